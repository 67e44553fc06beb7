"""What a new size of a symbolic graph costs (issue 17, kiln/dynamic.py).

Compiles a bench text model with kiln.compile (automatic dynamic), calls it
at 3 shapes (the recordings and the first sizes of their lowerings), then at
30 new shapes, timing each first call and the part of it spent in
PerSize._build (kiln's work for that size: the C core's plan, the match
against a parametric build, the filled-in lowering; the rest is the model
running).  Prints the means per new size and kiln's size counters.

    python benchmarks/dynamic_per_size.py            # MODEL=gpt2
    KILN_DIRECT_SIZES=0 python benchmarks/dynamic_per_size.py   # every size through the static path
    DEVICE=cuda DTYPE=bfloat16 MODEL=bert python benchmarks/dynamic_per_size.py
    PROFILE=25 python benchmarks/dynamic_per_size.py   # and _build's top 25 functions (cProfile)
"""
import os
import random
import time

import torch

import kiln
from kiln import dynamic
from kiln.bench import models as zoo

torch.set_num_threads(2)
spec = zoo.MODELS[os.environ.get("MODEL", "gpt2")]
device = os.environ.get("DEVICE", "cpu")
model, _, _ = zoo.build_model(spec, zoo.BuildConfig(device=device, dtype=getattr(torch, os.environ.get("DTYPE", "float32"))))
vocab = model.model.config.vocab_size
shapes = [(b, s) for b in (2, 3, 4, 6, 7, 9) for s in (16, 24, 33, 48, 64, 80, 100, 128)]
random.Random(0).shuffle(shapes)

spent = [0.0]
build = dynamic.PerSize._build


prof = None
if os.environ.get("PROFILE"):
    # (inside _build only: kiln runs the model's frames as Python while a
    # profiler is set, so the model itself cannot be profiled this way)
    import cProfile
    prof = cProfile.Profile()


def timed_build(self, *args):
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    try:
        return build(self, *args)
    finally:
        if prof is not None:
            prof.disable()
        spent[0] += time.perf_counter() - t0


f = kiln.compile(model)
with torch.no_grad():
    for shape in shapes[:3]:
        f(torch.randint(0, vocab, shape, device=device))
    dynamic.PerSize._build = timed_build
    new = shapes[3:33]
    xs = [torch.randint(0, vocab, shape, device=device) for shape in new]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for x in xs:
        f(x)
    sync()
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    for x in xs:      # the same sizes again: the model's own time
        f(x)
    sync()
    again = time.perf_counter() - t0
dynamic.PerSize._build = build
st = kiln.stats()
print(f"{spec.name}: per new size {1e3 * total / len(new):.1f} ms, of it kiln's PerSize._build "
      f"{1e3 * spent[0] / len(new):.1f} ms; the same sizes again {1e3 * again / len(new):.1f} ms ({len(new)} sizes)")
print({k: st[k] for k in ("recompiles", "specializations", "direct_sizes", "size_plans", "compiles",
                          "parametric_builds", "parametric_hits", "templates", "template_cache_hits")})
if prof is not None:
    import pstats
    pstats.Stats(prof).sort_stats("cumulative").print_stats(int(os.environ["PROFILE"]))
