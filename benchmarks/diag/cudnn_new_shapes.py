"""What a convolution network's first call at a new shape costs in eager
PyTorch, by memory format (issue 17's serving sweep): resnet18 in bf16 on a
GPU called at 8 new shapes in NCHW, then at the same shapes channels-last,
then both again.  A first call pays cuDNN's planning for that shape and
layout (torch caches the plan process-wide, so the next caller with the
same shape and layout does not); the "again" rows show the cache.

    python benchmarks/diag/cudnn_new_shapes.py

On an H100 (2026-12-06): about 20 ms per new shape in either format
against a 1.4-1.8 ms call; 1.3-1.8 ms again.  This is why the sweep's
order matters (kiln/bench/dynamic.py `call_order`).
"""
import time

import torch
import torchvision


def main():
    torch.backends.cudnn.benchmark = False   # (the default: heuristics, no timing runs)
    m = torchvision.models.resnet18().cuda().to(torch.bfloat16).eval()
    shapes = ((6, 272), (8, 96), (4, 112), (2, 224), (10, 160), (12, 192), (14, 128), (16, 240))

    def timed(f, x):
        torch.cuda.synchronize()
        t = time.perf_counter()
        f(x)
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3

    with torch.no_grad():
        x = torch.randn(2, 3, 64, 64, device="cuda", dtype=torch.bfloat16)
        m(x)
        for name, cl in (("NCHW", False), ("channels-last", True), ("NCHW again", False),
                         ("channels-last again", True)):
            fmt = torch.channels_last if cl else torch.contiguous_format
            mm = m.to(memory_format=fmt)
            first, steady = [], []
            for b, s in shapes:
                x = torch.randn(b, 3, s, s, device="cuda", dtype=torch.bfloat16).to(memory_format=fmt)
                first.append(timed(mm, x))
                steady.append(timed(mm, x))
            print(f"{name:20s} first call ms {[round(v, 1) for v in first]}  next call "
                  f"{[round(v, 1) for v in steady]}", flush=True)


if __name__ == "__main__":
    main()
