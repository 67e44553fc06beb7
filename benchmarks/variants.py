"""kiln against itself: one model compiled several ways in the same process,
on the same inputs, timed in interleaved rounds (so a noisy machine moves
all variants alike).  Variants:

    default   kiln.compile(model)
    no-lt     KILN_LT_EPILOGUES=0: activations after GPU matmuls stay kiln kernels
    tuned     mode="max-autotune-no-cudagraphs": launch sizes tuned on the first run
    full-opt  KILN_NVRTC_FAST_COMPILE=0: NVRTC's full optimisation instead of --Ofast-compile=min
    pydispatch  KILN_TRACE_PYTHON_DISPATCHER=1: plain traces with torch's Python dispatcher
    row-loops KILN_CUDA_ROW_REGISTERS=0: row kernels loop over memory in every pass

    python benchmarks/variants.py --models gpt2,t5,resnet50 [--rounds 5 --repeat 20] [--variants no-lt,tuned]

Prints per model the median ms per call of each variant, its ratio to
default (>1 = faster than default), and its first-call time.
"""
import argparse
import statistics
import tempfile
import time

import torch

import kiln
from kiln import backends
from kiln.bench import models as zoo

# variant -> (kiln.config overrides, mode)
VARIANTS = {
    "default": ({}, None),
    "no-lt": ({"lt_epilogues": False}, None),
    "tuned": ({}, "max-autotune-no-cudagraphs"),
    "full-opt": ({"nvrtc_fast_compile": ""}, None),
    "pydispatch": ({"trace_python_dispatcher": True}, None),
    "row-loops": ({"cuda_row_registers": False}, None),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2,t5")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list (default: all); default is always run")
    a = ap.parse_args()
    chosen = ["default"] + [v for v in a.variants.split(",") if v in VARIANTS and v != "default"]
    variants = {v: VARIANTS[v] for v in chosen}
    kiln.config.cache_dir = tempfile.mkdtemp(prefix="kiln-variants-")
    dt = torch.bfloat16 if a.device == "cuda" else torch.float32
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    print(f"{'model':16s} " + "  ".join(f"{v:>22s}" for v in variants))
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, zoo.BuildConfig(device=a.device, dtype=dt))
        fns, first, info, ext = {}, {}, {}, {}
        with torch.no_grad():
            model(*inputs)
            for v, (over, mode) in variants.items():
                old = {k: getattr(kiln.config, k) for k in over}
                for k, val in over.items():
                    setattr(kiln.config, k, val)
                try:
                    kiln.reset()
                    f = kiln.compile(model, mode=mode)
                    sync()
                    t0 = time.perf_counter()
                    f(*inputs)
                    sync()
                    first[v] = time.perf_counter() - t0
                finally:
                    for k, val in old.items():
                        setattr(kiln.config, k, val)
                g = backends.compiled_graphs
                ext[v] = [e for x in g for e in x.get("extern_ops", [])]
                info[v] = (sum(x.get("kernels", 0) for x in g), sum(x.get("tuned_kernels", 0) for x in g),
                           sum("_addmm_activation" in e for x in g for e in x.get("extern_ops", [])))
                fns[v] = f
            times = {v: [] for v in variants}
            for _ in range(a.rounds):
                for v in variants:
                    for _ in range(3):
                        fns[v](*inputs)
                    sync()
                    for _ in range(a.repeat):
                        t0 = time.perf_counter()
                        fns[v](*inputs)
                        sync()
                        times[v].append(time.perf_counter() - t0)
        med = {v: statistics.median(times[v]) * 1e3 for v in variants}
        cells = [f"{med[v]:7.3f} ms {med['default'] / med[v]:5.2f}x {first[v]:5.2f}s" for v in variants]
        print(f"{spec.name:16s} " + "  ".join(f"{c:>22s}" for c in cells), flush=True)
        print(f"{'':16s} kernels/tuned/lt-epilogues: " + "  ".join(f"{v} {info[v]}" for v in variants), flush=True)
        if len({tuple(sorted(ext[v])) for v in variants if v != "no-lt"}) > 1:
            print(f"{'':16s} extern ops differ: " + "  ".join(f"{v} {sorted(set(ext[v]))}" for v in variants),
                  flush=True)
    print("cells: median ms per call, speedup over default (>1 = faster), first call s (compile + tuning)")


if __name__ == "__main__":
    main()
