"""kiln.backends — the torch.compile backend contract.

`kiln(gm, example_inputs)` has torch.compile's backend signature.  It lowers
the captured graph to core ATen with AOT autograd and a decomposition table
chosen op by op (below), then hands each ATen graph to the C core: lowering,
fusion, memory planning and C generation happen in kiln._C; the C compiler runs
through the disk cache; the result is a kiln._C.Program whose step loop runs in
C.  Forward and backward graphs take the same path (fw_compiler and
bw_compiler are the same function).

Any failure inside kiln warns once and runs that graph eagerly (the ATen graph
itself), so a user never gets an error or a wrong answer from kiln.
"""
import copy
import hashlib
import os
import pickle
import threading
import time
import warnings

import torch
from torch._decomp import core_aten_decompositions, decomposition_table
from torch._functorch.aot_autograd import aot_module_simplified

from . import _C, _saved, config, fx_bridge

__version__ = "0.1.0"

def _packed_linear_ops():
    """oneDNN's weight packing and packed linear, where this torch has them."""
    try:
        ops = torch.ops.mkldnn
        if not torch.backends.mkldnn.is_available():
            return None, None
        return ops._reorder_linear_weight.default, ops._linear_pointwise.default
    except (AttributeError, RuntimeError):
        return None, None


_C.set_runtime(torch.empty_strided, torch.empty, torch.as_strided, fx_bridge.DTYPES, torch.uint8, fx_bridge.Ref,
               *_packed_linear_ops())


def _lean_bindings():
    """torch's lean C++ bindings for allocation and views (what torch.compile's
    own generated wrappers call: each Python-level call costs microseconds,
    which on a GPU is the whole budget of a small kernel)."""
    g = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    return getattr(g, "_empty_strided_cuda", None), getattr(g, "_reinterpret_tensor", None)


_C.set_fast_runtime(*_lean_bindings())

aten = torch.ops.aten

# Ops kiln keeps whole (extern calls into ATen's own kernels, which beat a
# decomposition): attention, and the matmul family is not decomposed anyway;
# index_add/index_copy/index_fill, whose decomposition into index_put (an
# extern too) checks indices where eager does not (an empty tensor).
_KEEP = {
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten.index_add.default, aten.index_add_.default, aten.index_copy.default, aten.index_copy_.default,
    aten.index_fill.int_Scalar, aten.index_fill.int_Tensor, aten.index_fill_.int_Scalar,
    aten.index_fill_.int_Tensor,
}
# Composite ops that core ATen keeps but kiln fuses better from their parts:
# normalisations and softmax become reductions + pointwise in one kernel.
_EXTRA = [
    aten._softmax.default, aten._log_softmax.default, aten.native_layer_norm.default,
    aten.native_group_norm.default,
    aten.logsumexp.default, aten.hardswish.default, aten.hardsigmoid.default, aten.mish.default,
    aten.elu.default, aten.silu.default, aten.softplus.default, aten.addcmul.default, aten.addcdiv.default,
    aten.lerp.Scalar, aten.lerp.Tensor, aten.std.correction, aten.nan_to_num.default, aten.isfinite.default,
    aten.squeeze.dims, aten.native_dropout.default, aten.rms_norm.default if hasattr(aten, "rms_norm") else None,
]

_table_cache = None


def _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    if training or running_mean is None or running_var is None:
        return NotImplemented   # training: ATen's kernel, as eager
    return _batch_norm_inference(x, weight, bias, running_mean, running_var, momentum, eps)


def _cudnn_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    r = _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)
    if r is NotImplemented:
        return r   # training: cuDNN's kernel, as eager
    out, empty, _ = r
    return out, empty, empty, x.new_zeros((0,), dtype=torch.uint8)   # + cuDNN's (empty) reserve


def _batch_norm_inference(x, weight, bias, running_mean, running_var, momentum, eps):
    # inference batch norm as pointwise work on the running statistics, so it
    # fuses into the convolution's epilogue kernel
    shape = [1, -1] + [1] * (x.dim() - 2)
    scale = torch.rsqrt(running_var + eps)
    if weight is not None:
        scale = scale * weight
    out = (x - running_mean.view(shape)) * scale.view(shape)
    if bias is not None:
        out = out + bias.view(shape)
    empty = x.new_zeros((0,))
    return out, empty, empty


def _int_scalar_value(ref):
    """addcmul on integer tensors: eager's kernel converts a float `value` to
    the integer dtype (truncating); the reference decomposition refuses it."""
    def decomp(self, tensor1, tensor2, *, value=1):
        dt = torch.promote_types(torch.promote_types(self.dtype, tensor1.dtype), tensor2.dtype)
        if isinstance(value, float) and not dt.is_floating_point and not dt.is_complex and dt != torch.bool:
            value = int(value)
        return ref(self, tensor1, tensor2, value=value)
    return decomp


def _pow_scalar_contiguous(base, exponent):
    """pow(Scalar, Tensor): eager's kernel returns a contiguous tensor whatever
    the exponent's layout, while its meta function keeps the exponent's strides.
    Tracing it over a contiguous exponent gives the traced value eager's layout
    (an `as_strided` of it then reads what eager reads); the inner call, on a
    contiguous exponent, is traced as it is."""
    if exponent.is_contiguous():
        return NotImplemented
    return aten.pow.Scalar(base, exponent.contiguous())


def decompositions():
    """The decomposition table kiln lowers with (built once)."""
    global _table_cache
    if _table_cache is None:
        t = dict(core_aten_decompositions())
        for op in _KEEP:
            t.pop(op, None)
        for op in _EXTRA:
            if op is not None and op in decomposition_table:
                t[op] = decomposition_table[op]
        for op in (aten.addcmul.default, aten.addcmul_.default):
            if op in t:
                t[op] = _int_scalar_value(t[op])
        t[aten._native_batch_norm_legit_no_training.default] = _batch_norm_inference
        t[aten.pow.Scalar] = _pow_scalar_contiguous
        # on a GPU, tracing without the Python dispatcher reaches the kernel
        # batch_norm picks at trace time (cuDNN's, or native_batch_norm for
        # bfloat16): the same pointwise work in inference
        t[aten.cudnn_batch_norm.default] = _cudnn_batch_norm
        t[aten.native_batch_norm.default] = _native_batch_norm
        _table_cache = t
    return _table_cache


_warned = set()
_lock = threading.Lock()
# Stats of every graph compiled since the last reset (kiln.explain reads them).
compiled_graphs = []
# Shared objects built by running the C compiler / found in the disk cache,
# in this process.
build_counts = {"compiled": 0, "cached": 0}


def _warn_once(msg):
    with _lock:
        if msg in _warned:
            return
        _warned.add(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def reset():
    """Forget in-memory state (the disk cache stays)."""
    compiled_graphs.clear()
    _warned.clear()


class CompiledGraph:
    """Result of compiling one ATen graph.  AOT autograd calls it boxed (one
    list of arguments, which it may empty so inputs die early); `run(*args)`
    is the plain form."""

    _boxed_call = True

    def __init__(self, program, constants, single, stats, so_path=None):
        self.program = program
        self.constants = tuple(constants)
        self.single = single
        self.kiln_stats = stats
        self.so_path = so_path
        # output positions whose graph node differs from every earlier one's:
        # the program returns an exact view (alias, detach) as its base's own
        # tensor, where eager returns a new tensor; AOT autograd marks its
        # saved tensors non-differentiable by object, so a shared object
        # would cut the gradient of an output that is the other's alias
        self.fresh = ()

    def run(self, *args):
        if self.constants:
            args = args + self.constants
        if torch._C._len_torch_function_stack():
            # a torch-function mode (`with torch.device("meta")`) would redirect
            # the program's allocations: they name their device, as eager's do
            with torch._C.DisableTorchFunction():
                out = self.program(*args)
        else:
            out = self.program(*args)
        if self.fresh:
            out = self._distinct(out)
        return out[0] if self.single else out

    def _distinct(self, out):
        seen, new = set(), None
        for k, t in enumerate(out):
            if id(t) in seen and k in self.fresh and isinstance(t, torch.Tensor):
                new = list(out) if new is None else new
                new[k] = torch.ops.aten.alias.default(t)
            seen.add(id(t))
        return out if new is None else type(out)(new)

    def __call__(self, args):
        a = tuple(args)
        args.clear()
        return self.run(*a)


class EagerGraph:
    """A graph kiln could not compile: runs the ATen graph as is."""

    def __init__(self, gm, reason, aten_ops):
        self.gm = gm
        self.reason = reason
        self.kiln_stats = {"aten_ops": aten_ops, "kernels": 0, "externs": 0, "fallbacks": 1,
                           "extern_ops": [], "reason": reason}

    def __call__(self, *args):
        return self.gm(*args)


def _count_ops(gm):
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))


def _units(prelude, source):
    """Split a graph's kernels into translation units compiled in parallel:
    as many units as compiler jobs (at least 4 kernels each, at most
    config.chunk_kernels)."""
    parts = source.split("\nvoid ")
    head, kernels = parts[0], ["void " + p for p in parts[1:]]
    n = len(kernels)
    units = max(1, min(config.compile_jobs, n // 4))
    size = max(1, min(config.chunk_kernels, -(-n // units)))
    if size >= n:
        return [prelude + source]
    return [prelude + head + "\n" + "\n".join(kernels[i:i + size]) for i in range(0, n, size)]


def _salt():
    return f"kiln {__version__} recipe 2 | cc {config.cc} | torch {torch.__version__}"


def _describe(gm, device):
    """ATen graph -> (desc, constants, single) for the C core.  Raises
    fx_bridge.Unsupported."""
    if "graph" in config.dump:
        print(f"[kiln] ATen graph:\n{gm.graph}")
    return fx_bridge.describe(gm, device.type)


def _program(desc, prefix, device):
    """desc -> a Program (C for the CPU; CUDA C for a CUDA device, see
    kiln/cuda.py for the build).  Raises on failure."""
    if device.type == "cpu" and config.cuda_emulate:
        # tests: the CUDA renderer's kernels, run by the CPU emulator
        program = _C.compile(desc, prefix, "loops" in config.dump, False, True, 132, config.cuda_row_registers)
    elif device.type == "cuda":
        from . import cuda
        index = device.index if device.index is not None else torch.cuda.current_device()
        program = _C.compile(desc, prefix, "loops" in config.dump, False, True, cuda.sms(index),
                             config.cuda_row_registers)
    else:
        program = _C.compile(desc, prefix, "loops" in config.dump, config.packed_linear)
    if "loops" in config.dump:
        print(f"[kiln] loops:\n{program.loops}")
    if "code" in config.dump:
        what = "CUDA C (kernels; the prelude is kiln._C.prelude_cuda())" if program.cuda else \
            "C (kernels; the prelude is kiln._C.prelude())"
        print(f"[kiln] generated {what}:\n{program.source}")
    return program


def _prepare(gm, prefix, device=None):
    """ATen graph -> (Program, constants, single).  Raises on failure."""
    dev = device if device is not None else torch.device("cpu")
    desc, constants, single = _describe(gm, dev)
    return _program(desc, prefix, dev), constants, single


def _build(programs, device=None):
    """Compile the kernels of all programs into one cached shared object (a
    cubin for programs on a CUDA device; the CPU emulator's library for CUDA
    programs of graphs on the CPU).  Returns its path, or None."""
    programs = [p for p in programs if p.num_kernels]
    if not programs:
        return None
    if programs[0].cuda:
        if device is not None and device.type == "cuda":
            from . import cuda
            path, cached = cuda.build(programs, device)
        else:
            from . import cuda_emulator
            path, cached = cuda_emulator.build(programs)
        build_counts["cached" if cached else "compiled"] += 1
        return path
    prelude = _C.prelude()
    units = []
    for p in programs:
        units.extend(_units(prelude, p.source))
    so, cached = _C.build(units, config.cache_dir, config.cc, config.cflags, _salt(), config.compile_jobs)
    build_counts["cached" if cached else "compiled"] += 1
    if "code" in config.dump:
        print(f"[kiln] generated C: {so[:-3]}.c ({'cached' if cached else 'compiled'})")
    lib = _C.Library(so)
    for p in programs:
        p.load(lib)
    return so


def compile_graph(gm, example_inputs=None, described=None):
    """Compile one ATen graph (after AOT autograd) with kiln; never raises:
    an internal failure warns once and returns an eager runner.
    `described`: the graph's (desc, constants, single, device) when the
    caller has it already."""
    t0 = time.perf_counter()
    try:
        if described is None:
            dev = fx_bridge.graph_device(gm)
            program, constants, single = _prepare(gm, "kn_", dev)
        else:
            desc, constants, single, dev = described
            program = _program(desc, "kn_", dev)
        cg = _finish(program, constants, single, dev, t0)
        cg.fresh = _fresh_outputs(gm)
    except fx_bridge.Unsupported as e:
        cg = EagerGraph(gm, str(e), _count_ops(gm))
    except _C.CompilerError as e:
        if config.debug:
            raise
        _warn_once(f"kiln: C compilation failed, running eagerly: {str(e).splitlines()[0]}")
        cg = EagerGraph(gm, str(e), _count_ops(gm))
    except Exception as e:  # internal error: never crash the user's process
        if config.debug:
            raise
        _warn_once(f"kiln: internal error, running this graph eagerly: {type(e).__name__}: {e}")
        cg = EagerGraph(gm, f"{type(e).__name__}: {e}", _count_ops(gm))
    compiled_graphs.append(cg.kiln_stats)
    return cg


def _fresh_outputs(gm):
    """The output positions of gm that name a tensor node no earlier
    position names (CompiledGraph.fresh); () when there are fewer than two."""
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outs = out if isinstance(out, (tuple, list)) else (out,)
    fresh, seen = [], set()
    for k, n in enumerate(outs):
        if isinstance(n, torch.fx.Node) and n not in seen:
            fresh.append(k)
            seen.add(n)
    return frozenset(fresh) if len(fresh) > 1 else ()


def _finish(program, constants, single, dev, t0):
    so = _build([program], dev)
    stats = dict(program.stats)
    stats["compile_s"] = time.perf_counter() - t0
    cg = CompiledGraph(program, constants, single, stats, so)
    if getattr(_autotune_state, "on", False) and program.cuda and dev.type == "cuda" and program.num_kernels:
        cg.run = _tuning_first_run(cg, dev)
    return cg


_autotune_state = threading.local()


class _autotuning:
    """While compiling in a max-autotune mode: CUDA graphs compiled now tune
    their kernels' launch sizes on their first run."""

    def __enter__(self):
        self.was = getattr(_autotune_state, "on", False)
        _autotune_state.on = True

    def __exit__(self, *exc):
        _autotune_state.on = self.was


def _tuning_first_run(cg, dev):
    def run(*args):
        from . import cuda
        del cg.run   # later calls take the plain path
        try:
            todo = cuda.prepare_tuning(cg.program, dev)
            out = cg.run(*args)
        except Exception as e:
            # tuning must never cost the user a result: codegen's launch
            # sizes, untuned, and the call again (a genuine error raises there)
            cg.program.tune_next_run(0, [])
            for k, (_, _, blocks0, _, _) in enumerate(cg.program.cuda_launch_sizes()):
                cg.program.set_cuda_launch_size(k, blocks0)
            _warn_once(f"kiln: launch-size tuning failed ({type(e).__name__}: {e}); using codegen's launch sizes")
            return cg.run(*args)
        if todo:
            cuda.save_tuning(cg.program, dev, todo)
            cg.kiln_stats["tuned_kernels"] = len(todo)
        return out
    return run


def _aot(gm, example_inputs, fw):
    def bw(g, e):
        # (called when backward first runs) a backward graph that eager's
        # kernels reject runs through them, so they raise eager's error there
        from . import validate
        why = validate.eager_rejects(g, e)
        why = _backward_rejected(g) if why is None else f"eager raises on this backward graph ({why})"
        if why is None:
            return fw(g, e)
        cg = EagerGraph(g, why, _count_ops(g))
        compiled_graphs.append(cg.kiln_stats)
        return cg
    # outputs eager's backward saves keep autograd's version check (_saved.py)
    return _saved.keep_version_checks(
        aot_module_simplified(gm, example_inputs, fw_compiler=fw, bw_compiler=bw,
                              decompositions=decompositions()), gm)


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


def _inference_graph(gm, example_inputs):
    """Graphs with no gradient to compute and only tensor inputs qualify for
    the lowered-graph disk cache."""
    if any(n.op == "get_attr" for n in gm.graph.nodes):
        return False
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        return False
    return not torch.is_grad_enabled() or not any(t.requires_grad for t in example_inputs)


def _lowering_state():
    return (torch.get_default_dtype(), torch._C._is_any_autocast_enabled(),
            torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype("cuda"),
            torch._C._len_torch_function_stack())


def _lowered_key(gm, example_inputs):
    h = hashlib.sha256()
    h.update(_salt().encode())
    # (not the size of the decomposition table: importing torch._inductor
    # adds entries to it, and the key must not depend on what was imported)
    h.update(f"lowering recipe 18 packed {config.packed_linear} emulate {config.cuda_emulate} "
             f"fast {config.fast_lowering} lt {config.lt_epilogues} pyd {config.trace_python_dispatcher}".encode())
    # (the device index too: a lowered graph carries its device in its ops)
    h.update(gm.code.encode())
    # global state the trace reads: factories and scalar promotion use the
    # default dtype, autocast inserts casts, torch-function modes see every op
    h.update(repr(_lowering_state()).encode())
    for t in example_inputs:
        h.update(repr((t.dtype, tuple(t.shape), t.stride(), str(t.device), t.requires_grad)).encode())
    return h.hexdigest()


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


def _storage(v):
    from torch.multiprocessing.reductions import StorageWeakRef
    return StorageWeakRef(v.untyped_storage()) if isinstance(v, torch.Tensor) else None


def _trace_plain(gm, example_inputs):
    """Fast lowering of an inference graph: one make_fx trace with kiln's
    decompositions and no functionalization (about half the time of AOT
    export).  In-place ops on fresh intermediates nobody reads afterwards
    (ReLU(inplace=True), `x += y` on a temporary) become their functional
    forms; anything else that mutates, or outputs that alias inputs or each
    other, raise _NeedsFunctionalization (the caller takes AOT export)."""
    import contextlib
    import operator

    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    # a fake mode of our own, with static shapes (not the one of a
    # TorchDynamo tracing context, which may make sizes symbolic)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    # Without the Python dispatcher (2-3x faster to trace a convolutional
    # network), composite ops pick a device kernel at trace time: on a GPU,
    # batch_norm becomes cudnn_batch_norm, which kiln's table decomposes.
    # KILN_TRACE_PYTHON_DISPATCHER=1 traces as AOT export does instead.
    pyd = enable_python_dispatcher() if config.trace_python_dispatcher else contextlib.nullcontext()
    with mode, pyd:
        aten = make_fx(gm, decomposition_table=decompositions(), tracing_mode="real")(*fake)
    nodes = list(aten.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    for n in nodes:
        tgt = n.target
        if n.op != "call_function" or tgt is operator.getitem:
            continue
        if not isinstance(tgt, torch._ops.OpOverload):
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
    seen = {_storage(p.meta.get("val")) for p in nodes if p.op == "placeholder"} - {None}
    for v in out.args[0]:
        st = _storage(v.meta.get("val")) if isinstance(v, torch.fx.Node) else None
        if st is None:
            continue
        if st in seen:
            raise _NeedsFunctionalization("aliased output")
        seen.add(st)
    aten.graph.eliminate_dead_code()
    aten.recompile()
    return aten


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


# ops whose arguments kiln must hand over as tensors (externs): a constant
# argument of theirs is worth computing once at compile time even when it is
# cheap, since it would otherwise be stored on every call
_EXTERN_USERS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "scaled_dot_product_attention",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"}
# factories whose contents are unspecified: never a constant
_NEVER_FOLD = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_FOLD_BYTES = 1 << 24


def _bytes_of(val):
    """Bytes of storage behind a node's value (fake or real; 0 if unknown)."""
    vals = val if isinstance(val, (tuple, list)) else (val,)
    total = 0
    for v in vals:
        if isinstance(v, torch.Tensor):
            try:
                total += v.untyped_storage().nbytes()
            except Exception:
                total += v.numel() * v.element_size()
    return total


def _extern_user(n):
    tgt = n.target
    if not isinstance(tgt, torch._ops.OpOverload):
        return False
    return tgt.namespace != "aten" or tgt._schema.name.split("::")[-1] in _EXTERN_USERS


def _fold_constants(aten):
    """Compute once, at compile time, the values of an inference graph that
    depend on no input (attention masks built from constants, the rows such
    a mask lets attend), and make them constants of the graph.  Folded: a
    value that an extern takes as an argument, or whose computation has a
    reduction or another op that is not pointwise, a view or a factory; left
    to the kernels: index arithmetic such as positions from arange, which
    kiln computes inline for free.  Random ops, ops with unspecified
    contents (empty) and mutating ops are never folded, nor is a graph
    output (it would alias the constant), nor a value over 16 MiB."""
    import operator

    from torch.utils._pytree import tree_flatten, tree_map

    Node = torch.fx.Node
    value, heavy = {}, {}
    # what an output views is not folded either (the output would be a view
    # of the constant, shared by every call)
    out_node = next(n for n in aten.graph.nodes if n.op == "output")
    viewed = set()
    for o in tree_flatten(out_node.args)[0]:
        viewed |= _storage_bases(o)
    for n in aten.graph.nodes:
        if n.op == "get_attr":
            t = aten
            for part in str(n.target).split("."):
                t = getattr(t, part, None)
            if isinstance(t, torch.Tensor):
                value[n], heavy[n] = t, False
            continue
        if n.op != "call_function":
            continue
        ins = [a for a in tree_flatten((n.args, n.kwargs))[0] if isinstance(a, Node)]
        if any(a not in value for a in ins):
            continue
        tgt = n.target
        if tgt is operator.getitem:
            v = value[n.args[0]]
            if isinstance(v, (tuple, list)) and isinstance(v[n.args[1]], torch.Tensor):
                value[n], heavy[n] = v[n.args[1]], heavy[n.args[0]]
            continue
        if not isinstance(tgt, torch._ops.OpOverload) or tgt._schema.is_mutable or \
                torch.Tag.nondeterministic_seeded in tgt.tags or tgt._schema.name.split("::")[-1] in _NEVER_FOLD:
            continue
        if _bytes_of(n.meta.get("val")) > _FOLD_BYTES:
            continue   # not computed at all: a big temporary is not worth the memory
        try:
            args, kwargs = tree_map(lambda a: value[a] if isinstance(a, Node) else a, (n.args, n.kwargs))
            v = tgt(*args, **kwargs)
        except Exception:
            continue
        if not (isinstance(v, torch.Tensor) or
                (isinstance(v, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in v))):
            continue
        value[n] = v
        cheap = not ins or torch.Tag.pointwise in tgt.tags or _is_view(tgt) or \
            tgt._schema.name.split("::")[-1] in ("lift_fresh_copy", "clone", "_to_copy", "scalar_tensor")
        heavy[n] = not cheap or any(heavy[a] for a in ins)
    folded = 0
    for n, v in list(value.items()):
        if n.op != "call_function" or not isinstance(v, torch.Tensor):
            continue
        outside = [u for u in n.users if u not in value]
        if not outside or any(u.op == "output" for u in n.users) or n in viewed:
            continue
        if not (heavy[n] or any(_extern_user(u) for u in outside)):
            continue
        if v.untyped_storage().nbytes() > _FOLD_BYTES:
            continue
        name = f"_kiln_folded{folded}"
        folded += 1
        aten.register_buffer(name, v, persistent=False)
        with aten.graph.inserting_before(n):
            g = aten.graph.get_attr(name)
        n.replace_all_uses_with(g)
    if folded:
        aten.graph.eliminate_dead_code()
        aten.recompile()
    return aten


def _inputs_share_storage(example_inputs):
    seen = set()
    for t in example_inputs:
        st = _storage(t)
        if st is None:
            continue
        if st in seen:
            return True
        seen.add(st)
    return False


def _lower(gm, example_inputs):
    """The captured graph as an inference ATen graph (a plain trace when it
    is functional enough, else AOT export with functionalization; both with
    kiln's decompositions).  Raises when the graph mutates its inputs or
    returns aliases of them: those keep AOT autograd's runtime wrappers (the
    caller falls back to aot_module_simplified)."""
    from torch._functorch.aot_autograd import aot_export_joint_simple

    if any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in example_inputs):
        from . import ops
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
    aten = _fold_constants(aten)
    if config.lt_epilogues and fx_bridge.graph_device(aten).type == "cuda":
        from . import gemm_epilogues
        gemm_epilogues.apply(aten)
    return aten


def _compile_inference(gm, example_inputs):
    """Compile an inference graph, with its lowering cached on disk: what is
    cached is the description the C core reads (ops by name, shapes, strides,
    arguments), so a warm start skips AOT tracing, fake-tensor propagation
    and describing alike, and a cold and a warm start hand the C core the
    same input (so the warm one finds the cold one's native code).  Raises
    when the graph cannot be lowered this way (see _lower)."""
    key = _lowered_key(gm, example_inputs)
    path = os.path.join(config.cache_dir, "aten", key[:2], key + ".pkl")
    blob = None
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        pass
    if blob:
        t0 = time.perf_counter()
        try:
            pdesc, constants, single, dev = pickle.loads(blob)
            cg = _finish(_program(fx_bridge.relink(pdesc), "kn_", dev), constants, single, dev, t0)
            compiled_graphs.append(cg.kiln_stats)
            return cg
        except Exception:   # a corrupt, truncated or stale entry is rebuilt, never trusted
            pass
    aten = _lower(gm, example_inputs)
    dev = fx_bridge.graph_device(aten)
    try:
        desc, constants, single = _describe(aten, dev)
    except fx_bridge.Unsupported:
        return compile_graph(aten, example_inputs)   # runs eagerly, says why
    _cache_write(path, lambda: pickle.dumps((fx_bridge.portable(desc), constants, single, dev)))
    return compile_graph(aten, example_inputs, described=(desc, constants, single, dev))


def _cache_write(path, make_blob):
    """Write a cache entry atomically (a temporary file renamed into place);
    on any failure (a full disk, an argument pickle cannot write) the entry
    stays unwritten and the temporary file is removed: caching is an
    optimisation, never an error."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        blob = make_blob()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class _Flat:
    """A CompiledGraph called with plain positional arguments."""

    def __init__(self, cg):
        self.cg = cg
        self.kiln_stats = cg.kiln_stats

    def __call__(self, *args):
        cg = self.cg
        return cg.run(*args) if isinstance(cg, CompiledGraph) else cg(*args)


def _devices(example_inputs):
    return {t.device for t in example_inputs if isinstance(t, torch.Tensor)}


import operator as _operator  # noqa: E402

_INPLACE_OPERATORS = {getattr(_operator, k) for k in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
                                                      "iand", "ior", "ixor", "ilshift", "irshift", "imatmul")}
_VIEW_METHODS = {"unfold", "view", "reshape", "transpose", "t", "permute", "select", "narrow", "expand",
                 "expand_as", "view_as", "squeeze", "unsqueeze", "flatten", "unflatten", "diagonal", "as_strided",
                 "movedim", "swapaxes", "swapdims", "unbind", "split", "chunk", "tensor_split", "real", "imag",
                 "__getitem__", "getitem", "contiguous", "detach", "alias", "broadcast_to", "view_as_real",
                 "view_as_complex", "adjoint", "ravel", "moveaxis"}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag", "data"}   # views of their tensor, captured as getattr


def _views_arg(n):
    """Does captured node n return a view of its first argument (a view
    method, or a view attribute such as x.mT)?"""
    name = _target_name(n)
    return name in _VIEW_METHODS or (n.target is getattr and len(n.args) == 2 and n.args[1] in _VIEW_ATTRS)


def _target_name(n):
    t = n.target
    if isinstance(t, str):
        return t
    if isinstance(t, torch._ops.OpOverload):
        return t._schema.name.split("::")[-1]
    return getattr(t, "__name__", "")


def _written_by(n):
    """The nodes captured node n writes into in place (in-place methods and
    operators, setitem, `out=`)."""
    if n.op not in ("call_method", "call_function"):
        return []
    name = _target_name(n)
    out = n.kwargs.get("out")
    if out is not None:
        written = out if isinstance(out, (list, tuple)) else [out]
    elif (name.endswith("_") and not name.startswith("_")) or n.target in _INPLACE_OPERATORS or \
            name in ("setitem", "__setitem__"):
        written = n.args[:1]
    else:
        return []
    return [w for w in written if isinstance(w, torch.fx.Node)]


def _writes_through_unfold(gm):
    """Does the graph write in place through a view made by unfold?  AOT
    autograd's functionalization replays such a write onto the base with
    unfold_backward, which zeroes the elements no window covers and sums
    overlapping windows (PyTorch's FunctionalInverses::unfold_inverse): those
    graphs run as captured (eager kernels write through the view)."""
    return _writes_through(gm, lambda n: _target_name(n) == "unfold")


def _bool_expand(n):
    v = n.meta.get("example_value")
    return _target_name(n) in ("expand", "expand_as") and isinstance(v, torch.Tensor) and v.dtype == torch.bool


def _empty_dtype_view(n):
    """view(dtype) to another element size giving no elements: functionalization
    writes through it with view(dtype) of a fresh contiguous tensor, whose
    strides (a size-0 last dim counts as 1) ATen then refuses."""
    v = n.meta.get("example_value")
    dt = n.args[1] if len(n.args) == 2 else n.kwargs.get("dtype")
    src = n.args[0].meta.get("example_value") if n.args and isinstance(n.args[0], torch.fx.Node) else None
    return _target_name(n) == "view" and isinstance(dt, torch.dtype) and isinstance(v, torch.Tensor) and \
        isinstance(src, torch.Tensor) and v.numel() == 0 and v.element_size() != src.element_size()


def _writes_through(gm, makes_view):
    """Does the graph write in place through a view (or a view of a view)
    of a node for which makes_view is true?"""
    tainted = set()
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function"):
            continue
        name = _target_name(n)
        first = n.args[0] if n.args else None
        from_view = isinstance(first, torch.fx.Node) and first in tainted
        if makes_view(n) or (from_view and _views_arg(n)):
            tainted.add(n)
        elif any(w in tainted for w in _written_by(n)):   # (`t[i] = v` too)
            return True
    return False


# in-place ops whose eager kernels raise when the written tensor shares memory
# with another argument (at::assert_no_overlap); functionalization removes
# the overlap, so such a graph runs as captured
_OVERLAP_CHECKED = {"scatter_", "scatter_add_", "scatter_reduce_", "index_put_", "index_add_", "index_copy_",
                    "index_fill_", "index_reduce_", "masked_scatter_", "masked_fill_", "put_", "index_select",
                    "gather", "take"}


def _root(n):
    while isinstance(n, torch.fx.Node) and n.op in ("call_method", "call_function") and n.args and _views_arg(n):
        n = n.args[0]
    return n


def _writes_overlapping_args(gm):
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or _target_name(n) not in _OVERLAP_CHECKED:
            continue
        out = n.kwargs.get("out")
        written = out if out is not None else (n.args[0] if _target_name(n).endswith("_") and n.args else None)
        if not isinstance(written, torch.fx.Node):
            continue
        r = _root(written)
        others = list(n.args) if out is not None else list(n.args[1:])
        others += [v for k, v in n.kwargs.items() if k != "out"]
        flat = []
        for a in others:
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
        if any(isinstance(a, torch.fx.Node) and _root(a) is r for a in flat):
            return True
    return False


def _overlapping_inputs(gm, example_inputs):
    """The placeholders whose example tensors are internally overlapping
    (several elements at one address: expand, stride 0)."""
    out = set()
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, x in zip(phs, example_inputs):
        if isinstance(x, torch.Tensor) and x.layout == torch.strided and \
                torch._debug_has_internal_overlap(x) == 1:   # what copy_ checks (2, too hard to tell, passes)
            out.add(n)
    return out


def _writes_overlapping_input(gm, example_inputs):
    """Does the graph write in place into (a view of) an internally
    overlapping input?  AOT autograd's functionalization writes the updated
    value back with input.copy_(new), which raises on such an input even
    where eager's write (through a non-overlapping view) is fine; those
    graphs run as captured."""
    inputs = _overlapping_inputs(gm, example_inputs)
    return bool(inputs) and any(_root(w) in inputs for w in _written(gm))


def _writes_overlapping_view(gm):
    """Does the graph write in place into an internally overlapping tensor
    (an expanded view)?  Functionalization's meta kernels raise on it (copy_
    checks its destination) where eager may not (x.copy_(x) returns early)."""
    for w in _written(gm):
        v = w.meta.get("example_value")
        if isinstance(v, torch.Tensor) and v.layout == torch.strided and torch._debug_has_internal_overlap(v) == 1:
            return True
    return False


def _written(gm):
    """The nodes the captured graph writes into in place."""
    for n in gm.graph.nodes:
        yield from _written_by(n)


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


def _writes_inputs(gm):
    """Does the captured graph write in place into (a view of) an input?"""
    return any(_root(w).op == "placeholder" for w in _written(gm))


def _symbolic(gm, example_inputs):
    """Has the graph symbolic sizes (TorchDynamo's dynamic shapes: SymInt
    inputs, or placeholders whose example values have symbolic sizes)?"""
    vals = list(example_inputs) + [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return any(isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and any(
        isinstance(s, torch.SymInt) for s in (*v.shape, *v.stride(), v.storage_offset())) for v in vals)


def _replays_views_of_written_inputs(gm, example_inputs):
    """Does the graph write into an input and return a view of an input,
    where inputs share memory or have symbolic sizes?  AOT autograd makes
    such an output after the call by replaying its views onto the input (or
    the inputs' synthetic base), and that replay is wrong there (torch 2.13:
    a chunk of an offset input loses the offset under dynamic shapes; with
    a synthetic base it raises or returns other elements); those graphs run
    as captured."""
    if not _symbolic(gm, example_inputs):   # (inputs sharing storage: _views_input_of_mutated_shared_storage)
        return False
    if not _writes_inputs(gm):
        return False
    from torch.utils._pytree import tree_flatten
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return any(isinstance(o, torch.fx.Node) and o.op != "placeholder" and _root(o).op == "placeholder"
               for o in tree_flatten(out.args)[0])


def _views_input_as_other_dtype(gm, example_inputs):
    """Does the graph return a view of an input in another dtype
    (`a.view(torch.int32)`) under symbolic sizes?  AOT autograd rebuilds
    that output from the input with as_strided at the view's sizes in the
    input's dtype (torch 2.13: its view replay declines symbolic sizes), and
    raises (setStorage: out of bounds) or shows other elements; those
    graphs run as captured."""
    if not _symbolic(gm, example_inputs):
        return False
    from torch.utils._pytree import tree_flatten
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for o in tree_flatten(out.args)[0]:
        if not isinstance(o, torch.fx.Node) or o.op == "placeholder" or _root(o).op != "placeholder":
            continue
        v, b = o.meta.get("example_value"), _root(o).meta.get("example_value")
        if isinstance(v, torch.Tensor) and isinstance(b, torch.Tensor) and v.dtype != b.dtype:
            return True
    return False


# in-place ops that change a tensor's sizes, strides or offset, not its data
_METADATA_INPLACE = {"squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_",
                     "resize_", "resize_as_", "set_"}


def _writes_input_data_and_metadata(gm):
    """Does the graph change both the data and the sizes/strides (squeeze_,
    t_, ...) of one input?  AOT autograd's epilogue then re-strides the input
    with the functional result's strides and offset (a fresh tensor's, not
    the input's: a sliced input moves to offset 0) before it copies the data
    back, so the data lands in the wrong elements; those graphs run as
    captured."""
    def same_tensor(n):   # in-place ops return their first argument
        while isinstance(n, torch.fx.Node) and n.op in ("call_method", "call_function") and n.args and \
                _target_name(n).endswith("_") and not _target_name(n).startswith("_"):
            n = n.args[0]
        return n

    def base(n):          # through in-place results and views
        m = _root(same_tensor(n))
        return n if m is n else base(m)

    data, meta = set(), set()
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args:
            continue
        name = _target_name(n)
        if name in _METADATA_INPLACE:
            meta.add(same_tensor(n.args[0]))
        else:
            data.update(base(w) for w in _written_by(n))
    return any(isinstance(m, torch.fx.Node) and m.op == "placeholder" and m in data for m in meta)



def _metadata_change_of_a_viewed_grad_tensor(gm):
    """Does the graph change the sizes/strides (t_, transpose_, ...) of a
    tensor that requires grad while another view of its storage is live (or
    it is a view itself)?  AOT autograd's functionalization then traces the
    view's backward with the changed layout and raises "invalid gradient ...
    got [2, 4] but expected shape compatible with [4, 2]" (backend
    "aot_eager" alike): those graphs run as captured."""
    if not torch.is_grad_enabled():
        return False
    views = {}   # storage root -> number of views of it made so far
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args:
            continue
        name = _target_name(n)
        if _views_arg(n):
            r = _root(n.args[0])
            views[r] = views.get(r, 0) + 1
        elif name in _METADATA_INPLACE and isinstance(n.args[0], torch.fx.Node):
            x = n.args[0]
            v = x.meta.get("example_value", x.meta.get("val"))
            if isinstance(v, torch.Tensor) and v.requires_grad and views.get(_root(x), 0) > 0:
                return True
    return False

def _views_input_of_mutated_shared_storage(gm, example_inputs):
    """Does the graph write in place while its inputs share storage, and
    return a view of an input?  A write into one of the inputs that share
    storage makes AOT autograd stand one synthetic base for them all, and it
    then rebuilds an output that views an input from that base wrongly:
    replaying the view ops recorded on the input onto the base (an
    AssertionError about the ViewMeta sequence, or an op raising on the
    wrong shape), or, with view replay off, as_strided at the offset the
    view had in the traced graph's own base (another input's elements).
    Those graphs run as captured.  (Any in-place write counts: one into a
    view the names here do not follow still writes the input.)"""
    if not _inputs_share_storage(example_inputs):
        return False
    nodes = list(gm.graph.nodes)
    if not any(_written_by(n) for n in nodes):
        return False
    placeholders = {n for n in nodes if n.op == "placeholder"}
    # (a node's example value is a fake: it shares the storage of the
    # placeholders' fakes, not of example_inputs)
    inputs = {_storage(p.meta.get("example_value")) for p in placeholders} | \
        {_storage(t) for t in example_inputs}
    inputs.discard(None)
    out = next(n for n in reversed(nodes) if n.op == "output")
    for o in torch.utils._pytree.tree_flatten(out.args)[0]:
        if not isinstance(o, torch.fx.Node):
            continue
        val = o.meta.get("example_value")
        if o in placeholders or _root(o) in placeholders or not isinstance(val, torch.Tensor) or \
                _storage(val) in inputs:   # (no tensor value known: it may view an input)
            return True
    return False


def _may_overlap(t):
    """Whether a tensor's elements may share addresses in a way that
    torch._debug_has_internal_overlap does not report (it answers "too hard"
    for as_strided((2, 2), (1, 1)), say): no dim's stride clears the span of
    the smaller-strided dims before it."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t._has_symbolic_sizes_strides or \
            torch._debug_has_internal_overlap(t) != 2:
        return False
    span = 0
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s > 1):
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def _overlapping_grad_output(gm):
    """Does the graph return a tensor that requires grad and overlaps itself
    without a stride-0 dim (as_strided)?  AOT autograd copies the incoming
    gradient into that output's own layout (coerce_to_expected_memory_format),
    which keeps one of the gradients of each shared element: such graphs run
    as captured (eager autograd sums them)."""
    if not torch.is_grad_enabled():
        return False
    out = next(n for n in gm.graph.nodes if n.op == "output")
    vals = []
    torch.fx.node.map_arg(out.args, lambda n: vals.append(n.meta.get("example_value", n.meta.get("val"))))
    return any(isinstance(v, torch.Tensor) and v.requires_grad and _may_overlap(v) for v in vals)


# Graphs that run as captured (eager kernels, a counted fallback with the
# reason): where AOT autograd or kiln's lowering would be wrong or raise
# where eager does not.  One row per case: (test(gm, example_inputs), reason).
_PRODUCTS = {"matmul", "mm", "mv", "bmm", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmv", "addbmm",
             "baddbmm", "addr", "__matmul__", "__rmatmul__", "linear", "tensordot", "einsum", "chain_matmul",
             "multi_dot", "kron"}


def _mixed_dtype_product(gm):
    """Does a matrix product take tensors of different dtypes?  Eager raises
    on them, except on some empty inputs where its kernel (torch 2.11:
    `matmul` of a (0, 1) float64 by a float32 vector) returns a dtype that
    the meta function, which kiln's trace follows, does not (fuzzer
    tensor:970018, 974780, 993673): eager's own kernels decide."""
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method") or _target_name(n) not in _PRODUCTS:
            continue
        vals = []
        torch.fx.node.map_aggregate((n.args, n.kwargs), lambda a: vals.append(a.meta.get("example_value"))
                                    if isinstance(a, torch.fx.Node) else None)
        dts = {v.dtype for v in vals if isinstance(v, torch.Tensor)}
        if len(dts) > 1:
            return True
    return False


# in-place ops without a derivative: eager lets them write a leaf that requires grad
_NO_DERIVATIVE_INPLACE = {"logical_not_", "logical_and_", "logical_or_", "logical_xor_", "eq_", "ne_", "lt_", "le_",
                          "gt_", "ge_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_"}


def _writes_grad_input_without_grad(gm, example_inputs):
    """Does the graph, run with grad enabled, write into an input that
    requires grad under no_grad (`with torch.no_grad(): w.add_(1)`) or by
    an op without a derivative (`w.logical_not_()`)?  AOT autograd (without
    keeping input mutations in the graph) returns the written value as an
    output and passes its tangent back as the input's gradient: a zero
    gradient where eager leaves it None (fuzzer tensor:1007300)."""
    if not torch.is_grad_enabled():
        return False
    grad_inputs = {p for p, v in zip((n for n in gm.graph.nodes if n.op == "placeholder"), example_inputs)
                   if isinstance(v, torch.Tensor) and v.requires_grad}
    if not grad_inputs:
        return False
    enabled = True
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in (torch._C._set_grad_enabled, torch.set_grad_enabled) and n.args:
            enabled = bool(n.args[0])
            continue
        if enabled and _target_name(n) not in _NO_DERIVATIVE_INPLACE:
            continue
        if any(_root(w) in grad_inputs for w in _written_by(n)):
            return True
    return False


_RUN_AS_CAPTURED = (
    (_writes_grad_input_without_grad,
     "an input that requires grad written under no_grad or by an op without a derivative (AOT autograd would give "
     "it a zero gradient where eager gives none)"),
    (lambda gm, ex: _mixed_dtype_product(gm),
     "a matrix product of tensors of different dtypes (eager's kernel decides the result's dtype on empty inputs)"),
    (lambda gm, ex: _writes_input_data_and_metadata(gm),
     "an input whose data and sizes/strides are both changed in place (AOT autograd's write-back "
     "re-strides it with a fresh tensor's layout)"),
    (_views_input_of_mutated_shared_storage,
     "an output viewing an input while inputs that share storage are written (AOT autograd rebuilds it wrongly)"),
    (_replays_views_of_written_inputs,
     "an output viewing an input the graph writes into, with symbolic sizes (AOT autograd's replay of the view "
     "is wrong there)"),
    (_views_input_as_other_dtype,
     "an output viewing an input as another dtype, with symbolic sizes (AOT autograd rebuilds it with the "
     "input's dtype)"),
    (lambda gm, ex: _overlapping_grad_output(gm),
     "an output that requires grad overlaps itself (AOT autograd would drop gradients)"),
    (_writes_overlapping_input,
     "an in-place write into an internally overlapping (expanded) input (AOT autograd's write-back raises)"),
    (lambda gm, ex: _writes_overlapping_view(gm),
     "an in-place write into an internally overlapping (expanded) view (functionalization raises)"),
    (lambda gm, ex: _metadata_change_of_a_viewed_grad_tensor(gm),
     "a tensor that requires grad changes its sizes/strides in place while a view of it is live (AOT autograd "
     "raises tracing the backward)"),
    (lambda gm, ex: _writes_through_unfold(gm),
     "an in-place write through an unfold view (AOT autograd would replay it wrongly)"),
    (lambda gm, ex: _writes_through(gm, _bool_expand),
     "an in-place write through an expand view of a bool tensor (AOT autograd's replay subtracts bools)"),
    (lambda gm, ex: _writes_through(gm, _empty_dtype_view),
     "an in-place write through an empty view(dtype) to another element size (functionalization raises)"),
    (lambda gm, ex: _writes_overlapping_args(gm),
     "an in-place op whose output overlaps another argument (eager checks and raises)"),
)


def _eager_only(gm, example_inputs=()):
    """Why the captured graph must run as it is (eager kernels), or None."""
    for test, reason in _RUN_AS_CAPTURED:
        if test(gm, example_inputs):
            return reason
    return None


# ops whose eager kernels check their indices (or dtypes) and raise: one whose
# result nobody uses must still run (lowering would eliminate it as dead code)
_INDEX_CHECKED = {"index_put", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
                  "scatter_reduce_", "gather", "index_select", "take", "take_along_dim", "index_add", "index_add_",
                  "index_copy", "index_copy_", "index_fill", "index_fill_", "put", "put_", "embedding",
                  "index_reduce", "index_reduce_", "getitem", "__getitem__",
                  # and ops that raise on a dtype (bitwise ops on floats)
                  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                  "bitwise_right_shift", "__and__", "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__",
                  "__rand__", "__ror__", "__rxor__", "and_", "or_", "xor", "invert", "lshift", "rshift"}


# integer division raises on a zero divisor: checked like an index
_DIVISION_CHECKED = {"floor_divide", "floor_divide_", "remainder", "remainder_", "fmod", "fmod_", "floordiv",
                     "mod", "ifloordiv", "imod", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
                     "__ifloordiv__", "__imod__", "div", "div_", "true_divide"}
# consumers that read an argument's sizes or dtype, never its values (the
# argument positions that are read so)
_METADATA_ONLY = {"new_zeros": (0,), "new_ones": (0,), "new_empty": (0,), "new_full": (0,), "new_empty_strided": (0,),
                  "new_tensor": (0,), "zeros_like": (0,), "ones_like": (0,), "empty_like": (0,), "full_like": (0,),
                  "rand_like": (0,), "randn_like": (0,), "randint_like": (0,), "size": (0,), "dim": (0,),
                  "numel": (0,), "nelement": (0,), "ndimension": (0,), "stride": (0,), "storage_offset": (0,),
                  "is_contiguous": (0,), "element_size": (0,), "expand_as": (1,), "view_as": (1,),
                  "reshape_as": (1,), "type_as": (1,)}
_METADATA_ATTRS = {"shape", "dtype", "device", "ndim", "layout", "is_cuda", "requires_grad", "is_leaf"}
# views that show part of their argument: a check read only through them sees only that part
_PARTIAL_VIEWS = {"select", "narrow", "__getitem__", "getitem", "diagonal", "as_strided", "unfold", "split", "chunk",
                  "tensor_split", "unbind", "split_with_sizes"}


def _checks_values(n):
    """Does node n check the values it reads (an index, a divisor) and raise?"""
    import operator

    name = _target_name(n)
    if name in _DIVISION_CHECKED:
        if name in ("div", "div_", "true_divide") and n.kwargs.get("rounding_mode") is None:
            return False   # true division never raises
        v = n.meta.get("example_value")
        return isinstance(v, torch.Tensor) and not (v.dtype.is_floating_point or v.dtype.is_complex)
    if name not in _INDEX_CHECKED:
        return False
    if n.target in (operator.getitem, "__getitem__"):
        idx = n.args[1] if len(n.args) > 1 else None
        idx = idx if isinstance(idx, (tuple, list)) else (idx,)
        return any(isinstance(a, torch.fx.Node) for a in idx)   # basic indexing checks nothing at run time
    return True


def _reads_values(user, n):
    """Does user read node n's values (not only its sizes or dtype)?"""
    name = _target_name(user)
    if user.op in ("call_function", "call_method") and name == "getattr" and len(user.args) > 1:
        return user.args[1] not in _METADATA_ATTRS
    meta = _METADATA_ONLY.get(name) if user.op in ("call_function", "call_method") else None
    if meta is None:
        return True
    flat = [a for i, a in enumerate(user.args) if i not in meta]
    flat += list(user.kwargs.values())
    while flat:
        a = flat.pop()
        if a is n:
            return True
        if isinstance(a, (tuple, list)):
            flat.extend(a)
        elif isinstance(a, dict):
            flat.extend(a.values())
    return False


def _dead_index_checks(gm):
    """The captured graph's nodes that check values (index ops, integer
    division) whose checks lowering would drop or narrow: results that reach
    no output through a read of their values (unused, used only by dead code
    or by `new_zeros`/`*_like`/`.shape`), or reach it only through views that
    show part of them (`x[:1]` checks only what it shows); and the targets
    of `t[i] = v` with a tensor key on a tensor no live node reads after the
    write (`y = t @ w; t[i] = v`: the write is dead though t is live).  Returned as
    the nodes to add as outputs, as two lists: the checking nodes (their
    values as computed) and the write targets (their values after the
    write: the write's own check; a target may be in both, or also
    overwritten, `v = a % b; v[i] = 0`).  An extra output that was live
    after all (a mutated input) only costs its store."""
    import operator

    live, stack = set(), [n for n in gm.graph.nodes if n.op == "output"]
    while stack:
        n = stack.pop()
        if n not in live:
            live.add(n)
            stack.extend(a for a in n.all_input_nodes if _reads_values(n, a))

    whole = {}

    def read_whole(n):
        """Does some live read of n see all of its elements?  A user that
        is not a partial view or an index into n sees all of n only if its
        own result is seen whole: lowering computes a pointwise op (a cast)
        only where its result is read (`x[:, i].double()[:, j]` computes
        x[:, i] only at j; fuzzer tensor:1008536)."""
        if n not in whole:
            whole[n] = False
            whole[n] = any(u in live and _reads_values(u, n) and (
                u.op == "output" or _target_name(u) not in _PARTIAL_VIEWS and read_whole(u) and
                not (_target_name(u) in _INDEX_CHECKED and u.args and u.args[0] is n))
                for u in n.users)
        return whole[n]

    def tensor_key(idx):
        idx = idx if isinstance(idx, (tuple, list)) else (idx,)
        return any(isinstance(a, torch.fx.Node) for a in idx)

    order = {n: i for i, n in enumerate(gm.graph.nodes)}

    def read_after(tgt, n):
        """Does a live node read tgt's values after n (graph order)?"""
        return any(u in live and order[u] > order[n] and _reads_values(u, tgt) for u in tgt.users)

    dead, writes = [], []
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function"):
            continue
        if n.target in (operator.setitem, "__setitem__"):
            tgt = n.args[0] if n.args else None
            if isinstance(tgt, torch.fx.Node) and not read_after(tgt, n) and tgt not in writes and len(n.args) > 1 \
                    and tensor_key(n.args[1]):
                writes.append(tgt)
            continue
        if n in dead or not _checks_values(n) or (n in live and read_whole(n)):
            continue
        dead.append(n)
    return dead, writes


# in-place ops that overwrite what they write without reading it: a checked
# value they overwrite is dead once functionalized (`v = a % b; v.zero_()`)
_OVERWRITES = {"zero_", "fill_", "copy_", "normal_", "uniform_", "random_", "exponential_", "geometric_",
               "log_normal_", "cauchy_", "bernoulli_", "setitem", "__setitem__"}


def _overwritten_checks(gm):
    """The captured graph's value-checking nodes (index ops, integer
    division) that an in-place op overwrites, directly or through a view,
    without reading them (`_OVERWRITES`, `out=`): functionalized, their
    values are dead however the graph reads them afterwards.  Each is kept
    as a copy taken before the write (`_keep_index_checks`)."""
    found = []
    for m in gm.graph.nodes:
        if m.op not in ("call_method", "call_function"):
            continue
        if _target_name(m) not in _OVERWRITES and m.kwargs.get("out") is None:
            continue
        for w in _written_by(m):
            while not _checks_values(w) and w.op in ("call_method", "call_function") and w.args and \
                    isinstance(w.args[0], torch.fx.Node) and _target_name(w) in _VIEW_METHODS:
                w = w.args[0]
            if _checks_values(w) and w not in found:
                found.append(w)
    return found


def _views_input(n, v):
    """Is node n's value v a view of an input?  Its ops lead back to a
    placeholder through view methods, and (where the placeholder's example
    value is known) it shares that value's storage: `a[:, i]` with a tensor
    index is a getitem that copies."""
    root = _root(n)
    if root.op != "placeholder":
        return False
    rv = root.meta.get("example_value", root.meta.get("val"))
    return not isinstance(rv, torch.Tensor) or _storage(rv) == _storage(v)


def _keep_index_checks(gm):
    """A copy of gm that also returns its dead index-checking results (so
    their bounds checks run), and how many outputs were added.  Those that
    require grad are returned detached: else AOT autograd would run their
    backward too, with zero gradients that still give NaN where the local
    derivative is inf or NaN (0 * inf)."""
    overwritten = _overwritten_checks(gm)
    checks, writes = _dead_index_checks(gm)
    dead = [n for n in checks if n not in overwritten]
    dead += [t for t in writes if t not in dead]   # a target's value after its write: the write's check
    if not dead and not overwritten:
        return gm, 0, False
    graph = copy.deepcopy(gm.graph)
    env = dict(zip(gm.graph.nodes, graph.nodes))
    out = next(n for n in graph.nodes if n.op == "output")
    orig = out.args[0]
    tupled = isinstance(orig, (tuple, list))
    extra = [_snapshot(graph, env[n]) for n in overwritten]
    for n in dead:
        v = n.meta.get("example_value", n.meta.get("val"))
        name = _target_name(n)
        aliases = (name.endswith("_") and not name.startswith("_")) or name in _VIEW_METHODS
        if isinstance(v, torch.Tensor) and (v.requires_grad or aliases) and not _views_input(n, v):
            # detached (no backward for it) and, where n's value is an alias
            # of an intermediate (an in-place op's result, a view), a copy:
            # AOT autograd regenerates an aliasing output from its base, which
            # fails on an empty view (`v = x[:, 2:]; v.scatter_add_(...)`
            # with size 0; fuzzer tensor:1300218)
            with graph.inserting_before(out):
                d = graph.call_method("detach", (env[n],))
                extra.append(graph.call_method("clone", (d,)) if aliases else d)
        else:   # (a detached input would be an alias of it, for AOT autograd to replay)
            extra.append(env[n])
    out.args = ((tuple(orig) if tupled else (orig,)) + tuple(extra),)
    return torch.fx.GraphModule(gm, graph), len(extra), not tupled


def _snapshot(graph, n):
    """A detached copy of node n's value taken right after n (before any
    in-place write into it)."""
    v = n.meta.get("example_value")
    with graph.inserting_after(n):
        d = graph.call_method("detach", (n,))
    with graph.inserting_after(d):
        c = graph.call_method("clone", (d,))
    if isinstance(v, torch.Tensor):
        d.meta["example_value"] = v.detach()
        c.meta["example_value"] = v.detach().clone()
    return c


_EXPANDS = {"expand", "expand_as", "broadcast_to"}


def _same_shape_expand(n):
    """Is captured node n an expand to its input's own shape (`x.expand_as(x)`,
    `x.expand(*x.shape)`, `x.broadcast_to(x.shape)`, `torch.broadcast_to`:
    the input's and the result's example shapes are equal and static)?"""
    if n.op not in ("call_method", "call_function") or _target_name(n) not in _EXPANDS or not n.args \
            or not isinstance(n.args[0], torch.fx.Node):
        return False
    x = n.args[0]
    if n.op == "call_method" and n.target == "expand_as" and len(n.args) == 2 and n.args[1] is x and not n.kwargs:
        return True
    v, r = x.meta.get("example_value"), n.meta.get("example_value")
    return isinstance(v, torch.Tensor) and isinstance(r, torch.Tensor) and \
        all(type(d) is int for d in (*v.shape, *r.shape)) and tuple(v.shape) == tuple(r.shape)


def _exact_expands(gm):
    """gm with each expand to its input's own shape made a view of that
    shape.  Both read alike, but functionalization writes an in-place op on
    an expand back as `base + (written - base)` (PyTorch's expand inverse),
    NaN or inf wherever base holds NaN or inf (`x.expand_as(x).fill_(3)`
    left x's NaN; fuzzer seeds tensor:971452, 998037 through broadcast_to);
    a view's inverse is exact."""
    hits = [n for n in gm.graph.nodes if _same_shape_expand(n)]
    if not hits:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for n in gm.graph.nodes:
        if _same_shape_expand(n):
            x = n.args[0]
            n.op, n.target, n.args, n.kwargs = "call_method", "view_as", (x, x), {}
    gm.recompile()
    return gm


def kiln(gm, example_inputs):
    """torch.compile backend: `torch.compile(model, backend="kiln")`."""
    gm = _exact_expands(gm)
    g, extra, untuple = _keep_index_checks(gm)
    fn = _kiln(g, example_inputs)
    if fn == g.forward:
        # the graph runs as captured: its in-place writes happen as it runs,
        # so a replay after an error would write twice (and the kept index
        # checks are eager's own: the captured graph runs them)
        return gm.forward
    if not extra:
        return _EagerOnError(fn, gm)

    def checked(*args):
        out = fn(*args)
        return out[0] if untuple else type(out)(out[:-extra]) if isinstance(out, tuple) else out[:-extra]
    checked._kiln_pure = getattr(fn, "_kiln_pure", False)
    checked.kiln_stats = getattr(fn, "kiln_stats", None)
    return _EagerOnError(checked, gm)


class _EagerOnError:
    """A compiled graph that raised (an index or zero-division check, an
    ATen extern) has written none of its inputs: AOT autograd writes mutated
    inputs back after the compiled forward returns.  So the captured graph
    runs again as it is, and eager's kernels raise eager's exception after
    eager's writes (the in-place ops before the failing one, and what the
    failing one wrote before it raised).  A GPU kernel's deferred error
    (`_kiln_no_replay`) belongs to an earlier call: it is raised as is."""

    def __init__(self, fn, gm):
        self.fn = fn
        self.gm = gm
        self._kiln_pure = getattr(fn, "_kiln_pure", False)
        self.kiln_stats = getattr(fn, "kiln_stats", None)

    def __call__(self, *args):
        try:
            return self.fn(*args)
        except Exception as e:
            if getattr(e, "_kiln_no_replay", False):
                raise
            err = e
        out = self.gm(*args)   # raises eager's exception
        msg = f"kiln: a compiled graph raised {type(err).__name__}: {err} where eager does not"
        if config.debug:
            raise RuntimeError(msg) from err
        _warn_once(msg + " (eager's result is used)")
        return out


def _eager_rejects(gm, example_inputs):
    """The error eager's kernels raise on every call of gm (kiln.validate),
    or None.  A graph whose lowering is in the disk cache passed already."""
    if _inference_graph(gm, example_inputs):
        key = _lowered_key(_tupled(gm)[0], example_inputs)
        if os.path.exists(os.path.join(config.cache_dir, "aten", key[:2], key + ".pkl")):
            return None
    from . import validate
    why = validate.eager_rejects(gm, example_inputs)
    return None if why is None else f"eager raises on this graph's dtypes or sizes ({why})"


def _kiln(gm, example_inputs):
    dev = _non_cpu(example_inputs)
    reason = _eager_only(gm, example_inputs)
    if reason is None:
        reason = _eager_rejects(gm, example_inputs)
    if reason is not None:
        _warn_once(f"kiln: {reason}; the graph runs through ATen")
        compiled_graphs.append({"aten_ops": _count_ops(gm), "kernels": 0, "externs": 0, "fallbacks": 1,
                                "extern_ops": [], "reason": reason})
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
        _warn_once(f"kiln: {reason}; graphs on {dev} run through ATen")
        compiled_graphs.append({"aten_ops": _count_ops(gm), "kernels": 0, "externs": 0, "fallbacks": 1,
                                "extern_ops": [], "reason": reason})
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
            except _TensorifyRestart:
                raise
            except Exception as e:
                # an untraceable graph takes AOT autograd's full path too (which
                # reports it); under debug a kiln bug must surface here
                if config.debug and not _data_dependent(e):
                    raise
                fn = None
        pure = fn is not None   # no input mutation, no aliased outputs (aot_export_joint_simple checked)
        if fn is None:
            try:
                fn = _aot(g, example_inputs, compile_graph)
            except RuntimeError as e:
                reason = _backward_only_error(e)
                if reason is None:
                    raise
                compiled_graphs.append({"aten_ops": _count_ops(gm), "kernels": 0, "externs": 0, "fallbacks": 1,
                                        "extern_ops": [], "reason": reason})
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
        compiled_graphs.append({"aten_ops": _count_ops(gm), "kernels": 0, "externs": 0, "fallbacks": 1,
                                "extern_ops": [], "reason": reason})
        return gm.forward
    except Exception as e:
        if config.debug and not _data_dependent(e) and not _aot_assertion(e):
            raise
        _warn_once(f"kiln: could not lower this graph to ATen, running it eagerly: {type(e).__name__}: {e}")
        compiled_graphs.append({"aten_ops": 0, "kernels": 0, "externs": 0, "fallbacks": 1, "extern_ops": [],
                                "reason": f"{type(e).__name__}: {e}"})
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
    if dev is None or dev.type != "cuda" or not getattr(fn, "_kiln_pure", False):
        # not on a GPU, run through ATen, or a graph that mutates its inputs
        # or returns views of them (AOT autograd's wrappers handle those
        # outside any graph): no CUDA graph
        return fn
    return CudaGraphed(fn, dev)


class CudaGraphed:
    """A compiled graph replayed as a CUDA graph, as torch.compile's
    reduce-overhead mode does.

    The first call runs normally; the second records which inputs kept their
    address (parameters, buffers: read in place by the graph) and which moved
    (activations: copied into static buffers before each replay), then
    captures.  A replay whose in-place input has moved runs without the graph.
    Outputs are copied out of the graph's memory, so a result stays valid
    after the next call."""

    def __init__(self, fn, device):
        self.fn = fn
        self.device = device
        self.kiln_stats = getattr(fn, "kiln_stats", None)
        self.graph = None
        self.failed = False
        self.calls = 0
        self.first_ptrs = None

    @staticmethod
    def _ptrs(args):
        return [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]

    def _signature(self, args):
        """Sizes and strides of the inputs copied into static buffers (the only
        graphs wrapped take tensors only, and their in-place inputs keep their
        address; sizes are guarded by capture, this checks again cheaply)."""
        return [(args[i].shape, args[i].stride()) for i in self.copied]

    def __call__(self, *args):
        if self.graph is not None:
            return self._replay(args)
        self.calls += 1
        if self.failed or torch.is_grad_enabled() and any(getattr(a, "requires_grad", False) for a in args):
            return self.fn(*args)
        if self.calls == 1:
            self.first_ptrs = self._ptrs(args)
            return self.fn(*args)
        try:
            return self._capture(args)
        except Exception as e:  # capture is an optimisation: never fail the user's call
            if config.debug:
                raise
            _warn_once(f"kiln: CUDA graph capture failed, running without it: {type(e).__name__}: {e}")
            self.failed = True
            self.graph = None
            return self.fn(*args)

    def _capture(self, args):
        ptrs = self._ptrs(args)
        self.copied = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and ptrs[i] != self.first_ptrs[i]]
        self.signature = self._signature(args)
        self.static = list(args)
        for i in self.copied:   # same sizes and strides as the argument: the program was compiled for them
            a = args[i]
            self.static[i] = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
            self.static[i].copy_(a)
        self.inplace = [(i, ptrs[i]) for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in self.copied]
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.fn(*self.static)   # warm-up on the side stream, as CUDA graph capture wants
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.outputs = self.fn(*self.static)
        self.graph = graph
        return self._replay(args)

    def _replay(self, args):
        for i, p in self.inplace:
            if args[i].data_ptr() != p:
                return self.fn(*args)
        if self._signature(args) != self.signature:
            return self.fn(*args)
        for i in self.copied:
            self.static[i].copy_(args[i])
        self.graph.replay()
        out = self.outputs
        if isinstance(out, torch.Tensor):
            return out.clone()
        return type(out)(o.clone() if isinstance(o, torch.Tensor) else o for o in out)


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
    return None


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


def _data_dependent(e):
    """An op whose output shape depends on tensor values (nonzero, boolean
    masks) cannot be traced to a static graph: a legitimate eager fallback."""
    return "DynamicOutputShape" in type(e).__name__ or "DynamicOutputShape" in str(e) or \
        "data-dependent" in str(e).lower()


class _Deferred:
    """Placeholder returned to AOT autograd by compile_many until the shared
    object holding every graph is built."""

    def __init__(self, gm):
        self.gm = gm
        self.target = None
        self.kiln_stats = None

    def __call__(self, *args):
        t = self.target
        return t.run(*args) if isinstance(t, CompiledGraph) else t(*args)


def compile_many(items):
    """Compile many (gm, example_inputs) with one C compiler run.  Returns a
    callable per item (each with .kiln_stats); an item that fails runs
    eagerly."""
    results, deferred = [], []
    for gm, ex in items:
        mine = []

        def fw(g, e, mine=mine):
            d = _Deferred(g)
            mine.append(d)
            deferred.append(d)
            return d

        try:
            g, unwrap = _tupled(gm)
            f = _aot(g, list(ex), fw)
            if unwrap:
                f = _Unwrap(f)
        except Exception as e:
            f = EagerGraph(gm, f"{type(e).__name__}: {e}", _count_ops(gm))
            mine = []
        results.append((f, mine))
    by_device = {}
    for i, d in enumerate(deferred):
        try:
            dev = fx_bridge.graph_device(d.gm)
            prog, consts, single = _prepare(d.gm, f"g{i}_", dev)
            by_device.setdefault(dev, []).append((d, prog, consts, single))
        except Exception as e:
            d.target = EagerGraph(d.gm, f"{type(e).__name__}: {e}", _count_ops(d.gm))
            d.kiln_stats = d.target.kiln_stats
    for dev, owners in by_device.items():
        _build_owned(owners, dev)
    return _gather(results)


def _build_owned(owners, dev):
    try:
        so = _build([o[1] for o in owners], dev)
        for d, prog, consts, single in owners:
            d.target = CompiledGraph(prog, consts, single, dict(prog.stats), so)
            d.kiln_stats = d.target.kiln_stats
    except Exception:
        # one bad unit must not take the others down: build each alone
        for d, prog, consts, single in owners:
            try:
                so = _build([prog], dev)
                d.target = CompiledGraph(prog, consts, single, dict(prog.stats), so)
            except Exception as e:
                d.target = EagerGraph(d.gm, f"{type(e).__name__}: {e}", _count_ops(d.gm))
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


class _Unwrap:
    def __init__(self, f):
        self.f = f

    def __call__(self, *args):
        return self.f(*args)[0]


class _StatsCallable:
    def __init__(self, f, stats):
        self.f = f
        self.kiln_stats = stats

    def __call__(self, *args):
        return self.f(*args)


def lowered_ops():
    return sorted(_C.lowered_ops())
