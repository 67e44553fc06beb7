"""Differential harness for the capture acceptance suite.

A case is a *program* (a function or an nn.Module, possibly built from some
per-run state) plus a list of *calls*.  The harness runs the whole call
sequence twice, once eagerly and once through ``kiln.compile``, each time on a
fresh deep copy of the initial state, the call arguments and the module
globals the case declares.  Before each call a ``before`` hook may change the
state (flip a global, retrain a module, rebind a function, ...) identically in
both runs.  After every call it records a detached snapshot of

  * the return value (or the exception raised),
  * the call's arguments (in-place mutation of inputs, list appends, ...),
  * the case state (module parameters, buffers, grads, training flags,
    object attributes, dicts, lists),
  * the declared module globals,
  * everything printed to stdout,
  * optionally the object-identity pattern of the returned tensors (which
    outputs *are* inputs or each other),

and then compares the two records call by call: tensors with
``torch.testing.assert_close`` (dtype, shape, requires_grad and .grad too),
containers structurally, other Python values with ``==``.
"""
import contextlib
import copy
import dataclasses
import io
import math
import types

import torch

import kiln

__all__ = ["Call", "Ctx", "check", "check_program", "calls_of", "CountingBackend", "snapshot", "assert_same"]


class Call:
    """One call of the program: ``args``/``kwargs``, an optional ``before(ctx)``
    hook run just before the call (in both runs), and an optional
    ``invoke(ctx, *args, **kwargs)`` replacing the plain ``ctx.f(*args, **kwargs)``
    (e.g. to run backward on the result).

    The args are deep-copied per run; the hooks are not, so a hook must build
    any tensor it installs afresh (and seed before random init) rather than
    capture one, or the eager run's mutations leak into the compiled run."""

    def __init__(self, *args, before=None, invoke=None, **kwargs):
        self.args = args
        self.kwargs = kwargs
        self.before = before
        self.invoke = invoke

    def __repr__(self):
        return f"Call(args={len(self.args)}, kwargs={sorted(self.kwargs)})"


class Ctx:
    """What hooks see: ``f`` the callable under test (eager or compiled),
    ``st`` this run's copy of the state, ``g`` the module globals dict,
    ``i`` the call index, ``compiled`` whether this is the compiled run."""

    def __init__(self, f, st, g, compiled):
        self.f = f
        self.st = st
        self.g = g
        self.i = 0
        self.compiled = compiled


class CountingBackend:
    """A torch.compile-signature backend that records every graph it gets."""

    def __init__(self):
        self.graphs = []
        self.op_counts = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.op_counts.append(sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")))
        return gm.forward

    @property
    def count(self):
        return len(self.graphs)


# --------------------------------------------------------------------------
# snapshots: detached, structural copies that can be compared later


class _T:
    """Snapshot of a tensor."""

    __slots__ = ("value", "requires_grad", "grad", "dtype", "shape")

    def __init__(self, t):
        self.value = t.detach().clone()
        self.requires_grad = t.requires_grad
        self.grad = t.grad.detach().clone() if t.is_leaf and t.grad is not None else None
        self.dtype = t.dtype
        self.shape = tuple(t.shape)


class _Obj:
    __slots__ = ("kind", "fields")

    def __init__(self, kind, fields):
        self.kind = kind
        self.fields = fields

    def __repr__(self):
        return f"<{self.kind} {self.fields!r}>"


class _Raised:
    __slots__ = ("type", "msg")

    def __init__(self, e):
        self.type = type(e).__name__
        self.msg = str(e)

    def __repr__(self):
        return f"<raised {self.type}: {self.msg}>"


def _module_snapshot(m, memo, depth):
    fields = {
        "params": {n: snapshot(p, memo, depth) for n, p in m.named_parameters()},
        "buffers": {n: snapshot(b, memo, depth) for n, b in m.named_buffers()},
        "training": {n: s.training for n, s in m.named_modules()},
    }
    plain = {}
    for n, s in m.named_modules():
        for k, v in vars(s).items():
            if k.startswith("_") or k == "training":
                continue
            if isinstance(v, (bool, int, float, str, list, tuple, dict, set, type(None), torch.Tensor)):
                plain[f"{n}.{k}"] = snapshot(v, memo, depth)
    fields["attrs"] = plain
    return _Obj(f"module:{type(m).__name__}", fields)


def snapshot(obj, memo=None, depth=0):
    """Detached structural copy of ``obj`` for comparison."""
    if memo is None:
        memo = {}
    if depth > 12:
        return _Obj("deep", repr(type(obj)))
    key = id(obj)
    if key in memo:
        return memo[key]
    d = depth + 1
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)):
        return obj
    if isinstance(obj, torch.Tensor):
        out = _T(obj)
    elif isinstance(obj, torch.nn.Module):
        out = _module_snapshot(obj, memo, d)
    elif isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        out = _Obj(f"namedtuple:{type(obj).__name__}", {f: snapshot(getattr(obj, f), memo, d) for f in obj._fields})
    elif isinstance(obj, (list, tuple)):
        out = type(obj)(snapshot(v, memo, d) for v in obj) if type(obj) in (list, tuple) else \
            _Obj(type(obj).__name__, [snapshot(v, memo, d) for v in obj])
    elif isinstance(obj, dict):
        out = _Obj(f"dict:{type(obj).__name__}", [(snapshot(k, memo, d), snapshot(v, memo, d)) for k, v in obj.items()])
    elif isinstance(obj, (set, frozenset)):
        out = _Obj(type(obj).__name__, frozenset(obj))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = _Obj(f"dataclass:{type(obj).__name__}",
                   {f.name: snapshot(getattr(obj, f.name), memo, d) for f in dataclasses.fields(obj)})
    elif isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        out = _Obj("callable", getattr(obj, "__qualname__", repr(obj)))
    elif isinstance(obj, types.MethodType):
        out = _Obj("method", obj.__func__.__qualname__)
    elif hasattr(obj, "__dict__"):
        out = _Obj(f"object:{type(obj).__name__}",
                   {k: snapshot(v, memo, d) for k, v in vars(obj).items() if not k.startswith("__")})
    else:
        out = _Obj("repr", repr(obj))
    memo[key] = out
    return out


# --------------------------------------------------------------------------
# comparison


def _tol(dtype, rtol, atol):
    if rtol is not None or atol is not None:
        return dict(rtol=rtol if rtol is not None else 1.3e-6, atol=atol if atol is not None else 1e-5)
    if dtype in (torch.bfloat16, torch.float16):
        return dict(rtol=2e-2, atol=2e-2)
    return dict(rtol=1e-5, atol=1e-5)


def assert_same(a, b, path="out", rtol=None, atol=None):
    """Recursive structural comparison of two snapshots."""
    if isinstance(a, _T) or isinstance(b, _T):
        assert isinstance(a, _T) and isinstance(b, _T), f"{path}: tensor vs non-tensor ({a!r} / {b!r})"
        assert a.dtype == b.dtype, f"{path}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad {a.requires_grad} != {b.requires_grad}"
        torch.testing.assert_close(b.value, a.value, equal_nan=True, msg=lambda m: f"{path}: {m}",
                                   **_tol(a.dtype, rtol, atol))
        assert (a.grad is None) == (b.grad is None), f"{path}.grad: {a.grad is None} vs {b.grad is None} (None?)"
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, equal_nan=True, msg=lambda m: f"{path}.grad: {m}",
                                       **_tol(a.grad.dtype, rtol, atol))
        return
    assert type(a) is type(b), f"{path}: type {type(a).__name__} != {type(b).__name__} ({a!r} / {b!r})"
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]", rtol, atol)
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]", rtol, atol)
    elif isinstance(a, _Obj):
        assert a.kind == b.kind, f"{path}: {a.kind} != {b.kind}"
        fa, fb = a.fields, b.fields
        if isinstance(fa, dict):
            assert list(fa) == list(fb), f"{path}: fields {list(fa)} != {list(fb)}"
            for k in fa:
                assert_same(fa[k], fb[k], f"{path}.{k}", rtol, atol)
        elif isinstance(fa, list):
            assert len(fa) == len(fb), f"{path}: {len(fa)} items != {len(fb)} items"
            for i, (x, y) in enumerate(zip(fa, fb)):
                assert_same(x, y, f"{path}<{i}>", rtol, atol)
        else:
            assert fa == fb, f"{path}: {fa!r} != {fb!r}"
    elif isinstance(a, _Raised):
        assert (a.type, a.msg) == (b.type, b.msg), f"{path}: raised {a!r} vs {b!r}"
    elif isinstance(a, float):
        # Python floats may come from a differently-ordered reduction
        assert a == b or (a != a and b != b) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _tensors(obj, out, seen):
    if id(obj) in seen:
        return out
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        seen.add(id(obj))
        for v in obj:
            _tensors(v, out, seen)
    elif isinstance(obj, dict):
        seen.add(id(obj))
        for v in obj.values():
            _tensors(v, out, seen)
    return out


def _identity_pattern(result, args, kwargs):
    """For each tensor in ``result``: which input tensor / earlier output it *is*."""
    ins = _tensors((args, kwargs), [], set())
    outs = _tensors(result, [], set())
    pat = []
    for j, t in enumerate(outs):
        tag = None
        for i, u in enumerate(ins):
            if t is u:
                tag = ("in", i)
                break
        if tag is None:
            for i in range(j):
                if t is outs[i]:
                    tag = ("out", i)
                    break
        pat.append(tag)
    return pat


# --------------------------------------------------------------------------
# running


def _run(make, state, calls, globs, g, compiled, compile_kw, compiler, catch, seed):
    torch.manual_seed(seed)
    if state is _NOSTATE:
        calls, gvals = copy.deepcopy((calls, globs))
        st = _NOSTATE
    else:
        st, calls, gvals = copy.deepcopy((state, calls, globs))
    for k, v in gvals.items():
        g[k] = v
    prog = make(st) if st is not _NOSTATE else make
    f = compiler(prog, **compile_kw) if compiled else prog
    ctx = Ctx(f, st, g, compiled)
    records = []
    for i, c in enumerate(calls):
        ctx.i = i
        if not isinstance(c, Call):
            c = Call(*c) if isinstance(c, tuple) else Call(c)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            if c.before is not None:
                c.before(ctx)
            try:
                if c.invoke is not None:
                    res = c.invoke(ctx, *c.args, **c.kwargs)
                else:
                    res = ctx.f(*c.args, **c.kwargs)
            except Exception as e:  # noqa: BLE001
                if not catch:
                    raise
                res = _Raised(e)
        ident = _identity_pattern(res, c.args, c.kwargs)
        memo = {}
        rec = {
            "result": snapshot(res, memo) if not isinstance(res, _Raised) else res,
            "args": snapshot((c.args, c.kwargs), memo),
            "state": snapshot(st, memo) if st is not _NOSTATE else None,
            "globals": {k: snapshot(g[k], memo) for k in globs},
            "stdout": buf.getvalue(),
            "identity": ident,
        }
        records.append(rec)
    return records, f


_NOSTATE = object()


def check_program(make, calls, *, state=_NOSTATE, globs=None, g=None, backend="eager", fullgraph=False,
                  dynamic=None, mode=None, rtol=None, atol=None, identity=False, catch=False, min_calls=3,
                  compiler=None, seed=0):
    """Run ``calls`` against ``make(state)`` eagerly and compiled; assert equal.

    ``make``: a factory ``make(st) -> fn_or_module`` when ``state`` is given,
    else the function/module itself.  ``globs``: {name: initial value} of
    module globals (in ``g``, default ``make.__globals__``) that the program
    reads or writes; they are reset to deep copies before each run, compared
    after each call and restored at the end.  ``identity``: also compare which
    returned tensors *are* inputs or each other.  ``catch``: record exceptions
    as results instead of propagating them.  ``seed``: torch.manual_seed at
    the start of each run.  ``compiler``: stands in for kiln.compile (the
    harness self-test passes wrong ones).  Returns (eager records, compiled
    records, compiled callable)."""
    assert len(calls) >= min_calls, f"a case needs at least {min_calls} calls, got {len(calls)}"
    globs = dict(globs or {})
    if g is None:
        g = getattr(make, "__globals__", None)
        if g is None and globs:
            raise ValueError("pass g= (the globals dict) for globs")
    if g is None:
        g = {}
    saved = {k: g[k] for k in globs if k in g}
    if compiler is None:
        compiler = kiln.compile
    compile_kw = dict(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode)
    try:
        eager, _ = _run(make, state, calls, globs, g, False, compile_kw, compiler, catch, seed)
        kiln.reset()
        comp, f = _run(make, state, calls, globs, g, True, compile_kw, compiler, catch, seed)
    finally:
        for k in globs:
            if k in saved:
                g[k] = saved[k]
            else:
                g.pop(k, None)
    assert len(eager) == len(comp)
    for i, (a, b) in enumerate(zip(eager, comp)):
        for key in ("result", "args", "state", "globals"):
            assert_same(a[key], b[key], f"call {i}: {key}", rtol, atol)
        assert a["stdout"] == b["stdout"], f"call {i}: stdout {a['stdout']!r} != {b['stdout']!r}"
        if identity:
            assert a["identity"] == b["identity"], f"call {i}: identity {a['identity']} != {b['identity']}"
    return eager, comp, f


def check(fn, calls, **kw):
    """``check_program`` for a function, or for a module (which then becomes
    the per-run state, so each run gets its own deep copy)."""
    if isinstance(fn, torch.nn.Module):
        kw.setdefault("g", type(fn).forward.__globals__)
        return check_program(lambda m: m, calls, state=fn, **kw)
    return check_program(fn, calls, **kw)


def calls_of(make_args, n=3):
    """``n`` calls whose positional args come from fresh ``make_args(i)``
    draws (different values each call)."""
    out = []
    for i in range(n):
        a = make_args(i)
        out.append(a if isinstance(a, tuple) else (a,))
    return out
