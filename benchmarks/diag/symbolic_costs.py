"""Time the two costs of a symbolic graph that a serving sweep pays (issue
17), one process, one model, for profiling under py-spy:

  compile   kiln.compile(model, dynamic=True) called at 4x64, ROUNDS times
            (kiln.reset() and an empty disk cache before each): a symbolic
            recording and a symbolic compile, nothing static first
  sizes     kiln.compile(model) called at 4x64 and 6x96 (a static, then a
            symbolic compile), then at NEW further sizes (batch 2..17 x
            sequence 8..256): each a size plan from the parametric build;
            prints the median time of a new size's call, its run included,
            and (--split) the medians of its stages: the whole plan
            (PerSize._build), and within it the description filled in, the
            C core, the parametric match and load, the CompiledGraph made;
            then a second (steady) call at that size

Inputs are the serving sweep's (kiln/bench/dynamic.py make_inputs: token
ids, or images of side S), at batch x size.

On a GPU the model runs in bfloat16 and each timed call is synchronised.

    python benchmarks/diag/symbolic_costs.py compile bert [ROUNDS]
    python benchmarks/diag/symbolic_costs.py sizes llama [NEW] --device cuda --split
    py-spy record -r 200 -f raw -o rec.raw -- python benchmarks/diag/symbolic_costs.py compile bert 6
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln.bench import dynamic, models  # noqa: E402


def _timed(fn, inputs, device):
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("compile", "sizes"))
    p.add_argument("model")
    p.add_argument("count", nargs="?", type=int, default=None, help="ROUNDS (compile, 3) or NEW (sizes, 120)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--split", action="store_true", help="sizes: the stages of a new size's call")
    a = p.parse_args()
    torch.manual_seed(0)
    cfg = models.BuildConfig(device=a.device, dtype=torch.bfloat16 if a.device == "cuda" else torch.float32)
    spec = models.MODELS[a.model]
    model, example, _ = models.build_model(spec, cfg)
    model.eval()

    def ids(b, s):   # (the serving sweep's inputs at batch b, size s)
        return dynamic.make_inputs(spec, model, example, (b, s), cfg, 0)

    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        if a.what == "compile":
            for r in range(a.count or 3):
                kiln.reset()
                kiln.config.cache_dir = os.path.join(tmp, str(r))
                fn = kiln.compile(model, dynamic=True)
                print(f"round {r}: symbolic compile and first call at 4x64 "
                      f"{_timed(fn, ids(4, 64), a.device) * 1e3:.0f} ms", flush=True)
            return
        kiln.config.cache_dir = tmp
        fn = kiln.compile(model)
        fn(*ids(4, 64))
        fn(*ids(6, 96))
        sizes = [(b, s) for b in range(2, 18) for s in range(8, 264, 8) if (b, s) not in ((4, 64), (6, 96))]
        spent = _split_stages() if a.split else None
        times, stages = [], {}
        for b, s in sizes[:a.count or 120]:
            inputs = ids(b, s)
            if spent is not None:
                spent.clear()
            times.append(_timed(fn, inputs, a.device))
            if spent is not None:
                spent["steady call (2nd at that size)"] = _timed(fn, inputs, a.device)
                for k, v in spent.items():
                    stages.setdefault(k, []).append(v)
        print(f"{len(times)} new sizes: median {statistics.median(times) * 1e3:.2f} ms a call "
              f"(its run included); kiln size plans {kiln.stats().get('size_plans')}")
        for k, v in stages.items():
            v = v + [0.0] * (len(times) - len(v))
            print(f"  {k:<34} median {statistics.median(v) * 1e3:7.3f} ms  mean {statistics.mean(v) * 1e3:7.3f} ms")


def _split_stages():
    """Time a new size's stages by wrapping the functions that make them:
    returns the dict {stage: seconds} they add to (the caller clears it
    before each size)."""
    from kiln import dynamic as kdyn, kernel_params, pipeline, runners, template

    spent = {}

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
        setattr(owner, name, timed)

    wrap(kdyn.PerSize, "_build", "build (all of a new size's plan)")
    wrap(template.Template, "instantiate", "description filled in")
    wrap(pipeline, "_compile", "C core")
    wrap(kernel_params, "build", "parametric match and load")
    wrap(runners.CompiledGraph, "__init__", "CompiledGraph made")
    return spent


if __name__ == "__main__":
    main()
