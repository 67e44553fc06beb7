"""Is cuBLASLt's fused epilogue (bias + GELU-tanh or ReLU inside the GEMM,
reached through torch._addmm_activation) faster than the GEMM with its bias
followed by the activation as a separate pointwise kernel (what kiln does
when the activation has nowhere else to fuse)?  For the linear shapes of the
benchmark models, in bfloat16, median over CUDA-event-timed repetitions.

    python benchmarks/cublaslt_epilogue.py
"""
import statistics

import torch
import torch.nn.functional as F

# (name, M rows, K in, N out): the FFN up-projections of the bench models
SHAPES = [
    ("gpt2 c_fc", 8 * 512, 256, 1024),
    ("bert intermediate", 8 * 512, 256, 1024),
    ("vit fc1", 64 * 197, 384, 1536),
    ("encoder linear1", 32 * 256, 256, 1024),
    ("large", 8 * 512, 1024, 4096),
]


def timed(fn, n=200):
    for _ in range(20):
        fn()
    ends = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ends:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ends) * 1e3


def main():
    dt = torch.bfloat16
    print(f"{'shape':20s} {'act':5s} {'addmm':>8s} {'+act':>8s} {'lt-fused':>9s} {'gain':>6s}  max|diff|")
    for name, m, k, n in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=dt)
        w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
        b = torch.randn(n, device="cuda", dtype=dt)
        wt = w.t()
        for act, use_gelu, f in (("gelu", True, lambda y: F.gelu(y, approximate="tanh")), ("relu", False, torch.relu)):
            plain = timed(lambda: torch.addmm(b, x, wt))
            split = timed(lambda: f(torch.addmm(b, x, wt)))
            fused = timed(lambda: torch._addmm_activation(b, x, wt, use_gelu=use_gelu))
            diff = (torch._addmm_activation(b, x, wt, use_gelu=use_gelu).float() - f(torch.addmm(b, x, wt)).float()).abs().max()
            print(f"{name:20s} {act:5s} {plain:8.1f} {split:8.1f} {fused:9.1f} {split / fused:5.2f}x  {diff:.3g}", flush=True)
    print("times: median microseconds per call; gain = (addmm then activation) / fused epilogue")


if __name__ == "__main__":
    main()
