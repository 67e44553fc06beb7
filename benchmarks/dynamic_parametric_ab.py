"""Steady-state cost of parametric builds (issue 17, kiln/kernel_params.py).

Compiles a bench model with kiln.compile (automatic dynamic), calls it at a
few shapes, then times kiln against eager at each shape, interleaved (15
calls each, medians) and prints the kiln/eager ratios and their geomean.
Run it with parametric builds on and off, alternating, and compare the
geomeans (each ratio has its own eager in the same process):

    for i in 1 2; do for p in 1 0; do
        KILN_PARAMETRIC_KERNELS=$p python benchmarks/dynamic_parametric_ab.py; done; done

MODEL picks the model (default bert).
"""
import os
import statistics
import time

import torch

import kiln
from kiln.bench import models as zoo

torch.set_num_threads(2)
spec = zoo.select_models(os.environ.get("MODEL", "bert"))[0]
model, inputs, _ = zoo.build_model(spec, zoo.BuildConfig(batch=2, seq=8))


def ids(b, s):
    return torch.randint(0, 1000, (b, s), generator=torch.Generator().manual_seed(b * 1000 + s))


shapes = [(4, 72), (3, 104), (7, 40), (9, 128), (2, 16), (6, 56)]
cm = kiln.compile(model)
with torch.no_grad():
    for b, s in [(2, 8), (3, 8), (3, 16)] + shapes:
        cm(ids(b, s))
    ratios = []
    for b, s in shapes:
        x = ids(b, s)
        tk, te = [], []
        for _ in range(3): cm(x); model(x)
        for _ in range(15):
            t0 = time.perf_counter(); cm(x); t1 = time.perf_counter(); model(x); t2 = time.perf_counter()
            tk.append(t1 - t0); te.append(t2 - t1)
        ratios.append(statistics.median(tk) / statistics.median(te))
print(os.environ.get("KILN_PARAMETRIC_KERNELS", "1"), " ".join(f"{r:.3f}" for r in ratios), "geomean", f"{statistics.geometric_mean(ratios):.3f}", {k: v for k, v in kiln.stats().items() if "param" in k})
