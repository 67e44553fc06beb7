"""kiln's graph capture against TorchDynamo's over the model zoo
(tests/models/zoo.py: ~120 transformers and torch.nn architectures at toy
sizes, built on the CPU), one process, one model after another:

    python benchmarks/capture_zoo.py [--backend eager] [--vision] [name ...]

Columns: kiln's graphs and breaks under kiln.explain(model, backend="eager")
(one break per place and reason); TorchDynamo's under
torch._dynamo.explain(model) (its count is graph_count - 1, shown as 0 where
it records no graph, or the number of distinct breaks in its counters where
that is more: explain reports none where a break leaves it no graph); "equal": kiln.compile(model) (two calls) gives eager's
outputs, every tensor of the ModelOutput / tuple / cache at rtol = atol =
1e-4 (ERR: an exception, shown in brackets); "D eq", only where kiln's is not
equal: whether torch.compile(model, backend="eager") gives eager's outputs
(NO: the model computes differently under any compiler, or Dynamo fails too);
then kiln's first break.  After the table: a summary line and kiln's break
reasons grouped, most frequent first, with one place each.  kiln runs with
kiln.config.debug on, so an internal error shows as ERR instead of running
eagerly.

--backend: kiln.compile's backend for the output check (default kiln: kiln's
C compiler; eager: kiln's capture only).  --vision: the timm and torchvision
models instead (tests/models/zoo_vision.py; they need torchvision and timm,
which import beside torch 2.14.1, not the main venv's 2.13.0:
`make build setup-vision`, then .venv-vision/bin/python benchmarks/capture_zoo.py
--vision).
"""
import argparse
import collections
import os
import re
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import kiln  # noqa: E402
from tests.models import zoo  # noqa: E402


def _cell(v):
    return "-" if v is None else str(v)


def _reason_key(reason):
    """A break reason without the names and numbers that vary between
    models, for grouping."""
    r = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", reason)
    return re.sub(r"\b\d+\b", "N", r)[:100]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="kiln")
    ap.add_argument("--vision", action="store_true", help="the timm and torchvision models")
    ap.add_argument("names", nargs="*")
    opts = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        tv = transformers.__version__
    except ImportError:
        tv = "-"
    known = zoo.names()
    if opts.vision:
        from tests.models import zoo_vision  # noqa: F401 (registers the "vision" and "vision_more" groups)
        import timm
        import torchvision

        known = zoo.names("vision") + zoo.names("vision_more")  # the tested ones first
        tv = f"{tv}  torchvision {torchvision.__version__}  timm {timm.__version__}"
    unknown = [n for n in opts.names if n not in known]
    if unknown:
        sys.exit(f"unknown model(s): {' '.join(unknown)}; the zoo has: {' '.join(known)}")
    names = opts.names or known
    kiln.config.debug = True  # a kiln internal error is raised (and noted), not hidden by running eagerly
    print(f"kiln vs TorchDynamo capture over the zoo  torch {torch.__version__}  transformers {tv}  "
          f"Python {sys.version.split()[0]}  kiln.compile backend={opts.backend}  {kiln.__file__}")
    head = (f"{'model':36} {'k graphs':>8} {'k breaks':>8} {'D graphs':>8} {'D breaks':>8} {'equal':>5} {'D eq':>4}"
            "  kiln's first break")
    if opts.vision:
        print(f"(the first {len(zoo.names('vision'))} are tests/models/test_zoo_vision.py's, the other "
              f"{len(zoo.names('vision_more'))} only benchmarked)")
    print(head)
    print("-" * len(head))
    results = []
    t0 = time.perf_counter()
    # TorchDynamo's explain runs live for every model here (the tests read
    # tests/models/dynamo_reference.json for two thirds of them)
    os.environ["KILN_ZOO_DYNAMO"] = "live"
    for name in names:
        r = zoo.compare(name, backend=opts.backend, catch=True)
        results.append(r)
        equal = "yes" if r.equal else ("NO" if r.equal is False else "ERR")
        deq = {True: "yes", False: "NO", None: "."}[r.dynamo_equal]
        first = ""
        if r.kiln_reasons:
            b = r.kiln_reasons[0]
            first = f"{os.path.basename(b.filename)}:{b.lineno}: {b.reason}"
        if r.error:
            first = (first + "  " if first else "") + f"[error: {r.error}]"
        elif r.equal is False:
            first = (first + "  " if first else "") + f"[{r.mismatch}]"
        print(f"{name:36} {_cell(r.kiln_graphs):>8} {_cell(r.kiln_breaks):>8} {_cell(r.dynamo_graphs):>8} "
              f"{_cell(r.dynamo_breaks):>8} {equal:>5} {deq:>4}  {first[:110]}", flush=True)
    n = len(results)
    le = sum(r.kiln_breaks is not None and r.dynamo_breaks is not None and r.kiln_breaks <= r.dynamo_breaks
             for r in results)
    zero = sum(r.kiln_breaks == 0 for r in results)
    dzero = sum(r.dynamo_breaks == 0 for r in results)
    eq = sum(bool(r.equal) for r in results)
    both = sum(r.dynamo_equal is False for r in results)
    print(f"\n{n} models: kiln breaks <= Dynamo's in {le}; zero kiln breaks in {zero} (Dynamo: {dzero}); "
          f"kiln.compile equal to eager in {eq} (of the others, TorchDynamo differs or fails too in {both}); "
          f"{time.perf_counter() - t0:.0f} s")

    groups = collections.defaultdict(list)  # reason -> [(model, break)]
    for r in results:
        for b in r.kiln_reasons:
            groups[_reason_key(b.reason)].append((r.name, b))
    if groups:
        print("\nkiln's break reasons, grouped (breaks, models, an example):")
        for key, hits in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            models = sorted({m for m, _ in hits})
            m, b = hits[0]
            print(f"  {len(hits):4} breaks in {len(models):3} models  {key}")
            print(f"         e.g. {m}: {b.filename}:{b.lineno}  ({b.source})"[:220])
    return 0


if __name__ == "__main__":
    sys.exit(main())
