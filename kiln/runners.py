"""kiln.runners — the callables a compiled graph becomes.

Consumes: a Program (kiln._C) and its constants, or a graph kiln runs as it
is.  Produces: CompiledGraph (the program, boxed for AOT autograd),
EagerGraph (the ATen graph, with the reason), _EagerOnError (a compiled graph
that replays the captured one when it raises), and the small adapters of the
batch path (_Flat, _Deferred, _Unwrap, _StatsCallable).
"""
import torch

from . import config, errors


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
        # would cut the gradient of an output that is the other's alias, and
        # its epilogue's metadata write into an input (`a.squeeze_()`) would
        # re-shape an output that is the input's alias (`a.detach()`)
        self.fresh = ()
        self.fresh_of_input = False   # some fresh output is a view of an input

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
            out = self._distinct(out, args if self.fresh_of_input else ())
        return out[0] if self.single else out

    def _distinct(self, out, args):
        seen, new = {id(a) for a in args}, None
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


def _fresh_outputs(gm):
    """(positions, of_input): the output positions of gm that name a tensor
    node no earlier position names and that is not an input
    (CompiledGraph.fresh), () when no output can be the object of another or
    of an input (fewer than two, none a view of an input); and whether one
    is a view of an input (only then are the inputs' objects compared)."""
    from .captured import _root
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outs = out if isinstance(out, (tuple, list)) else (out,)
    fresh, seen, of_input = [], set(), False
    for k, n in enumerate(outs):
        if isinstance(n, torch.fx.Node) and n not in seen and n.op != "placeholder":
            fresh.append(k)
            seen.add(n)
            of_input = of_input or _root(n).op == "placeholder"
    return (frozenset(fresh) if len(fresh) > 1 or of_input else ()), of_input


class _Flat:
    """A CompiledGraph called with plain positional arguments."""

    def __init__(self, cg):
        self.cg = cg
        self.kiln_stats = cg.kiln_stats

    def __call__(self, *args):
        cg = self.cg
        return cg.run(*args) if isinstance(cg, CompiledGraph) else cg(*args)


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
        errors.warn_once(msg + " (eager's result is used)")
        return out


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
