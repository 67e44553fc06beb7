"""Per-call CPU costs of the things a compiled graph's step loop does on a
GPU host (microseconds, median): allocation, views, an extern matmul, an
eager pointwise op, a raw kernel launch.  Explains enqueue-bound figures.

    python benchmarks/host_costs.py
"""
import statistics
import time

import torch

import kiln.cuda


def us(fn, n=3000):
    for _ in range(100):
        fn()
    s = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        s.append((time.perf_counter() - t0) / n * 1e6)
    torch.cuda.synchronize()
    return statistics.median(s)


def main():
    d = torch.device("cuda")
    g = torch._C._dynamo.guards
    x = torch.randn(64, 64, device=d)
    b = torch.randn(64, device=d)
    op = torch.ops.aten.addmm.default._op
    mod = kiln.cuda.module('extern "C" __global__ void k(float *p) { }', ["k"])
    ptr = x.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    rows = [
        ("torch.empty_strided(..., dtype, device)", lambda: torch.empty_strided((64, 64), (64, 1), dtype=torch.float32, device=d)),
        ("_empty_strided_cuda", lambda: g._empty_strided_cuda((64, 64), (64, 1), torch.float32)),
        ("torch.as_strided", lambda: torch.as_strided(x, (32, 64), (64, 1), 64)),
        ("_reinterpret_tensor", lambda: g._reinterpret_tensor(x, (32, 64), (64, 1), 64)),
        ("aten.addmm.default._op", lambda: op(b, x, x)),
        ("torch.addmm", lambda: torch.addmm(b, x, x)),
        ("eager x + 1", lambda: x + 1),
        ("x.data_ptr()", lambda: x.data_ptr()),
        ("CudaModule.launch (Python)", lambda: mod.launch("k", (1, 1, 1), (32, 1, 1), "p", [ptr], stream)),
    ]
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
    for name, fn in rows:
        print(f"{us(fn):8.2f} us  {name}")


if __name__ == "__main__":
    main()
