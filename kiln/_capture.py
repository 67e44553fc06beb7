"""Python side of kiln's capture (the C core is src/capture/).

Why Python here: torch.fx graphs, FakeTensorMode and backends are Python
objects, so making a graph, finishing it into a GraphModule and calling the
backend go through these few functions.  The hook, guards, recording and the
replay of a captured frame are C.  What the C core reports comes back here
too: graph breaks (`note_break`), recompiles (`recompiled`) and each new
recording's guards (`dump_guards`), counted and logged (kiln/logs.py).
"""
import collections
import functools
import linecache
import operator
import os
import sys
import sysconfig
import types
import warnings

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from . import _C, counters, fakes, logs, ops

# ---------------------------------------------------------------- names the C core uses
Tensor = torch.Tensor
Parameter = torch.nn.Parameter
Module = torch.nn.Module
ModuleList = torch.nn.ModuleList
ModuleDict = torch.nn.ModuleDict
Sequential = torch.nn.Sequential
getitem = operator.getitem
set_grad_enabled = torch._C._set_grad_enabled
is_grad_enabled = torch.is_grad_enabled
no_grad = torch.no_grad
enable_grad = torch.enable_grad
set_grad_enabled_cls = torch.set_grad_enabled
# nn.Module's enumerations kiln walks at record time (record_value.c,
# kn_module_members): the order is the code's `which`
module_members = tuple(getattr(torch.nn.Module, n) for n in (
    "modules", "named_modules", "children", "named_children",
    "parameters", "named_parameters", "buffers", "named_buffers"))
autocast = torch.amp.autocast
from torch.amp.autocast_mode import _enter_autocast as enter_autocast, _exit_autocast as exit_autocast
from contextlib import nullcontext
Size = torch.Size
dtype = torch.dtype
device = torch.device


from .trace import DATA_DEPENDENT as DataDependent  # noqa: E402  (one classification: kiln.trace.data_dependent)


def _global_hook_dicts():
    m = torch.nn.modules.module
    names = ["_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_hooks",
             "_global_backward_pre_hooks", "_global_forward_hooks_always_called",
             "_global_forward_hooks_with_kwargs"]
    return tuple(getattr(m, n) for n in names if isinstance(getattr(m, n, None), dict))


global_hook_dicts = _global_hook_dicts()

def regen_view(anchor, out, info):
    """A graph output that views an input or another graph tensor, rebuilt
    from that anchor so that it shares its memory as in eager (a backend may
    return views as fresh tensors).  ``out`` (the graph's own output) is the
    answer when the anchor's geometry is not the one recorded."""
    v = _regen_view(anchor, out, info)
    if info[6] is not None and v._is_view() and _get_creation_meta(v) != info[6]:
        # a view of unbind's or split's (or one made with grad off) that
        # eager refuses to write in place: the rebuilt view refuses it too
        _set_creation_meta(v, info[6])
    return v


def view_creation(fake):
    """How autograd made the view `fake` (torch._C._autograd.CreationMeta),
    or None for the default (a plain view, written in place freely)."""
    if not fake._is_view():
        return None
    m = _get_creation_meta(fake)
    return None if m == _DEFAULT_CREATION else m


_get_creation_meta = torch._C._autograd._get_creation_meta
_set_creation_meta = torch._C._autograd._set_creation_meta
_DEFAULT_CREATION = torch._C._autograd.CreationMeta.DEFAULT


def _regen_view(anchor, out, info):
    size, stride, rel, asize, astride, grad, _ = info
    if anchor.shape != asize or anchor.stride() != astride:
        return out
    off = anchor.storage_offset() + rel
    if off < 0:
        return out
    if out._base is not None and (out._base is anchor or out._base is anchor._base) and \
            out.storage_offset() == off and out.stride() == stride and out.shape == size and \
            out.requires_grad == (grad and anchor.requires_grad):
        # already that view (AOT autograd's wrappers replay the view ops on
        # the input): keep its backward; as_strided's would be wrong for an
        # anchor that overlaps itself (an expanded input: its grad averaged)
        return out
    if grad and anchor.requires_grad and out.grad_fn is not None and torch._debug_has_internal_overlap(anchor) != 0:
        # an anchor that overlaps itself (an expanded input): as_strided's
        # backward averages the gradients of the elements sharing an address
        # where eager's view ops (split/unbind, whose outputs AOT autograd
        # returns as fresh tensors) send each to its own element.  The view
        # shares the anchor's memory; its gradient is the backend's.
        with torch.enable_grad():
            return _ViewWithGrad.apply(out, anchor.detach().as_strided(size, stride, off))
    if grad == torch.is_grad_enabled():
        return anchor.as_strided(size, stride, off)
    with torch.set_grad_enabled(grad):
        return anchor.as_strided(size, stride, off)


class _ViewWithGrad(torch.autograd.Function):
    """view (memory, values) with the gradient of src (the same values)."""

    @staticmethod
    def forward(ctx, src, view):
        return view

    @staticmethod
    def backward(ctx, g):
        return g, None


class _FunctionCtx:
    """The ctx a torch.autograd.Function's forward gets when kiln inlines it
    without autograd (grad off, or no input needs it): what forward may call
    on it, recorded like any object (the backward is never needed)."""

    def __init__(self, args):
        self.needs_input_grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        self.saved_tensors = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        pass

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        self.materialize_grads = value


def function_apply(cls, *args, **kwargs):
    """Fn.apply(*args) where no gradient is needed, as the recorder inlines
    it (kiln._calls class 11): Fn.forward with a stand-in ctx."""
    ctx = _FunctionCtx(args)
    if cls.setup_context is torch.autograd.function._SingleLevelFunction.setup_context:
        return cls.forward(ctx, *args, **kwargs)
    out = cls.forward(*args, **kwargs)
    cls.setup_context(ctx, args, out)
    return out


_IMPURE_OPS = {"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF", "LOAD_DEREF", "LOAD_CLOSURE",
               "LOAD_CLASSDEREF", "COPY_FREE_VARS", "MAKE_CELL"}


def function_apply_whole(cls):
    """The graph node's callable for Fn.apply with autograd on (its forward
    and backward run by autograd, traced whole by AOT autograd), or None
    unless Fn's own methods read nothing but their arguments, the ctx,
    modules, classes and builtins: they also run on fakes while recording
    (and while AOT traces), which a global or closure they change, a print or
    Python's random would show."""
    import builtins
    import random

    for name in ("forward", "backward", "setup_context", "jvp", "vmap"):
        fn = getattr(cls, name, None)
        if not isinstance(fn, types.FunctionType) or fn.__module__.startswith("torch.autograd"):
            continue   # torch's own (setup_context's default, jvp's raising one)
        for ins in _instructions(fn.__code__):
            if ins.opname in _IMPURE_OPS:
                return None
            if ins.opname == "LOAD_GLOBAL":
                v = fn.__globals__.get(ins.argval, getattr(builtins, ins.argval, None))
                if v is print or v is random or not (isinstance(v, (types.ModuleType, type)) or
                                                     isinstance(v, types.BuiltinFunctionType) and
                                                     getattr(v, "__module__", None) == "builtins"):
                    return None
    return _autograd_apply


def _instructions(code):
    import dis

    yield from dis.get_instructions(code)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _instructions(c)


def _autograd_apply(cls, *args):
    return cls.apply(*args)



def constructor_fakes(obj, depth=3):
    """The fake tensors an object built at record time holds, with their
    paths from it: [(path, fake)], a path a tuple of ("attr", name) and
    ("item", index or str key) steps through instance dicts, lists, tuples
    and plain dicts (modules, types and functions are not entered)."""
    found = []
    seen = set()

    def walk(o, path, d):
        if isinstance(o, FakeTensor):
            found.append((tuple(path), o))
            return
        if d == 0 or id(o) in seen or isinstance(o, (type, types.ModuleType, types.FunctionType, str, bytes)):
            return
        seen.add(id(o))
        if isinstance(o, (list, tuple)):
            for i, x in enumerate(o):
                walk(x, path + [("item", i)], d - 1)
        elif type(o) is dict:
            for k, x in o.items():
                if type(k) in (str, int):
                    walk(x, path + [("item", k)], d - 1)
        elif not isinstance(o, torch.nn.Module):
            od = getattr(o, "__dict__", None)
            if type(od) is dict:
                for k, x in list(od.items()):
                    walk(x, path + [("attr", k)], d - 1)

    walk(obj, [], depth)
    return found


def _follow(o, path):
    for kind, key in path:
        o = getattr(o, key) if kind == "attr" else o[key]
    return o


def constructor_tensors(cls, args, kwargs, paths):
    """The tensors a constructor makes from constants, made again for real:
    for each path, (fn, args, kwargs) of a torch call that makes the same
    tensor (a small one by value, an equal-valued one by torch.full), or
    None when there is none: the constructor draws random numbers, or a
    tensor is large and not uniform."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        rng = torch.get_rng_state()
        try:
            twin = cls(*args, **kwargs)
        except Exception:  # noqa: BLE001  (it raised for real: not rebuilt)
            return None
        if not torch.equal(rng, torch.get_rng_state()):   # random: each call's values differ
            torch.set_rng_state(rng)
            return None
        makers = []
        for path in paths:
            try:
                t = _follow(twin, path)
            except Exception:  # noqa: BLE001
                return None
            if type(t) is not torch.Tensor or t.requires_grad or t.is_complex():
                return None
            kw = {"dtype": t.dtype, "device": t.device}
            if t.numel() <= 64:
                makers.append((torch.tensor, (t.tolist(),), kw))
            elif t.numel() and bool((t == t.reshape(-1)[0]).all()):
                makers.append((torch.full, (tuple(t.shape), t.reshape(-1)[0].item()), kw))
            else:
                return None
        return makers


def fill_object(obj, d):
    """An object made while recording, built by the replay: object.__new__
    made it, its __dict__ is what the recorded __init__ and stores left."""
    obj.__dict__.update(d)
    return obj


def has_fake(values, _depth=0):
    """Whether a fake tensor is inside values (the replay's constants): one
    must never reach the user or the frame."""
    for v in values:
        if isinstance(v, FakeTensor):
            return True
        if _depth < 4:
            if isinstance(v, (tuple, list, set, frozenset)):
                if has_fake(v, _depth + 1):
                    return True
            elif isinstance(v, dict):
                if "__builtins__" not in v and has_fake(v.values(), _depth + 1):   # not a module's globals
                    return True
            elif not isinstance(v, (type, types.ModuleType, types.FunctionType, torch.nn.Module)):
                d = getattr(v, "__dict__", None)
                if isinstance(d, dict) and has_fake(d.values(), _depth + 1):
                    return True
    return False


# ---------------------------------------------------------------- state for explain
graphs = []      # one dict per compiled graph (the newest _KEEP)
breaks = []      # one dict per graph break (the newest _KEEP)
break_counts = collections.Counter()   # graph breaks by kind (a name in kiln._C.BREAK_REASONS)
_KEEP = 10000


def new_graph(symbolic=False):
    """A recording's graph and fake mode; symbolic: with a ShapeEnv, sizes
    may be symbols (kiln/symbolic.py)."""
    return torch.fx.Graph(), (symbolic_mode() if symbolic else FakeTensorMode())


def _eager_backend(gm, example_inputs):
    return gm.forward


def _inductor_backend(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


def _own_backends():
    from . import backends

    return {_eager_backend, _inductor_backend} | {getattr(backends, n) for n in dir(backends)
                                                 if n == "kiln" or n.startswith("kiln_")}


_OWN_BACKENDS = set()


def resolve_backend(backend):
    if backend == "eager":
        return _eager_backend
    if backend == "inductor":
        return _inductor_backend
    if backend == "kiln":
        from . import backends

        return backends.kiln
    return backend


try:
    from torch._dynamo.exc import BackendCompilerFailed as _TorchBackendCompilerFailed
except Exception:  # an older torch: kiln's exception stands alone
    _TorchBackendCompilerFailed = RuntimeError


class BackendCompilerFailed(_TorchBackendCompilerFailed):
    """A backend given to kiln.compile raised while compiling a graph: the
    user's own error, raised where the compiled function was called (as
    torch.compile does).  The backend's exception is __cause__ (and
    inner_exception)."""

    def __init__(self, backend_fn, inner_exception):
        # torch's __init__ signature differs between releases: set the fields directly
        self.backend_name = getattr(backend_fn, "__name__", repr(backend_fn))
        self.inner_exception = inner_exception
        self.first_useful_frame = None
        Exception.__init__(self, f"kiln.compile: backend={self.backend_name!r} raised:\n"
                                 f"{type(inner_exception).__name__}: {inner_exception}")


# torch functions whose recording fake kiln makes itself (src/capture/
# record_value.c kn_torch_op): each takes the call's arguments (fakes) and
# returns the result's fake, or NotImplemented for torch's own
# (kiln/fakes.py holds the rules and says what each must keep)
fake_overrides = {torch._C._nn.scaled_dot_product_attention: ops.recorded_attention,
                  torch._C._nn.linear: fakes.recorded_linear,
                  torch.nn.functional.layer_norm: fakes.recorded_layer_norm,
                  torch.nn.functional.batch_norm: fakes.recorded_batch_norm}


def tensor_unsupported(value):
    """Why kiln cannot record tensor `value` (or a tensor in a tuple/list of
    an op's results), as a short reason; None when it can.  Real inputs and
    fake results both come here; the frame or graph then runs as Python."""
    if isinstance(value, (tuple, list)):
        for v in value:
            if isinstance(v, torch.Tensor):
                why = tensor_unsupported(v)
                if why:
                    return why
        return None
    t = type(value)
    if t is not Tensor and t is not Parameter and not isinstance(value, FakeTensor):
        return f"a tensor subclass ({t.__qualname__})"
    if value.is_nested:
        return "a nested tensor"
    if value.layout is not torch.strided:
        return f"a {value.layout} tensor"
    if value.is_quantized:
        return "a quantized tensor"
    if _is_functorch_wrapped(value):
        return "a functorch-wrapped tensor (inside vmap/grad)"
    return None


def _is_functorch_wrapped(t):
    f = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return bool(f(t)) if f is not None else False


def _function_attrs(graph):
    """The graph's root module, holding the Python functions and the
    autograd.Function classes that nodes take as arguments (associative_scan's
    combine_fn: record_call.c class 12; Fn for _autograd_apply: class 11),
    each read by a get_attr node (fx writes neither into its code)."""
    from ._calls import HIGHER_ORDER_ALIAS

    def held(a):   # a function, or a torch.autograd.Function class (_autograd_apply's first)
        return isinstance(a, types.FunctionType) or isinstance(a, type) and issubclass(a, torch.autograd.Function)

    root = torch.nn.Module()
    for node in list(graph.nodes):
        if node.op != "call_function" or not any(held(a) for a in node.args):
            continue
        node.target = HIGHER_ORDER_ALIAS.get(node.target, node.target)
        args = list(node.args)
        for i, a in enumerate(args):
            if held(a):
                name = f"_kn_fn{len(root._modules) + len(root.__dict__)}"
                object.__setattr__(root, name, a)
                with graph.inserting_before(node):
                    args[i] = graph.get_attr(name)
        node.args = tuple(args)
    return root


def finish(graph, fake_mode, examples, backend, info):
    """A recorded graph -> the backend's compiled callable (returns a tuple),
    or None where the segment must run as Python (see below).
    A backend the user passed that raises is their error
    (BackendCompilerFailed); kiln's own backends raising are kiln's."""
    gm = torch.fx.GraphModule(_function_attrs(graph), graph)
    if logs.on("graph"):   # (KILN_DUMP=capture switches the topic on)
        logs.emit("graph", "captured graph of %s (%s:%s):\n%s", info.get("name"), info.get("filename"),
                  info.get("line"), gm.code.strip(), level=logs.DEBUG)
    from . import backends

    before = len(backends.compiled_graphs)
    fn = resolve_backend(backend)
    if isinstance(backend, str) or fn in _OWN_BACKENDS or getattr(fn, "_kiln_own", False):
        compiled = fn(gm, list(examples))
        if isinstance(compiled, backends._EagerOnError):
            compiled = _Unwritten(compiled.fn, compiled.gm)
        elif compiled == gm.forward and fn not in (_eager_backend, _inductor_backend) and \
                backends._writes_inputs(gm):
            # kiln runs it as captured (eager's kernels): an error would come
            # after some of its writes, where no re-run as Python can undo
            # them, and be raised at the segment's start, outside the user's
            # try/except.  None: segment.c runs the segment as Python
            compiled = None
    else:
        try:
            compiled = fn(gm, list(examples))
        except Exception as e:
            raise BackendCompilerFailed(fn, e) from e
        if not callable(compiled):
            e = TypeError(f"the backend returned {type(compiled).__name__}, not a callable")
            raise BackendCompilerFailed(fn, e) from e
    entry = dict(info)
    entry["ops"] = sum(1 for n in graph.nodes if n.op in ("call_function", "call_method"))
    new = backends.compiled_graphs[before:]
    entry["kernels"] = sum(g.get("kernels", 0) for g in new)
    entry["aten_ops"] = sum(g.get("aten_ops", 0) for g in new)
    entry["externs"] = sum(g.get("externs", 0) for g in new)
    entry["fallbacks"] = sum(g.get("fallbacks", 0) for g in new)
    # its size inputs that are symbols (issue 17: compiled per size at its calls)
    entry["symbols"] = [f"{n.name}={n.meta['example_value']}" for n in graph.nodes if n.op == "placeholder" and
                        isinstance(n.meta.get("example_value"), torch.SymInt)]
    graphs.append(entry)
    del graphs[:-_KEEP]   # explain reads the newest entries; old ones must not pile up
    return compiled


class _Unwritten:
    """A compiled graph (not one that runs as captured) without the backend's
    replay of the captured graph after an error: AOT autograd writes mutated
    inputs back only after the compiled forward returns, so its error
    leaves every input as it was.  The error is marked `_kiln_unwritten`,
    and hook.c runs the segment again as Python: eager's writes and eager's
    exception, from the user's line, in the frame's own try/except.  Under
    kiln.config.debug, eager's kernels must raise too (on copies of the
    inputs, their sharing kept): else it is a kiln bug."""

    def __init__(self, fn, gm):
        self.fn = fn
        self.gm = gm

    def __call__(self, *args):
        try:
            return self.fn(*args)
        except Exception as e:
            if not getattr(e, "_kiln_no_replay", False):
                from . import config
                if config.debug:
                    self._eager_raises(e, args)
                e._kiln_unwritten = True
            raise

    def _eager_raises(self, err, args):
        import copy
        with torch.no_grad():
            copies = copy.deepcopy([a.detach() if isinstance(a, torch.Tensor) else a for a in args])
            try:
                self.gm(*copies)
            except Exception:
                return
        raise RuntimeError(f"kiln: a compiled graph raised {type(err).__name__}: {err} where eager does not") \
            from err


def _line_at(code, offset):
    """The source line of instruction `offset` (in code units) of code."""
    for start, end, line in code.co_lines():
        if start <= 2 * offset < end and line is not None:
            return line
    return code.co_firstlineno


def _dump_guards(code, offset, guards):
    logs.emit("guards", "recorded %s (%s:%d) from line %d; guards:\n%s", code.co_qualname, code.co_filename,
              code.co_firstlineno, _line_at(code, offset), "\n".join(f"    {g}" for g in guards), level=logs.DEBUG)


def _recompiled(code, offset, count, why):
    """A new recording where `count` earlier ones failed their guards; why:
    the newest one's first failing guard and what it saw (guard.c,
    kn_guard_failure)."""
    logs.emit("recompiles", "recompiling %s (%s:%d) at line %d, recording %d: guard failed: %s", code.co_qualname,
              code.co_filename, code.co_firstlineno, _line_at(code, offset), count + 1, why)


# the C core reads these at a new recording (dump_guards: at setup): None
# while their topic is off, so nothing is described (KILN_LOGS=guards,recompiles;
# KILN_DUMP=guards)
dump_guards = None
recompiled = None


def refresh_logs():
    """Set the callbacks for the topics switched on (kiln.logs calls it)."""
    global dump_guards, recompiled
    guards, recompiles = logs.on("guards"), logs.on("recompiles")
    if (dump_guards is not None) != guards:
        dump_guards = _dump_guards if guards else None
        if _set_up:
            setup()   # the C core reads dump_guards at setup
    recompiled = _recompiled if recompiles else None


def source_line(filename, lineno):
    return linecache.getline(filename, lineno).strip()


_TORCH_DIRS = tuple({os.path.dirname(torch.__file__) + os.sep, os.path.realpath(os.path.dirname(torch.__file__)) + os.sep,
                     os.path.dirname(os.path.abspath(__file__)) + os.sep})
_STDLIB_DIRS = tuple({sysconfig.get_paths()["stdlib"] + os.sep, os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep})


def _internal(filename):
    """torch's, kiln's or the standard library's code (a library installed
    in site-packages is the user's: its model code is what they run)."""
    if filename.startswith(_TORCH_DIRS) or filename.startswith("<frozen "):
        return True
    return filename.startswith(_STDLIB_DIRS) and "site-packages" + os.sep not in filename


def note_break(reason, filename, lineno, kind, outer=None, function="?"):
    """A graph break: reason is its message, kind its name in
    kiln._C.BREAK_REASONS (src/capture/breaks.def), function the qualname
    of the code it is in.  outer: the (filename, line, qualname) of the
    inlined calls that led to it, innermost first; a break inside torch or
    the standard library is reported at the innermost caller that is the
    user's code, the inner place kept in the message."""
    if _internal(filename):
        for f, n, fn in outer or ():
            if not _internal(f):
                reason = f"{reason} (inside {os.path.basename(filename)}:{lineno})"
                filename, lineno, function = f, n, fn
                break
    break_counts[kind] += 1
    counters.counts["graph_breaks"] += 1
    source = source_line(filename, lineno)
    breaks.append({"reason": reason, "kind": kind, "filename": filename, "lineno": lineno, "source": source,
                   "function": function})
    del breaks[:-_KEEP]
    if logs.on("graph_breaks"):
        logs.emit("graph_breaks", "graph break in %s (%s:%d): %s\n    %s", function, filename, lineno, reason, source)


def warn(message):
    warnings.warn(message, RuntimeWarning, stacklevel=3)


# what the frame still needs (kiln/_liveness.py) and how a call is recorded
# (kiln/_calls.py): the C core reads these names from this module
from ._calls import _classify, classify  # noqa: E402,F401
from ._liveness import dead_cells, dead_locals, private_cells  # noqa: E402,F401
from .errors import UserError  # noqa: E402,F401  (the capture raises it to the user)
from .symbolic import concrete, dims_for, fx_arg, guard_program, int_dynamic, int_symbol, is_symbolic  # noqa: E402,F401
from .symbolic import size_program, symbolic_fake  # noqa: E402,F401
from .symbolic import new_mode as symbolic_mode, wants_symbols  # noqa: E402,F401
from torch import SymBool, SymFloat, SymInt  # noqa: E402,F401  (kn_numeric)
op_add = operator.add


# ---------------------------------------------------------------- paths never recorded
def _path_rules():
    """((prefix, skip), ...) for the capture's hook (skip: a bool, or the
    names of the functions recorded there, the rest skipped): frames of torch, kiln,
    the standard library and a few tools are never recorded (they run as
    Python unless a recorded frame inlines them); with
    config.capture_libraries site-packages is recorded (a library's model
    code is the user's code), even where it sits inside the standard
    library's folder (an installation without a virtual environment).  The longest matching prefix decides.  Each path in both
    spellings: code objects name the path they were imported by (a
    symlinked venv's and the real one)."""
    import site

    import kiln

    skip = {os.path.dirname(torch.__file__), os.path.dirname(kiln.__file__), os.path.dirname(functools.__file__)}
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            skip.add(p)
    files = set()
    for name in ("numpy", "typing_extensions", "_pytest", "pytest", "pluggy", "tqdm", "sympy", "triton"):
        m = sys.modules.get(name)
        f = getattr(m, "__file__", None) if m is not None else None
        if f and os.path.basename(f) == "__init__.py":
            skip.add(os.path.dirname(f))   # a package: its folder
        elif f:
            files.add(f)                  # a module of one file (typing_extensions): that file alone
    keep = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")} | set(site.getsitepackages())
    try:
        keep.add(site.getusersitepackages())
    except Exception:  # noqa: BLE001  (no user site in some embedded interpreters)
        pass
    # torch.optim: an optimizer's step (under its wrappers, which run as Python) is its own graph, as
    # under TorchDynamo; the rest of torch.optim is not recorded as a root
    optim = os.path.join(os.path.dirname(torch.__file__), "optim")
    steps = {optim}
    files |= {os.path.join(optim, f) for f in ("lr_scheduler.py", "swa_utils.py")}   # their step()s are not
    rules = {}
    from . import config
    for paths, is_skip, sep in ((keep, not config.capture_libraries, os.sep), (skip, True, os.sep), (files, True, ""),
                                (steps, ("step",), os.sep)):
        for p in paths:
            if p:
                for q in {os.path.realpath(p), os.path.abspath(p)}:
                    rules[q + sep] = is_skip
    return tuple(sorted(rules.items()))


_set_up = False


def setup():
    global _set_up
    _OWN_BACKENDS.update(f for f in _own_backends() if callable(f))
    _C.capture_setup(sys.modules[__name__], _path_rules())
    _set_up = True
