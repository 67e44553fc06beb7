"""One kiln version against eager on a few models, in this process: the
ratio eager/kiln per model (median of interleaved rounds), for comparing
two kiln checkouts run one after the other on a noisy machine (the
ratio to eager, measured in the same process, moves less than raw times).

    PYTHONPATH=<checkout> python benchmarks/diag/regress.py --models resnet18,resnet50 --device cuda
"""
import argparse
import statistics
import time

import torch

import kiln
from kiln.bench import models as zoo


def timed(fn, args, n, sync):
    sync()
    t = time.perf_counter()
    for _ in range(n):
        fn(*args)
    sync()
    return (time.perf_counter() - t) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,resnet50")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    cfg = zoo.BuildConfig(device=a.device, dtype=getattr(torch, a.dtype))
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        with torch.inference_mode():
            t0 = time.perf_counter()
            fast = kiln.compile(model)
            fast(*inputs)
            sync()
            first = time.perf_counter() - t0
            for _ in range(3):
                model(*inputs), fast(*inputs)
            e, k = [], []
            for _ in range(a.rounds):
                e.append(timed(model, inputs, a.repeat, sync))
                k.append(timed(fast, inputs, a.repeat, sync))
        me, mk = statistics.median(e), statistics.median(k)
        print("%-8s %-12s eager %7.3f ms  kiln %7.3f ms  kiln/eager speedup %.3fx  first call %.2f s"
              % (a.tag, spec.name, me, mk, me / mk, first), flush=True)


if __name__ == "__main__":
    main()
