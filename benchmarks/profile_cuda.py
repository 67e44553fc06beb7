"""Where a compiled model's time goes on a GPU: for eager, torch.compile and
kiln on the same model and inputs, the wall time per call, the CPU time to
enqueue a call (no sync), and from torch.profiler the GPU kernel time per
call, the number of kernels, and the heaviest kernels.

    python benchmarks/profile_cuda.py --models bert,resnet18 [--dtype bfloat16] [--cpu-ops 12]

--cpu-ops N also lists, per variant, the N operators with the most CPU time
of their own (torch.profiler's self CPU time), to see where an enqueue-bound
call spends its host time.
"""
import argparse
import collections

import torch

import kiln
from kiln.bench import models as zoo
from kiln.bench.measure import wall_and_enqueue_ms


def gpu_profile(fn, x, n=5):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn(*x)
        torch.cuda.synchronize()
    per = collections.Counter()
    count = 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name[:60]] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            count += 1
    total = sum(per.values()) / n / 1e3
    return total, count // n, per.most_common(6)


def cpu_profile(fn, x, top, n=5):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            fn(*x)
        torch.cuda.synchronize()
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    for e in rows:
        print(f"      cpu {e.self_cpu_time_total / n / 1e3:7.3f} ms self  {e.count // n:4d} calls  {e.key[:70]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,resnet18,vit_small")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--cpu-ops", type=int, default=0)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    cfg = zoo.BuildConfig(device="cuda", dtype=dtype)
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        graphs = []

        def spy(gm, ex):
            f = kiln.backends.kiln(gm, ex)
            graphs.append((f, ex))
            return f

        with torch.no_grad():
            variants = {"eager": model, "inductor": torch.compile(model), "kiln": kiln.compile(model, backend=spy)}
            for name, fn in variants.items():
                wall, enq = wall_and_enqueue_ms(fn, inputs)
                gpu, nk, top = gpu_profile(fn, inputs)
                print(f"{spec.name:10s} {name:8s} wall {wall:7.3f} ms  enqueue {enq:7.3f} ms  "
                      f"gpu {gpu:7.3f} ms  kernels/call {nk}")
                for k, t in top:
                    print(f"      {t / 5 / 1e3:7.3f} ms  {k}")
                if a.cpu_ops:
                    cpu_profile(fn, inputs, a.cpu_ops)
            for f, ex in graphs:
                while not hasattr(f, "cg") and hasattr(f, "fn"):   # (kiln's wrappers: _EagerOnError, ...)
                    f = f.fn
                cg = getattr(f, "cg", None)
                if cg is None or not hasattr(cg, "program"):
                    continue
                args = tuple(ex) + cg.constants
                st = cg.kiln_stats
                wall, enq = wall_and_enqueue_ms(cg.program, args)
                print(f"      kiln program alone: wall {wall:.3f} ms enqueue {enq:.3f} ms; "
                      f"{st.get('kernels')} kernels, {st.get('externs')} externs, {len(args)} inputs; "
                      f"externs {sorted(set(st.get('extern_ops', [])))}")


if __name__ == "__main__":
    main()
