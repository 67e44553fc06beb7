"""kiln.template — one symbolic lowering per graph, instantiated per size
(issue 17, stage 2 of docs/plans/dynamic-shapes.md).

Consumes: a graph with symbolic sizes as kiln/dynamic.py's PerSize holds it
(placeholders whose example values are fake tensors of symbolic shape and
SymInts, under the ShapeEnv of the capture that made them).  Produces:
`Template`, that graph lowered to core ATen once with its sizes symbolic
(kiln/trace.py's lowering, under the capture's own fake mode) and described
once (kiln/fx_bridge.describe with every SymInt a `Hole`: the description the
C core reads, with holes where a size, a stride or a size argument depends
on the symbols).  `Template.instantiate(args)` fills the holes for one call's
sizes: the description a static lowering of those sizes would hand the C
core, at the cost of a walk over it instead of a trace (about half of a new
size's compile time on the CPU).

Soundness.  The lowering is valid for every size the capture's guards admit
and the guards the lowering itself added to the ShapeEnv (a decomposition
that branched on a size, a view that needed divisibility, a value
specialised): those are kept here (`extra`) and checked for each new size;
a size that fails one, or whose filled-in input metadata is not the call's,
is lowered statically instead (`instantiate` returns None).  A graph whose
lowering leaves a symbolic value kiln cannot fill in (a SymFloat, a SymBool
argument, an expression outside `symbolic._ARITH`) has no template: every
size is lowered on its own, as before.

`state()`/`restored()` are its disk-cache form (kiln/dynamic.py keys it by
the symbolic graph).  What is not here yet: the C core still plans each
size (its kernels are shared by kiln/kernel_params.py; stage 3 proper:
symbolic kernels).
"""
import operator

import sympy
import torch

from . import fx_bridge, symbolic


class Hole:
    """A place in a description that holds the value of expression k."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return f"Hole({self.k})"


class Holes:
    """The distinct size expressions of a description, numbered."""

    def __init__(self):
        self.exprs = []
        self.index = {}

    def hole(self, s):
        """A Hole for SymInt s (an int where its value is a constant)."""
        if not isinstance(s, torch.SymInt):
            return int(s)
        e = symbolic._sym_value(s)
        if e.is_number:
            return int(e)
        k = self.index.get(e)
        if k is None:
            k = self.index[e] = len(self.exprs)
            self.exprs.append(e)
        return Hole(k)


# ------------------------------------------------------------------ printing
_REL = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
        "StrictGreaterThan": ">", "GreaterThan": ">="}
# the Python text of symbolic._ARITH's operators (which sympy nodes they are is that table's)
_INFIX = {operator.add: " + ", operator.mul: " * ", operator.floordiv: " // ", operator.mod: " % "}


class _Unprintable(Exception):
    pass


def _py(e, names):
    """Python source computing sympy expression e over the symbols' names."""
    if e is sympy.true:
        return "True"
    if e is sympy.false:
        return "False"
    if isinstance(e, sympy.Symbol):
        if e not in names:
            raise _Unprintable(f"symbol {e} has no value")
        return names[e]
    if e.is_number:
        if not e.is_integer:
            raise _Unprintable(f"non-integer constant {e}")
        return str(int(e))
    name = type(e).__name__
    args = [_py(a, names) for a in e.args]
    row = symbolic._arith(e)
    if row is not None:
        op = row[0]
        return "(" + _INFIX[op].join(args) + ")" if op in _INFIX else f"{op.__name__}({', '.join(args)})"
    if name in _REL:
        return f"({args[0]} {_REL[name]} {args[1]})"
    if name in ("And", "Or"):
        return "(" + f" {name.lower()} ".join(args) + ")"
    if name == "Not":
        return f"(not {args[0]})"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) >= 0:
        return f"({args[0]} ** {int(e.exp)})"
    raise _Unprintable(f"{name} in {e}")


def _function(exprs, checks, names):
    """A Python function of the symbols' values (a tuple in `names` order)
    returning (the values of exprs, whether every check holds)."""
    params = {s: f"v[{i}]" for i, s in enumerate(names)}
    vals = ", ".join(_py(e, params) for e in exprs)
    ok = " and ".join(_py(c, params) for c in checks) or "True"
    src = f"def fill(v):\n    return ({vals}{',' if exprs else ''}), bool({ok})\n"
    return _fill_of(src), src


def _fill_of(src):
    """The function `fill` that _function's source defines."""
    scope = {}
    exec(compile(src, "<kiln.template>", "exec"), scope)   # noqa: S102  (kiln's own text, from sympy expressions)
    return scope["fill"]


# ------------------------------------------------------------------ building
def _shape_env(fakes):
    for f in fakes:
        if isinstance(f, torch.SymInt):
            return f.node.shape_env
        if isinstance(f, torch.Tensor):
            for s in f.shape:
                if isinstance(s, torch.SymInt):
                    return s.node.shape_env
    return None


def _state(env):
    return (len(env.guards), dict(env.replacements), {s: (r.lower, r.upper) for s, r in env.var_to_range.items()},
            len(getattr(env, "deferred_runtime_asserts", {}) or {}))


def _added(env, before):
    """The relations the lowering added to env: new guards, replacements of
    a symbol and narrowed ranges, as sympy booleans."""
    n, repl, ranges, _ = before
    out = [g.expr for g in env.guards[n:]]
    for s, r in env.replacements.items():
        if repl.get(s) != r:
            out.append(sympy.Eq(s, r, evaluate=False))
    for s, vr in env.var_to_range.items():
        old = ranges.get(s)
        if old is None or old == (vr.lower, vr.upper):
            continue
        lo, hi = symbolic._finite(vr.lower), symbolic._finite(vr.upper)
        if lo is not None:
            out.append(sympy.Ge(s, lo, evaluate=False))
        if hi is not None:
            out.append(sympy.Le(s, hi, evaluate=False))
    return out


class Template:
    """A graph's symbolic lowering and description; see the module doc.
    Raises (errors.Unsupported or whatever the trace raised) when the graph
    has none: the caller lowers each size on its own."""

    # set by kiln/dynamic.py once a size took this lowering through the static
    # path (kiln's checks passed): later sizes go straight to the C core
    direct = False

    def __init__(self, g, fakes, lower):
        """g: the graph as the static path lowers it (after kiln/backends'
        front rewrites), fakes: its placeholders' symbolic example values,
        lower(g, fakes) -> the ATen graph (kiln/trace.py)."""
        env = _shape_env(fakes)
        if env is None:
            raise fx_bridge.Unsupported("no ShapeEnv")
        before = _state(env)
        aten = lower(g, fakes)
        self.device = fx_bridge.graph_device(aten)
        holes = Holes()
        self.desc, self.constants, self.single = fx_bridge.describe(aten, self.device.type, holes=holes)
        extra = _added(env, before)
        if len(getattr(env, "deferred_runtime_asserts", {}) or {}) != before[3]:
            raise fx_bridge.Unsupported("the lowering deferred a runtime assertion")
        # each symbol's value: from a size argument, else from an input's shape
        self.sources = []
        names = []
        seen = set()
        for i, f in enumerate(fakes):
            if isinstance(f, torch.SymInt):
                e = f.node.expr
                if isinstance(e, sympy.Symbol) and e not in seen:
                    seen.add(e)
                    names.append(e)
                    self.sources.append((i, None))
        for i, f in enumerate(fakes):
            if isinstance(f, torch.Tensor):
                for d, s in enumerate(f.shape):
                    e = s.node.expr if isinstance(s, torch.SymInt) else None
                    if isinstance(e, sympy.Symbol) and e not in seen:
                        seen.add(e)
                        names.append(e)
                        self.sources.append((i, d))
        # a symbol the capture replaced by another's expression keeps its
        # own value source, its replacement checked like a guard
        for s in list(names):
            r = env.replacements.get(s)
            if r is not None and r != s:
                extra.append(sympy.Eq(s, r, evaluate=False))
        used = set().union(*(e.free_symbols for e in holes.exprs + extra)) if holes.exprs or extra else set()
        for s in used - set(names):
            r = env.replacements.get(s)
            if r is not None and r.is_number:
                raise fx_bridge.Unsupported(f"the lowering specialised size {s} to {r}")
            raise fx_bridge.Unsupported(f"size {s} has no source among the graph's inputs")
        try:
            self.fill, self.source = _function(holes.exprs, extra, names)
        except _Unprintable as e:
            raise fx_bridge.Unsupported(f"a size expression kiln does not compute ({e})") from None
        self.checks = [str(c) for c in extra]
        self.nexprs = len(holes.exprs)
        self.inputs = [i for i, f in enumerate(fakes) if isinstance(f, torch.Tensor)]
        self._fresh()

    def _fresh(self):
        self.builds = []      # kiln/kernel_params.py's parametric builds of this lowering
        self.recent = []      # and the C of its latest sizes built on their own
        self.build_failures = 0
        self.extern_sizes = 0  # sizes filled in whose programs have no kernels (all extern calls)
        self.forms = None     # CUDA: the first build's kernel forms, which later sizes take (pipeline._compile)
        self.fusion = None    # and its fusion (where each buffer joined a kernel)

    # the disk cache (kiln/dynamic.py keys it by the symbolic graph): what a
    # new process needs to fill the lowering in without tracing it again
    _KEPT = ("constants", "single", "device", "source", "checks", "nexprs", "sources", "inputs")

    def state(self):
        """This template as picklable data (`restored` undoes it)."""
        st = {k: getattr(self, k) for k in self._KEPT}
        st["desc"] = fx_bridge.portable(self.desc)
        return st

    @classmethod
    def restored(cls, st):
        t = cls.__new__(cls)
        for k in cls._KEPT:
            setattr(t, k, st[k])
        t.desc = fx_bridge.relink(st["desc"])
        t.fill = _fill_of(t.source)
        t._fresh()
        return t

    def values(self, args):
        out = []
        for i, d in self.sources:
            a = args[i]
            out.append(int(a) if d is None else int(a.shape[d]))
        return tuple(out)

    def describe_at(self, symvals):
        """The description at these symbol values (nodes, inputs, outputs,
        Ref), or None when a relation the lowering relied on fails."""
        vals, ok = self.fill(symvals)
        if not ok:
            return None
        nodes, inputs, outputs, ref = self.desc
        made = getattr(self, "_made", None)
        if made is None:
            # (the nodes with a hole somewhere, made by one function of the
            # values; the others are the same at every size)
            made = self._made = _nodes_maker(nodes)
        nodes = list(nodes)
        for i, node in zip(made[0], made[1](vals)):
            nodes[i] = node
        fill = _filler(vals, ref)
        return nodes, inputs, [fill(o) for o in outputs], ref

    def probes(self, symvals, few=False):
        """Other symbol values the lowering holds for (each symbol moved a
        little, so that the C core's size-dependent decisions rarely
        change), for kiln/kernel_params.py to tell which literals are sizes
        (the outer loops' thread splits need none: the C core writes the
        ones it does not take as comments).  None for a lowering without
        symbols (the capture specialised every size it had).  few: the
        first of each kind only (kernel_params.first_fusion)."""
        if not symvals:
            return
        # each kind: the symbols moved alike; moved by multiples of their
        # alignment (a GPU kernel's vector loads, taken where a size is a
        # multiple of 8, change the kernel's shape at the unaligned
        # neighbours); each moved its own way (moved alike, two symbols equal
        # here stay equal, so their loops' extents would seem one, a (s, t)
        # loop fused with a (t, s) one at s == t, and their literals one
        # parameter)
        n = len(symvals)
        kinds = [[tuple(v + d for v in symvals) for d in (1, -1, 2, 3, -2)]]
        if any(v % 2 == 0 for v in symvals):
            kinds.append([tuple(v + d * _alignment(v) for v in symvals) for d in (1, 2, -1)])
        if n > 1 and len(set(symvals)) < n:
            kinds.append([tuple(v + d * (k + 1 if up else n - k) for k, v in enumerate(symvals))
                          for d in (1, 2) for up in (True, False)])
        for kind in kinds:
            for vals in kind:
                if min(vals) >= 2 and self.fill(vals)[1]:
                    yield vals
                    if few:
                        break

    def instantiate(self, args):
        """The description for these arguments' sizes (nodes, inputs,
        outputs, Ref), or None when a relation the lowering relied on fails
        for them or the filled-in inputs do not match the call's."""
        desc = self.describe_at(self.values(args))
        if desc is None:
            return None
        nodes, inputs, outputs, ref = desc
        # the filled-in input metadata must be the call's tensors' own
        # (kiln/lowered_cache.py checks it again against the graph compiled)
        tensors = [args[i] for i in self.inputs]
        if len(tensors) + len(self.constants) != len(inputs):
            return None
        for t, k in zip(tensors, inputs):
            m = nodes[k][2][0] if nodes[k][2] else None
            if m is not None and (m[0] != tuple(t.shape) or m[1] != t.stride() or m[3] != t.storage_offset()):
                return None
        try:
            fx_bridge._check_output_views(outputs, nodes, [n[8] for n in nodes])
        except fx_bridge.Unsupported:
            return None   # (the static path finds it too, and says why)
        return nodes, inputs, outputs, ref


def _alignment(v):
    """The largest power of two up to 16 dividing v."""
    a = 1
    while a < 16 and v % (2 * a) == 0:
        a *= 2
    return a


def _filler(vals, ref):
    def fill(v):
        if type(v) is Hole:
            return vals[v.k]
        if isinstance(v, tuple):
            return tuple(fill(x) for x in v) if _has_hole(v) else v
        if isinstance(v, list):
            return [fill(x) for x in v]
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        return v
    return fill


def _nodes_maker(nodes):
    """([indices of the nodes with holes], a function of the values making
    those nodes): one generated Python function building each such node as
    one expression (`v[k]` at each hole, `c[j]` for each part without
    one), planned once per template: a size then costs one call, not a
    call per tuple."""
    idx, exprs, consts = [], [], []

    def const(x):
        consts.append(x)
        return f"c[{len(consts) - 1}]"

    def expr(x, depth):
        if type(x) is Hole:
            return f"v[{x.k}]"
        if depth > 12:
            return None if _maker(x) is None else f"{const(_maker(x))}(v)"
        if type(x) in (tuple, list):
            parts = [expr(y, depth + 1) for y in x]
            if all(p is None for p in parts) and type(x) is tuple:
                return None
            items = ", ".join(p if p is not None else const(y) for p, y in zip(parts, x))
            return f"({items},)" if type(x) is tuple else f"[{items}]"   # (an empty tuple has no hole)
        m = _maker(x)
        return None if m is None else f"{const(m)}(v)"

    for i, n in enumerate(nodes):
        e = expr(n, 0)
        if e is not None:
            idx.append(i)
            exprs.append(e)
    src = "def make(v):\n    return (" + "".join(e + ",\n" for e in exprs) + ")\n"
    ns = {}
    exec(compile(src, "<kiln.template: the nodes with holes>", "exec"), {"c": consts}, ns)
    return idx, ns["make"]


def _maker(v):
    """None where v holds no Hole, else a function of the values making v
    with its holes filled (what _filler does, planned once)."""
    if type(v) is Hole:
        k = v.k
        return lambda vals: vals[k]
    if isinstance(v, (tuple, list)):
        parts = [_maker(x) for x in v]
        if all(p is None for p in parts) and isinstance(v, tuple):
            return None
        parts = [(True, p) if p is not None else (False, x) for p, x in zip(parts, v)]
        kind = type(v) if type(v) in (tuple, list) else None
        if kind is None:
            return None if all(not f for f, _ in parts) else _unplanned(v)
        return lambda vals: kind([p(vals) if f else p for f, p in parts])
    if isinstance(v, dict):
        if not _has_hole(v.values()):
            return None
        return _unplanned(v)
    return None


def _unplanned(v):
    return lambda vals: _filler(vals, None)(v)


def _has_hole(v, depth=0):
    for x in v:
        if type(x) is Hole:
            return True
        if isinstance(x, (tuple, list, dict)) and depth < 8:
            if _has_hole(x.values() if isinstance(x, dict) else x, depth + 1):
                return True
    return False
