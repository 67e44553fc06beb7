"""A/B of kiln's make_fx lowering with and without torch.fx's tensor_meta
(kiln/trace.py `_without_tensor_meta`, stop 47): `kiln.compile(model,
dynamic=True)`'s first call (a symbolic recording and compile, nothing
static first) in interleaved rounds, each with a fresh disk cache; prints
the medians.

    python benchmarks/diag/lowering_meta_ab.py bert 7
"""
import contextlib
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln import trace  # noqa: E402
from kiln.bench import dynamic, models  # noqa: E402


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "bert"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    on = trace._without_tensor_meta
    cfg = models.BuildConfig(device="cpu", dtype=torch.float32)
    spec = models.MODELS[name]
    model, example, _ = models.build_model(spec, cfg)
    model.eval()
    res = {"without tensor_meta": [], "with tensor_meta": []}
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for k in (list(res) if r % 2 else list(res)[::-1]):
                trace._without_tensor_meta = on if k.startswith("without") else contextlib.nullcontext
                kiln.reset()
                kiln.config.cache_dir = os.path.join(tmp, f"{r}-{k.split()[0]}")
                fn = kiln.compile(model, dynamic=True)
                x = dynamic.make_inputs(spec, model, example, (4, 64), cfg, 0)
                t0 = time.perf_counter()
                fn(*x)
                res[k].append(time.perf_counter() - t0)
    trace._without_tensor_meta = on
    for k, v in res.items():
        print(f"{name} {k}: median {statistics.median(v) * 1e3:.0f} ms over {rounds} rounds "
              f"({', '.join(str(round(x * 1e3)) for x in v)})")


if __name__ == "__main__":
    main()
