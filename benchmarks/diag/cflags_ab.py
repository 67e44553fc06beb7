"""The C compiler's optimisation level against kiln's kernels (CPU): each
bench model compiled twice in one process, with config.cflags at -O3 (the
default) and at -O2, then both timed in interleaved rounds; prints the
native build's time (the "cc" phase) and the per-call medians.

    python benchmarks/diag/cflags_ab.py [--models bert,gpt2,llama,cnn] [--rounds 15]
"""
import argparse
import collections
import copy
import os
import statistics
import tempfile
import time

import torch

import kiln
from kiln import pipeline
from kiln.bench import models as zoo

CC = collections.Counter()


class _CC:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        if self.name == "cc":
            CC["s"] += time.perf_counter() - self.t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,gpt2,llama,cnn")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    os.environ["KILN_CACHE_DIR"] = kiln.config.cache_dir = tempfile.mkdtemp(prefix="kiln-cflags-")
    kiln.config.cache_size_limit = 64   # (each copy of a model is a recording of the same code)
    torch.set_num_threads(2)
    pipeline.add_phase_hook(_CC)
    base = kiln.config.cflags
    levels = {"O3": base, "O2": base.replace("-O3", "-O2")}
    for name in a.models.split(","):
        spec = zoo.MODELS[name]
        m, _, _ = zoo.build_model(spec, zoo.BuildConfig(device="cpu", dtype=torch.float32))
        if name == "cnn":
            x = torch.randn(8, 3, 64, 64)
        else:
            x = torch.randint(0, m.model.config.vocab_size, (8 if name != "llama" else 4, 128))
        fns, cc = {}, {}
        with torch.no_grad():
            for tag, flags in levels.items():
                f = kiln.compile(copy.deepcopy(m), options={"cflags": flags})
                CC.clear()
                f(x)
                fns[tag], cc[tag] = f, CC["s"]
            times = {k: [] for k in fns}
            for _ in range(a.rounds):
                for k, f in fns.items():
                    t0 = time.perf_counter()
                    f(x)
                    times[k].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"{name:6s} cc: O3 {cc['O3']:.2f} s, O2 {cc['O2']:.2f} s | per call: O3 {med['O3']:.2f} ms, "
              f"O2 {med['O2']:.2f} ms, O2/O3 {med['O2'] / med['O3']:.3f}", flush=True)
    st = kiln.stats()
    print(f"kiln: {st['compiles']} compiles, {st['fallbacks']} fallbacks, {st['frames_run_as_python']} frames run as Python")


if __name__ == "__main__":
    main()
