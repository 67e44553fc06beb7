"""Diagnostic: single fused kernels of ViT-S's shapes on the GPU, for eager,
torch.compile and kiln in a few configurations (CUDA events, median of
many launches): an erf-GELU, a copy (the bandwidth ceiling), and a
residual add + layer_norm over rows of 384.

    python benchmarks/diag/row_and_pointwise.py
"""
import statistics

import torch
import torch.nn.functional as F

import kiln


def time_us(fn, args, reps=50):
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn(*args)
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / reps * 1e3)
    return statistics.median(out)


def main():
    d, bf = "cuda", torch.bfloat16
    x = torch.randn(64, 197, 1536, device=d, dtype=bf)
    a, b = torch.randn(2, 64, 197, 384, device=d, dtype=bf)
    ln = torch.nn.LayerNorm(384).to(d, bf)
    cases = {
        "gelu [64,197,1536]": (lambda t: F.gelu(t), (x,), 2 * x.numel() * 2),
        "copy x*1 [64,197,1536]": (lambda t: t * 1, (x,), 2 * x.numel() * 2),
        "add+layer_norm [12608,384]": (lambda p, q: (p + q, ln(p + q)), (a, b), 4 * a.numel() * 2),
    }
    configs = {
        "kiln": {},
        "kiln fast-compile off": {"nvrtc_fast_compile": ""},
        "kiln row loops": {"cuda_row_registers": False},
    }
    with torch.no_grad():
        for name, (fn, args, nbytes) in cases.items():
            row = {"eager": time_us(fn, args), "torch.compile": time_us(torch.compile(fn), args)}
            for label, over in configs.items():
                old = {k: getattr(kiln.config, k) for k in over}
                try:
                    for k, v in over.items():
                        setattr(kiln.config, k, v)
                    kiln.reset()
                    row[label] = time_us(kiln.compile(fn), args)
                finally:
                    for k, v in old.items():
                        setattr(kiln.config, k, v)
            cells = "  ".join(f"{k} {v:6.1f} us ({nbytes / v / 1e6:5.2f} TB/s)" for k, v in row.items())
            print(f"{name:28s} {cells}", flush=True)


if __name__ == "__main__":
    main()
