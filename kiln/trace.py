"""kiln.trace — from a captured graph to core ATen.

Consumes: a captured torch.fx graph module and its example inputs.
Produces: an ATen graph: for inference, `_lower` (a plain make_fx trace with
kiln's decompositions, `_trace_plain`, else AOT export with
functionalization), followed by the graph rewrites (`_rewrite`: constant
folding, cuBLASLt epilogues); otherwise `_aot` (AOT autograd, forward and
backward graphs handed to a compiler function).  Also the classification of
torch's own failures while tracing (`_backward_only_error`, `_aot_assertion`).
"""
import contextlib
import copy
import os
import threading

import warnings

import torch
from torch._functorch.aot_autograd import aot_module_simplified

from . import _C, _saved, config, counters, fakes, fx_bridge
from .captured import _inputs_share_storage, _storage
from .decomp import decompositions
from .pipeline import phase
from .runners import EagerGraph
from .counters import count_ops as _count_ops


def _aot(gm, example_inputs, fw):
    @torch._dynamo.disable
    def bw(g, e):
        # (with kiln's frame hook off, and TorchDynamo's: autograd compiles
        # it when the user's frame first runs backward, a frame either may
        # be capturing)
        return _C.unhooked(_bw, g, e)

    def _bw(g, e):
        # (called when backward first runs) a backward graph that eager's
        # kernels reject runs through them, so they raise eager's error there
        from . import validate
        why = validate.eager_rejects(g, e)
        why = _backward_rejected(g) if why is None else f"eager raises on this backward graph ({why})"
        if why is None:
            return fw(g, e)
        cg = EagerGraph(g, why, _count_ops(g))
        counters.graph(cg.kiln_stats)
        return cg
    # outputs eager's backward saves keep autograd's version check (_saved.py)
    with phase("aot_autograd"), warnings.catch_warnings():
        # AOT traces the joint graph under anomaly mode: a backward it cannot trace (an
        # autograd.Function's that branches on data) warns before raising, and the graph
        # then runs eagerly, counted as a fallback: the warning would only be noise
        warnings.filterwarnings("ignore", message="Error detected in", category=UserWarning)
        compiled = aot_module_simplified(gm, example_inputs, fw_compiler=fw, bw_compiler=bw,
                                         decompositions=decompositions())
    return _plain_views(_saved.keep_version_checks(compiled, gm))


def _plain_views(fn):
    """fn with its outputs that are views needing no grad, of a base that
    needs none, detached: out of AOT autograd's Function they are views made
    inside a custom Function, which autograd forbids writing in place under
    grad mode, where eager's view may be written (a bool mask's squeeze,
    fuzzer 2102010).  The detached tensor shares the view's memory, so
    writes still reach its base.  (A view without grad of a base that needs
    grad was made under no_grad: eager forbids writing it too; it is kept.
    So is an input itself, which eager returns as such: `x.flatten(-1)` is
    x, fuzzer 2302673.)"""
    def run(*args):
        out = fn(*args)
        if not isinstance(out, (tuple, list)):
            return out
        fixed, given = None, None
        for i, t in enumerate(out):
            if isinstance(t, torch.Tensor) and not t.requires_grad and t._is_view() and \
                    t._base is not None and not t._base.requires_grad:
                if given is None:
                    given = {id(a) for a in args}
                if id(t) in given or id(t._base) in given:
                    continue   # an input itself (x.flatten(-1) is x), or AOT autograd's view of one
                if fixed is None:
                    fixed = list(out)
                fixed[i] = t.detach()
        if fixed is None:
            return out
        return tuple(fixed) if isinstance(out, tuple) else fixed
    return _saved.wrapping(run, fn)


_SUBTRACTIONS = {getattr(getattr(torch.ops.aten, op), o) for op in ("sub", "rsub") for o in ("Tensor", "Scalar")}


def _backward_rejected(gm):
    """Why eager's kernels raise on the ATen backward graph gm where kiln's
    lowering would not (fake tensors skip the check: AOT autograd traced it),
    or None: a subtraction with a bool tensor, from the derivative of pow
    with a bool exponent (`exponent - 1`)."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in _SUBTRACTIONS and any(
                isinstance(a, torch.fx.Node) and getattr(a.meta.get("val"), "dtype", None) == torch.bool
                for a in n.args[:2]):
            return "a subtraction with a bool tensor in the backward (eager's kernel raises)"
    return None


def _non_cpu(example_inputs):
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            return t.device
    return None


def _tupled(gm):
    """AOT autograd needs a graph that returns a tuple (TorchDynamo's always
    do).  For a graph returning one value, returns (a copy returning a
    1-tuple, True); the user's graph module is never modified."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    if isinstance(out.args[0], (tuple, list)):
        return gm, False
    graph = copy.deepcopy(gm.graph)
    new_out = next(n for n in graph.nodes if n.op == "output")
    new_out.args = ((new_out.args[0],),)
    return torch.fx.GraphModule(gm, graph), True


_ASSERTIONS = {getattr(torch.ops.aten, n).default for n in ("_assert_tensor_metadata", "_assert_async",
                                                            "_assert_scalar") if hasattr(torch.ops.aten, n)}


class _NeedsFunctionalization(Exception):
    """The plain trace cannot lower this graph (AOT export will)."""


class _NotInference(Exception):
    """The graph cannot take the inference path (it mutates its inputs or
    returns aliases of them, which only AOT autograd's runtime wrappers
    handle): not an error, the caller takes aot_module_simplified."""


def _is_view(tgt):
    return isinstance(tgt, torch._ops.OpOverload) and any(
        r.alias_info is not None and not r.alias_info.is_write for r in tgt._schema.returns)


def _shares_storage(tgt):
    """Results of op `tgt` share an argument's storage (a view, an in-place
    result, `_unsafe_view`)."""
    return isinstance(tgt, torch._ops.OpOverload) and fx_bridge._aliased_arg(tgt) is not None


def _storage_bases(node):
    """The nodes whose storage node's value shares, following views (and
    elements of a view op's list) back to the value that owns it."""
    import operator

    out = set()
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target is operator.getitem:
            node = node.args[0]
            continue
        k = fx_bridge._aliased_arg(node.target) if isinstance(node.target, torch._ops.OpOverload) else None
        if k is None:
            break
        args = fx_bridge._schema_args(node.target, node.args, node.kwargs)
        node = args[k] if k < len(args) else None
        if isinstance(node, torch.fx.Node):
            out.add(node)
    return out


_NO_META = object()
_META_LOCK = threading.RLock()


@contextlib.contextmanager
def _without_tensor_meta():
    """Within it, make_fx in this thread records each value as its node's
    "val" only, not also as "tensor_meta" (torch.fx's TensorMetadata, whose
    memory format is found by testing the value's contiguity in each layout:
    with symbolic sizes, sympy work at every node, about 7% of BERT's
    symbolic lowering).  kiln reads "val" alone; the caller removes the
    placeholder this leaves.  Another thread's make_fx meanwhile gets torch's
    own function."""
    from torch.fx.experimental import proxy_tensor as pt
    orig = getattr(pt, "_extract_tensor_metadata", None)
    if orig is None:   # (another torch: its trace is left as it is)
        yield
        return
    me = threading.get_ident()

    def extract(val):
        return _NO_META if threading.get_ident() == me else orig(val)
    with _META_LOCK:
        pt._extract_tensor_metadata = extract
        try:
            yield
        finally:
            pt._extract_tensor_metadata = orig


def _layer_norm_fake(me, slow):
    """aten.native_layer_norm's fake under symbolic sizes, for make_fx in
    thread `me` (else, and wherever its conditions fail, `slow`: torch's own,
    its Python reference run on the fakes).  kiln lowers the op whole
    (lower_reduce.c), so only its results' metadata is needed: what the
    reference returns (out contiguous in x's dtype; mean and rstd of x's
    sizes with the normalized dims 1, contiguous, in x's compute dtype, x's
    own on the CPU), for a floating x whose normalized dims are plain ints
    equal to normalized_shape, and weight and bias of exactly those sizes on
    x's device or none: then the reference's checks hold without a guard.
    The reference is a dozen ATen ops, each a symbolic fake propagation; a
    fifth of BERT's symbolic lowering.  (FakeTensorMode's dispatch cache is
    its class's, so a result made here may answer another mode's call with
    the same inputs: it is the reference's, sizes, strides and dtypes.)"""
    def fake(mode, x, normalized_shape, weight=None, bias=None, eps=1e-5):
        if threading.get_ident() != me:
            return slow(mode, x, normalized_shape, weight, bias, eps)
        shape = tuple(x.shape)
        ns = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple, torch.Size)) else None
        k = len(ns) if ns is not None else 0
        if not 1 <= k <= len(shape) or not x.dtype.is_floating_point or \
                not all(type(n) is int for n in ns) or not all(type(n) is int for n in shape[-k:]) or \
                shape[-k:] != ns or any(t is not None and (t.device != x.device or tuple(t.shape) != ns or
                                                           not all(type(n) is int for n in t.shape))
                                        for t in (weight, bias)):
            return slow(mode, x, normalized_shape, weight, bias, eps)
        cd = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        sd = x.dtype if x.device.type in ("cpu", "mtia") else cd
        stat = shape[:len(shape) - k] + (1,) * k
        with mode:
            got = (torch.empty(shape, dtype=x.dtype, device=x.device),
                   torch.empty(stat, dtype=sd, device=x.device), torch.empty(stat, dtype=sd, device=x.device))
        if config.debug:
            _check_fake("native_layer_norm", got, slow(mode, x, normalized_shape, weight, bias, eps))
        return got
    return fake


def _batch_norm_fake(me, slow):
    """aten._native_batch_norm_legit_no_training's fake under symbolic
    sizes, for make_fx in thread `me` (else, and wherever its conditions
    fail, `slow`: torch's own, its Python decomposition run on the fakes:
    the normalisation over x as four symbolic ATen ops with broadcasting).
    kiln lowers the op whole (lower_reduce.c), so only its results'
    metadata is needed, as the decomposition gives it: out laid out as x,
    for a contiguous or 4-d channels-last x (fakes.like_dense: a pointwise
    result of x and per-channel values is), in x's dtype; the statistics
    empty in x's dtype on the CPU, else the running mean and 1 / sqrt(var +
    eps), one per channel, in x's compute dtype.  Taken for a floating x of at least two dims whose channel count
    is a plain int, and weight, bias, running mean and running var of one
    value per channel on x's device (or no weight, no bias): then the
    decomposition's checks hold without a guard."""
    def fake(mode, x, weight, bias, running_mean, running_var, momentum, eps):
        args = (x, weight, bias, running_mean, running_var, momentum, eps)
        if threading.get_ident() != me:
            return slow(mode, *args)
        if x.dim() < 2 or not x.dtype.is_floating_point or type(x.shape[1]) is not int or \
                running_mean is None or running_var is None or \
                any(t is not None and (t.device != x.device or t.dim() != 1 or type(t.shape[0]) is not int or
                                       t.shape[0] != x.shape[1] or not t.dtype.is_floating_point)
                    for t in (weight, bias, running_mean, running_var)):
            return slow(mode, *args)
        cd = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        with mode:
            out = fakes.like_dense(x)
            if out is None:
                return slow(mode, *args)
            if x.device.type == "cpu":
                stats = (torch.empty((0,), dtype=x.dtype, device=x.device),
                         torch.empty((0,), dtype=x.dtype, device=x.device))
            else:
                stats = (torch.empty((x.shape[1],), dtype=cd, device=x.device),
                         torch.empty((x.shape[1],), dtype=cd, device=x.device))
        got = (out,) + stats
        if config.debug:
            _check_fake("_native_batch_norm_legit_no_training", got, slow(mode, *args))
        return got
    return fake


def _check_fake(name, got, want):
    """KILN_DEBUG: a fake of kiln's has torch's results' metadata."""
    for g, w in zip(got, want):
        if g.shape != w.shape or g.stride() != w.stride() or g.dtype != w.dtype or g.device != w.device:
            raise AssertionError(f"kiln: {name}'s fake {tuple(g.shape)} {g.stride()} {g.dtype} "
                                 f"differs from torch's {tuple(w.shape)} {w.stride()} {w.dtype}")


# the ops kiln lowers whole whose fakes under symbolic sizes are its own
# while it traces: op name -> the name of the function making the fake
_KEPT_FAKES = {
    "native_layer_norm.default": "_layer_norm_fake",
    "_native_batch_norm_legit_no_training.default": "_batch_norm_fake",
}


def _torch_fake(op, decomposition_table):
    """torch's own fake of op as slow(mode, *args): its decomposition run on
    the fakes; None where torch fakes it otherwise."""
    ref = decomposition_table.get(op)
    if ref is None:
        return None

    def slow(mode, *args):
        with mode:
            return ref(*args)
    return slow


@contextlib.contextmanager
def _kept_fakes():
    """Within it, make_fx in this thread takes kiln's fakes (_KEPT_FAKES)
    for the ops kiln lowers whole, at symbolic sizes (FakeTensorMode's fast
    op table, consulted first under symbolic sizes); another thread
    meanwhile gets torch's own fake.  Each left as torch has it where the
    table is not found or already has the op (another torch)."""
    try:
        from torch._decomp import decomposition_table, meta_table
        from torch._subclasses.fake_impls import get_fast_op_impls
        table = get_fast_op_impls()
    except Exception:   # noqa: BLE001  (another torch: its trace is left as it is)
        table = None
    if not isinstance(table, dict):
        yield
        return
    me = threading.get_ident()
    with _META_LOCK:
        added = []
        try:
            for name, maker in _KEPT_FAKES.items():
                pkt, _, overload = name.partition(".")
                op = getattr(getattr(torch.ops.aten, pkt, None), overload, None)
                if op is None or op in table or op in meta_table:
                    continue
                slow = _torch_fake(op, decomposition_table)
                if slow is None:
                    continue
                table[op] = globals()[maker](me, slow)
                added.append(op)
            yield
        finally:
            for op in added:
                table.pop(op, None)


def _trace_plain(gm, example_inputs):
    """Fast lowering of an inference graph: one make_fx trace with kiln's
    decompositions and no functionalization (about half the time of AOT
    export).  In-place ops on fresh intermediates nobody reads afterwards
    (ReLU(inplace=True), `x += y` on a temporary) become their functional
    forms; anything else that mutates, or an output that aliases an input,
    raises _NeedsFunctionalization (the caller takes AOT export).  Outputs
    may alias each other, and a symbolic trace's size arithmetic
    (operator.mul on SymInts) passes."""
    import operator

    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    sym = _symbolic_mode(example_inputs)
    if sym is not None:
        # fakes of symbolic sizes (kiln/template.py): traced under their own
        # mode, so the trace's size arithmetic is over their symbols
        mode, fake = sym, list(example_inputs)
    else:
        # a fake mode of our own, with static shapes (not the one of a
        # TorchDynamo tracing context, which may make sizes symbolic)
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    # Without the Python dispatcher (2-3x faster to trace a convolutional
    # network), composite ops pick a device kernel at trace time: on a GPU,
    # batch_norm becomes cudnn_batch_norm, which kiln's table decomposes.
    # KILN_TRACE_PYTHON_DISPATCHER=1 traces as AOT export does instead.  A
    # symbolic trace always does: some composites' C++ (torch 2.11's linear
    # and matmul) read concrete sizes, which specialises a size symbol to
    # its example value; their Python decompositions keep sizes symbolic.
    pyd = enable_python_dispatcher() if config.trace_python_dispatcher or sym is not None else \
        contextlib.nullcontext()
    with mode, pyd, _without_tensor_meta(), _kept_fakes():
        aten = make_fx(gm, decomposition_table=decompositions(), tracing_mode="real")(*fake)
    nodes = list(aten.graph.nodes)
    for n in nodes:
        if n.meta.get("tensor_meta") is _NO_META:
            del n.meta["tensor_meta"]
    order = {n: i for i, n in enumerate(nodes)}
    for n in nodes:
        tgt = n.target
        if n.op != "call_function" or tgt is operator.getitem:
            continue
        if not isinstance(tgt, torch._ops.OpOverload):
            if sym is not None and _size_arithmetic(n):
                continue   # (s0 * s1 in a symbolic trace: arithmetic on sizes, which writes nothing)
            raise _NeedsFunctionalization(f"call of {tgt}")
        schema = tgt._schema
        if not schema.is_mutable:
            continue
        written = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
        name = schema.name.split("::")[-1]
        if written != [0] or not name.endswith("_") or not n.args:
            raise _NeedsFunctionalization(str(tgt))
        x = n.args[0]
        # (x must own its storage: not a view, an element of a view op's list
        # such as split's, or an in-place result; else the write must reach
        # the storage's other users, which only functionalization replays)
        if not isinstance(x, torch.fx.Node) or x.op != "call_function" or _shares_storage(x.target) or \
                _storage_bases(x) or any(u is not n and (order[u] > order[n] or _shares_storage(u.target)) for u in x.users):
            raise _NeedsFunctionalization(str(tgt))
        functional = _functional_overload(tgt)
        if functional is None:
            raise _NeedsFunctionalization(str(tgt))
        n.target = functional
    out = next(n for n in reversed(nodes) if n.op == "output")
    # outputs may share memory with each other (one value twice, a view of
    # another output: kiln's outputs are views of its buffers as eager's
    # are), never with an input
    inputs = {_storage(p.meta.get("val")) for p in nodes if p.op == "placeholder"} - {None}
    for v in out.args[0]:
        if isinstance(v, torch.fx.Node) and v.op == "placeholder":
            continue   # (an input itself, as `x.to(x.dtype)` returns it: the run returns that tensor)
        st = _storage(v.meta.get("val")) if isinstance(v, torch.fx.Node) else None
        if st is not None and st in inputs:
            raise _NeedsFunctionalization("output aliasing an input")
    aten.graph.eliminate_dead_code()
    aten.recompile()
    return aten


def _size_arithmetic(n):
    """Is fx node n arithmetic on symbolic sizes (operator.mul, torch.sym_max,
    ...: a Python function whose value is a SymInt, SymFloat or SymBool)?"""
    tgt = n.target
    if getattr(tgt, "__module__", None) not in ("_operator", "math") and \
            not getattr(tgt, "__name__", "").startswith("sym_"):
        return False
    return isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def _symbolic_mode(example_inputs):
    """The fake mode of example inputs that are fakes with a ShapeEnv (a
    symbolic lowering, kiln/template.py), else None."""
    from torch._subclasses.fake_tensor import FakeTensor
    for t in example_inputs:
        if isinstance(t, torch.SymInt):
            for u in example_inputs:
                if isinstance(u, FakeTensor):
                    return u.fake_mode
        if isinstance(t, FakeTensor) and t.fake_mode.shape_env is not None:
            return t.fake_mode
    return None


def _functional_overload(tgt):
    """The out-of-place overload of in-place op `tgt` taking the same
    arguments, matched by schema, not by overload name: `pow_.Scalar` is
    pow(Tensor, Scalar), which is `pow.Tensor_Scalar`; `pow.Scalar` is
    pow(Scalar, Tensor) (fuzzer tensor:998513).  None if there is none."""
    name = tgt._schema.name.split("::")[-1]
    packet = getattr(getattr(torch.ops, tgt.namespace), name[:-1], None)
    if packet is None:
        return None
    want = [(a.name, str(a.type)) for a in tgt._schema.arguments]
    for o in packet.overloads():
        f = getattr(packet, o)
        if not f._schema.is_mutable and not any(r.alias_info for r in f._schema.returns) and \
                [(a.name, str(a.type)) for a in f._schema.arguments] == want:
            return f
    return None


def _lower(gm, example_inputs):
    """The captured graph as an inference ATen graph: `_lower_graph`, run as
    the phase "lower"."""
    with phase("lower"):
        return _lower_graph(gm, example_inputs)


def _lower_graph(gm, example_inputs):
    """The captured graph as an inference ATen graph (a plain trace when it
    is functional enough, else AOT export with functionalization; both with
    kiln's decompositions).  Raises when the graph mutates its inputs or
    returns aliases of them: those keep AOT autograd's runtime wrappers (the
    caller falls back to aot_module_simplified)."""
    from torch._functorch.aot_autograd import aot_export_joint_simple

    if any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in example_inputs):
        from . import ops
        with phase("attention"):
            gm = ops.keep_attention_whole(gm)   # inference on a GPU: eager's fused attention
    if config.fast_lowering:
        try:
            return _rewrite(_trace_plain(gm, example_inputs))
        except _NeedsFunctionalization:
            pass
    # AOT export refuses inputs that share memory when the graph mutates one
    # (duplicated or aliased inputs need synthetic bases, which only AOT
    # autograd's runtime wrappers build): such inputs take that path whether
    # or not the graph mutates (the plain trace above handled the rest)
    if _inputs_share_storage(example_inputs):
        raise _NotInference("inputs share storage")
    try:
        with phase("aot_export"), _kept_fakes():
            aten = aot_export_joint_simple(gm, list(example_inputs), trace_joint=False,
                                           decompositions=decompositions())
    except RuntimeError as e:
        # its other refusals (input data or metadata mutation, aliased outputs)
        # name it or say they are about export
        if "aot_export" in str(e) or "trying to export" in str(e):
            raise _NotInference(str(e).strip().split(".")[0]) from e
        raise
    # export-style tracing leaves metadata assertions with no users: drop them
    for n in list(aten.graph.nodes):
        if n.op == "call_function" and not n.users and n.target in _ASSERTIONS:
            aten.graph.erase_node(n)
    aten.recompile()
    return _rewrite(aten)


def _rewrite(aten):
    """The graph-level rewrites of a lowered inference graph: constants
    folded, then (on a GPU) activations moved into cuBLASLt epilogues."""
    from .fold import _fold_constants

    aten = _fold_constants(aten)
    if config.lt_epilogues and fx_bridge.graph_device(aten).type == "cuda":
        from . import gemm_epilogues
        gemm_epilogues.apply(aten)
    return aten


def _backward_only_error(e):
    """AOT autograd traces the backward when the graph is compiled; eager
    raises these errors only if backward runs (and the forward's results are
    right).  The graph then runs as captured, so the user sees eager's
    behaviour: the reason, or None for any other error."""
    msg = str(e)
    if "modified by an inplace operation" in msg:
        return "a tensor saved for backward is written in place (autograd raises at backward)"
    if "output of a function that returns multiple views" in msg:
        return "a view from unbind/split written in place (autograd raises where the view is used)"
    if "derivative for" in msg and "is not implemented" in msg:
        return "an op without a derivative on a tensor that requires grad (autograd raises at backward)"
    if _in_backward(e):
        # a derivative formula that raises on these operands (atan2's of a
        # bool tensor negates it): eager raises it when backward runs
        return f"the backward raises ({type(e).__name__}: {msg.splitlines()[0][:200]}; eager raises at backward)"
    return None


def _in_backward(e):
    """Was e raised while autograd ran a backward (AOT autograd tracing the
    joint graph), not in the forward?"""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name in ("_engine_run_backward", "run_backward"):
            return True
        tb = tb.tb_next
    return False


_FUNCTORCH = os.path.join(os.path.dirname(torch.__file__), "_functorch") + os.sep


def _aot_assertion(e):
    """An AssertionError raised inside AOT autograd's own code (torch 2.11:
    "n=copy_, n.args[0]=empty_permuted" on graphs writing their inputs) is
    torch's failure on a valid graph, not a kiln bug: the graph runs as
    captured (counted) even under debug."""
    if not isinstance(e, AssertionError):
        return False
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(
        os.path.realpath(_FUNCTORCH[:-1]) + os.sep)


def _data_dependent_errors():
    from torch._subclasses import fake_tensor as ft

    names = ["DataDependentOutputException", "DynamicOutputShapeException"]
    errs = tuple(getattr(ft, n) for n in names if hasattr(ft, n))
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        errs += (GuardOnDataDependentSymNode,)
    except Exception:
        pass
    return errs


# torch's exceptions for an op whose output shape (or a branch) depends on
# tensor values: the capture's fake execution matches them by type (hook.c
# reads kiln._capture.DataDependent)
DATA_DEPENDENT = _data_dependent_errors()


def data_dependent(e):
    """Is `e` torch's refusal to trace a value-dependent shape (nonzero,
    boolean masks, `.item()` in a branch)?  A legitimate fallback (the graph
    or frame runs eagerly), never a kiln bug.  By type, or by message where
    AOT autograd re-raised it as another exception."""
    return isinstance(e, DATA_DEPENDENT) or "DynamicOutputShape" in type(e).__name__ or \
        "DynamicOutputShape" in str(e) or "data-dependent" in str(e).lower()
