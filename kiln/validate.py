"""kiln.validate — eager's own argument checks, run on a captured graph.

Consumes a captured FX graph and its example inputs (real or fake, sizes
possibly symbolic); produces None, or the error eager raises on every call
of that graph whatever the input values (a dtype the kernel refuses, a
bool subtraction, a view out of its storage's bounds), which the caller
turns into "run this graph as captured" (run_as_captured._eager_only): then eager's
kernels raise it, at eager's point, after eager's side effects.

Why: kiln records and lowers graphs on FakeTensors, whose meta functions
(PyTorch's Python references) skip many of the checks ATen's kernels make,
and the lowering decomposes ops (std into sums) so a check is lost for good.
Instead of a hand list of checks, each ATen op of the graph is run once,
at compile time, by ATen's real CPU kernel on a probe: tensors of the op's
dtypes, sizes, strides and storage (aliasing kept), filled with zeros.
Inputs and outputs over PROBE_BYTES run on probes with every size clamped
to at most 1 (the dtype checks do not depend on sizes), for ops where that
keeps the call valid: pointwise ops and ops whose only integer arguments
are dims.  Probes run on the CPU whatever the graph's device (a GPU kernel's
device-side assert would cost the CUDA context); ops with no CPU kernel are
not probed.  An error of a kind that depends on values (an index, a division
by zero, a singular matrix) is the runtime checks' business and ignored, as
is NotImplementedError for a GPU graph (a kernel the CPU lacks); any other error is
confirmed on probes filled with ones before it counts.  Random ops are not
probed (the caller's generator must not move).

A fake propagation of the graph that runs anyway (kiln/dynamic.py
specialises a symbolic graph to one size's values so) can run under the
probes (`run_probed`); its verdict is handed to the check of that graph
(`known_verdict`), which then need not propagate again.
"""
import threading
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

PROBE_BYTES = 1 << 16
_DIM_ARGS = {"dim", "dims", "dim0", "dim1", "start_dim", "end_dim"}


class _Rejected(Exception):
    pass


class _Unknown(Exception):
    pass


def _hint(x):
    if isinstance(x, torch.SymInt):
        h = x.node.hint
        if h is None:
            raise _Unknown("unbacked size")
        return int(h)
    return x


def _storage_key(t):
    from torch.multiprocessing.reductions import StorageWeakRef
    try:
        return StorageWeakRef(t.untyped_storage())
    except Exception:
        return None


def _nbytes(t):
    try:
        return int(_hint(t.untyped_storage().nbytes()))
    except _Unknown:
        raise
    except Exception:
        return t.numel() * t.element_size()


def _fake_inputs(mode, example_inputs):
    """Fresh fakes (static sizes, the inputs' hints) with the inputs'
    sizes, strides, storage offsets and storage sizes."""
    out, bases = [], {}
    for t in example_inputs:
        if isinstance(t, torch.SymInt):
            out.append(_hint(t))
            continue
        if not isinstance(t, torch.Tensor):
            out.append(t)
            continue
        size = [_hint(s) for s in t.shape]
        stride = [_hint(s) for s in t.stride()]
        key = _storage_key(t)
        with mode:
            base = bases.get(key)
            if base is None:
                base = torch.empty(_nbytes(t) // t.element_size(), dtype=t.dtype, device=t.device)
                if key is not None:
                    bases[key] = base
            if base.dtype != t.dtype:
                base = base.view(t.dtype) if base.numel() * base.element_size() % t.element_size() == 0 else \
                    torch.empty(_nbytes(t) // t.element_size(), dtype=t.dtype, device=t.device)
            out.append(base.as_strided(size, stride, _hint(t.storage_offset())))
    return out


def _shrinkable(func):
    """Clamping every size to 1 keeps a call of func valid."""
    if torch.Tag.pointwise in func.tags:
        return True
    for a in func._schema.arguments:
        if "int" in str(a.type).lower() and a.name not in _DIM_ARGS:
            return False
    return True


def _cpu(a):
    return torch.device("cpu") if isinstance(a, torch.device) else a


def _call(func, args, kwargs, fill, shrink, nbytes):
    """Run func's CPU kernel on probes of args (storage sizes from nbytes:
    as they were before the fake op ran, which may grow a fake storage);
    returns its error or None."""
    bases = {}

    def probe(t):
        if not isinstance(t, torch.Tensor):
            return _cpu(_hint(t))
        if shrink:
            return torch.full([min(int(_hint(s)), 1) for s in t.shape], fill, dtype=t.dtype)
        key = _storage_key(t)
        base = bases.get((key, t.dtype))
        if base is None:
            base = torch.full((nbytes.get(id(t), _nbytes(t)) // t.element_size(),), fill, dtype=t.dtype)
            if key is not None:
                bases[(key, t.dtype)] = base
        return base.as_strided([_hint(s) for s in t.shape], [_hint(s) for s in t.stride()],
                               _hint(t.storage_offset()))

    try:
        pargs, pkwargs = tree_map(probe, (args, kwargs))
    except Exception:   # a probe that cannot be made: nothing to say
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            func(*pargs, **pkwargs)
    except Exception as e:
        return e
    return None


def _value_dependent(e, on_cpu):
    """An error that depends on values, or that the CPU kernel alone makes
    (NotImplementedError when a probe of a GPU graph's op runs on the CPU;
    on a CPU graph it is eager's own refusal of a dtype: bitwise_and of
    floats): not a verdict."""
    return isinstance(e, (IndexError, ZeroDivisionError, torch.linalg.LinAlgError)) or \
        isinstance(e, NotImplementedError) and not on_cpu or "ZeroDivisionError" in str(e)


def _probed(func, args, kwargs):
    """The inputs' storage sizes when func is worth probing, else None."""
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten" or \
            torch.Tag.nondeterministic_seeded in func.tags or torch.Tag.data_dependent_output in func.tags or \
            not torch._C._dispatch_has_computed_kernel_for_dispatch_key(func.name(), "CPU"):
        return None
    ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
    if not ins:
        return None   # a factory: no caller's tensor to check
    return {id(t): _nbytes(t) for t in ins}


def _probe(func, args, kwargs, out, nbytes):
    outs = [a for a in tree_flatten(out)[0] if isinstance(a, torch.Tensor)]
    total = sum(nbytes.values()) + sum(t.numel() * t.element_size() for t in outs)
    shrink = total > PROBE_BYTES
    if shrink and not _shrinkable(func):
        return None
    on_cpu = all(t.device.type == "cpu" for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor))
    e = _call(func, args, kwargs, 0, shrink, nbytes)
    if e is None:
        return None
    if isinstance(e, IndexError):
        # probes filled with zeros index element 0 of every dim, which every
        # non-empty tensor has: the error is about shapes ("Index is
        # supposed to be a vector"), not values, unless a tensor is empty and
        # one may hold indices (an integer tensor); with none it is about
        # shapes still (max over an empty dim; fuzzer tensor:1702254)
        ins = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if any(0 in t.shape for t in ins) and any(not t.dtype.is_floating_point and not t.dtype.is_complex
                                                  for t in ins):
            return None
    elif _value_dependent(e, on_cpu) or _call(func, args, kwargs, 1, shrink, nbytes) is None:
        return None
    return f"{func}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


class _Probe(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        kwargs = kwargs or {}
        with unset_fake_temporarily():
            nbytes = _probed(func, args, kwargs)
        try:
            out = func(*args, **kwargs)   # the fake mode below: eager's sizes and dtypes
        except Exception:
            # the fake op refuses: if ATen's kernel refuses these inputs too
            # (any error: the graph cannot be traced either), eager raises
            if nbytes is not None:
                with unset_fake_temporarily():
                    e = _call(func, args, kwargs, 0, False, nbytes)
                if e is not None:
                    raise _Rejected(f"{func}: {type(e).__name__}: "
                                    f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}")
            raise
        if nbytes is None:
            return out
        with unset_fake_temporarily():
            why = _probe(func, args, kwargs, out, nbytes)
        if why is not None:
            raise _Rejected(why)
        return out


def _touches_global_state(gm):
    return any(n.op == "call_function" and "autocast" in getattr(n.target, "__name__", "")
               for n in gm.graph.nodes)


def eager_rejects(gm, example_inputs):
    """The error (a line) that eager's kernels raise on every call of the
    captured graph gm with inputs like example_inputs, or None (none found,
    or the graph could not be checked)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if _touches_global_state(gm):
        return None
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        fakes = _fake_inputs(mode, example_inputs)
        with torch.no_grad(), mode, _Probe():
            gm(*fakes)
    except _Rejected as e:
        return str(e)
    except Exception:   # data-dependent, unsupported by fake tensors: no verdict
        return None
    return None


# ------------------------------------------------ a verdict reached already
UNKNOWN = object()
_known = threading.local()


def run_probed(gm, example_inputs, run):
    """run() (a fake propagation of the captured graph gm, inside its fake
    mode, on fakes of example_inputs) under the probes: eager_rejects'
    verdict on gm (the error, or None), or UNKNOWN where the probes cannot
    run alongside (a graph that sets global state) or failed.  The probes
    sit below autograd and run ATen's kernels on tensors of their own, so the
    caller's grad mode changes nothing of theirs.  run() completes either
    way: after a rejection or a failure it runs again without them, and its
    own errors are its caller's."""
    if _touches_global_state(gm):
        run()
        return UNKNOWN
    try:
        with _Probe():
            run()
    except _Rejected as e:
        run()
        return str(e)
    except Exception:   # noqa: BLE001  (no verdict: the plain run raises what the propagation itself raises)
        run()
        return UNKNOWN
    return None


class known_verdict:
    """Within it, the next check of a graph with these very example_inputs
    (the same list: backends._eager_rejects) takes `verdict` (run_probed's)
    instead of propagating; once, and not at all where it is UNKNOWN."""

    def __init__(self, verdict, example_inputs):
        self.value = None if verdict is UNKNOWN else (verdict, example_inputs)

    def __enter__(self):
        self.saved = getattr(_known, "value", None)
        _known.value = self.value

    def __exit__(self, *exc):
        _known.value = self.saved


def take_known(example_inputs):
    """The verdict known for a graph with example_inputs, or UNKNOWN."""
    got = getattr(_known, "value", None)
    if got is None or got[1] is not example_inputs:
        return UNKNOWN
    _known.value = None
    return got[0]
