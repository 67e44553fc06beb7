"""Diagnostic: the scaled_dot_product_attention calls of a model run eagerly
and then through kiln (first call), with the shapes, strides and dtypes of
q/k/v/mask, the fused backend SDPA chooses, and the wall time of each call
(synchronised).  Shows whether kiln's first call pays a cuDNN plan build that
eager's call at eager's layouts did not.

    python benchmarks/diag/attention_layouts.py --models bert,vit_small
"""
import argparse
import time

import torch

import kiln
from kiln.bench import models as zoo

LOG = []
_orig = torch._C._nn.scaled_dot_product_attention


def _desc(t):
    if not isinstance(t, torch.Tensor):
        return repr(t)
    return f"{tuple(t.shape)}/{tuple(t.stride())}/{str(t.dtype)[6:]}"


def logged(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    choice = torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = _orig(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    torch.cuda.synchronize()
    LOG.append(f"  {(time.perf_counter() - t0) * 1e3:8.2f} ms  backend {choice}  q {_desc(q)}  k {_desc(k)}  "
               f"v {_desc(v)}  mask {_desc(attn_mask)}  causal {is_causal}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert")
    a = ap.parse_args()
    from kiln import fx_bridge, ops

    def kiln_call(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
        if attn_mask is not None:
            attn_mask = ops.aligned_mask(attn_mask, q)
        return logged(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)

    fx_bridge.FAST_CALLS[torch.ops.kiln.attention.default] = kiln_call
    eager_f = torch.nn.functional.scaled_dot_product_attention
    cfg = zoo.BuildConfig(device="cuda", dtype=torch.bfloat16)
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        with torch.no_grad():
            for label, fn in (("eager", model), ("kiln", kiln.compile(model))):
                LOG.clear()
                torch.nn.functional.scaled_dot_product_attention = logged if label == "eager" else eager_f
                fn(*inputs)
                print(f"{spec.name} {label}: {len(LOG)} calls", flush=True)
                for line in LOG[:3]:
                    print(line)
        kiln.reset()


if __name__ == "__main__":
    main()
