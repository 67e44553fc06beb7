"""native_layer_norm kept whole through kiln's trace (lowered in C, its fake
under symbolic sizes kiln's: kiln/trace.py _layer_norm_fakes) against
decomposed while tracing (torch's decomposition in kiln's table, as before
stop 48), in interleaved rounds in one process: each round a fresh
kiln.compile(model, dynamic=DYN) and its first call at 4x64, with an empty
disk cache; prints each variant's first calls and its traces
(trace._trace_plain: the symbolic template's, or the static lowering's).

    python benchmarks/diag/layer_norm_trace_ab.py bert 5 dyn
    python benchmarks/diag/layer_norm_trace_ab.py gpt2 5 static
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import torch  # noqa: E402
from torch._decomp import decomposition_table  # noqa: E402

import kiln  # noqa: E402
from kiln import decomp, trace  # noqa: E402
from kiln.bench import dynamic, models  # noqa: E402


def main():
    name, rounds, dyn = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "dyn"
    aten = torch.ops.aten
    cfg = models.BuildConfig(device="cpu", dtype=torch.float32)
    spec = models.MODELS[name]
    model, example, _ = models.build_model(spec, cfg)
    model.eval()
    x = dynamic.make_inputs(spec, model, example, (4, 64), cfg, 0)
    whole = decomp.decompositions()
    parts = dict(whole)
    parts[aten.native_layer_norm.default] = decomposition_table[aten.native_layer_norm.default]
    calls, traces, cur = {True: [], False: []}, {True: [], False: []}, [None]
    plain = trace._trace_plain

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return plain(*a, **k)
        finally:
            traces[cur[0]].append(time.perf_counter() - t)
    trace._trace_plain = timed
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for keep in ((True, False) if r % 2 else (False, True)):
                decomp._table_cache = whole if keep else parts
                cur[0] = keep
                kiln.reset()
                kiln.config.cache_dir = os.path.join(tmp, f"{r}{keep}")
                fn = kiln.compile(model, dynamic=dyn)
                t = time.perf_counter()
                fn(*x)
                calls[keep].append(time.perf_counter() - t)
    decomp._table_cache = whole
    for keep in (False, True):
        print(f"{name} {'symbolic' if dyn else 'static'}, layer_norm {'whole' if keep else 'decomposed'}: "
              f"first call median {1e3 * statistics.median(calls[keep][1:]):.0f} ms "
              f"{[round(1e3 * a) for a in calls[keep]]}; traces median {1e3 * statistics.median(traces[keep]):.0f} ms "
              f"{sorted(round(1e3 * a) for a in traces[keep])}")


if __name__ == "__main__":
    main()
