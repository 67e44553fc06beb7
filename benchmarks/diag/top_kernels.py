"""Diagnostic: a model's heaviest kiln kernels on the GPU (torch.profiler),
with the CUDA C of each (the bodies kiln/cuda.py compiled under those
names), to see which fused kernel is slow and why.

    python benchmarks/diag/top_kernels.py vit_small [--top 6]
"""
import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import kiln
from kiln import backends, cuda
from kiln.bench import models as zoo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--top", type=int, default=6)
    a = ap.parse_args()
    model, inputs, _ = zoo.build_model(zoo.MODELS[a.model], zoo.BuildConfig(device="cuda", dtype=torch.bfloat16))
    progs = []
    real = backends._build
    backends._build = lambda ps, d=None: (progs.extend(ps), real(ps, d))[1]
    f = kiln.compile(model)
    with torch.no_grad():
        for _ in range(5):
            f(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                f(*inputs)
            torch.cuda.synchronize()
    per, calls = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] += e.device_time_total
            calls[e.name] += 1
    total = sum(per.values()) / 5 / 1e3
    print(f"{a.model}: kiln GPU time {total:.3f} ms per call")
    for name, t in per.most_common(20):
        print(f"  {t / 5 / 1e3:7.3f} ms  {calls[name] // 5:3d} launches  {name[:90]}")
    bodies, _ = cuda.unique_kernels(progs)
    by_name = {n: b for b, n in bodies.items()}
    sizes = {}
    for p in progs:
        for name, blocks, _, threads, _ in p.cuda_launch_sizes():
            sizes[name] = (blocks, threads)
    shown = 0
    for name, t in per.most_common():
        if name in by_name and shown < a.top:
            shown += 1
            print(f"\n==== {name}: {t / 5 / 1e3:.3f} ms per call, launch {sizes.get(name)}")
            print("\n".join(by_name[name].splitlines()[:40]))


if __name__ == "__main__":
    main()
