"""The serving sweep's costly calls, one model alone (issue 17): eager and
kiln.compile called over SHAPES in order (each shape: one eager call, then
kiln's first call there, timed), then the same shapes again (kiln's steady
calls); prints each first call's time and the full garbage collections
that ran in it.  Meant to run under a sampling profiler (a profiler that
sets sys.setprofile makes kiln run frames as Python, so cProfile shows
nothing of kiln's):

    MODEL=bert python benchmarks/diag/first_calls.py
    TC=1 MODEL=bert python benchmarks/diag/first_calls.py   # torch.compile first at each shape
    EAGER=0 MODEL=cnn python benchmarks/diag/first_calls.py  # kiln alone at each new shape
    DEVICE=cuda DTYPE=bfloat16 SHAPES=6x384,8x32,4x256 python benchmarks/diag/first_calls.py
    py-spy record -r 500 -f raw -o bert.raw -- python benchmarks/diag/first_calls.py
"""
import gc
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import kiln  # noqa: E402
from kiln.bench import dynamic as dyn  # noqa: E402
from kiln.bench import models as zoo  # noqa: E402

_gc = {"n": 0, "s": 0.0, "t0": 0.0}


def _gc_cb(phase, info):
    if info.get("generation") != 2:
        return
    if phase == "start":
        _gc["t0"] = time.perf_counter()
    else:
        _gc["n"] += 1
        _gc["s"] += time.perf_counter() - _gc["t0"]


def main():
    name = os.environ.get("MODEL", "bert")
    dev = os.environ.get("DEVICE", "cpu")
    cfg = zoo.BuildConfig(device=dev, dtype=getattr(torch, os.environ.get("DTYPE", "float32")))
    spec = zoo.MODELS[name]
    model, example, _ = zoo.build_model(spec, cfg)
    default = "6x384,8x32,4x256,16x416,2x64,10x160,12x480" if dev == "cuda" else "4x96,5x8,7x40,3x64,9x120,2x16"
    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", default).split(",")]
    fn = kiln.compile(model)
    # TC=1: torch.compile called at every shape first, as in the sweep
    # (its compiles leave a large heap for later collections to walk)
    tc = torch.compile(model) if os.environ.get("TC") else None
    # EAGER=0: no eager call before kiln's first call at a shape (a process
    # of kiln alone: nothing else warms a library's per-shape plans)
    eager = os.environ.get("EAGER", "1") != "0"

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    gc.callbacks.append(_gc_cb)
    with torch.no_grad():
        for rnd in ("first", "again"):
            for shape in shapes:
                inputs = dyn.make_inputs(spec, model, example, shape, cfg, 0)
                e_ms = None
                if eager or rnd == "again":
                    sync()
                    t = time.perf_counter()
                    model(*inputs)
                    sync()
                    e_ms = (time.perf_counter() - t) * 1e3
                if tc is not None and rnd == "first":
                    tc(*inputs)
                sync()
                n0, s0 = _gc["n"], _gc["s"]
                t = time.perf_counter()
                fn(*inputs)
                sync()
                ms = (time.perf_counter() - t) * 1e3
                print(f"{name} {rnd} {shape[0]}x{shape[1]}: {ms:.1f} ms"
                      + (f" (eager's call before it {e_ms:.1f} ms)" if e_ms is not None else "")
                      + f" (full collections {_gc['n'] - n0}, {1e3 * (_gc['s'] - s0):.1f} ms)", flush=True)
    print({k: v for k, v in kiln.stats().items() if isinstance(v, int) and v})


if __name__ == "__main__":
    main()
