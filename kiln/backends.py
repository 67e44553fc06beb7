"""kiln.backends — the torch.compile backend contract: the entry points.

`kiln(gm, example_inputs)` has torch.compile's backend signature.  It rewrites
the captured graph for soundness (kiln/index_checks.py), decides whether it
must run as captured (kiln/run_as_captured.py, kiln/validate.py), lowers it to
core ATen (kiln/trace.py: a plain trace or AOT export for inference, with the
lowering cached on disk by kiln/lowered_cache.py; AOT autograd otherwise,
with the decomposition table of kiln/decomp.py) and hands each ATen graph to
the C pipeline (kiln/pipeline.py), whose result is a kiln._C.Program whose
step loop runs in C (kiln/runners.py wraps it).  Forward and backward graphs
take the same path.  kiln_cudagraphs (kiln/cudagraphs.py) and the
max-autotune backends (kiln/autotune.py) wrap it; compile_many compiles many
graphs with one C compiler run (the OpInfo sweep's path).

A graph kiln cannot compile runs eagerly (the ATen graph itself) with the
reason counted (kiln/counters.py); a kiln bug goes through errors.internal:
raised under KILN_DEBUG, else warned once and that graph runs eagerly.
"""
import os

import torch

from . import _C, config, counters, dynamic, errors, fx_bridge, logs, pipeline, trace
from .captured import _writes_inputs  # noqa: F401  (_writes_inputs: kiln/_capture.py)
from .cudagraphs import CudaGraphed
from .autotune import _autotuning
from .decomp import decompositions  # noqa: F401  (public)
from .index_checks import _exact_expands, _keep_index_checks
from .lowered_cache import _compile_inference, _inference_graph, _lowered_key
from .pipeline import __version__, compile_graph, phase  # noqa: F401  (compile_graph: public)
from .run_as_captured import _eager_only
from .runners import CompiledGraph, EagerGraph, _Deferred, _EagerOnError, _Flat, _StatsCallable, _Unwrap  # noqa: F401
from .counters import count_ops as _count_ops
from .counters import build_counts, compiled_graphs  # noqa: F401  (read by kiln/_capture.py, kiln.explain, tests)
from .trace import _aot, _backward_only_error, _non_cpu, _NotInference, _tupled


def _devices(example_inputs):
    return {t.device for t in example_inputs if isinstance(t, torch.Tensor)}


def reset():
    """Forget in-memory state and the counters (the disk cache stays)."""
    counters.reset()
    errors.forget_warnings()
    _C.runtime_reset()


try:
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis as _TensorifyRestart
except ImportError:   # a torch without it never raises it
    class _TensorifyRestart(Exception):
        pass

try:
    from torch._dynamo.symbolic_convert import TensorifyState as _TensorifyState
except ImportError:
    _TensorifyState = None


def _tensorify_marks():
    """The floats TorchDynamo is told to specialize when it captures again
    (global state, kept across later captures of any frame)."""
    return set(getattr(_TensorifyState, "force_specializations", ()))


def _tensorify_unmark(before):
    """Forget the specializations a declined restart asked for: a later capture
    (a recompile for new sizes) would otherwise specialize the float input and
    lose the graph's writes into it, the loss the declined restart avoided."""
    marks = getattr(_TensorifyState, "force_specializations", None)
    if marks is not None:
        marks.intersection_update(before)


def kiln(gm, example_inputs, mode=None, options=None):
    """torch.compile backend: `torch.compile(model, backend="kiln")`; torch.compile
    passes its mode and options (see configured)."""
    if mode not in (None, "default") or options:
        return configured(mode, options)(gm, example_inputs)
    if dynamic.symbolic_graph(gm, example_inputs):
        # sizes as symbols (TorchDynamo's automatic dynamic, dynamic=True,
        # mark_dynamic): compiled per size when first called (kiln/dynamic.py)
        fn = _symbolic_training(gm, example_inputs)
        return fn if fn is not None else dynamic.PerSize(gm, example_inputs, _static)
    with counters.timed(_graph_name(gm)), phase("backend"), pipeline.no_collection():
        return _checked(gm, example_inputs)


def _symbolic_training(gm, example_inputs):
    """A symbolic graph that needs grad (training): AOT autograd traces it
    once, on its placeholders' symbolic fake values (the capture's ShapeEnv),
    and the forward and backward ATen graphs it makes, symbolic too, are
    each served per size from their own symbolic lowering
    (dynamic.PerSize(aten=True)): a new batch size is a size plan, not a
    trace of the joint graph.  None where this does not apply (inference, a
    graph the static path would not compile, a symbolic trace that fails:
    then every size is specialised and compiled on its own)."""
    if not (config.symbolic_training and torch.is_grad_enabled()):
        return None
    # (the soundness rewrites first, as every compile path: a dead index
    # op's bounds check is kept, and an error replays the captured graph)
    front, finish = _front(gm)
    fakes = [n.meta.get("example_value") for n in front.graph.nodes if n.op == "placeholder"]
    if len(fakes) != len(example_inputs) or not all(isinstance(f, (torch.Tensor, torch.SymInt)) for f in fakes) or \
            not any(isinstance(f, torch.Tensor) and f.requires_grad for f in fakes):
        return None
    if _non_cpu(example_inputs) is not None and _non_cpu(example_inputs).type != "cuda":
        return None
    if not all(_unmoved(f, a) for f, a in zip(fakes, example_inputs)):
        return None   # (an input's metadata written in place: its recorded fake shows it after the write)
    if _eager_only(gm, example_inputs) is not None or _eager_rejects(gm, example_inputs) is not None:
        return None   # (the static path says why, per size)

    def each(g, e):
        if not dynamic.symbolic_graph(g, e):
            return compile_graph(g, e)
        per_size = dynamic.PerSize(g, e, lambda gs, ts: _Flat(compile_graph(gs, ts)), aten=True)

        # (AOT autograd's convention: one list, emptied so inputs die early;
        # TorchDynamo off: autograd runs the backward from the user's frame,
        # which TorchDynamo may be capturing, and kiln's Python is not theirs)
        @torch._dynamo.disable
        def boxed(args):
            flat = tuple(args)
            args.clear()
            return per_size(*flat)
        boxed._boxed_call = True
        return boxed

    try:
        with counters.timed(_graph_name(gm)), phase("backend"), pipeline.no_collection():
            g, unwrap = _tupled(front)
            fn = _aot(g, fakes, each)
    except Exception as e:   # noqa: BLE001  (each size then takes the static path, which classifies it)
        # (what AOT autograd refuses on symbolic sizes: a data-dependent
        # size, an op without a symbolic meta function)
        counters.counts["template_failures"] += 1
        if logs.on("dynamic"):
            logs.emit("dynamic", "a symbolic training graph did not trace once (%s: %s): each size is traced on "
                      "its own", type(e).__name__, str(e).split("\n")[0][:200])
        return None
    if logs.on("dynamic"):
        logs.emit("dynamic", "a symbolic training graph traced once by AOT autograd: its forward and backward "
                  "are served per size")
    if unwrap:
        whole = fn

        def fn(*args):
            return whole(*args)[0]
    return finish(fn)


def _unmoved(fake, given):
    """Whether a placeholder's fake value still has the metadata of the
    argument it stands for (sizes, strides and offset at their hints), as
    AOT autograd must see it: a recording that wrote an input's metadata in
    place (`a.unsqueeze_(0)`) leaves the fake as it is after the write."""
    def hint_int(v):   # (a SymInt's value at the recording; torch's helper for it moved between versions)
        h = v if isinstance(v, int) else v.node.hint
        if not isinstance(h, int):
            raise TypeError("no hint")
        return h
    if not isinstance(fake, torch.Tensor) or not isinstance(given, torch.Tensor):
        return not isinstance(fake, torch.Tensor) and not isinstance(given, torch.Tensor)
    try:
        return (fake.dim() == given.dim() and [hint_int(v) for v in fake.shape] == list(given.shape) and
                [hint_int(v) for v in fake.stride()] == list(given.stride()) and
                hint_int(fake.storage_offset()) == given.storage_offset())
    except Exception:   # noqa: BLE001  (a size with no hint: not known to be unmoved)
        return False


def _static(gm, example_inputs):
    """kiln() for a graph of concrete sizes, compiled at its first call (a
    symbolic graph specialised by kiln/dynamic.py)"""
    with counters.timed(_graph_name(gm)), phase("backend"), pipeline.no_collection():
        return _checked(gm, example_inputs)


# options= of kiln.compile and torch.compile(backend="kiln"): kiln.config knobs of the
# compiler, set while a graph compiles, and torch.compile's (Inductor's) two that mean
# the same here
OPTION_KNOBS = ("autotune_reps", "cc", "cflags", "chunk_kernels", "compile_jobs", "cuda_row_registers",
                "debug", "dump", "fast_lowering", "lt_epilogues", "nvrtc_fast_compile", "packed_linear")
OPTION_ALIASES = ("triton.cudagraphs", "max_autotune")
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def check_options(options):
    """options as a dict, or a user error naming what is accepted."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"kiln: options must be a dict, got {type(options).__name__}")
    bad = sorted(str(k) for k in options if k not in OPTION_KNOBS and k not in OPTION_ALIASES)
    if bad:
        raise ValueError(f"kiln: unknown option(s) {', '.join(bad)}; the options kiln takes are "
                         f"{', '.join(OPTION_KNOBS + OPTION_ALIASES)}")
    return dict(options)


def configured(mode=None, options=None):
    """The kiln backend for a torch.compile mode and options: reduce-overhead
    replays CUDA graphs, the max-autotune modes tune launch sizes (with and
    without CUDA graphs); options' "triton.cudagraphs" and "max_autotune" turn
    those on or off, the other keys set kiln.config while a graph compiles."""
    if mode not in MODES:
        raise ValueError(f"kiln: unknown mode {mode!r}; use one of {list(MODES)}")
    opts = check_options(options)
    graphs = opts.pop("triton.cudagraphs", mode in ("reduce-overhead", "max-autotune"))
    tune = opts.pop("max_autotune", mode in ("max-autotune", "max-autotune-no-cudagraphs"))
    base = {(False, False): _plain, (True, False): kiln_cudagraphs, (False, True): kiln_max_autotune_no_cudagraphs,
            (True, True): kiln_max_autotune}[(bool(graphs), bool(tune))]
    if not opts:
        return base

    def kiln_configured(gm, example_inputs):
        saved = {k: getattr(config, k) for k in opts}
        try:
            for k, v in opts.items():
                setattr(config, k, v)
            return base(gm, example_inputs)
        finally:
            for k, v in saved.items():
                setattr(config, k, v)

    kiln_configured._kiln_own = True   # kiln's own backend (kiln/_capture.py finish)
    return kiln_configured


def _plain(gm, example_inputs):
    return kiln(gm, example_inputs)


_plain._kiln_own = True


def _graph_name(gm):
    return f"the graph of {sum(1 for _ in gm.graph.nodes)} nodes"


def _checked(gm, example_inputs):
    """kiln() with the soundness rewrites of kiln/index_checks.py around it."""
    g, finish = _front(gm)
    return finish(_kiln(g, example_inputs))


def _front(gm):
    """The soundness rewrites every compile path applies first (kiln() and
    compile_many alike; kiln/index_checks.py): (g, finish), g the graph to
    compile, finish(fn) the callable the user gets from g's compiled fn
    (the kept index checks' outputs dropped, eager's error on a failure)."""
    gm = _exact_expands(gm)
    g, extra, untuple = _keep_index_checks(gm)

    def finish(fn, eager=None):
        """(eager: what replays the call on an error, in place of gm: a
        symbolic graph's compiled size takes its tensors alone)"""
        if eager is not None:
            return _EagerOnError(fn if not extra else _dropping(fn, extra, untuple), eager)
        if isinstance(fn, EagerGraph):
            return EagerGraph(gm, fn.reason, fn.kiln_stats["aten_ops"])
        if fn == g.forward:
            # the graph runs as captured: its in-place writes happen as it
            # runs, so a replay after an error would write twice (and the kept
            # index checks are eager's own: the captured graph runs them)
            return gm.forward
        return _EagerOnError(fn if not extra else _dropping(fn, extra, untuple), gm)
    return g, finish


def _dropping(fn, extra, untuple):
    """fn without its last `extra` outputs (the kept index checks'), its
    one remaining output alone where untuple."""
    def checked(*args):
        out = fn(*args)
        return out[0] if untuple else type(out)(out[:-extra]) if isinstance(out, tuple) else out[:-extra]
    checked._kiln_pure = getattr(fn, "_kiln_pure", False)
    checked.kiln_stats = getattr(fn, "kiln_stats", None)
    return checked


def _eager_rejects(gm, example_inputs):
    """The error eager's kernels raise on every call of gm (kiln.validate),
    or None.  A graph whose lowering is in the disk cache passed already; a
    size of a symbolic graph was checked as it was specialised
    (kiln/dynamic.py: validate.known_verdict)."""
    from . import validate
    known = validate.take_known(example_inputs)
    if known is not validate.UNKNOWN:
        return None if known is None else f"eager raises on this graph's dtypes or sizes ({known})"
    if _inference_graph(gm, example_inputs):
        key = _lowered_key(_tupled(gm)[0], example_inputs)
        if os.path.exists(os.path.join(config.cache_dir, "aten", key[:2], key + ".pkl")):
            return None
    why = validate.eager_rejects(gm, example_inputs)
    return None if why is None else f"eager raises on this graph's dtypes or sizes ({why})"


def _kiln(gm, example_inputs):
    dev = _non_cpu(example_inputs)
    reason = _eager_only(gm, example_inputs)
    if reason is None:
        reason = _eager_rejects(gm, example_inputs)
    if reason is not None:
        errors.warn_once(f"kiln: {reason}; the graph runs through ATen")
        counters.fallback(_count_ops(gm), reason)
        return gm.forward
    if dev is not None:
        if dev.type != "cuda":
            reason = f"kiln generates code for CPUs and CUDA GPUs, not {dev.type}"
        elif len(_devices(example_inputs)) > 1:
            reason = "inputs on several devices"
        else:
            from . import cuda
            ok, why, _ = cuda.available()
            if not ok:
                reason = f"CUDA code generation is unavailable here ({why})"
    if reason is not None:
        # run the captured graph as it is (ATen's own kernels), not a decomposed one
        errors.warn_once(f"kiln: {reason}; graphs on {dev} run through ATen")
        counters.fallback(_count_ops(gm), reason)
        return gm.forward
    marks = _tensorify_marks()
    try:
        g, unwrap = _tupled(gm)
        fn = None
        if _inference_graph(g, example_inputs):
            try:
                fn = _Flat(_compile_inference(g, example_inputs))
            except _NotInference:
                fn = None   # mutation or aliasing: AOT autograd's full path
            except (_TensorifyRestart, errors.UserError, _C.CompilerError):
                raise   # (a C compiler's failure reaches here only under debug: compile_graph falls back)
            except Exception as e:
                # a graph with data-dependent shapes takes AOT autograd's full
                # path too (which reports it); anything else is a kiln bug
                _lowering_failed(e, gm)
                fn = None
        pure = fn is not None   # no input mutation, no aliased outputs (aot_export_joint_simple checked)
        if fn is None:
            try:
                fn = _aot(g, example_inputs, compile_graph)
            except RuntimeError as e:
                reason = _backward_only_error(e)
                if reason is None:
                    raise
                counters.fallback(_count_ops(gm), reason)
                return gm.forward
        if unwrap:
            def single(*args):
                return fn(*args)[0]
            single._kiln_pure = pure
            return single
        if pure:
            fn._kiln_pure = True
        return fn
    except _TensorifyRestart:
        # AOT autograd asks TorchDynamo to restart its analysis (to specialize
        # a float it could not turn into a tensor; a 0-d float64 input is
        # one), and the graph captured again has lost in-place writes into
        # that input (torch 2.13, backend "aot_eager" alike): a graph that
        # writes into its inputs is kept and runs as captured instead
        if not _writes_inputs(gm):
            raise   # TorchDynamo captures again with the float specialized
        _tensorify_unmark(marks)
        reason = "a restart of TorchDynamo's analysis would lose this graph's writes into its inputs"
        counters.fallback(_count_ops(gm), reason)
        return gm.forward
    except (errors.UserError, _C.CompilerError):
        raise   # (they reach here only under debug: compile_graph falls back)
    except Exception as e:
        reason = errors.fall_back(e, f"{_graph_name(gm)}, lowering to ATen (kiln.trace)", warn_unsupported=True)
        counters.fallback(0, reason)
        return gm.forward


def kiln_max_autotune_no_cudagraphs(gm, example_inputs):
    """The kiln backend with mode="max-autotune-no-cudagraphs": on a GPU,
    each kernel's launch size is chosen by timing a few on the first run
    (kept in the disk cache for later compiles)."""
    with _autotuning():
        return kiln(gm, example_inputs)


def kiln_max_autotune(gm, example_inputs):
    """mode="max-autotune": tuned launch sizes, replayed as CUDA graphs."""
    with _autotuning():
        return kiln_cudagraphs(gm, example_inputs)


def kiln_cudagraphs(gm, example_inputs):
    """The kiln backend with mode="reduce-overhead": a graph whose inputs are
    on a CUDA device (and that computes no gradients) is replayed as a CUDA
    graph.  Elsewhere it is the plain kiln backend."""
    fn = kiln(gm, example_inputs)
    dev = _non_cpu(example_inputs)
    if isinstance(fn, dynamic.PerSize):
        if dev is not None and dev.type == "cuda":
            fn.post.append(lambda f: CudaGraphed(f, dev) if getattr(f, "_kiln_pure", False) else f)
        return fn
    if dev is None or dev.type != "cuda" or not getattr(fn, "_kiln_pure", False):
        # not on a GPU, run through ATen, or a graph that mutates its inputs
        # or returns views of them (AOT autograd's wrappers handle those
        # outside any graph): no CUDA graph
        return fn
    return CudaGraphed(fn, dev)


def _inference_lowering(g, example_inputs):
    """The front end kiln() takes for an inference graph (trace._lower: the
    plain trace or AOT export, then constant folding and the GPU rewrites),
    for graphs compiled in a batch: the ATen graph, or None where the graph
    takes AOT autograd's full path (it is no inference graph, mutates its
    inputs or returns aliases of them, or has data-dependent shapes)."""
    if not _inference_graph(g, example_inputs):
        return None
    try:
        return trace._lower(g, example_inputs)
    except _NotInference:
        return None
    except Exception as e:
        _lowering_failed(e, g)
        return None


def _lowering_failed(e, gm):
    """The inference lowering of gm raised `e`: the graph takes AOT
    autograd's full path instead (which reports an unsupported graph
    again); only a kiln bug is reported here."""
    if errors.classify(e) != errors.UNSUPPORTED:
        errors.fall_back(e, f"{_graph_name(gm)}, lowering for inference (kiln.trace._lower)")


def compile_many(items):
    """Compile many (gm, example_inputs) with one C compiler run.  Returns a
    callable per item (each with .kiln_stats).  Each item takes kiln()'s
    front end (_front's soundness rewrites) and decisions (run as captured,
    eager's own errors, inference lowering or AOT autograd); one that fails
    runs eagerly, classified as kiln() does (errors.fall_back)."""
    counted = set()   # items run as captured: counted (and kept) by counters.fallback already
    with counters.timed(f"{len(items)} graphs"):
        out = _compile_many(items, counted)
    for i, f in enumerate(out):
        if i not in counted:
            counters.count(getattr(f, "kiln_stats", None) or {})
    return out


def _compile_many(items, counted):
    results, deferred, finishes = [], [], []
    for gm, ex in items:
        mine = []
        gm, finish = _front(gm)
        finishes.append(finish)

        def fw(g, e, mine=mine):
            d = _Deferred(g)
            mine.append(d)
            deferred.append(d)
            return d

        reason = _eager_only(gm, ex) or _eager_rejects(gm, ex)   # as kiln() decides
        if reason is not None:
            counters.fallback(_count_ops(gm), reason)
            counted.add(len(results))
            results.append((EagerGraph(gm, reason, _count_ops(gm)), []))
            continue
        try:
            g, unwrap = _tupled(gm)
            aten = _inference_lowering(g, list(ex))
            if aten is not None:   # kiln()'s inference path (plain trace, folding), built with the batch
                f = fw(aten, None)
            else:
                f = _aot(g, list(ex), fw)
            if unwrap:
                f = _Unwrap(f)
        except Exception as e:
            f = EagerGraph(gm, errors.fall_back(e, f"{_graph_name(gm)}, lowering to ATen (kiln.backends.compile_many)"),
                           _count_ops(gm))
            mine = []
        results.append((f, mine))
    by_device = {}
    for i, d in enumerate(deferred):
        try:
            dev = fx_bridge.graph_device(d.gm)
            prog, consts, single = pipeline._prepare(d.gm, f"g{i}_", dev)
            by_device.setdefault(dev, []).append((d, prog, consts, single))
        except Exception as e:
            d.target = EagerGraph(d.gm, errors.fall_back(e, f"an ATen graph of {_count_ops(d.gm)} ops, stage "
                                                          f"describe/c_core (kiln.backends.compile_many)"), _count_ops(d.gm))
            d.kiln_stats = d.target.kiln_stats
    for dev, owners in by_device.items():
        _build_owned(owners, dev)
    return [finish(f) for finish, f in zip(finishes, _gather(results))]


def _build_owned(owners, dev):
    try:
        so = pipeline._build([o[1] for o in owners], dev)
        for d, prog, consts, single in owners:
            d.target = CompiledGraph(prog, consts, single, dict(prog.stats), so)
            d.kiln_stats = d.target.kiln_stats
    except Exception:
        # one bad unit must not take the others down: build each alone (each
        # failure then classified on its own)
        for d, prog, consts, single in owners:
            try:
                so = pipeline._build([prog], dev)
                d.target = CompiledGraph(prog, consts, single, dict(prog.stats), so)
            except Exception as e:
                d.target = EagerGraph(d.gm, errors.fall_back(e, f"an ATen graph of {_count_ops(d.gm)} ops, stage cc/load "
                                                              f"(kiln.backends.compile_many)"), _count_ops(d.gm))
            d.kiln_stats = d.target.kiln_stats


def _gather(results):
    out = []
    for f, mine in results:
        if isinstance(f, EagerGraph):
            f.kiln_stats = dict(f.kiln_stats)
            out.append(f)
            continue
        stats = {"aten_ops": 0, "kernels": 0, "externs": 0, "fallbacks": 0, "extern_ops": []}
        for d in mine:
            for k in ("aten_ops", "kernels", "externs", "fallbacks"):
                stats[k] += d.kiln_stats.get(k, 0)
            stats["extern_ops"] += list(d.kiln_stats.get("extern_ops", []))
            if "reason" in d.kiln_stats:
                stats["reason"] = d.kiln_stats["reason"]
        wrapped = _StatsCallable(f, stats)
        out.append(wrapped)
    return out


def lowered_ops():
    return sorted(_C.lowered_ops())
