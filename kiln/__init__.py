"""kiln — torch.compile rebuilt with its core in C.

    import kiln
    fast = kiln.compile(model)            # or torch.compile(model, backend="kiln")

kiln.compile records the function's bytecode in C (a PEP 523 frame hook, a
symbolic interpreter, guards and graph breaks: src/capture/) and compiles each
graph with kiln's C compiler (src/compile, src/codegen).  Importing kiln
registers the "kiln" backend with torch.compile.
"""
import functools
import types

import torch

from . import config
from . import _C
from . import runtime
from . import backends
from . import _capture
from . import counters
from . import logs
from .backends import lowered_ops, __version__
from .logs import set_logs

runtime.wire()   # the C runtime's torch functions, before anything compiles

try:
    from torch._dynamo import register_backend as _register

    _register(name="kiln")(backends.kiln)
except Exception:  # already registered (re-import) or an older torch
    pass

logs.init()   # KILN_LOGS, TORCH_LOGS, KILN_DUMP: before the capture's setup reads its log callbacks
_capture.setup()


def _hook_torch_reset():
    """torch.compiler.reset() (torch._dynamo.reset) clears kiln's caches too."""
    import torch._dynamo as dynamo
    original = dynamo.reset
    if getattr(original, "_kiln_wrapped", False):
        return

    @functools.wraps(original)
    def reset_both(*args, **kwargs):
        out = original(*args, **kwargs)
        _C.capture_reset()   # kiln's recorded frames (its statistics and warnings stay, as Dynamo's)
        return out
    reset_both._kiln_wrapped = True
    reset_both._kiln_original = original
    dynamo.reset = reset_both


_hook_torch_reset()


def disable(fn=None, recursive=True):
    """kiln.disable: torch.compiler.disable (the call breaks the graph and it
    and all it calls run eagerly)."""
    return torch.compiler.disable(fn, recursive=recursive) if fn is not None else \
        (lambda f: torch.compiler.disable(f, recursive=recursive))


def allow_in_graph(fn):
    """kiln.allow_in_graph: torch.compiler.allow_in_graph (one graph node)."""
    return torch.compiler.allow_in_graph(fn)


def assume_constant_result(fn):
    """kiln.assume_constant_result: torch.compiler.assume_constant_result
    (run once while recording, its result taken as a constant, unguarded)."""
    return torch.compiler.assume_constant_result(fn)

def mark_dynamic(t, index, **kwargs):
    """kiln.mark_dynamic: torch._dynamo.mark_dynamic (the mark is kept on the
    tensor; kiln.explain lists the marked dims of the arguments, which kiln
    still specialises until it records sizes symbolically)."""
    return torch._dynamo.mark_dynamic(t, index, **kwargs)


def mark_static(t, index=None):
    """kiln.mark_static: torch._dynamo.mark_static."""
    return torch._dynamo.mark_static(t, index)


def _marked_dynamic(args, kwargs):
    """(argument name or position, dims) for the tensor arguments marked by
    mark_dynamic (torch._dynamo's _dynamo_dynamic_indices)."""
    marked = []
    for key, a in list(enumerate(args)) + list(kwargs.items()):
        dims = getattr(a, "_dynamo_dynamic_indices", None) if isinstance(a, torch.Tensor) else None
        if dims:
            marked.append((key, sorted(dims)))
    return marked


# raised where a compiled function is called when a backend the user passed
# to kiln.compile raises (a subclass of torch._dynamo.exc.BackendCompilerFailed;
# the backend's exception is its __cause__)
BackendCompilerFailed = _capture.BackendCompilerFailed

__all__ = ["compile", "reset", "explain", "stats", "set_logs", "config", "lowered_ops", "backends", "CompiledModule", "disable",
           "allow_in_graph", "assume_constant_result", "mark_dynamic", "mark_static",
           "BackendCompilerFailed"]

_BACKEND_NAMES = ("kiln", "eager", "inductor")


def _check_backend(backend):
    if isinstance(backend, str):
        if backend not in _BACKEND_NAMES:
            raise ValueError(f"kiln.compile: unknown backend {backend!r}; use one of {list(_BACKEND_NAMES)} "
                             "or a callable(gm, example_inputs) with torch.compile's backend signature")
    elif not callable(backend):
        raise TypeError("kiln.compile: backend must be a name or a callable(gm, example_inputs), "
                        f"got {type(backend).__name__}")


_MODES = backends.MODES


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"kiln.compile: unknown mode {mode!r}; use one of {list(_MODES)}")


def _with_mode(backend, mode):
    """mode="reduce-overhead" (and "max-autotune", which implies CUDA graphs in
    torch.compile too) replays each compiled CUDA graph as a CUDA graph; the
    max-autotune modes time a few launch sizes per GPU kernel on the first
    run and keep the fastest (cached on disk)."""
    if backend == "kiln" and mode not in (None, "default"):
        return backends.configured(mode)
    return backend


def _root_code(fn):
    if isinstance(fn, torch.nn.Module):
        fwd = type(fn).forward
        return getattr(fwd, "__code__", None)
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    if isinstance(fn, types.FunctionType):
        return fn.__code__
    call = getattr(type(fn), "__call__", None)
    return getattr(call, "__code__", None)


class CompiledModule(torch.nn.Module):
    """What kiln.compile returns for an nn.Module: calls run through kiln's
    capture; state_dict, parameters, attributes and train()/eval() are the
    original module's."""

    def __init__(self, mod, captured):
        super().__init__()
        self.__dict__["_orig_mod"] = mod
        self.__dict__["_kiln_call"] = captured

    def __call__(self, *args, **kwargs):
        return self._kiln_call(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._kiln_call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["_orig_mod"], name)

    # container modules (Sequential, ModuleList, ModuleDict) index like the original
    def __getitem__(self, idx):
        return self._orig_mod[idx]

    def __len__(self):
        return len(self._orig_mod)

    def __bool__(self):   # a module is true even when it is not a container
        return True

    def __iter__(self):
        return iter(self._orig_mod)

    def __setattr__(self, name, value):
        if name in ("_orig_mod", "_kiln_call"):
            raise AttributeError(f"{name} is kiln's own")
        if "_orig_mod" in self.__dict__:
            setattr(self._orig_mod, name, value)
        else:   # nn.Module.__init__ of the wrapper itself
            super().__setattr__(name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return dir(self._orig_mod)

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    @property
    def training(self):
        return self.__dict__["_orig_mod"].training if "_orig_mod" in self.__dict__ else True

    @training.setter
    def training(self, value):
        if "_orig_mod" in self.__dict__:
            self._orig_mod.training = value

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._orig_mod.load_state_dict(*args, **kwargs)

    def named_parameters(self, *args, **kwargs):
        return self._orig_mod.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self._orig_mod.named_buffers(*args, **kwargs)

    def named_children(self):
        return self._orig_mod.named_children()

    def named_modules(self, *args, **kwargs):
        return self._orig_mod.named_modules(*args, **kwargs)

    def train(self, mode=True):
        self._orig_mod.train(mode)
        return self

    def _apply(self, fn, *args, **kwargs):
        self._orig_mod._apply(fn, *args, **kwargs)
        return self


def compile(fn=None, *, backend="kiln", fullgraph=False, dynamic=None, mode=None, options=None, disable=False):
    """Compile a function or nn.Module; usable as a decorator.

    backend: "kiln" (default), "eager" (run the captured graphs as they are),
    "inductor" (torch's compiler), or any callable(gm, example_inputs).
    fullgraph=True makes a graph break an error.  mode: torch.compile's
    ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs");
    options: a dict of kiln.config compiler knobs and torch.compile's
    "triton.cudagraphs" / "max_autotune" (kiln.backends.OPTION_KNOBS; an
    unknown key is an error naming the valid ones); disable=True returns fn
    itself.  dynamic: True records every size of an input tensor as a
    symbol from the first call (sizes 0 and 1, parameters and
    non-contiguous inputs stay static); None (the default) does so for the
    sizes that have changed between recordings when
    kiln.config.automatic_dynamic_shapes is on (the default), and for the
    dims marked with mark_dynamic; False never.  A graph with
    symbolic sizes is compiled per size by kiln's backend
    (kiln/dynamic.py)."""
    if fn is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                 options=options, disable=disable)
    if not callable(fn):
        raise TypeError(f"kiln.compile expects a function or torch.nn.Module, got {type(fn).__name__}")
    _check_backend(backend)
    _check_mode(mode)
    backends.check_options(options)
    if options and backend != "kiln":
        raise ValueError(f"kiln.compile: options apply to backend='kiln', not {backend!r}")
    if disable or config.disable:
        return fn
    backend = backends.configured(mode, options) if options else _with_mode(backend, mode)
    if config.capture == "dynamo":
        b = {"kiln": backends.kiln}.get(backend, backend) if isinstance(backend, str) else backend
        kw = {"mode": mode} if mode is not None and b == "inductor" else {}
        return torch.compile(fn, backend=b, fullgraph=fullgraph, dynamic=dynamic, **kw)
    dyn = (-1 if config.automatic_dynamic_shapes else -2) if dynamic is None else int(bool(dynamic))
    captured = _C.Captured(fn, backend, _root_code(fn), bool(fullgraph), int(config.cache_size_limit), dyn)
    if isinstance(fn, torch.nn.Module):
        return CompiledModule(fn, captured)
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return captured(*args, **kwargs)

        wrapper._kiln_captured = captured
        # the fast path: callers that want no Python frame use captured directly
        wrapper.__dict__["__wrapped__"] = fn
        return captured if getattr(config, "bare_callable", False) else wrapper
    return captured


def stats():
    """Process-wide counters since the last kiln.reset(), as a dict:
    captures, recompiles, graph_breaks, compiles, fallbacks, extern_ops,
    cache_hits, lowering_cache_hits, compile_seconds, frames_run_as_python
    and the capture's own counters (kiln/counters.py says what each counts)."""
    return counters.stats()


def reset():
    """Drop every in-memory cache: recorded frames, guards, compiled graphs;
    zero the counters of kiln.stats().  Safe while other threads run
    compiled functions: frames already running finish with the segments
    they hold, which are freed afterwards."""
    _C.capture_reset()
    try:
        getattr(torch._dynamo.reset, "_kiln_original", torch._dynamo.reset)()
    except Exception:
        pass
    backends.reset()


class GraphBreak:
    """One graph break: why, and where in the user's source."""

    def __init__(self, reason, filename, lineno, source):
        self.reason, self.filename, self.lineno, self.source = reason, filename, lineno, source

    def __repr__(self):
        return f"{self.filename}:{self.lineno}: {self.reason}  ({self.source})"


class Explanation:
    """What kiln did with a function: graphs, graph breaks, guards and, per
    graph, its ops and (with the kiln backend) kernels, extern calls and
    fallbacks."""

    def __init__(self, graphs, breaks, guards, marked_dynamic=(), specialised=()):
        self.marked_dynamic = list(marked_dynamic)   # [(argument, dims)] marked by mark_dynamic
        # [(input size, value, where)]: symbolic sizes the recorded code specialised
        self.specialised = list(specialised)
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.breaks = breaks
        self.graph_break_count = len(breaks)
        self.guards = guards
        self.ops_per_graph = [g.get("ops", 0) for g in graphs]
        self.aten_ops_per_graph = [g.get("aten_ops", 0) for g in graphs]
        self.kernels_per_graph = [g.get("kernels", 0) for g in graphs]
        self.externs_per_graph = [g.get("externs", 0) for g in graphs]
        self.fallbacks_per_graph = [g.get("fallbacks", 0) for g in graphs]

    def __str__(self):
        lines = [f"kiln: {self.graph_count} graph(s), {self.graph_break_count} graph break(s)"]
        if self.graph_count == 0:
            lines.append("  0 graphs: kiln captured nothing, the function ran as plain Python"
                         + (" (see the breaks below)" if self.breaks else ""))
        for i, g in enumerate(self.graphs):
            lines.append(f"  graph {i} ({g.get('name')} at {g.get('filename')}:{g.get('line')}): "
                         f"{g.get('ops', 0)} ops -> {g.get('aten_ops', 0)} ATen ops, {g.get('kernels', 0)} kernels, "
                         f"{g.get('externs', 0)} extern calls, {g.get('fallbacks', 0)} fallbacks")
            if g.get("symbols"):
                lines.append(f"    symbolic sizes {', '.join(g['symbols'])}: one lowering for every size, each "
                             "size planned when first called (its ATen ops and kernels are not counted above; "
                             "kiln.stats(): specializations, size_plans)")
        for b in self.breaks:
            lines.append(f"  break: {b}")
        for arg, dims in self.marked_dynamic:
            lines.append(f"  argument {arg}: dims {dims} marked dynamic: symbols in the recording, unless "
                         "the code takes their values (a guard then holds each value)")
        for size, value, where in self.specialised:
            lines.append(f"  size {size} specialised to {value} at {where or 'torch code outside the recorded frames'}"
                         ": each other value records again")
        if self.guards:
            lines.append(f"  guards ({len(self.guards)}):")
            lines.extend(f"    {g}" for g in self.guards)
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn, backend="kiln"):
    """kiln.explain(fn)(*args, **kwargs) -> Explanation (runs fn once under kiln)."""

    def run(*args, **kwargs):
        reset()
        g0, b0 = len(_capture.graphs), len(_capture.breaks)
        compiled = compile(fn, backend=backend)
        compiled(*args, **kwargs)
        graphs = list(_capture.graphs[g0:])
        # one break per place and reason: a break inside a call kiln was
        # inlining is noted where it stops the inlining and again when the
        # callee, run by CPython from there, is recorded as its own frame
        seen = {(b["filename"], b["lineno"], b["reason"]): b for b in _capture.breaks[b0:]}
        breaks = [GraphBreak(b["reason"], b["filename"], b["lineno"], b["source"]) for b in seen.values()]
        guards = []
        code = _root_code(fn)
        if code is not None:
            for seg in _C.capture_guards(code):
                guards.extend(seg)
        return Explanation(graphs, breaks, guards, _marked_dynamic(args, kwargs), counters.specialised)

    return run
