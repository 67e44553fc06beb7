"""Diagnostic: a model's heaviest kiln kernels on the GPU (torch.profiler),
with the CUDA C of each (the bodies kiln/cuda.py compiled under those
names), to see which fused kernel is slow and why.

    python benchmarks/diag/top_kernels.py vit_small [--top 6] [--compare]

--compare also lists the heaviest kernels of eager and torch.compile on the
same model and inputs, to see which of kiln's kernels trail theirs.
"""
import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import kiln
from kiln import cuda, pipeline
from kiln.bench import models as zoo


def res_usage(name):
    """cuobjdump's resource line (registers, spills, shared memory) of kernel
    `name`, from the cubin in kiln's disk cache that holds it."""
    import glob
    import os
    import subprocess
    for path in glob.glob(os.path.join(kiln.config.cache_dir, "cuda", "*", "*.cubin")):
        with open(path, "rb") as f:
            if name.encode() not in f.read():
                continue
        try:
            out = subprocess.run(["cuobjdump", "-res-usage", path], capture_output=True, text=True).stdout
        except OSError as e:
            return f"  (cuobjdump: {e})"
        lines = out.splitlines()
        for i, ln in enumerate(lines):
            if name in ln and i + 1 < len(lines):
                return "  " + lines[i + 1].strip()
    return "  (no cubin found)"


def gpu_kernels(fn, inputs, calls_=5):
    """GPU time per kernel name (us, summed over calls_ calls) and launches."""
    with torch.no_grad():
        for _ in range(5):
            fn(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls_):
                fn(*inputs)
            torch.cuda.synchronize()
    per, calls = collections.Counter(), collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] += e.device_time_total
            calls[e.name] += 1
    return per, calls


def show(model, label, per, calls, n=20):
    total = sum(per.values()) / 5 / 1e3
    print(f"{model}: {label} GPU time {total:.3f} ms per call, {sum(calls.values()) // 5} launches")
    for name, t in per.most_common(n):
        print(f"  {t / 5 / 1e3:7.3f} ms  {calls[name] // 5:3d} launches  {name[:90]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--lines", type=int, default=40)
    ap.add_argument("--res-usage", action="store_true", help="registers and spills of the top kernels (cuobjdump)")
    a = ap.parse_args()
    model, inputs, _ = zoo.build_model(zoo.MODELS[a.model], zoo.BuildConfig(device="cuda", dtype=torch.bfloat16))
    progs = []
    pipeline.add_build_hook(progs.extend)
    f = kiln.compile(model)
    if a.compare:
        for label, fn in (("eager", model), ("torch.compile", torch.compile(model))):
            show(a.model, label, *gpu_kernels(fn, inputs))
    per, calls = gpu_kernels(f, inputs)
    show(a.model, "kiln", per, calls)
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
            if a.res_usage:
                print(res_usage(name))
            print("\n".join(by_name[name].splitlines()[:a.lines]))


if __name__ == "__main__":
    main()
