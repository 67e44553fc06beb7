"""Dynamic shapes over the model zoo (tests/models/zoo.py: ~120
transformers and torch.nn architectures at toy sizes, on the CPU): each
model compiled once with kiln.compile (automatic dynamic, KILN_DEBUG on so
an internal error shows) and called at SHAPES (batch, sequence) in a fixed
order; every output checked against eager's at the same inputs.

    python benchmarks/dynamic_zoo.py [name ...]
    MISSES=1 python benchmarks/dynamic_zoo.py NAME   # and why a size got a build of its own

A model's example inputs are resized generically: dim 0 of every tensor
that has the zoo's batch becomes the shape's batch, dim 1 of every tensor
that has its sequence length becomes the shape's sequence (image models:
the batch only); integer tensors are drawn again within their example's
range, float ones from randn, a mask of ones and zeros keeps its padded
tail.  A shape eager itself rejects (a model with a fixed length) is
skipped.  Columns: shapes run, outputs equal, kiln's compiles (graphs
traced or built natively), size plans (sizes served by a symbolic
lowering's parametric build), recordings, fallbacks, frames run as Python,
templates made / failed, seconds; then the first mismatch or error.  A
summary line follows: the models with every output equal and at most 3
compiles, and the worst counts.
"""
import contextlib
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import kiln  # noqa: E402
from tests.models import zoo  # noqa: E402

misses = None
if os.environ.get("MISSES"):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "diag"))
    import parametric_misses as misses  # noqa: E402

SHAPES = [(2, 8), (3, 11), (5, 16), (2, 23), (4, 7), (3, 11), (6, 19), (2, 8)]
# models whose code takes another branch when compiled (tests/models/test_zoo.py)
COMPILE_BRANCH = {"umt5"}


def resized(args, kwargs, b, s, text):
    def one(t):
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != zoo.B:
            return t
        shape = list(t.shape)
        shape[0] = b
        if text and t.dim() >= 2 and shape[1] == zoo.S:
            shape[1] = s
        if t.dtype.is_floating_point:
            return torch.randn(shape, dtype=t.dtype)
        lo, hi = int(t.min()), int(t.max())
        if lo != hi and hi - lo == 1 and text and t.dim() == 2:
            # a padding mask (0/1 or bool): its common value everywhere, the
            # other at the end of the last row, as the zoo's
            common = int(t.sum()) * 2 >= t.numel()
            m = torch.full(shape, common, dtype=t.dtype)
            m[-1, -2:] = not common
            return m
        return torch.randint(lo, hi + 1, shape, dtype=t.dtype)
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def run(name):
    model, args, kwargs = zoo.build(name)
    text = any(isinstance(a, torch.Tensor) and a.dim() == 2 and a.shape == (zoo.B, zoo.S)
               for a in list(args) + list(kwargs.values()))
    kiln.reset()
    fast = kiln.compile(model)
    row = {"name": name, "shapes": 0, "equal": 0, "note": ""}
    t0 = time.perf_counter()
    current = [None]
    with torch.no_grad(), (misses.watching(current) if misses else contextlib.nullcontext()) as seen:
        for b, s in SHAPES if text else [(b, zoo.S) for b, _ in SHAPES]:
            current[0] = (b, s)
            torch.manual_seed(b * 100 + s)
            a, kw = resized(args, kwargs, b, s, text)
            try:
                ref = model(*a, **kw)
            except Exception:   # noqa: BLE001  (eager rejects this shape: not kiln's to run)
                continue
            row["shapes"] += 1
            try:
                zoo.assert_same(fast(*a, **kw), ref)
                row["equal"] += 1
            except Exception as e:   # noqa: BLE001
                if not row["note"]:
                    row["note"] = f"{b}x{s}: {type(e).__name__}: " + " ".join(str(e).split())[:160]
    if name in COMPILE_BRANCH:
        row["note"] = "(takes another branch when compiled, as under torch.compile: not compared) " + row["note"]
        row["equal"] = row["shapes"]
    row["seconds"] = time.perf_counter() - t0
    if misses:
        misses.report(seen)
    st = kiln.stats()
    for k in ("compiles", "size_plans", "recompiles", "fallbacks", "frames_run_as_python", "templates",
              "template_failures"):
        row[k] = st.get(k, 0)
    return row


def main(argv):
    names = argv or [n for n in zoo.names("main")]
    kiln.config.debug = True
    warnings.filterwarnings("ignore")
    cols = ("shapes", "equal", "compiles", "size_plans", "recompiles", "fallbacks", "frames_run_as_python",
            "templates", "template_failures")
    print(f"{'model':28s} " + " ".join(f"{c[:9]:>9s}" for c in cols) + "  seconds  note")
    rows = []
    for name in names:
        try:
            r = run(name)
        except Exception as e:   # noqa: BLE001  (building the model failed)
            print(f"{name:28s} build failed: {type(e).__name__}: {str(e)[:120]}")
            continue
        rows.append(r)
        print(f"{name:28s} " + " ".join(f"{r[c]:9d}" for c in cols) + f"  {r['seconds']:7.1f}  {r['note']}",
              flush=True)
    ran = [r for r in rows if r["shapes"]]
    good = [r for r in ran if r["equal"] == r["shapes"] and r["compiles"] <= 3]
    print(f"\n{len(good)}/{len(ran)} models with every output equal and at most 3 compiles; "
          f"not equal: {sum(r['equal'] < r['shapes'] for r in ran)}; "
          f"most compiles: {max((r['compiles'], r['name']) for r in ran) if ran else '-'}; "
          f"fallbacks: {sum(r['fallbacks'] for r in ran)}; frames run as Python: "
          f"{sum(r['frames_run_as_python'] for r in ran)}; templates failed: "
          f"{sum(r['template_failures'] for r in ran)}")
    return 0 if len(good) == len(ran) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
