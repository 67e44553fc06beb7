"""kiln's dynamic function against its static compile of one shape, timed in
the same interleaved rounds (issue 17's "steady state within 10% of kiln's
own static compile").  The dynamic function is kiln.compile(model) after two
warm-up shapes (so its graph is symbolic and each shape a size plan from a
parametric build); the static one is kiln.compile(copy of the model,
dynamic=False) called at that shape alone.  Prints per shape the medians of
ROUNDS rounds (dynamic, static, eager), their ratio, and what each call
added to kiln's counters (a static compile for the copy, a plan for the
dynamic function).

    python benchmarks/diag/dynamic_vs_static_ab.py MODEL SHAPES [ROUNDS]
    python benchmarks/diag/dynamic_vs_static_ab.py cnn 9x44,2x32,5x36,9x44 40
    DEVICE=cuda python benchmarks/diag/dynamic_vs_static_ab.py bert 12x320,8x32 40   # bfloat16, synchronised

On a GPU (DEVICE=cuda) the model runs in bfloat16, the warm-up shapes are
the GPU sweep's first two (8x32, 6x384; images 8x96, 6x272) and each
timed call is synchronised.
"""
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln.bench import dynamic as dyn  # noqa: E402
from kiln.bench import models as zoo  # noqa: E402


def main():
    name = sys.argv[1]
    shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[2].split(",")]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    torch.set_num_threads(2)
    spec = zoo.MODELS[name]
    dev = os.environ.get("DEVICE", "cpu")
    cfg = zoo.BuildConfig(device=dev, dtype=torch.bfloat16 if dev == "cuda" else torch.float32)
    model, example, _ = zoo.build_model(spec, cfg)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def inputs(shape):
        return dyn.make_inputs(spec, model, example, shape, cfg, 0)

    def counts():
        st = kiln.stats()
        return st["compiles"], st["size_plans"]

    print(f"dynamic_vs_static_ab  {time.strftime('%Y-%m-%d %H:%M')}  torch {torch.__version__}  "
          f"command: python {' '.join(sys.argv)}")
    dynamic = kiln.compile(model)
    image = dyn.input_kind(spec) == "image"
    if dev == "cuda":
        warm = [(8, 96), (6, 272)] if image else [(8, 32), (6, 384)]
    else:
        warm = [(5, 32), (4, 78)] if image else [(5, 8), (4, 96)]
    with torch.no_grad():
        for shape in warm:
            dynamic(*inputs(shape))
        for shape in shapes:
            args = inputs(shape)
            c0 = counts()
            dynamic(*args)
            c1 = counts()
            static = kiln.compile(copy.deepcopy(model), dynamic=False)
            static(*args)
            c2 = counts()
            times = {"dynamic": [], "static": [], "eager": []}
            for _ in range(rounds):
                for key, fn in (("dynamic", dynamic), ("static", static), ("eager", model)):
                    sync()
                    t = time.perf_counter()
                    fn(*args)
                    sync()
                    times[key].append(time.perf_counter() - t)
            d, s, e = (statistics.median(times[k]) * 1e3 for k in ("dynamic", "static", "eager"))
            print(f"{shape}: dynamic {d:.2f} ms  static {s:.2f} ms  eager {e:.2f} ms  dynamic/static {d / s:.3f}"
                  f"  (dynamic: +{c1[0] - c0[0]} compiles +{c1[1] - c0[1]} plans; "
                  f"static: +{c2[0] - c1[0]} compiles)", flush=True)


if __name__ == "__main__":
    main()
