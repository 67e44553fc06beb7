"""kiln.counters — what this process captured and compiled.

Consumes: the stats dict of each graph the backends compile or run as
captured (`graph`, `fallback`), the capture's counters in C
(kiln._C.capture_stats: segments recorded, recompiles, frames run as Python)
and the graph breaks kiln/_capture.py notes (`counts["graph_breaks"]`).
Produces: `compiled_graphs` (one dict per graph since the last reset:
kiln.explain and the tests read it), `build_counts` (shared objects built by
the C compiler / found in the disk cache), `counts` and `stats()`, the
process-wide counters `kiln.stats()` returns (reset by kiln.reset()), and
`timed()`, the clock of the outermost compile on a thread (compile_seconds,
the perf log, the progress display of kiln/progress.py).
"""
import contextlib
import threading
import time

import torch

from . import logs

# Stats of every graph compiled since the last reset (kiln.explain reads them).
compiled_graphs = []
# Shared objects built by running the C compiler / found in the disk cache,
# in this process.
build_counts = {"compiled": 0, "cached": 0}

_ZERO = {"graph_breaks": 0, "compiles": 0, "fallbacks": 0, "extern_ops": 0, "cache_hits": 0,
         "lowering_cache_hits": 0, "compile_seconds": 0.0, "symbolic_graphs": 0, "specializations": 0, "dynamic_dims": 0,
         "sizes_specialised": 0,
         "templates": 0, "template_instances": 0, "direct_sizes": 0, "size_plans": 0, "template_cache_hits": 0, "template_mismatches": 0, "template_failures": 0,
         "parametric_builds": 0, "parametric_hits": 0}
counts = dict(_ZERO)
# the last sizes symbolic recordings specialised (kiln/symbolic.py), at most 32:
# (input size, value, where in the recorded code)
specialised = []


def stats():
    """Process-wide counters since the last kiln.reset():

    captures        segments kiln.compile's capture recorded (frames and resume points)
    recompiles      recordings made because every earlier one at that place failed its guards
    graph_breaks    graph breaks noted while recording
    compiles        graphs kiln's compiler compiled (native code loaded)
    fallbacks       graphs run through ATen: kiln's compiler declined them (the reason is logged
                    under KILN_LOGS=fallbacks)
    extern_ops      ATen calls inside compiled graphs (ops kiln does not generate code for)
    cache_hits      compiled graphs whose native code came from the disk cache
    lowering_cache_hits  inference graphs whose lowering came from the disk cache
    compile_seconds time spent compiling graphs (the backend, and backward graphs compiled
                    on first use)
    dynamic_dims    input dims kiln's capture made symbols because their size changed
                    (automatic dynamic) or mark_dynamic marked them
    sizes_specialised  symbolic sizes a recording specialised to one value (a branch or
                    a call that needs the exact size; each makes the next size record
                    again): KILN_LOGS=dynamic says where, kiln.explain lists the last ones
    symbolic_graphs graphs with symbolic sizes the backend took (kiln's capture or TorchDynamo's)
    specializations sizes of a symbolic graph compiled (each also counted in compiles, or in
                    size_plans; kiln/dynamic.py)
    templates, template_instances, template_mismatches, template_failures  symbolic
                    lowerings made, sizes filled in from one, sizes that failed a
                    relation it relied on, graphs that have none (kiln/template.py)
    template_cache_hits  symbolic lowerings read from the disk cache (not traced again)
    direct_sizes    sizes filled in from a symbolic lowering straight to the C core
    size_plans      sizes of a symbolic graph whose kernels came from an existing
                    parametric build, or that have none (every op an extern call):
                    the C core planned them, nothing was traced or built; not
                    counted in compiles
    parametric_builds, parametric_hits  CPU builds with sizes as parameters, and sizes
                    that reused one (kiln/kernel_params.py)
    frames_run_as_python  frames kiln handed to CPython: cache_size_limit reached, too deep
                    in the recursion limit, or a capture failure
    frames_without_torch  code kiln runs as Python from now on: a recording of it ended the
                    call with no tensor operation in any of its recordings and no tensor
                    or module in the frame (a dataclass's __init__ torch's code calls)
    and the capture's own counters by name (kiln._C.capture_stats)."""
    from . import _C
    cap = _C.capture_stats() or {}
    out = {"captures": cap.get("segments_recorded", 0), "recompiles": cap.get("recompiles", 0)}
    out.update(counts)
    out["frames_run_as_python"] = sum(cap.get(k, 0) for k in
                                      ("cache_limit_fallbacks", "recursion_fallbacks", "capture_failures"))
    for k, v in cap.items():
        if k != "segments_recorded":   # (captures)
            out.setdefault(k, v)
    return out


def reset():
    compiled_graphs.clear()
    specialised.clear()
    counts.update(_ZERO)


def count_ops(gm):
    """The ATen ops of an ATen graph module."""
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))


def graph(st):
    """Keep and count the stats of a graph compiled (or run as captured).
    A size plan is counted, not kept: a serving process meets sizes without
    end."""
    if not st.get("parametric_hit"):
        compiled_graphs.append(st)
    count(st)


def count(st):
    """Count a graph's stats (compile_many's graphs are counted, not kept)."""
    try:
        if st.get("fallbacks"):
            counts["fallbacks"] += 1
            if logs.on("fallbacks"):
                logs.emit("fallbacks", "a graph of %d ATen ops runs through ATen: %s", st.get("aten_ops", 0),
                          st.get("reason", "?"))
        else:
            counts["size_plans" if st.get("parametric_hit") else "compiles"] += 1
            counts["extern_ops"] += st.get("externs", 0)
            if logs.on("perf"):
                ext = sorted(set(map(str, st.get("extern_ops") or ())))
                logs.emit("perf", "a graph of %d ATen ops compiled: %d kernels, %d extern ATen calls%s",
                          st.get("aten_ops", 0), st.get("kernels", 0), st.get("externs", 0),
                          f" ({', '.join(ext)})" if ext else "")
    except Exception:   # noqa: BLE001  (a stats entry of another shape is never the user's problem)
        pass


def fallback(aten_ops, reason):
    """Count a graph that runs through ATen (as captured), with the reason."""
    graph({"aten_ops": aten_ops, "kernels": 0, "externs": 0, "fallbacks": 1, "extern_ops": [], "reason": reason})


_tls = threading.local()


@contextlib.contextmanager
def timed(what):
    """The outermost compile on this thread (`what` names it): its time is
    added to compile_seconds and, with KILN_LOGS=perf, logged by phase; on a
    terminal a compile past a few seconds shows progress.  Nested compiles
    (the backend compiling a forward graph) run inside the outer one."""
    if getattr(_tls, "depth", 0):
        yield
        return
    from . import progress
    _tls.depth = 1
    t0 = time.perf_counter()
    watch = progress.start(what)
    phases = _PhaseTimes() if logs.on("perf") else None
    try:
        yield
    finally:
        _tls.depth = 0
        dt = time.perf_counter() - t0
        counts["compile_seconds"] += dt
        progress.stop(watch)
        if phases is not None:
            phases.close(what, dt)


class _PhaseTimes:
    """Times the pipeline's phases on this thread while a compile runs
    (KILN_LOGS=perf), as a phase hook of kiln.pipeline."""

    _kiln_internal = True   # (pipeline: no first-run wrapper for it)

    def __init__(self):
        from . import pipeline
        self.owner = threading.get_ident()
        self.times = {}
        pipeline.add_phase_hook(self)

    @contextlib.contextmanager
    def __call__(self, name):
        if threading.get_ident() != self.owner:
            yield
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0

    def close(self, what, dt):
        from . import pipeline
        try:
            pipeline.remove_phase_hook(self)
        except ValueError:
            pass
        by = ", ".join(f"{k} {v:.3f}s" for k, v in self.times.items() if k != "backend")   # (backend: the whole)
        logs.emit("perf", "compiled %s in %.3fs (%s)", what, dt, by or "no pipeline phase")
