"""``python -m kiln.bench --dynamic``: the serving sweep of issue 17.

Each model is called over a grid of batch sizes x sequence lengths (image
sides for a vision model), every (batch, size) pair once, in one seeded
random order that is the same for every compiler:

1. sweep: for each shape in that order, ``torch.compile(model)`` (default:
   inductor, automatic dynamic shapes) and ``kiln.compile(model)``, then
   eager (the reference), each called once on the same inputs; torch.compile
   first at every other shape, last of the compilers at the rest
   (``call_order``: the first caller at a shape pays what libraries cache
   for the next, cuDNN's plans above all).  A compiler's
   *sweep time* is the sum of its calls, so the compiles it does along the
   way are included; every output is compared with eager's
   (``measure.compare_outputs``: atol + rtol * scale per dtype).
2. steady state: a second pass over the same order; per shape one untimed
   call of each compiler, then ``--dyn-repeat`` timed calls of each in
   interleaved rounds; the median per shape and compiler.
2b. re-timing (``--dyn-retime N``, default 32): the N shapes where kiln's
   steady median came out furthest behind torch.compile's are timed again,
   every compiler in at least 15 interleaved rounds; the per-shape worst
   ratio takes those rounds' medians (the largest of 128 ratios of 3-call
   medians is mostly one shape's noise), and both are printed.
3. kiln static (``--dyn-static N`` shapes spread over the order, 0 = skip):
   ``kiln.compile(copy, dynamic=False)`` of a deep copy of the model (its own
   guards, so the sweep's symbolic entry does not serve it) called at one
   shape: what kiln does with that shape when it sees no other.  Its
   steady-state time is measured in the same interleaved rounds as eager's
   and the sweep's kiln function at that shape, so the kiln/static ratio is
   not two phases' noise apart.  Its disk cache is the sweep's, so a shape
   the sweep compiled costs no new native build.

Compile counts: torch.compile's are TorchDynamo's
``counters["stats"]["unique_graphs"]`` (graphs handed to inductor) and its
recompile-limit hits (frames it then runs eagerly); kiln's are
``kiln.stats()``: ``captures`` (recordings), ``compiles`` (graphs compiled to
native code), ``fallbacks`` (graphs run through ATen) and
``frames_run_as_python`` (calls handed to CPython once ``cache_size_limit``
recordings of a frame exist).  A compiler that raises on a shape is recorded
as an error for that shape; the run goes on.  The issue's targets are
checked per model and printed as met / NOT MET.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import math
import random
import shlex
import sys
import warnings

import torch
from tqdm import tqdm

from . import models as zoo
from .compilers import captured_kiln_warnings, inductor_cache_dir, kiln_cache_dir, reset_compilers
from .machine import format_header, machine_info
from .measure import compare_outputs, median, time_first_call
from .report import describe_exception, geomean, render_table, save_json, shorten, write_json

COMPILERS = ("eager", "torch.compile", "kiln", "dynamo+kiln")
# dynamo+kiln: torch.compile(model, backend="kiln"), TorchDynamo's capture
# (automatic dynamic) with kiln's backend, which compiles a graph with
# symbolic sizes per size (kiln/dynamic.py)
# (lowest, highest) sizes per input kind and device kind; N values are spread
# evenly between them.  Sizes start at 2: a size of 1 is a specialisation of
# its own under torch.compile (and kiln's plan), one more compile each.
RANGES = {
    ("text", "cpu"): {"seq": (8, 128), "batch": (2, 9)},
    ("text", "cuda"): {"seq": (32, 512), "batch": (2, 16)},
    ("image", "cpu"): {"seq": (32, 96), "batch": (2, 9)},
    ("image", "cuda"): {"seq": (96, 336), "batch": (2, 16)},
}
DEFAULT_SEQS, DEFAULT_BATCHES = 16, 8
# issue 17's targets for kiln
TARGET_COMPILES = 3
TARGET_SWEEP_RATIO = 0.2       # kiln's sweep time / torch.compile's
TARGET_STATIC_RATIO = 1.10     # kiln's steady time / kiln's static compile, per shape
RETIME_ROUNDS = 15             # interleaved rounds of a shape timed again (run_retime)


# ------------------------------------------------------------------- sizes
def spread(count: int, lo: int, hi: int) -> list[int]:
    """``count`` distinct integers spread evenly over [lo, hi] (fewer if the range is short)."""
    if count <= 1:
        return [hi]
    return sorted({lo + (hi - lo) * i // (count - 1) for i in range(count)})


def parse_sizes(text: str | None, default_count: int, lo: int, hi: int) -> list[int]:
    """A flag's sizes: None = the default count, ``N`` = N sizes spread over
    [lo, hi], ``a,b,c`` = exactly those (``64,`` for one)."""
    if text is None:
        return spread(default_count, lo, hi)
    text = str(text).strip()
    if "," in text:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
        if not values or min(values) < 1:
            raise ValueError(f"sizes must be positive integers: {text!r}")
        return values
    count = int(text)
    if count < 1:
        raise ValueError(f"a size count must be at least 1: {text!r}")
    return spread(count, lo, hi)


def input_kind(spec: zoo.ModelSpec) -> str:
    """text (token ids), sequence (float b x s x d), image (b x 3 x s x s) or batch (b x ...)."""
    if spec.group == "transformers":
        return "text"
    if spec.seq is not None:
        return "sequence"
    return "image" if spec.name == "cnn" or spec.group in ("torchvision", "timm") else "batch"


def default_models(device: str) -> str:
    """BERT, GPT-2, Llama and a vision model: resnet18 on a GPU where torchvision
    imports, else the bench's own cnn."""
    vision = "resnet18" if device == "cuda" and zoo.MODELS["resnet18"].available() else "cnn"
    return f"bert,gpt2,llama,{vision}"


def shape_grid(spec: zoo.ModelSpec, args) -> tuple[list[int], list[int | None]]:
    """(batch sizes, sequence lengths or image sides) of ``spec``'s sweep."""
    kind = input_kind(spec)
    ranges = RANGES[("image" if kind == "image" else "text", "cuda" if args.device == "cuda" else "cpu")]
    batches = parse_sizes(args.dyn_batches, DEFAULT_BATCHES, *ranges["batch"])
    sizes = [None] if kind == "batch" else parse_sizes(args.dyn_seqs, DEFAULT_SEQS, *ranges["seq"])
    return batches, sizes


def sweep_order(batches: list[int], sizes: list, seed: int) -> list[tuple]:
    """Every (batch, size) pair once, in a seeded random order."""
    pairs = [(b, s) for b in batches for s in sizes]
    random.Random(seed).shuffle(pairs)
    return pairs


def shape_key(shape: tuple) -> str:
    b, s = shape
    return f"{b}" if s is None else f"{b}x{s}"


def make_inputs(spec: zoo.ModelSpec, model, example: tuple, shape: tuple, cfg: zoo.BuildConfig,
                seed: int) -> tuple:
    """Deterministic inputs of ``spec`` at (batch, size), on cfg's device and dtype."""
    b, s = shape
    gen = torch.Generator().manual_seed(seed * 1_000_003 + b * 10_007 + (s or 0))
    kind = input_kind(spec)
    if kind == "text":
        vocab = model.model.config.vocab_size
        x = torch.randint(0, vocab, (b, s), generator=gen)
    elif kind == "sequence":
        x = torch.randn(b, s, *example[0].shape[2:], generator=gen)
    elif kind == "image":
        x = torch.randn(b, example[0].shape[1], s, s, generator=gen)
    else:
        x = torch.randn(b, *example[0].shape[1:], generator=gen)
    dtype = cfg.dtype if x.is_floating_point() else x.dtype
    return (x.to(device=cfg.device, dtype=dtype),)


# ---------------------------------------------------------------- counters
def torch_counts() -> dict:
    """TorchDynamo's counters that count compiles."""
    from torch._dynamo.utils import counters

    return {"compiles": counters["stats"]["unique_graphs"],
            "frames_compiled": counters["frames"]["ok"],
            "graph_breaks": sum(counters["graph_break"].values())}


def kiln_counts(kiln) -> dict:
    stats = kiln.stats()
    return {k: stats.get(k, 0) for k in ("captures", "recompiles", "compiles", "fallbacks",
                                         "frames_run_as_python", "cache_limit_fallbacks",
                                         "graph_breaks", "cache_hits", "compile_seconds",
                                         "symbolic_graphs", "specializations", "size_plans",
                                         "direct_sizes", "templates", "parametric_builds")}


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after}


class LimitHits(logging.Handler):
    """Counts TorchDynamo's 'hit config.recompile_limit' warnings (the frame
    then runs eagerly)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.hits = 0

    def emit(self, record):
        try:
            if "hit config." in record.getMessage():
                self.hits += 1
        except Exception:
            pass


@contextlib.contextmanager
def counting_limit_hits():
    handler = LimitHits()
    logger = logging.getLogger("torch._dynamo.convert_frame")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


# -------------------------------------------------------------------- phases
class Compilers:
    """eager, torch.compile and kiln.compile of one model, with their
    counters; ``fns`` holds those that could be built."""

    def __init__(self, model, session, errors: dict):
        self.session = session
        self.fns = {"eager": model}
        args = session.args
        if not args.no_inductor:
            try:
                self.fns["torch.compile"] = torch.compile(model)
            except Exception as exc:
                errors["torch.compile"] = describe_exception(exc)
        if session.kiln.module is None:
            errors["kiln"] = f"import kiln: {session.kiln.error}"
        else:
            try:
                self.fns["kiln"] = session.kiln.module.compile(model)
            except Exception as exc:
                errors["kiln"] = describe_exception(exc)
            try:
                self.fns["dynamo+kiln"] = torch.compile(model, backend="kiln")
            except Exception as exc:
                errors["dynamo+kiln"] = describe_exception(exc)

    def counts(self, name: str) -> dict | None:
        if name == "torch.compile":
            return torch_counts()
        if name == "kiln":
            return kiln_counts(self.session.kiln.module)
        if name == "dynamo+kiln":
            return {**torch_counts(), **kiln_counts(self.session.kiln.module)}
        return None


def call_shape(fn, inputs, session) -> tuple[dict, object]:
    """One timed call of ``fn`` at a shape; never raises."""
    try:
        ms, out = time_first_call(fn, inputs, session.sync)
    except Exception as exc:
        return {"error": describe_exception(exc)}, None
    return {"ms": ms}, out


def compare_with(rec: dict, ref, out, session) -> None:
    """rec updated with out's comparison with ref (eager's output)."""
    cmp = compare_outputs(ref, out, session.dtype)
    rec.update(ok=cmp["ok"], max_abs=cmp["max_abs"])
    if cmp.get("mismatch"):
        rec["mismatch"] = cmp["mismatch"]


def call_order(names: list, i: int) -> list:
    """The compilers' order at the i-th shape of the sweep: eager last (its
    output, the reference, is compared with the others' after its call),
    the others in two orders taken in turn, torch.compile first at even
    shapes and last at odd ones (kiln's two columns kept together).

    Whoever calls first at a new shape pays per-shape work that libraries
    cache process-wide for the next caller with the same layout: cuDNN's
    plan for a convolution at that shape and memory format (about 20 ms a
    shape for resnet18 on an H100, `benchmarks/diag/cudnn_new_shapes.py`),
    the caching allocator's growth.  Eager first would have warmed
    torch.compile's NCHW convolutions at every shape and never kiln's
    channels-last ones.  dynamo+kiln, after kiln, shares kiln's layouts."""
    others = [n for n in names if n != "eager"]
    if i % 2:
        others = others[1:] + others[:1]
    return others + (["eager"] if "eager" in names else [])


def run_sweep(spec, model, example, order, comps: Compilers, session, bar) -> dict:
    """Phase 1: one call per shape and compiler, in ``order``; per-shape records
    and totals.  A compiler's call whose counters moved is marked with what moved."""
    per_shape = {name: {} for name in comps.fns}
    # the counters are process-wide (TorchDynamo's, kiln's): each compiler's
    # are the sum of what moved during its own calls
    acc = {name: None for name in comps.fns}
    for i, shape in enumerate(order):
        inputs = make_inputs(spec, model, example, shape, session.cfg, session.args.dyn_seed)
        outs = {}
        for name in call_order(list(comps.fns), i):
            fn = comps.fns[name]
            before = comps.counts(name)
            rec, out = call_shape(fn, inputs, session)
            if before is not None:
                d = delta(comps.counts(name), before)
                acc[name] = d if acc[name] is None else {k: acc[name].get(k, 0) + v for k, v in d.items()}
                moved = {k: v for k, v in d.items()
                         if v and k not in ("compile_seconds", "cache_hits")}
                if moved:
                    rec["counters"] = moved
            per_shape[name][shape_key(shape)] = rec
            outs[name] = out
            del out
        ref = outs.pop("eager", None)
        if ref is not None:
            for name, out in outs.items():
                if out is not None:
                    compare_with(per_shape[name][shape_key(shape)], ref, out, session)
        del outs, ref
        bar.update(1)
    totals = {}
    for name, recs in per_shape.items():
        ok_ms = [r["ms"] for r in recs.values() if "ms" in r]
        totals[name] = {
            "sweep_s": sum(ok_ms) / 1e3,
            "shapes": len(recs),
            "errors": sum(1 for r in recs.values() if "error" in r),
            "equal": sum(1 for r in recs.values() if r.get("ok")),
            "compared": sum(1 for r in recs.values() if "ok" in r),
        }
        if acc[name] is not None:
            totals[name]["counts"] = acc[name]
    return {"per_shape": per_shape, "totals": totals}


def time_interleaved(fns: dict, inputs, rounds: int, sync) -> tuple[dict, dict]:
    """One untimed call of each function, then ``rounds`` rounds of one timed
    call each, in turn: (ms samples per name, error text per name).  A
    function that raises is dropped from the rounds from then on."""
    live, errors = {}, {}
    for name, fn in fns.items():
        try:
            fn(*inputs)
            live[name] = fn
        except Exception as exc:
            errors[name] = describe_exception(exc)
    samples = {name: [] for name in live}
    for _ in range(rounds):
        for name, fn in list(live.items()):
            try:
                samples[name].append(time_first_call(fn, inputs, sync)[0])
            except Exception as exc:
                errors[name] = describe_exception(exc)
                del live[name]
                samples.pop(name)
    return samples, errors


def run_steady(spec, model, example, order, comps: Compilers, session, bar) -> dict:
    """Phase 2: per shape, one untimed call each, then --dyn-repeat timed calls in
    interleaved rounds; median ms per shape and compiler."""
    repeat = max(1, session.args.dyn_repeat)
    medians = {name: {} for name in comps.fns}
    for shape in order:
        inputs = make_inputs(spec, model, example, shape, session.cfg, session.args.dyn_seed)
        samples, errors = time_interleaved(comps.fns, inputs, repeat, session.sync)
        for name, err in errors.items():
            medians[name][shape_key(shape)] = {"error": err}
        for name, v in samples.items():
            medians[name][shape_key(shape)] = {"ms": median(v)}
        bar.update(1)
    return medians


def retime_candidates(steady: dict, count: int) -> list:
    """The shapes (keys) where kiln's steady median is above torch.compile's,
    furthest behind first, at most ``count``."""
    kiln, tc = steady.get("kiln", {}), steady.get("torch.compile", {})
    behind = sorted(((_ms(r) / _ms(tc[k]), k) for k, r in kiln.items()
                     if _ms(r) and _ms(tc.get(k)) and _ms(r) > _ms(tc[k])), reverse=True)
    return [k for _, k in behind[:max(0, count)]]


def run_retime(spec, model, example, keys, order, comps: Compilers, session, bar) -> dict:
    """Phase 2b: the steady pass takes a median of --dyn-repeat calls per shape,
    and the largest of 128 such ratios is mostly the noise of one shape's few
    calls (the winner's curse).  Each shape where kiln came out behind
    torch.compile is timed again, every compiler in ``RETIME_ROUNDS``
    interleaved rounds (at least 5x --dyn-repeat), and its new medians replace
    the steady pass's for the per-shape worst (the geomeans stay the steady
    pass's); both are printed."""
    rounds = max(RETIME_ROUNDS, 5 * max(1, session.args.dyn_repeat))
    by_key = {shape_key(s): s for s in order}
    out = {}
    for key in keys:
        inputs = make_inputs(spec, model, example, by_key[key], session.cfg, session.args.dyn_seed)
        samples, _ = time_interleaved(comps.fns, inputs, rounds, session.sync)   # (errors: the steady pass's)
        out[key] = {"rounds": rounds, **{name: median(v) for name, v in samples.items() if v}}
        bar.update(1)
    return out


def static_sample(order: list, count: int) -> list:
    """``count`` shapes spread over the sweep order (its first shape included)."""
    if count <= 0 or not order:
        return []
    step = max(1, len(order) // count)
    return order[::step][:count]


def run_static(spec, model, example, shapes, session, bar, dynamic_fn=None) -> dict:
    """Phase 3: kiln compiled with ``dynamic=False`` on a deep copy of the model
    for each shape alone; its steady-state time interleaved with eager's and
    with ``dynamic_fn``'s (the sweep's kiln function) at that shape.  At least
    5 rounds: a ratio of two kiln times is the target here."""
    kiln = session.kiln.module
    repeat = max(5, session.args.dyn_repeat)
    out = {}
    for shape in shapes:
        key = shape_key(shape)
        inputs = make_inputs(spec, model, example, shape, session.cfg, session.args.dyn_seed)
        try:
            before = kiln_counts(kiln)
            fn = kiln.compile(copy.deepcopy(model), dynamic=False)
            ref = model(*inputs)
            first_ms, got = time_first_call(fn, inputs, session.sync)
            cmp = compare_outputs(ref, got, session.dtype)
            del got, ref
            fn(*inputs)
            model(*inputs)
            if dynamic_fn is not None:
                dynamic_fn(*inputs)
            ks, es, ds = [], [], []
            for _ in range(repeat):
                es.append(time_first_call(model, inputs, session.sync)[0])
                ks.append(time_first_call(fn, inputs, session.sync)[0])
                if dynamic_fn is not None:
                    ds.append(time_first_call(dynamic_fn, inputs, session.sync)[0])
            counts = delta(kiln_counts(kiln), before)
            out[key] = {"ms": median(ks), "eager_ms": median(es), "first_call_ms": first_ms,
                        "ok": cmp["ok"], "compiles": counts["compiles"],
                        "fallbacks": counts["fallbacks"]}
            if ds:
                out[key]["dynamic_ms"] = median(ds)
            del fn
        except Exception as exc:
            out[key] = {"error": describe_exception(exc)}
        bar.update(1)
    return out


# ------------------------------------------------------------- derivations
def _ms(rec):
    return rec.get("ms") if isinstance(rec, dict) else None


def summarize_model(row: dict) -> None:
    """Per compiler: steady geomean, ratios to eager / torch.compile / static."""
    steady = row.get("steady", {})
    eager = steady.get("eager", {})
    tc = steady.get("torch.compile", {})
    static = row.get("static", {})
    for name, recs in steady.items():
        summ = row["summary"].setdefault(name, {})
        times = [_ms(r) for r in recs.values()]
        summ["steady_geomean_ms"] = geomean(times)
        summ["steady_shapes"] = sum(1 for t in times if t)

        def ratios(ref_recs):
            pairs = {k: (_ms(r), _ms(ref_recs.get(k))) for k, r in recs.items()}
            return {k: a / b for k, (a, b) in pairs.items() if a and b}

        if name != "eager":
            r = ratios(eager)
            summ["vs_eager_geomean"] = geomean(r.values())
        if name != "torch.compile" and tc:
            r = ratios(tc)
            summ["vs_torch_compile_geomean"] = geomean(r.values())
            summ["vs_torch_compile_worst_first_pass"] = max(r.values()) if r else None
            # the shapes timed again (run_retime): their ratio from those rounds
            for k, rec in row.get("retimed", {}).items():
                if rec.get(name) and rec.get("torch.compile") and k in r:
                    r[k] = rec[name] / rec["torch.compile"]
            summ["vs_torch_compile_worst"] = max(r.values()) if r else None
            row.setdefault("ratios", {})[f"{name}/torch.compile"] = r
        if name == "kiln" and static:
            # the sweep's kiln function timed in the static phase's own rounds
            # where it was (the same-round ratio); else the steady phase's time
            r = {k: (s["dynamic_ms"] if s.get("dynamic_ms") else _ms(recs.get(k))) / s["ms"]
                 for k, s in static.items() if _ms(s) and (s.get("dynamic_ms") or _ms(recs.get(k)))}
            summ["vs_static_geomean"] = geomean(r.values())
            summ["vs_static_worst"] = max(r.values()) if r else None
            row.setdefault("ratios", {})["kiln/static"] = r


def check_targets(row: dict) -> dict:
    """Issue 17's targets for kiln on this model: name -> (met?, detail).
    None where the data to judge is missing."""
    tot = row.get("sweep", {}).get("totals", {})
    kiln, tc = tot.get("kiln"), tot.get("torch.compile")
    summ = row.get("summary", {}).get("kiln", {})
    targets = {}
    if kiln:
        c = kiln.get("counts", {})
        targets["compiles <= 3"] = (c.get("compiles", 0) <= TARGET_COMPILES,
                                    f"{c.get('compiles', 0)} compiles, {c.get('size_plans', 0)} size plans, "
                                    f"{c.get('captures', 0)} recordings")
        fb = c.get("fallbacks", 0) + c.get("frames_run_as_python", 0)
        targets["no fallback"] = (fb == 0, f"{c.get('fallbacks', 0)} graphs through ATen, "
                                           f"{c.get('frames_run_as_python', 0)} frames run as Python")
        targets["every output equal"] = (kiln["equal"] == kiln["shapes"] and not kiln["errors"],
                                         f"{kiln['equal']}/{kiln['shapes']} equal, {kiln['errors']} errors")
    if kiln and tc and tc["sweep_s"] > 0:
        ratio = kiln["sweep_s"] / tc["sweep_s"]
        targets["sweep <= 1/5 torch.compile"] = (ratio <= TARGET_SWEEP_RATIO,
                                                 f"{kiln['sweep_s']:.1f} s / {tc['sweep_s']:.1f} s = {ratio:.2f}")
    worst = summ.get("vs_static_worst")
    if worst is not None:
        targets["steady <= 1.10x static, every shape"] = (
            worst <= TARGET_STATIC_RATIO, f"worst {worst:.2f}x over {len(row.get('ratios', {}).get('kiln/static', {}))} "
                                          f"sampled shapes")
    worst = summ.get("vs_torch_compile_worst")
    if worst is not None:
        retimed = row.get("retimed", {})
        again = (f" (first pass {summ['vs_torch_compile_worst_first_pass']:.2f}x; {len(retimed)} shapes "
                 f"timed again over {next(iter(retimed.values()))['rounds']} rounds)") if retimed else ""
        targets["steady <= torch.compile, every shape"] = (
            worst <= 1.0, f"worst {worst:.2f}x{again}, geomean {summ['vs_torch_compile_geomean']:.2f}x")
    return targets


# -------------------------------------------------------------------- report
def _f(value, spec):
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf"
    return f"{value:{spec}}"


COLUMNS = [("compiler", "<"), ("sweep s", ">"), ("compiles", ">"), ("plans", ">"), ("recordings", ">"),
           ("fallbacks", ">"), ("py frames", ">"), ("equal", ">"), ("errors", ">"),
           ("steady ms", ">"), ("/eager", ">"), ("/t.compile", ">"), ("worst", ">"),
           ("/static", ">"), ("worst", ">")]


def model_table(row: dict) -> str:
    body = []
    totals = row.get("sweep", {}).get("totals", {})
    for name in COMPILERS:
        tot = totals.get(name)
        if tot is None:
            continue
        summ = row.get("summary", {}).get(name, {})
        c = tot.get("counts") or {}
        if name == "torch.compile":
            compiles, recs = c.get("compiles"), c.get("frames_compiled")
            fallbacks, py = row.get("torch_limit_hits"), None
        elif name == "dynamo+kiln":
            compiles, recs = c.get("compiles"), c.get("frames_compiled")
            fallbacks, py = c.get("fallbacks"), None
        elif name == "kiln":
            compiles, recs = c.get("compiles"), c.get("captures")
            fallbacks, py = c.get("fallbacks"), c.get("frames_run_as_python")
        else:
            compiles = recs = fallbacks = py = None
        body.append([
            name, _f(tot["sweep_s"], ".2f"), _f(compiles, "d"),
            _f(c.get("size_plans") if name in ("kiln", "dynamo+kiln") else None, "d"), _f(recs, "d"), _f(fallbacks, "d"),
            _f(py, "d"), "-" if name == "eager" else f"{tot['equal']}/{tot['shapes']}",
            _f(tot["errors"], "d"), _f(summ.get("steady_geomean_ms"), ".2f"),
            _f(summ.get("vs_eager_geomean"), ".2f"), _f(summ.get("vs_torch_compile_geomean"), ".2f"),
            _f(summ.get("vs_torch_compile_worst"), ".2f"), _f(summ.get("vs_static_geomean"), ".2f"),
            _f(summ.get("vs_static_worst"), ".2f"),
        ])
    return render_table(COLUMNS, body)


def worst_shapes(row: dict, n: int = 3) -> list[str]:
    """The shapes where kiln's steady time is furthest behind torch.compile's (or
    eager's without it), and the slowest first calls (compiles) of each compiler."""
    lines = []
    steady = row.get("steady", {})
    sweep = row.get("sweep", {}).get("per_shape", {})
    ref_name = "torch.compile" if "torch.compile" in steady else "eager"
    kiln, ref = steady.get("kiln", {}), steady.get(ref_name, {})
    retimed = row.get("retimed", {})
    ratios = sorted(((_ms(r) / _ms(ref[k]), k) for k, r in kiln.items() if _ms(r) and _ms(ref.get(k))),
                    reverse=True)[:n]
    for ratio, key in ratios:
        again = retimed.get(key, {})
        if again.get("kiln") and again.get(ref_name):
            lines.append(f"  steady kiln/{ref_name} {ratio:.2f}x at {key} in the steady pass; timed again over "
                         f"{again['rounds']} rounds: {again['kiln'] / again[ref_name]:.2f}x (kiln "
                         f"{again['kiln']:.2f} ms, {ref_name} {again[ref_name]:.2f} ms"
                         + (f", eager {again['eager']:.2f} ms" if again.get("eager") else "") + ")")
            continue
        first = sweep.get("kiln", {}).get(key, {})
        how = ("ran as Python" if first.get("counters", {}).get("frames_run_as_python")
               else "recorded+compiled" if first.get("counters", {}).get("captures") else "cache hit")
        eager = _ms(steady.get("eager", {}).get(key))
        also = f", eager {_f(eager, '.2f')} ms" if ref_name != "eager" else ""
        lines.append(f"  steady kiln/{ref_name} {ratio:.2f}x at {key}: kiln {_ms(kiln[key]):.2f} ms, "
                     f"{ref_name} {_ms(ref[key]):.2f} ms{also} (kiln's sweep call there: {how})")
    for name in ("torch.compile", "kiln", "dynamo+kiln"):
        recs = sweep.get(name, {})
        slow = sorted(((r["ms"], k) for k, r in recs.items() if "ms" in r), reverse=True)[:n]
        if slow:
            lines.append(f"  slowest {name} sweep calls: " +
                         ", ".join(f"{k} {ms / 1e3:.2f} s" for ms, k in slow))
    for name, recs in sweep.items():
        bad = [k for k, r in recs.items() if "error" in r or r.get("ok") is False]
        if bad:
            first = recs[bad[0]]
            what = shorten(first.get("error") or f"differs from eager (max abs {first.get('max_abs')})", 100)
            lines.append(f"  {name}: {len(bad)} shape(s) failed, first {bad[0]}: {what}")
    return lines


def legend() -> str:
    return "\n".join([
        "sweep s: sum of the calls of one pass over every shape in the random order, first calls "
        "(compiles) included; compiles: torch.compile counters['stats']['unique_graphs'], kiln "
        "stats()['compiles'] (graphs traced or natively built); plans: kiln sizes whose kernels came "
        "from an earlier size's parametric build (or that have none), the C core run for them but nothing "
        "traced or built "
        "(stats()['size_plans']); recordings: frames TorchDynamo converted / kiln captures",
        "fallbacks: torch.compile recompile-limit hits (frame then eager) / kiln graphs run through "
        "ATen; py frames: frames kiln handed to CPython (cache_size_limit recordings of the frame "
        "reached: every later call at a new shape runs as Python; stats()['frames_run_as_python'])",
        "dynamo+kiln: torch.compile(model, backend=\"kiln\"): TorchDynamo's capture and automatic "
        "dynamic, kiln's backend compiling each symbolic graph per size (kiln.stats()['specializations'], "
        "each one counted in compiles or plans); recordings: frames TorchDynamo converted",
        "equal: sweep outputs within atol + rtol * max|eager| of eager; steady ms: geomean over "
        "shapes of the per-shape median; /eager, /t.compile, /static: geomean over shapes of the "
        "time ratio (< 1 = faster), worst = the largest (/t.compile's: the --dyn-retime shapes kiln came "
        "out furthest behind on are timed again in at least 15 interleaved rounds and take those rounds' "
        "ratio; the others keep the steady pass's); /static: the sweep's kiln function against "
        "kiln.compile(copy of the model, dynamic=False) that saw that shape alone, timed in the same "
        "interleaved rounds (sampled shapes)",
    ])


def format_targets(targets: dict) -> str:
    if not targets:
        return "  issue 17 targets: not judged (no kiln data)"
    parts = [f"{name}: {'met' if ok else 'NOT MET'} ({detail})" for name, (ok, detail) in targets.items()]
    return "  issue 17 targets for kiln: " + "; ".join(parts)


def print_model(row: dict) -> None:
    shapes = row.get("shapes", {})
    print(f"\n== {row['model']} ({row.get('description', '')}): {len(shapes.get('batches', []))} batch sizes "
          f"{shapes.get('batches')} x {len(shapes.get('sizes', []))} {shapes.get('size_name', 'sizes')} "
          f"{shapes.get('sizes')} = {len(row.get('order', []))} shapes")
    if row.get("errors"):
        for phase, msg in row["errors"].items():
            print(f"  ERROR {phase}: {shorten(msg, 200)}")
    if "sweep" in row:
        print(model_table(row))
        for line in worst_shapes(row):
            print(line)
        print(format_targets(row.get("targets", {})))
    if row.get("warnings"):
        print(f"  kiln warned {row['kiln_warning_count']} times, first: {shorten(row['warnings'][0], 200)}")
    sys.stdout.flush()


# ---------------------------------------------------------------------- main
def run_model(spec: zoo.ModelSpec, session) -> dict:
    """All phases for one model; never raises (errors land in the row)."""
    args = session.args
    row: dict = {"model": spec.name, "description": spec.description, "errors": {}, "summary": {},
                 "warnings": []}
    try:
        batches, sizes = shape_grid(spec, args)
        order = sweep_order(batches, sizes, args.dyn_seed)
        size_name = {"text": "seq", "sequence": "seq", "image": "image side"}.get(input_kind(spec), "-")
        row["shapes"] = {"batches": batches, "sizes": sizes, "size_name": size_name}
        row["order"] = [shape_key(s) for s in order]
        model, example, _ = zoo.build_model(spec, session.cfg)
    except Exception as exc:
        row["errors"]["build"] = describe_exception(exc)
        return row
    static = static_sample(order, args.dyn_static) if session.kiln.module is not None else []
    steps = 2 * len(order) + len(static)
    kiln_warnings: list[str] = []
    with contextlib.ExitStack() as stack, torch.no_grad(), \
            tqdm(total=steps, file=sys.stderr, unit="shape", dynamic_ncols=True, leave=False) as bar:
        stack.enter_context(inductor_cache_dir(session.fresh_dir(f"inductor-{spec.name}")))
        stack.enter_context(kiln_cache_dir(session.fresh_dir(f"kiln-{spec.name}"), session.kiln))
        stack.enter_context(captured_kiln_warnings(kiln_warnings))
        hits = stack.enter_context(counting_limit_hits())
        reset_compilers(session.kiln)
        comps = Compilers(model, session, row["errors"])
        try:
            bar.set_description(f"{spec.name}: sweep")
            row["sweep"] = run_sweep(spec, model, example, order, comps, session, bar)
            row["torch_limit_hits"] = hits.hits if "torch.compile" in comps.fns else None
            bar.set_description(f"{spec.name}: steady state")
            row["steady"] = run_steady(spec, model, example, order, comps, session, bar)
            row["after_steady"] = {n: comps.counts(n) for n in comps.fns if n != "eager"}
            keys = retime_candidates(row["steady"], args.dyn_retime)
            if keys:
                bar.total += len(keys)
                bar.set_description(f"{spec.name}: re-timing")
                row["retimed"] = run_retime(spec, model, example, keys, order, comps, session, bar)
        except Exception as exc:
            row["errors"]["sweep"] = describe_exception(exc)
        if static:
            bar.set_description(f"{spec.name}: kiln static")
            row["static"] = run_static(spec, model, example, static, session, bar, comps.fns.get("kiln"))
        del comps
    unique = list(dict.fromkeys(kiln_warnings))
    row["warnings"], row["kiln_warning_count"] = unique[:5], len(kiln_warnings)
    summarize_model(row)
    row["targets"] = check_targets(row)
    reset_compilers(session.kiln)
    return row


def add_dynamic_args(p) -> None:
    """The --dynamic mode's flags (on runner.parse_args's parser)."""
    p.add_argument("--dynamic", action="store_true",
                   help="the serving sweep of issue 17: each model over batch sizes x sequence lengths "
                        "in a random order, eager / torch.compile / kiln.compile: sweep time with "
                        "compiles, compile counts, fallbacks, steady state per shape "
                        "(default models: " + "bert,gpt2,llama and cnn or resnet18)")
    p.add_argument("--dyn-seqs", default=None, metavar="N|a,b,..",
                   help=f"--dynamic: N sequence lengths (image sides) spread over the device's range, or "
                        f"a comma-separated list (default: {DEFAULT_SEQS})")
    p.add_argument("--dyn-batches", default=None, metavar="N|a,b,..",
                   help=f"--dynamic: N batch sizes (from 2) or a list (default: {DEFAULT_BATCHES})")
    p.add_argument("--dyn-seed", type=int, default=0, help="--dynamic: seed of the shape order and inputs")
    p.add_argument("--dyn-repeat", type=int, default=3,
                   help="--dynamic: timed calls per shape and compiler in the steady-state pass "
                        "(default: %(default)s)")
    p.add_argument("--dyn-retime", type=int, default=32,
                   help="--dynamic: shapes where kiln's steady time came out behind torch.compile's "
                        "that are timed again, every compiler in at least %d interleaved rounds "
                        "(furthest behind first; 0: none; default: %%(default)s)" % RETIME_ROUNDS)
    p.add_argument("--dyn-static", type=int, default=8,
                   help="--dynamic: shapes at which kiln is also compiled alone (static), "
                        "0 to skip (default: %(default)s)")


def run_dynamic(session) -> int:
    """Entry point of ``--dynamic``; returns the exit status."""
    args = session.args
    selection = default_models(args.device) if args.models == "default" else args.models
    try:
        specs = zoo.select_models(selection)
        for spec in specs:
            shape_grid(spec, args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = machine_info(args, session.kiln)
    info.update(mode="dynamic", repeat=args.dyn_repeat, warmup=1, command=command_line(getattr(args, "argv", None) or sys.argv[1:]),
                seed=args.dyn_seed, kiln_cache_size_limit=_kiln_limit(session.kiln))
    from .runner import quiet_libraries

    quiet_libraries()
    print(format_header(info))
    print(f"command: {info['command']}")
    print(f"serving sweep: eager, torch.compile (default: inductor, automatic dynamic), kiln.compile "
          f"(default; cache_size_limit {info['kiln_cache_size_limit']}); seed {args.dyn_seed}, "
          f"{args.dyn_repeat} steady calls per shape, kiln static at {args.dyn_static} shapes")
    sys.stdout.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session.prime(([] if args.no_inductor else ["inductor"]) + ["kiln"])
    rows = []
    for spec in specs:
        row = run_model(spec, session)
        rows.append(row)
        print_model(row)
        if args.json:   # after every model, so a run cut short keeps what it measured
            try:
                write_json(args.json, {"meta": info, "results": rows, "partial": True})
            except OSError:
                pass
    print()
    print(legend())
    return save_json(args.json, {"meta": info, "results": rows})


def command_line(argv) -> str:
    return shlex.join(["python", "-m", "kiln.bench", *argv])


def _kiln_limit(kiln) -> int | None:
    return getattr(getattr(kiln.module, "config", None), "cache_size_limit", None)
