"""Where kiln's compile time goes: for each model, a cold compile (empty
disk cache) and then a warm one (same process after kiln.reset(), so the disk
cache is full), timed by phase: capture (kiln's bytecode interpreter, the
rest of the first call), AOT lowering to ATen,
describing the graph to C, the C compiler core (IR, fusion, codegen), and the
native build (NVRTC + module load on a GPU, the C compiler on a CPU).

    python benchmarks/compile_phases.py --models gpt2,bert [--device cuda]
"""
import argparse
import collections
import functools
import os
import tempfile
import time

import torch

import kiln
from kiln import backends
from kiln.bench import models as zoo

T = collections.Counter()
N = collections.Counter()


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            T[name] += time.perf_counter() - t0
            N[name] += 1
    return wrapper


PROFILE = {"on": False}    # --profile-first-run: armed for the next cold first run
LOWERING = {"on": False}   # --profile-lowering: armed for the next cold lowering


def profiled(fn, flag, sort, lines):
    """fn, profiled once (by `sort`, `lines` rows) the next time it runs
    while flag["on"]: the Python-visible calls of a cold first run (extern
    wrappers such as attention) by own time, or where a cold lowering (the
    ATen trace) spends its time, cumulatively."""
    @functools.wraps(fn)
    def wrapper(*a, **k):
        if not flag["on"]:
            return fn(*a, **k)
        import cProfile
        import pstats
        flag["on"] = False
        pr = cProfile.Profile()
        pr.enable()
        try:
            return fn(*a, **k)
        finally:
            pr.disable()
            pstats.Stats(pr).sort_stats(sort).print_stats(lines)
    return wrapper


def patch():
    import torch._functorch.aot_autograd as aa
    aa.aot_export_joint_simple = timed("aot_export", aa.aot_export_joint_simple)
    backends._lower = timed("lower(total)", profiled(backends._lower, LOWERING, "cumulative", 30))
    backends._describe = timed("describe", backends._describe)
    backends._program = timed("c_core", backends._program)
    backends.aot_module_simplified = timed("aot_module_simplified", backends.aot_module_simplified)
    backends._build = timed("build", backends._build)
    backends.kiln = timed("backend(total)", backends.kiln)
    backends.CompiledGraph.run = timed("first run", profiled(backends.CompiledGraph.run, PROFILE, "tottime", 8))
    from kiln import ops
    ops.keep_attention_whole = timed("keep_attention_whole", ops.keep_attention_whole)


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
