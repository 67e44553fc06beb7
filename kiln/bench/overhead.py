"""Dispatch-overhead and capture-speed benchmarks of ``kiln.compile``.

``python -m kiln.bench --overhead``
    Per-call time of a cache hit with backend "eager" (the graph runs as
    plain ATen calls, so everything above eager is the compiler's call
    overhead: guard checks, argument handling, frame switching) for three
    workloads: a one-input function, a ten-input function and a module of
    20 tiny Linear layers.  Eager, ``torch.compile(backend="eager")`` and
    ``kiln.compile(backend="eager")`` run in one process on the same inputs;
    timeit-style loops of N calls, interleaved, repeated, medians reported.
    Reports the added overhead (compiled - eager, microseconds) and
    kiln_added / torch_added (the aim is <= 0.5).

``python -m kiln.bench --capture``
    Capture speed: the first call of a freshly compiled 12-layer BERT
    (transformers ``BertModel``, random weights, the model zoo's builder with
    12 layers) with backend "eager", after ``kiln.reset()`` and
    ``torch._dynamo.reset()``, for ``torch.compile`` and ``kiln.compile``;
    raw first-call time and first call minus the steady-state call (= the
    capture time).  Medians over ``--capture-repeat`` runs; ratio kiln/torch
    (the aim is <= 0.2).  Graph counts come from one extra run per compiler
    with a counting backend callable.

Only the public API is used: ``kiln.compile(fn, backend=...)`` and
``kiln.reset()``, so the benchmarks do not depend on how kiln captures.
Every compiled variant is given its own freshly compiled copy of the
function's code (``_fresh``), so no two compilers ever share a code
object, and with it a per-code cache.  Failures and fallbacks of kiln are
recorded as notes; the numbers that exist are still printed.
"""
from __future__ import annotations

import functools
import gc
import itertools
import linecache
import statistics
import sys
import time
import warnings

import torch
from torch import nn

from . import models as zoo
from .compilers import captured_kiln_warnings
from .machine import format_header, machine_info
from .measure import compare_outputs, flatten_tensors
from .report import describe_exception, render_table, save_json, shorten

COMPILERS = ("torch", "kiln")
OVERHEAD_AIM = 0.5
CAPTURE_AIM = 0.2
TARGET_LOOP_S = 0.1  # auto --overhead-number: one timed loop of the slowest variant

_fresh_ids = itertools.count()


# ------------------------------------------------------------------ helpers
def _fresh(source: str, name: str, namespace: dict | None = None):
    """Execute ``source`` anew and return its object ``name``.

    Every call makes new code objects, so a function (or class) from here
    shares no per-code cache with any other copy.  The source is registered
    with linecache so tracebacks and ``inspect`` still work.
    """
    filename = f"<kiln.bench.overhead:{name}#{next(_fresh_ids)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"torch": torch, "nn": nn, "__name__": "kiln.bench.overhead"}
    ns.update(namespace or {})
    exec(compile(source, filename, "exec"), ns)
    return ns[name]


class CountingBackend:
    """A backend callable that counts the graphs it is given and runs them
    as they are (what backend "eager" does).  It also keeps the first graph
    and the arguments of its first call, so the graph can be timed alone."""

    def __init__(self):
        self.graphs = 0
        self.ops = 0
        self.first_graph = None
        self.first_args = None

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        try:
            self.ops += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method",
                                                                 "call_module"))
        except Exception:
            pass
        run = getattr(gm, "forward", gm)
        if self.first_graph is not None:
            return run
        self.first_graph = run

        def record_first_call(*args):
            if self.first_args is None:
                self.first_args = args
            return run(*args)

        return record_first_call


def kiln_api(session):
    """kiln's compile and reset, or raise with the import error."""
    module = session.kiln.module
    if module is None:
        raise RuntimeError(f"import kiln failed: {session.kiln.error}")
    return module.compile, getattr(module, "reset", lambda: None)


def reset_all(session) -> None:
    """Forget compiled code in dynamo and in kiln (kiln errors are ignored)."""
    torch._dynamo.reset()
    try:
        session.kiln.reset()
    except Exception:
        pass


def compile_with(compiler: str, fn, backend, session):
    if compiler == "torch":
        return torch.compile(fn, backend=backend)
    kiln_compile, _ = kiln_api(session)
    return kiln_compile(fn, backend=backend)


def prime(session) -> dict:
    """Pay both compilers' one-time start-up on a tiny function."""
    errors = {}
    for compiler in COMPILERS:
        fn = _fresh("def prime(x):\n    return torch.relu(x * 2 + 1).sum()\n", "prime")
        try:
            with torch.no_grad():
                compiled = compile_with(compiler, fn, "eager", session)
                for _ in range(3):
                    compiled(torch.ones(4, 8))
        except Exception as exc:
            errors[compiler] = describe_exception(exc)
    reset_all(session)
    return errors


def same_outputs(ref, out, dtype) -> dict:
    """compare_outputs plus ``exact``: bitwise equal to eager."""
    cmp = compare_outputs(ref, out, dtype)
    refs, outs = flatten_tensors(ref), flatten_tensors(out)
    cmp["exact"] = len(refs) == len(outs) and all(
        r.shape == o.shape and torch.equal(r, o) for r, o in zip(refs, outs))
    return cmp


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _f(value, spec):
    return "-" if value is None else f"{value:{spec}}"


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ================================================================ overhead
ONE_SRC = """
def one_input(x):
    return x + 1
"""

TEN_SRC = """
def ten_inputs(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9
"""

STACK_SRC = """
class LinearStack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
"""


class Workload:
    """``make()`` returns a fresh callable (new code objects, shared
    parameters); ``inputs`` are shared by all variants."""

    def __init__(self, name: str, description: str, make, inputs: tuple):
        self.name, self.description, self.make, self.inputs = name, description, make, inputs


def overhead_workloads(device: str, dtype: torch.dtype) -> list[Workload]:
    gen = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)

    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(20)]).to(device=device, dtype=dtype)

    def make_stack():
        return _fresh(STACK_SRC, "LinearStack")(layers).eval()

    return [
        Workload("1 input", "x + 1, x: 8 elements",
                 lambda: _fresh(ONE_SRC, "one_input"), (t(8),)),
        Workload("10 inputs", "sum of 10 tensors of 8 elements",
                 lambda: _fresh(TEN_SRC, "ten_inputs"), tuple(t(8) for _ in range(10))),
        Workload("20 Linear", "nn.Module, 20 x Linear(8, 8) over a ModuleList, x: 1x8",
                 make_stack, (t(1, 8),)),
    ]


def per_call_us(fn, args: tuple, number: int) -> float:
    """Mean microseconds per call of ``fn(*args)`` over ``number`` calls (timeit-style)."""
    loop = range(number)
    start = time.perf_counter()
    for _ in loop:
        fn(*args)
    return (time.perf_counter() - start) / number * 1e6


def choose_number(variants: list) -> int:
    """Calls per timed loop: the slowest variant's loop takes ~TARGET_LOOP_S,
    clamped to [1000, 10000] and rounded to 1, 2 or 5 x 10^k."""
    slowest = max(per_call_us(fn, args, 200) for fn, args in variants)
    want = TARGET_LOOP_S * 1e6 / max(slowest, 1e-3)
    nice = [m * 10 ** k for k in range(3, 5) for m in (1, 2, 5)] + [10000]
    return max([n for n in nice if n <= want] or [1000])


def measure_overhead(work: Workload, session) -> dict:
    """One workload: eager, torch and kiln per-call times and notes."""
    args = session.args
    row: dict = {"workload": work.name, "description": work.description, "errors": {},
                 "notes": []}
    eager = work.make()
    ref = eager(*work.inputs)
    fns = {"eager": (eager, work.inputs)}  # name -> (callable, its arguments)
    for compiler in COMPILERS:
        kiln_warnings: list[str] = []
        try:
            with captured_kiln_warnings(kiln_warnings), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn = compile_with(compiler, work.make(), "eager", session)
                out = fn(*work.inputs)            # compiles
                for _ in range(max(args.warmup, 10)):  # caches, lazy paths
                    fn(*work.inputs)
                out = fn(*work.inputs)
            cmp = same_outputs(ref, out, session.dtype)
            row[compiler] = {"max_abs": cmp["max_abs"], "ok": cmp["ok"], "exact": cmp["exact"]}
            if not cmp["ok"]:
                row["notes"].append(f"{compiler} output differs from eager "
                                    f"(max abs {_f(cmp['max_abs'], '.1e')})")
            fns[compiler] = (fn, work.inputs)
        except Exception as exc:
            row["errors"][compiler] = describe_exception(exc)
        if compiler == "kiln" and kiln_warnings:
            row["notes"].append(f"kiln warned: {shorten(sorted(set(kiln_warnings))[0], 60)}")

    for compiler, graph in count_graphs(work, row, session).items():
        fns[f"{compiler} graph"] = graph

    number = args.overhead_number or choose_number(list(fns.values()))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for rep in range(args.overhead_repeat):
            shift = rep % len(order)  # rotate, so no variant always runs first
            for name in order[shift:] + order[:shift]:
                try:
                    samples[name].append(per_call_us(*fns[name], number))
                except Exception as exc:
                    row["errors"].setdefault(name, describe_exception(exc))
    finally:
        if gc_was_enabled:
            gc.enable()

    row["number"], row["repeat"] = number, args.overhead_repeat
    row["eager_us"] = _median(samples["eager"])
    for compiler in COMPILERS:
        if compiler not in fns or compiler in row["errors"]:
            continue
        data = row[compiler]
        data["samples_us"] = samples[compiler]
        data["median_us"] = _median(samples[compiler])
        if data["median_us"] is not None and row["eager_us"] is not None:
            data["added_us"] = data["median_us"] - row["eager_us"]
        graph_us = _median(samples.get(f"{compiler} graph", []))
        if graph_us is not None and data["median_us"] is not None:
            data["graph_us"] = graph_us
            data["added_vs_graph_us"] = data["median_us"] - graph_us
    row["eager_samples_us"] = samples["eager"]
    t, k = row.get("torch") or {}, row.get("kiln") or {}
    if k.get("graphs") != 0:  # no ratio for a kiln that ran the function eagerly
        row["kiln_over_torch_added"] = _ratio(k.get("added_us"), t.get("added_us"))
        row["kiln_over_torch_added_vs_graph"] = _ratio(k.get("added_vs_graph_us"),
                                                       t.get("added_vs_graph_us"))
    del fns
    reset_all(session)
    return row


def count_graphs(work: Workload, row: dict, session) -> dict:
    """Graphs each compiler hands its backend for one call of a fresh copy.

    Returns {compiler: (graph, args)} where the compiler captured exactly one
    graph: that graph alone, and the arguments the compiler called it with,
    to time the graph without the compiler's dispatch around it.
    """
    graphs = {}
    for compiler in COMPILERS:
        if compiler in row["errors"]:
            continue
        counter = CountingBackend()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile_with(compiler, work.make(), counter, session)(*work.inputs)
            row[compiler]["graphs"] = counter.graphs
            if counter.graphs == 0:
                row["notes"].append(f"{compiler} captured no graph (ran eagerly?)")
            elif counter.graphs == 1 and counter.first_args is not None:
                graphs[compiler] = (counter.first_graph, counter.first_args)
        except Exception as exc:
            row["notes"].append(f"{compiler} with a counting backend failed: "
                                f"{shorten(describe_exception(exc), 60)}")
    return graphs


def format_overhead(rows: list[dict]) -> str:
    header = [("workload", "<"), ("calls x reps", ">"), ("eager", ">"), ("torch", ">"),
              ("kiln", ">"), ("torch +", ">"), ("kiln +", ">"), ("k/t +", ">"),
              ("graph t/k", ">"), ("torch +g", ">"), ("kiln +g", ">"), ("k/t +g", ">"),
              ("graphs t/k", ">"), ("== eager", ">"), ("notes", "<")]
    body = []
    for row in rows:
        t, k = row.get("torch") or {}, row.get("kiln") or {}
        same = "/".join("-" if not d else ("exact" if d.get("exact") else
                                           ("ok" if d.get("ok") else "FAIL")) for d in (t, k))
        notes = [f"{c}: {shorten(m, 60)}" for c, m in row["errors"].items()] + row["notes"]
        body.append([
            row["workload"], f"{row.get('number', '-')} x {row.get('repeat', '-')}",
            _f(row.get("eager_us"), ".2f"), _f(t.get("median_us"), ".2f"),
            _f(k.get("median_us"), ".2f"), _f(t.get("added_us"), ".2f"),
            _f(k.get("added_us"), ".2f"), _f(row.get("kiln_over_torch_added"), ".2f"),
            f"{_f(t.get('graph_us'), '.2f')}/{_f(k.get('graph_us'), '.2f')}",
            _f(t.get("added_vs_graph_us"), ".2f"), _f(k.get("added_vs_graph_us"), ".2f"),
            _f(row.get("kiln_over_torch_added_vs_graph"), ".2f"),
            f"{t.get('graphs', '-')}/{k.get('graphs', '-')}", same, "; ".join(notes)])
    return render_table(header, body)


def overhead_legend() -> str:
    return "\n".join([
        "eager, torch, kiln: microseconds per call (eager; torch.compile and kiln.compile with "
        "backend \"eager\", cache hit)",
        "+: added overhead = compiled - eager (us); k/t +: kiln added / torch added "
        f"(aim <= {OVERHEAD_AIM}; '-' when torch's is <= 0)",
        "graph t/k: the graph that torch/kiln captured, called directly with the arguments "
        "the compiler passes it (us); +g: compiled - that graph = pure dispatch overhead "
        "(us); k/t +g: kiln +g / torch +g",
        "a module's graph skips nn.Module.__call__ of every submodule, so compiled can beat "
        "eager (+ < 0); +g still shows the dispatch cost",
        "graphs t/k: graphs torch/kiln hand their backend; == eager: output vs eager "
        "(exact = bitwise, ok = within tolerance)",
    ])


def run_overhead(session) -> int:
    """Entry point of ``--overhead``; returns the exit status."""
    args = session.args
    info = machine_info(args, session.kiln)
    info.update(mode="overhead", kiln_backend="eager", repeat=args.overhead_repeat)
    _progress("overhead: starting compilers")
    prime_errors = prime(session)
    rows = []
    with torch.no_grad():
        for work in overhead_workloads(args.device, session.dtype):
            _progress(f"overhead: {work.name}")
            try:
                rows.append(measure_overhead(work, session))
            except Exception as exc:
                rows.append({"workload": work.name, "errors": {"workload": describe_exception(exc)},
                             "notes": []})
    summary = {
        "median_kiln_over_torch_added": _median([r.get("kiln_over_torch_added") for r in rows]),
        "median_kiln_over_torch_added_vs_graph": _median(
            [r.get("kiln_over_torch_added_vs_graph") for r in rows]),
        "aim": OVERHEAD_AIM, "prime_errors": prime_errors}

    print()
    print(format_header(info))
    print("dispatch overhead of a cache hit, backend \"eager\", under torch.no_grad(): "
          "median over reps of the mean per-call time of a timed loop of N calls")
    print()
    print(format_overhead(rows))
    print()
    print(overhead_legend())
    for key, label in (("median_kiln_over_torch_added", "vs eager"),
                       ("median_kiln_over_torch_added_vs_graph", "vs graph")):
        med = summary[key]
        verdict = ("n/a" if med is None else "met" if med <= OVERHEAD_AIM else "not met")
        print(f"median kiln/torch added overhead ({label}) over the workloads: {_f(med, '.2f')} "
              f"(aim <= {OVERHEAD_AIM}: {verdict})")
    for compiler, msg in prime_errors.items():
        print(f"note: priming {compiler} failed: {shorten(msg, 200)}")
    sys.stdout.flush()
    return save_json(args.json, {"meta": info, "results": rows, "summary": summary})


# ================================================================= capture
def bert_spec(layers: int) -> zoo.ModelSpec:
    """The zoo's BERT (h256, 4 heads) with ``layers`` layers, batch 1, seq 128 (cpu)."""
    return zoo.ModelSpec(f"bert{layers}", "transformers", f"BertModel {layers}L h256",
                         functools.partial(zoo._build_bert, layers=layers),
                         batch={"cpu": 1, "cuda": 1}, seq=zoo._HF_SEQ, requires="transformers")


def time_ms(fn, inputs, sync):
    sync()
    start = time.perf_counter()
    out = fn(*inputs)
    sync()
    return (time.perf_counter() - start) * 1e3, out


def steady_ms(fn, inputs, sync, warmup: int = 2, repeat: int = 5) -> float:
    """Best of ``repeat`` calls after ``warmup``: the least disturbed by other processes."""
    for _ in range(warmup):
        fn(*inputs)
    return min(time_ms(fn, inputs, sync)[0] for _ in range(repeat))


def capture_once(compiler: str, model, inputs, ref, backend, session) -> dict:
    """Reset, compile, time the first call and the steady state, check the output."""
    reset_all(session)
    gc.collect()
    kiln_warnings: list[str] = []
    with captured_kiln_warnings(kiln_warnings), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_with(compiler, model, backend, session)
        first, out = time_ms(compiled, inputs, session.sync)
        cmp = same_outputs(ref, out, session.dtype)
        del out
        steady = steady_ms(compiled, inputs, session.sync)
    del compiled
    reset_all(session)
    return {"first_ms": first, "steady_ms": steady,
            "max_abs": cmp["max_abs"], "ok": cmp["ok"], "exact": cmp["exact"],
            "warnings": sorted(set(kiln_warnings))}


def run_capture(session) -> int:
    """Entry point of ``--capture``; returns the exit status."""
    args = session.args
    info = machine_info(args, session.kiln)
    info.update(mode="capture", kiln_backend="eager", repeat=args.capture_repeat)
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except Exception as exc:
        print(f"error: --capture needs transformers: {exc}", file=sys.stderr)
        return 1
    spec = bert_spec(args.capture_layers)
    model, inputs, shape = zoo.build_model(spec, session.cfg)
    info.update(model=spec.description, **shape)
    _progress(f"capture: {spec.description}, batch {shape['batch']}, seq {shape['seq']}; "
              "starting compilers")
    prime_errors = prime(session)
    results: dict = {c: {"runs": [], "errors": [], "notes": []} for c in COMPILERS}
    with torch.no_grad():
        ref = model(*inputs)
        eager_ms = steady_ms(model, inputs, session.sync)
        for rep in range(args.capture_repeat):
            order = COMPILERS if rep % 2 == 0 else COMPILERS[::-1]
            for compiler in order:
                _progress(f"capture: run {rep + 1}/{args.capture_repeat}: {compiler}")
                try:
                    results[compiler]["runs"].append(
                        capture_once(compiler, model, inputs, ref, "eager", session))
                except Exception as exc:
                    results[compiler]["errors"].append(describe_exception(exc))
                    reset_all(session)
        for compiler in COMPILERS:  # graph counts: one extra run with a counting backend
            _progress(f"capture: graph count: {compiler}")
            counter = CountingBackend()
            try:
                run = capture_once(compiler, model, inputs, ref, counter, session)
                results[compiler].update(graphs=counter.graphs, graph_ops=counter.ops,
                                         counting_first_ms=run["first_ms"])
            except Exception as exc:
                results[compiler]["notes"].append(
                    f"counting backend failed: {shorten(describe_exception(exc), 80)}")

    steadies = [eager_ms] + [r["steady_ms"] for res in results.values() for r in res["runs"]]
    noisy = max(steadies) > 1.5 * min(steadies)
    for compiler, res in results.items():
        runs = res["runs"]
        for key in ("first_ms", "steady_ms"):
            res[key] = _median([r[key] for r in runs])
        # the median steady state of all runs, robust to one disturbed run
        res["capture_ms"] = None if not runs else res["first_ms"] - res["steady_ms"]
        res["ok"] = all(r["ok"] for r in runs) if runs else None
        res["exact"] = all(r["exact"] for r in runs) if runs else None
        res["max_abs"] = max((r["max_abs"] for r in runs if r["max_abs"] is not None), default=None)
        if res["errors"]:
            res["notes"].insert(0, f"{len(res['errors'])} of {args.capture_repeat} run(s) failed: "
                                f"{shorten(res['errors'][0], 100)}")
        if runs and not res["ok"]:
            res["notes"].append(f"output differs from eager (max abs {_f(res['max_abs'], '.1e')})")
        warned = sorted({w for r in runs for w in r["warnings"]})
        if warned:
            res["notes"].append(f"warned: {shorten(warned[0], 80)}")
        if res.get("graphs") == 0:
            res["notes"].append("captured no graph (ran eagerly?)")
        if res["steady_ms"] is not None and res["first_ms"] is not None \
                and res["first_ms"] < 2 * res["steady_ms"]:
            res["notes"].append("first call about as fast as the steady state: nothing captured?")
    summary = {
        "eager_ms": eager_ms, "noisy": noisy,
        "kiln_over_torch_first": _ratio(results["kiln"]["first_ms"], results["torch"]["first_ms"]),
        "kiln_over_torch_capture": _ratio(results["kiln"]["capture_ms"],
                                          results["torch"]["capture_ms"]),
        "aim": CAPTURE_AIM, "prime_errors": prime_errors,
    }
    print_capture(info, results, summary, args)
    return save_json(args.json, {"meta": info, "results": results, "summary": summary})


def print_capture(info: dict, results: dict, summary: dict, args) -> None:
    header = [("compiler", "<"), ("first call ms", ">"), ("steady ms", ">"), ("capture ms", ">"),
              ("graphs", ">"), ("graph ops", ">"), ("== eager", ">"), ("runs", ">"),
              ("notes", "<")]
    body = []
    for compiler in COMPILERS:
        res = results[compiler]
        same = "-" if res["ok"] is None else ("exact" if res["exact"] else
                                              ("ok" if res["ok"] else "FAIL"))
        body.append([f"{compiler}.compile", _f(res["first_ms"], ".1f"), _f(res["steady_ms"], ".2f"),
                     _f(res["capture_ms"], ".1f"), str(res.get("graphs", "-")),
                     str(res.get("graph_ops", "-")), same,
                     f"{len(res['runs'])}/{args.capture_repeat}", "; ".join(res["notes"])])
    body.append(["kiln/torch", _f(summary["kiln_over_torch_first"], ".2f"), "",
                 _f(summary["kiln_over_torch_capture"], ".2f"), "", "", "", "", ""])
    print()
    print(format_header(info))
    print(f"capture speed: {info['model']}, batch {info['batch']}, seq {info['seq']}, "
          f"backend \"eager\", under torch.no_grad(); eager call {summary['eager_ms']:.2f} ms")
    print()
    print(render_table(header, body))
    print()
    print(f"first call: fresh compile after kiln.reset() + torch._dynamo.reset() (each compiler "
          f"already started once in this process); steady = best of 5 calls; capture = first call - "
          f"steady (medians over {args.capture_repeat} runs); graphs/graph ops: one extra run with a "
          f"counting backend")
    ratio = summary["kiln_over_torch_capture"]
    if ratio is None:
        verdict = "n/a"
    elif results["kiln"].get("graphs") == 0:
        verdict = "n/a: kiln captured no graph"
    else:
        verdict = "met" if ratio <= CAPTURE_AIM else "not met"
    print(f"kiln/torch capture time: {_f(ratio, '.2f')} (aim <= {CAPTURE_AIM}: {verdict})")
    for compiler, msg in summary["prime_errors"].items():
        print(f"note: priming {compiler} failed: {shorten(msg, 200)}")
    if summary["noisy"]:
        print("WARNING: steady-state call times varied by more than 1.5x between runs: "
              "the machine was busy, timings are noisy")
    sys.stdout.flush()
