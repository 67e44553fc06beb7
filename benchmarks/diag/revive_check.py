"""Diagnostic: what the old cold-path round trip (pickle the ATen graph,
which re-traces it symbolically and folds input-independent ops into
constants, then re-propagate fake values) changed in what kiln generates,
now that kiln describes the trace as it is.  For each model: kernels,
first-call time and median run time with and without it (fresh disk cache
each time).

    python benchmarks/diag/revive_check.py --models gpt2,bert
"""
import argparse
import statistics
import tempfile
import time

import torch

import kiln
from kiln import backends
from kiln.bench import models as zoo

_lower = backends._lower


def revived(gm, example_inputs):
    import pickle

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    aten = pickle.loads(pickle.dumps(_lower(gm, example_inputs)))
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(aten, mode).propagate(*[mode.from_tensor(t) for t in example_inputs])
    return aten


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dt = torch.bfloat16 if a.device == "cuda" else torch.float32
    cfg = zoo.BuildConfig(device=a.device, dtype=dt)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        with torch.no_grad():
            model(*inputs)
            for label, lw in (("revive", revived), ("plain", _lower)):
                backends._lower = lw
                kiln.reset()
                kiln.config.cache_dir = tempfile.mkdtemp(prefix="kiln-rv-")
                del backends.compiled_graphs[:]
                f = kiln.compile(model)
                sync()
                t0 = time.perf_counter()
                f(*inputs)
                sync()
                first = time.perf_counter() - t0
                times = []
                for _ in range(30):
                    sync()
                    t0 = time.perf_counter()
                    f(*inputs)
                    sync()
                    times.append(time.perf_counter() - t0)
                ks = [g.get("kernels") for g in backends.compiled_graphs]
                print(f"{spec.name:16s} {label:7s} kernels {ks}  first {first:.3f} s  median {statistics.median(times) * 1e3:.3f} ms",
                      flush=True)
        backends._lower = _lower


if __name__ == "__main__":
    main()
