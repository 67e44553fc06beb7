"""Where the serving sweep's slow calls go (issue 17): runs
``python -m kiln.bench`` with the given arguments, and for every timed
first call over 100 ms (a compile, a new size's build) prints its shape and
kiln's pipeline phases during it (benchmarks/compile_phases.py's phase hooks:
backend, lower, cc, c_core, first run, ...) and the full garbage collections
in it: the calls where kiln's work
(the call less its compiled graph's first run) took over 100 ms, and the
other compilers' calls over 1 s.  The time of a call not spent in the
backend is the capture's (the recording, its fake propagation).

    python benchmarks/diag/sweep_phases.py --dynamic --models bert --dyn-static 0 --dyn-repeat 1
    python benchmarks/diag/sweep_phases.py --dynamic --device cuda --dtype bfloat16 --models bert,llama --dyn-static 0
"""
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import compile_phases as cp  # noqa: E402  (benchmarks/: the phase hooks)

from kiln.bench import dynamic, runner  # noqa: E402

_first_call = dynamic.time_first_call
# full garbage collections: how many and their seconds, since the call began
_GC = {"n": 0, "s": 0.0, "t0": 0.0}


def _gc_callback(phase, info):
    if info.get("generation") == 2:
        if phase == "start":
            _GC["t0"] = time.perf_counter()
        else:
            _GC["n"] += 1
            _GC["s"] += time.perf_counter() - _GC["t0"]


def _timed(fn, inputs, sync):
    cp.T.clear()
    cp.N.clear()
    _GC.update(n=0, s=0.0)
    ms, out = _first_call(fn, inputs, sync)
    work = ms - 1e3 * cp.T.get("first run", 0.0)
    if (cp.T and work > 100) or (not cp.T and ms > 1000):
        parts = "  ".join(f"{k} {v:.3f}" + (f"/{cp.N[k]}" if cp.N[k] > 1 else "")
                          for k, v in sorted(cp.T.items(), key=lambda kv: -kv[1]))
        print(f"\nslow call {ms:.0f} ms at {tuple(inputs[0].shape)}: {parts or '(no kiln phase: another compiler)'}"
              f"  [full collections {_GC['n']}, {_GC['s']:.3f} s]", file=sys.stderr, flush=True)
    return ms, out


if __name__ == "__main__":
    cp.patch()
    gc.callbacks.append(_gc_callback)
    dynamic.time_first_call = _timed
    sys.exit(runner.main(sys.argv[1:]))
