"""kiln — torch.compile rebuilt with its core in C.

    import kiln
    fast = kiln.compile(model)            # or torch.compile(model, backend="kiln")

Importing kiln registers the "kiln" backend with torch.compile.
"""
import functools

import torch

from . import config
from . import backends
from .backends import lowered_ops, __version__

try:
    from torch._dynamo import register_backend as _register

    _register(name="kiln")(backends.kiln)
except Exception:  # already registered (re-import) or an older torch
    pass

__all__ = ["compile", "reset", "explain", "config", "lowered_ops", "backends"]

_BACKENDS = {"kiln": backends.kiln, "eager": "eager", "inductor": "inductor"}


def compile(fn=None, *, backend="kiln", fullgraph=False, dynamic=None, mode=None):
    """Compile a function or nn.Module; usable as a decorator.

    Capture currently goes through TorchDynamo (kiln's own C capture is the
    next milestone); the graphs are compiled by kiln's C compiler."""
    if fn is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode)
    if not callable(fn):
        raise TypeError(f"kiln.compile expects a function or torch.nn.Module, got {type(fn).__name__}")
    if config.disable:
        return fn
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise ValueError(f"kiln.compile: unknown backend {backend!r}; use one of {sorted(_BACKENDS)} "
                             "or a callable with torch.compile's backend signature")
        backend = _BACKENDS[backend]
    elif not callable(backend):
        raise TypeError("kiln.compile: backend must be a name or a callable(gm, example_inputs)")
    kw = {}
    if mode is not None:
        kw["mode"] = mode
    return torch.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, **kw)


def reset():
    """Drop every in-memory cache (compiled frames and graphs)."""
    torch._dynamo.reset()
    backends.reset()


class Explanation:
    """What kiln did with a function: graphs, breaks and, per graph, ATen ops,
    kernels, extern calls and fallbacks."""

    def __init__(self, graphs, breaks):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.breaks = breaks
        self.graph_break_count = len(breaks)
        self.ops_per_graph = [g.get("aten_ops", 0) for g in graphs]
        self.kernels_per_graph = [g.get("kernels", 0) for g in graphs]
        self.externs_per_graph = [g.get("externs", 0) for g in graphs]
        self.fallbacks_per_graph = [g.get("fallbacks", 0) for g in graphs]

    def __str__(self):
        lines = [f"kiln: {self.graph_count} graph(s), {self.graph_break_count} graph break(s)"]
        for i, g in enumerate(self.graphs):
            ext = ", ".join(sorted(set(g.get("extern_ops", []))))
            lines.append(f"  graph {i}: {g.get('aten_ops', 0)} ATen ops -> {g.get('kernels', 0)} kernels, "
                         f"{g.get('externs', 0)} extern calls{' (' + ext + ')' if ext else ''}, "
                         f"{g.get('fallbacks', 0)} fallbacks")
        for b in self.breaks:
            lines.append(f"  break: {b}")
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn):
    """kiln.explain(fn)(*args, **kwargs) -> Explanation (runs fn once)."""

    def run(*args, **kwargs):
        torch._dynamo.reset()
        start = len(backends.compiled_graphs)
        compiled = torch.compile(fn, backend=backends.kiln)
        compiled(*args, **kwargs)
        graphs = list(backends.compiled_graphs[start:])
        breaks = []
        try:
            torch._dynamo.reset()
            ex = torch._dynamo.explain(fn)(*args, **kwargs)
            breaks = [str(getattr(b, "reason", b)) for b in ex.break_reasons]
        except Exception:
            pass
        torch._dynamo.reset()
        return Explanation(graphs, breaks)

    return run
