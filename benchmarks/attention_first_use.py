"""What a GPU attention backend costs on its first call in a process (plan
building, kernel loading) and per call after that, for one shape and mask
kind: each backend in a fresh process, so first-use costs are not shared.

    python benchmarks/attention_first_use.py [--shape 8,4,512,64] [--mask additive|bool|none|causal]
"""
import argparse
import json
import subprocess
import sys
import time

CHILD = r'''
import json, sys, time, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
b, h, s, d = map(int, sys.argv[1].split(",")); kind = sys.argv[2]; backend = sys.argv[3]
dt = torch.bfloat16
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dt) for _ in range(3))
mask, causal = None, False
if kind == "additive":
    mask = torch.zeros(b, 1, 1, s, device="cuda", dtype=dt); mask[:, :, :, s - 7:] = float("-inf")
elif kind == "bool":
    mask = torch.ones(b, 1, 1, s, device="cuda", dtype=torch.bool); mask[:, :, :, s - 7:] = False
elif kind == "causal":
    causal = True
torch.randn(4, device="cuda").sum().item()   # context and allocator up
ctx = sdpa_kernel(getattr(SDPBackend, backend)) if backend != "DEFAULT" else torch.no_grad()
with ctx, torch.no_grad():
    try:
        torch.cuda.synchronize(); t0 = time.perf_counter()
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        torch.cuda.synchronize(); first = time.perf_counter() - t0
        for _ in range(10):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(100):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        torch.cuda.synchronize(); per = (time.perf_counter() - t0) / 100
        print(json.dumps({"first_s": first, "per_call_us": per * 1e6}))
    except RuntimeError as e:
        print(json.dumps({"error": str(e).splitlines()[0][:100]}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="8,4,512,64")
    ap.add_argument("--mask", default="additive")
    a = ap.parse_args()
    for backend in ("DEFAULT", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "FLASH_ATTENTION", "MATH"):
        r = subprocess.run([sys.executable, "-c", CHILD, a.shape, a.mask, backend], capture_output=True, text=True)
        line = (r.stdout.strip().splitlines() or [r.stderr.strip()[-200:]])[-1]
        print(f"{a.shape:14s} {a.mask:9s} {backend:20s} {line}", flush=True)


if __name__ == "__main__":
    main()
