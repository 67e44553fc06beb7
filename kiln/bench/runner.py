"""Command-line driver of the kiln benchmark: ``python -m kiln.bench``.

For every selected model, in one process and on the same inputs, under
``torch.no_grad()`` with the model in eval mode:

1. eager: warm up, time a few calls (for the cold compile times below), keep
   the output as reference;
2. inductor (``torch.compile`` default backend; skip with ``--no-inductor``):
   dynamo reset, fresh empty inductor cache dir, time the first call (cold
   compile = first call - eager median), check the output, warm up;
3. kiln (``kiln.compile(model, backend=--kiln-backend)``: kiln's own C capture;
   ``--kiln-capture dynamo`` uses ``torch.compile(backend=...)`` instead): the same, after
   ``kiln.reset()`` and with ``KILN_CACHE_DIR`` pointing at a fresh empty
   directory;
3b. steady-state times: ``--repeat`` calls of each of eager, inductor and kiln,
   in ``--rounds`` interleaved rounds (eager, inductor, kiln, eager, ...), so
   that a machine whose speed drifts (other tenants, clocks) moves all three
   alike; medians of each one's samples;
4. kiln warm compile (skip with ``--no-warm``): a new process
   (``python -m kiln.bench --_warm-child MODEL ...``) rebuilds the same model,
   reuses the cache directory filled in step 3 and reports its first-call time.

Before the first model each compiler compiles a tiny function once, so its
one-time process start-up is not charged to the first model's cold compile.

A failure in any step is recorded in the model's row and the run goes on; the
exit status is 0 unless the command line is invalid.  Progress goes to stderr
(tqdm), the results table and geomean summary to stdout, everything to
``--json FILE`` on request, and with ``--plot FILE.png`` a figure of the
speedups and compile times (``kiln.bench.plot``; ``--from-json FILE`` draws
an earlier run's JSON without running anything).  ``--bandwidth`` runs the
memory-bandwidth benchmark of ``kiln.bench.bandwidth`` instead of the
models; ``--overhead`` and ``--capture`` run the dispatch-overhead and
capture-speed benchmarks of ``kiln.bench.overhead``; ``--dynamic`` the serving
sweep over batch sizes x sequence lengths of ``kiln.bench.dynamic``.
"""
from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import torch
from tqdm import tqdm

from . import models as zoo
from .compilers import (KilnHandle, TimedBackend, captured_kiln_warnings, check_backend, count_files,
                        import_kiln, inductor_cache_dir, kiln_cache_dir, kiln_graph_stats,
                        prime_backend, reset_compilers)
from .dynamic import add_dynamic_args
from .measure import compare_outputs, median, synchronizer, time_first_call, time_iterations
from .machine import format_header, machine_info
from .report import (add_derived, describe_exception, format_errors, format_legend,
                     format_results, format_summary, save_json, shorten, summarize)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
WARM_MARKER = "@@KILN_BENCH_WARM@@"


# ------------------------------------------------------------------ arguments
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m kiln.bench",
        description="Benchmark eager vs torch.compile (inductor) vs kiln.")
    p.add_argument("--models", default="default",
                   help="comma-separated model names or groups (builtin, transformers, "
                        "torchvision, timm), 'default' or 'all' (default: %(default)s)")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=list(DTYPES))
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads(N) (default: leave as is)")
    p.add_argument("--repeat", type=int, default=30, help="timed iterations (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed iterations before timing (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved timing rounds the --repeat calls are spread over (default: %(default)s)")
    p.add_argument("--batch", type=int, default=None, help="override every model's batch size")
    p.add_argument("--seq", type=int, default=None, help="override the sequence length")
    p.add_argument("--json", metavar="FILE", help="also write all results as JSON")
    p.add_argument("--plot", metavar="FILE.png",
                   help="also draw speedups and compile times per model into FILE.png (needs matplotlib)")
    p.add_argument("--from-json", dest="from_json", metavar="FILE",
                   help="with --plot: draw the results of an earlier --json run instead of running")
    p.add_argument("--no-inductor", action="store_true",
                   help="skip torch.compile's default backend (slow to compile)")
    p.add_argument("--no-warm", action="store_true", help="skip the warm-compile subprocess")
    p.add_argument("--inductor-mode", default=None,
                   help="torch.compile mode of the inductor column (e.g. max-autotune-no-cudagraphs, "
                        "reduce-overhead; default: torch.compile's default)")
    p.add_argument("--kiln-mode", default=None,
                   help="kiln.compile mode of the kiln column (reduce-overhead: CUDA graphs)")
    p.add_argument("--kiln-backend", default="kiln",
                   help="torch.compile backend for the kiln column (default: %(default)s; "
                        "'eager' exercises the runner without kiln)")
    p.add_argument("--kiln-capture", choices=["kiln", "dynamo"], default="kiln",
                   help="who captures graphs for the kiln column: kiln.compile's C recorder (default) "
                        "or TorchDynamo (torch.compile(backend=...))")
    p.add_argument("--warm-timeout", type=float, default=900,
                   help="seconds allowed for one warm-compile subprocess")
    p.add_argument("--bandwidth", action="store_true",
                   help="measure copy bandwidth and a fused memory-bound kernel instead")
    p.add_argument("--bw-numel", type=int, default=None,
                   help="elements of the big tensors in --bandwidth mode "
                        "(default: 64M on cpu, 256M on cuda)")
    p.add_argument("--overhead", action="store_true",
                   help="measure the per-call overhead of a cache hit (backend 'eager') of "
                        "torch.compile and kiln.compile instead")
    p.add_argument("--overhead-repeat", type=int, default=7,
                   help="timed loops per variant in --overhead mode (default: %(default)s)")
    p.add_argument("--overhead-number", type=int, default=0,
                   help="calls per timed loop in --overhead mode (default: 0 = automatic, "
                        "1000-10000)")
    p.add_argument("--capture", action="store_true",
                   help="measure capture speed (first call, backend 'eager') of a 12-layer BERT "
                        "under torch.compile and kiln.compile instead")
    p.add_argument("--capture-repeat", type=int, default=3,
                   help="cold first calls per compiler in --capture mode (default: %(default)s)")
    p.add_argument("--capture-layers", type=int, default=12,
                   help="BERT layers in --capture mode (default: %(default)s)")
    add_dynamic_args(p)
    p.add_argument("-v", "--verbose", action="store_true", help="print full tracebacks")
    p.add_argument("--_warm-child", dest="warm_child", metavar="MODEL", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


# ------------------------------------------------------------------- session
class Session:
    """Everything the per-model steps share: options, device, kiln, temp dirs."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.dtype = DTYPES[args.dtype]
        self.cfg = zoo.BuildConfig(device=args.device, dtype=self.dtype,
                                   batch=args.batch, seq=args.seq)
        self.sync = synchronizer(args.device)
        self.kiln: KilnHandle = import_kiln()
        self.tmp_root = tempfile.mkdtemp(prefix="kiln-bench-")

    def fresh_dir(self, label: str) -> str:
        """A new empty directory under this run's temporary root."""
        return tempfile.mkdtemp(prefix=f"{label}-", dir=self.tmp_root)

    def prime(self, backends: list[str]) -> None:
        """Pay each compiler's one-time process start-up before measuring."""
        for backend in backends:
            prime_backend(backend, self.kiln, self.args.device, self.dtype,
                          self.fresh_dir(f"prime-{backend}"))

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp_root, ignore_errors=True)

    def note_error(self, row: dict, phase: str, exc: BaseException) -> None:
        message = describe_exception(exc)
        row.setdefault("errors", {})[phase] = message
        tqdm.write(f"[{row['model']}] {phase} FAILED: {shorten(message, 200)}", file=sys.stderr)
        if self.args.verbose:
            tqdm.write(traceback.format_exc(), file=sys.stderr)


def apply_threads(threads: int | None) -> None:
    """torch.set_num_threads, and OMP_NUM_THREADS for OpenMP runtimes loaded later.

    Code that compilers generate may link an OpenMP runtime other than
    torch's (kiln's C output uses the system libgomp); that one reads
    OMP_NUM_THREADS when first loaded, which happens after this point.
    """
    if threads:
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


def quiet_libraries() -> None:
    """Silence transformers' info/warning chatter (it interleaves with tqdm)."""
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except Exception:
        pass


# --------------------------------------------------------------- model phases
def prime_channels_last(model, inputs, session: Session) -> None:
    """One eager call of a channels-last copy of a convolutional model on a
    GPU.  Both compilers run convolutions channels-last, and cuDNN loads (or
    builds) those kernels on first use, which can take seconds: paid here,
    that start-up lands in neither compiler's compile time (otherwise it
    lands in whichever compiles first, and in kiln's warm start)."""
    if session.args.device != "cuda" or not any(isinstance(m, torch.nn.Conv2d) for m in model.modules()):
        return
    import copy

    twin = copy.deepcopy(model).to(memory_format=torch.channels_last)
    xs = tuple(x.to(memory_format=torch.channels_last) if isinstance(x, torch.Tensor) and x.dim() == 4 else x
               for x in inputs)
    with torch.no_grad():
        twin(*xs)
    session.sync()
    del twin


def run_eager(model, inputs, session: Session) -> tuple[dict, object]:
    """Reference output and eager timing."""
    args = session.args
    _, ref = time_first_call(model, inputs, session.sync)
    # a first estimate, for the cold compile times; the reported time comes
    # from the interleaved rounds (timed_rounds)
    samples = time_iterations(model, inputs, args.warmup, min(args.repeat, 5), session.sync)
    prime_channels_last(model, inputs, session)
    return {"median_ms": median(samples), "samples_ms": samples}, ref


def timed_rounds(fns: dict, inputs, session: Session) -> dict:
    """``--repeat`` timed calls of each function in ``fns``, spread over
    ``--rounds`` rounds that take the functions in turn (one untimed call
    before each function's share of a round); returns the samples of each."""
    args = session.args
    rounds = max(1, min(args.rounds, args.repeat))
    samples: dict = {name: [] for name in fns}
    for r in range(rounds):
        share = args.repeat // rounds + (1 if r < args.repeat % rounds else 0)
        for name, fn in fns.items():
            samples[name] += time_iterations(fn, inputs, 1, share, session.sync)
    return samples


def compile_with(model, timed, kiln_capture: bool, session: Session):
    """kiln.compile (kiln's C capture) or torch.compile (TorchDynamo) around ``timed``."""
    if kiln_capture:
        return session.kiln.module.compile(model, backend=timed)
    return torch.compile(model, backend=timed)


def run_compiled(model, inputs, ref, backend: str, eager_ms: float, session: Session,
                 kiln_capture: bool = False) -> dict:
    """Cold first call, accuracy check and steady-state timing under ``backend``."""
    args = session.args
    check_backend(backend, session.kiln)
    reset_compilers(session.kiln)
    timed = TimedBackend(backend, args.inductor_mode if backend == "inductor" else args.kiln_mode)
    compiled = compile_with(model, timed, kiln_capture, session)
    first_ms, out = time_first_call(compiled, inputs, session.sync)
    result = {"backend": backend, "first_call_ms": first_ms,
              "cold_compile_s": (first_ms - eager_ms) / 1e3,
              "cold_backend_s": timed.seconds}
    if backend == "kiln":
        result["graph_stats"] = kiln_graph_stats(session.kiln)
    result.update(compare_outputs(ref, out, session.dtype))
    del out
    for _ in range(args.warmup):
        compiled(*inputs)
    session.sync()
    result["_fn"] = compiled   # timed with the others in timed_rounds, then dropped
    return result


def run_inductor(model, inputs, ref, eager_ms, session: Session) -> dict:
    with inductor_cache_dir(session.fresh_dir("inductor")):
        return run_compiled(model, inputs, ref, "inductor", eager_ms, session)


def run_kiln(model, inputs, ref, eager_ms, session: Session, cache_dir: str) -> dict:
    kiln_warnings: list[str] = []
    with kiln_cache_dir(cache_dir, session.kiln), captured_kiln_warnings(kiln_warnings):
        result = run_compiled(model, inputs, ref, session.args.kiln_backend, eager_ms, session,
                              kiln_capture=session.args.kiln_capture == "kiln")
    result["cache_dir_files"] = count_files(cache_dir)
    result["warnings"] = sorted(set(kiln_warnings))
    return result


def kiln_notes(kiln: dict, backend: str) -> list[str]:
    """Table notes for things that make kiln's figures suspect."""
    notes = []
    stats = kiln.get("graph_stats") or {}
    if stats.get("fallbacks"):
        notes.append(f"kiln ran {stats['fallbacks']} of {stats['graphs']} graph(s) eagerly")
    elif kiln.get("warnings"):
        notes.append(f"kiln warned: {shorten(kiln['warnings'][0], 60)}")
    if backend == "kiln" and kiln.get("cache_dir_files") == 0:
        notes.append("kiln wrote nothing to its cache dir")
    return notes


def run_model(spec: zoo.ModelSpec, session: Session, bar: tqdm) -> dict:
    """All phases for one model; never raises (errors land in the row)."""
    args = session.args
    row: dict = {"model": spec.name, "errors": {}, "warnings": []}

    def step(phase: str):
        bar.set_description(f"{spec.name}: {phase}")

    step("eager")
    try:
        model, inputs, shape = zoo.build_model(spec, session.cfg)
        row.update(shape)
        eager, ref = run_eager(model, inputs, session)
        row["eager_ms"], row["eager"] = eager["median_ms"], eager
    except Exception as exc:
        session.note_error(row, "eager", exc)
        bar.update(len(phases(args)))
        return row
    bar.update(1)

    if not args.no_inductor:
        step("inductor")
        try:
            row["inductor"] = run_inductor(model, inputs, ref, row["eager_ms"], session)
        except Exception as exc:
            session.note_error(row, "inductor", exc)
        bar.update(1)

    step("kiln")
    cache_dir = session.fresh_dir(f"kiln-{spec.name}")
    try:
        row["kiln"] = run_kiln(model, inputs, ref, row["eager_ms"], session, cache_dir)
        row["warnings"] += kiln_notes(row["kiln"], args.kiln_backend)
    except Exception as exc:
        session.note_error(row, "kiln", exc)
    bar.update(1)

    step("timing")
    fns = {"eager": model}
    for name in ("inductor", "kiln"):
        if name in row and "_fn" in row[name]:
            fns[name] = row[name]["_fn"]
    try:
        with torch.no_grad():
            samples = timed_rounds(fns, inputs, session)
        row["eager"].update(median_ms=median(samples["eager"]), samples_ms=samples["eager"])
        row["eager_ms"] = row["eager"]["median_ms"]
        for name in fns:
            if name != "eager":
                row[name].update(median_ms=median(samples[name]), samples_ms=samples[name])
    except Exception as exc:
        session.note_error(row, "timing", exc)
    for name in ("inductor", "kiln"):
        if name in row:
            row[name].pop("_fn", None)
    del model, inputs, ref, fns
    release_memory()

    if not args.no_warm:
        step("kiln warm")
        if "kiln" in row:
            try:
                row["kiln"].update(run_warm_child(spec, session, row, cache_dir))
            except Exception as exc:
                session.note_error(row, "kiln warm", exc)
        bar.update(1)
    return row


def phases(args) -> list[str]:
    names = ["eager"] + ([] if args.no_inductor else ["inductor"]) + ["kiln"]
    return names + ([] if args.no_warm else ["kiln warm"])


def release_memory() -> None:
    torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ----------------------------------------------------------- warm compile
class WarmChildError(RuntimeError):
    """The warm-compile subprocess failed; the message is already complete."""

    report_location = False


def child_command(spec: zoo.ModelSpec, session: Session, row: dict) -> list[str]:
    """Command line of the warm-compile subprocess (same model, same shapes)."""
    args = session.args
    cmd = [sys.executable, "-m", "kiln.bench", "--_warm-child", spec.name,
           "--device", args.device, "--dtype", args.dtype,
           "--warmup", str(args.warmup), "--repeat", str(args.repeat),
           "--kiln-backend", args.kiln_backend, "--kiln-capture", args.kiln_capture]
    if args.kiln_mode:
        cmd += ["--kiln-mode", args.kiln_mode]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if row.get("batch"):
        cmd += ["--batch", str(row["batch"])]
    if row.get("seq"):
        cmd += ["--seq", str(row["seq"])]
    return cmd


def child_env(cache_dir: str) -> dict:
    """Environment for the child: warm KILN_CACHE_DIR, this kiln on PYTHONPATH."""
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [package_root, env.get("PYTHONPATH")] if p)
    return env


def run_warm_child(spec: zoo.ModelSpec, session: Session, row: dict, cache_dir: str) -> dict:
    """Run the warm-compile subprocess; returns its measurements."""
    timeout = session.args.warm_timeout
    try:
        proc = subprocess.run(child_command(spec, session, row), env=child_env(cache_dir),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise WarmChildError(f"timed out after {timeout:g} s (--warm-timeout)") from None
    result = parse_child_output(proc.stdout)
    if result is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
        raise WarmChildError(f"exited with {proc.returncode}: " + "\n".join(tail))
    if result.get("error"):
        raise WarmChildError(result["error"])
    if result.get("ok") is False:
        row["warnings"].append(f"warm-cache output differs from eager (max abs {result['max_abs']:.1e})")
    return {"warm_compile_s": result["warm_compile_s"],
            "warm_backend_s": result.get("warm_backend_s"),
            "warm_first_call_ms": result["first_call_ms"],
            "warm_eager_ms": result["eager_ms"],
            "warm_max_abs": result["max_abs"], "warm_ok": result["ok"],
            "warm_graph_stats": result.get("graph_stats"),
            "warm_warnings": result.get("warnings")}


def parse_child_output(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(WARM_MARKER):
            return json.loads(line[len(WARM_MARKER):])
    return None


def warm_child_main(args: argparse.Namespace) -> int:
    """Child side: eager baseline, then the first call under the warm kiln cache."""
    session = Session(args)
    result: dict = {}
    try:
        spec = zoo.select_models(args.warm_child)[0]
        model, inputs, _ = zoo.build_model(spec, session.cfg)
        session.prime([args.kiln_backend])
        with torch.no_grad():
            _, ref = time_first_call(model, inputs, session.sync)
            eager = median(time_iterations(model, inputs, args.warmup,
                                           min(args.repeat, 10), session.sync))
            prime_channels_last(model, inputs, session)
            check_backend(args.kiln_backend, session.kiln)
            timed = TimedBackend(args.kiln_backend, args.kiln_mode)
            compiled = compile_with(model, timed, args.kiln_capture == "kiln", session)
            kiln_warnings: list[str] = []
            with captured_kiln_warnings(kiln_warnings):
                first_ms, out = time_first_call(compiled, inputs, session.sync)
            cmp = compare_outputs(ref, out, session.dtype)
        result = {"eager_ms": eager, "first_call_ms": first_ms,
                  "warm_compile_s": (first_ms - eager) / 1e3,
                  "warm_backend_s": timed.seconds,
                  "max_abs": cmp["max_abs"], "ok": cmp["ok"],
                  "graph_stats": kiln_graph_stats(session.kiln),
                  "warnings": sorted(set(kiln_warnings)),
                  "cache_dir": os.environ.get("KILN_CACHE_DIR")}
    except Exception as exc:
        traceback.print_exc()
        result = {"error": describe_exception(exc)}
    finally:
        session.cleanup()
    print(WARM_MARKER + json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


# -------------------------------------------------------------------- output
def print_report(info: dict, rows: list[dict], summary: dict, args) -> None:
    print()
    print(format_header(info))
    print(f"modes: inductor {args.inductor_mode or 'default'}, kiln {args.kiln_mode or 'default'}")
    print()
    print(format_results(rows))
    print()
    print(format_legend())
    print(format_summary(summary, args.kiln_backend))
    errors = format_errors(rows)
    if errors:
        print(f"\nERRORS ({sum(len(r['errors']) for r in rows)}):")
        print(errors)
    sys.stdout.flush()


# ---------------------------------------------------------------------- main
def run_models(session: Session, specs: list[zoo.ModelSpec]) -> int:
    args = session.args
    info = machine_info(session.args, session.kiln)
    quiet_libraries()
    rows = []
    total = 1 + len(specs) * len(phases(args))
    with torch.no_grad(), tqdm(total=total, file=sys.stderr, unit="step",
                               dynamic_ncols=True) as bar:
        bar.set_description("starting compilers")
        session.prime(([] if args.no_inductor else ["inductor"]) + [args.kiln_backend])
        bar.update(1)
        for spec in specs:
            rows.append(add_derived(run_model(spec, session, bar)))
            if args.json:   # after every model, so a run cut short keeps what it measured
                save_json(args.json, {"meta": info, "results": rows, "partial": True})
    summary = summarize(rows)
    print_report(info, rows, summary, args)
    payload = {"meta": info, "results": rows, "summary": summary}
    rc = save_json(args.json, payload)
    return save_plot(args.plot, payload) or rc


def save_plot(path: str | None, payload: dict) -> int:
    """Draw ``payload`` into ``path`` if given; exit status 1 if that fails."""
    if not path:
        return 0
    from .plot import plot_results

    try:
        plot_results(payload, path)
    except (OSError, ValueError) as exc:
        print(f"error: cannot plot to {path}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


def check_plot(args) -> str | None:
    """Why --plot / --from-json cannot be honoured, before anything runs."""
    if args.from_json and not args.plot:
        return "--from-json only goes with --plot FILE.png"
    if args.plot and (args.bandwidth or args.overhead or args.capture or args.dynamic):
        return "--plot draws the model benchmark, not --bandwidth, --overhead, --capture or --dynamic"
    if args.plot:
        from .plot import PlotUnavailable, require_matplotlib

        try:
            require_matplotlib()
        except PlotUnavailable as exc:
            return str(exc)
    return None


def plot_from_json(args) -> int:
    from .plot import load_json

    try:
        payload = load_json(args.from_json)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {args.from_json}: {exc}", file=sys.stderr)
        return 2
    return save_plot(args.plot, payload)


def check_device(device: str) -> str | None:
    if device == "cuda" and not torch.cuda.is_available():
        return "--device cuda requested but torch.cuda.is_available() is False"
    return None


def main(argv: list[str] | None = None) -> int:
    try:
        faulthandler.enable()  # a crash in native code still leaves a traceback
    except (OSError, ValueError):   # io.UnsupportedOperation: a stderr without a file (notebooks, capsys)
        pass
    args = parse_args(argv)
    apply_threads(args.threads)
    if args.list:
        print(zoo.describe_models())
        return 0
    problem = check_plot(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.from_json:
        return plot_from_json(args)
    problem = check_device(args.device)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.warm_child:
        return warm_child_main(args)
    try:
        special = args.bandwidth or args.overhead or args.capture or args.dynamic
        specs = [] if special else zoo.select_models(args.models)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    session = Session(args)
    try:
        if args.bandwidth:
            from .bandwidth import run_bandwidth

            return run_bandwidth(session)
        if args.dynamic:
            from .dynamic import run_dynamic

            return run_dynamic(session)
        if args.overhead or args.capture:
            from .overhead import run_capture, run_overhead

            if args.overhead and args.capture:
                print("error: pass one of --overhead and --capture", file=sys.stderr)
                return 2
            return run_overhead(session) if args.overhead else run_capture(session)
        return run_models(session, specs)
    finally:
        session.cleanup()
