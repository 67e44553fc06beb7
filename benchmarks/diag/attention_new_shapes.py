"""What scaled_dot_product_attention costs at a shape it has not seen,
per fused kernel, on a GPU: the first call at each of a dozen new
(batch, sequence) shapes, then the steady time at a few, for SDPA's own
choice (reported by torch._fused_sdp_choice), the memory-efficient kernel
and cuDNN's, with an additive mask as BERT's (kiln::attention's case,
kiln/ops.py), and causal without a mask as GPT-2's.

    python benchmarks/diag/attention_new_shapes.py   (DTYPE=bfloat16, HEADS=4, DIM=64)
"""
import os
import statistics
import time

import torch

aten = torch.ops.aten
dt = getattr(torch, os.environ.get("DTYPE", "bfloat16"))
H, D = int(os.environ.get("HEADS", 4)), int(os.environ.get("DIM", 64))


def inputs(b, s, mask):
    q, k, v = (torch.randn(b, H, s, D, device="cuda", dtype=dt) for _ in range(3))
    m = None
    if mask:
        m = torch.zeros(b, 1, 1, s, device="cuda", dtype=dt)
        m[..., s - s // 4:] = float("-inf")
        m = m.expand(b, H, s, s)
    return q, k, v, m


def kernels(mask):
    out = {"sdpa": lambda q, k, v, m: torch._C._nn.scaled_dot_product_attention(q, k, v, m, 0.0, not mask),
           "efficient": lambda q, k, v, m: aten._scaled_dot_product_efficient_attention(q, k, v, m, False, 0.0,
                                                                                       not mask)[0]}
    if hasattr(aten, "_scaled_dot_product_cudnn_attention"):
        out["cudnn"] = lambda q, k, v, m: aten._scaled_dot_product_cudnn_attention(q, k, v, m, False, 0.0,
                                                                                   not mask)[0]
    if not mask:
        out["flash"] = lambda q, k, v, m: aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)[0]
    return out


def timed(fn, args, n=1):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def main():
    print("torch", torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version(), dt)
    for mask in (True, False):
        ks = kernels(mask)
        q, k, v, m = inputs(4, 128, mask)
        print("mask" if mask else "causal", "SDPA's choice:",
              torch._fused_sdp_choice(q, k, v, m, 0.0, not mask) if hasattr(torch, "_fused_sdp_choice") else "?")
        for name, fn in ks.items():
            first = []
            for i, (b, s) in enumerate([(2 + i % 7, 40 + 37 * i) for i in range(12)]):
                args = inputs(b + (0 if name == "sdpa" else 0), s + {"sdpa": 0, "efficient": 1, "cudnn": 2,
                                                                    "flash": 3}[name], mask)
                try:
                    first.append(timed(fn, args))
                except Exception as e:   # noqa: BLE001
                    first = [str(e).split("\n")[0][:80]]
                    break
            steady = []
            for b, s in ((4, 128), (16, 512), (32, 384)):
                args = inputs(b, s, mask)
                try:
                    fn(*args)
                    steady.append("%dx%d %.3f ms" % (b, s, timed(fn, args, 50)))
                except Exception as e:   # noqa: BLE001
                    steady.append(str(e)[:60])
            if first and isinstance(first[0], float):
                print(f"  {name:10s} first call at a new shape: median {statistics.median(first):7.2f} ms, "
                      f"max {max(first):7.2f}; steady {', '.join(steady)}")
            else:
                print(f"  {name:10s} {first}")


if __name__ == "__main__":
    main()
