"""Where kiln's compile time goes: for each model, a cold compile (empty
disk cache) and then a warm one (same process after kiln.reset(), so the disk
cache is full), timed by phase: capture (kiln's bytecode interpreter, the
rest of the first call), AOT lowering to ATen,
describing the graph to C, the C compiler core (IR, fusion, codegen), the
native build (NVRTC on a GPU, the C compiler on a CPU) and loading it, as
kiln.pipeline names its phases (the report counts them with a phase hook).

    python benchmarks/compile_phases.py --models gpt2,bert [--device cuda]
"""
import argparse
import collections
import os
import tempfile
import time

import torch

import kiln
from kiln import pipeline
from kiln.bench import models as zoo

T = collections.Counter()
N = collections.Counter()


class _Phase:
    """Times one run of a phase (kiln.pipeline's phase hooks), and profiles
    it the first time it runs while a PROFILED flag of its phase is on."""

    def __init__(self, name):
        self.name = name
        self.profile = None

    def __enter__(self):
        flag, sort, lines = PROFILED.get(self.name, (None, None, None))
        if flag is not None and flag["on"]:
            import cProfile
            flag["on"] = False
            self.profile = (cProfile.Profile(), sort, lines)
            self.profile[0].enable()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        T[NAMES.get(self.name, self.name)] += time.perf_counter() - self.t0
        N[NAMES.get(self.name, self.name)] += 1
        if self.profile is not None:
            import pstats
            pr, sort, lines = self.profile
            pr.disable()
            pstats.Stats(pr).sort_stats(sort).print_stats(lines)


PROFILE = {"on": False}    # --profile-first-run: armed for the next cold first run
LOWERING = {"on": False}   # --profile-lowering: armed for the next cold lowering
# phases profiled once while their flag is on: the Python-visible calls of a
# cold first run (extern wrappers such as attention) by own time, or where a
# cold lowering (the ATen trace) spends its time, cumulatively
PROFILED = {"first_run": (PROFILE, "tottime", 8), "lower": (LOWERING, "cumulative", 30)}
# kiln's phase names as this report prints them
NAMES = {"backend": "backend(total)", "lower": "lower(total)", "aot_autograd": "aot_module_simplified",
         "attention": "keep_attention_whole", "first_run": "first run"}


def patch():
    """Time every named phase of kiln's pipeline (kiln.pipeline.phase_hooks)."""
    pipeline.add_phase_hook(_Phase)


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2,bert")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--profile-first-run", action="store_true")
    ap.add_argument("--profile-lowering", default="", help="comma-separated models whose cold lowering is profiled")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype) if a.dtype else (torch.bfloat16 if a.device == "cuda" else torch.float32)
    os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-phases-"))
    kiln.config.cache_dir = os.environ["KILN_CACHE_DIR"]
    patch()
    cfg = zoo.BuildConfig(device=a.device, dtype=dtype)
    with torch.no_grad():   # prime: one-time start-up outside the per-model figures
        p = kiln.compile(lambda x: torch.relu(x) + 1)
        p(torch.randn(8, device=a.device, dtype=dtype))
        kiln.reset()
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        with torch.no_grad():
            model(*inputs)
            sync(a.device)
            t0 = time.perf_counter()
            model(*inputs)
            sync(a.device)
            eager = time.perf_counter() - t0
            for label in ("cold", "warm"):
                kiln.reset()
                T.clear()
                N.clear()
                f = kiln.compile(model)
                PROFILE["on"] = a.profile_first_run and label == "cold"
                LOWERING["on"] = spec.name in a.profile_lowering.split(",") and label == "cold"
                t0 = time.perf_counter()
                f(*inputs)
                sync(a.device)
                total = time.perf_counter() - t0 - eager
                be = T["backend(total)"]
                parts = "  ".join(f"{k} {v:.3f}" + (f"/{N[k]}" if N[k] > 1 else "")
                                  for k, v in sorted(T.items(), key=lambda kv: -kv[1]))
                print(f"{spec.name:16s} {label}  first call - eager {total:.3f} s  "
                      f"outside backend {total - be:.3f}  |  {parts}", flush=True)


if __name__ == "__main__":
    main()
