"""kiln.symbolic — symbolic sizes in kiln's capture (issue 17, stage 1).

Consumes: what src/capture's recorder asks while it records a frame whose
sizes may be symbols: which dims of an input tensor become symbols
(`dims_for`, the policy: `dynamic=True`, automatic dynamic, the marks of
torch._dynamo.mark_dynamic / mark_static), the fake tensor of such an input
(`symbolic_fake`), a graph argument that holds SymInts (`fx_arg`: the
expression rebuilt as fx nodes over the size placeholders), a value about to
leave the symbolic world (`concrete`: ints, each a guard), and at the end the
relations torch's ShapeEnv recorded (`guard_program`: kiln's KN_G_SIZES
program, evaluated in C on every call).  Produces those, and nothing else:
every use of ShapeEnv internals is here, so torch-version shims live in one
place.

The symbols are torch's (a ShapeEnv in the recording's FakeTensorMode, with
0/1 specialisation and no duck sizing): torch's meta functions reason about
them, and every Python int operation the recorder runs on a size builds an
expression, or adds a guard when it has to decide.
"""
import operator

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

_SYM = (torch.SymInt, torch.SymBool, torch.SymFloat)


class _SymbolicFakeMode(FakeTensorMode):
    """A FakeTensorMode that also runs torch's Python dispatcher while it is
    entered, as TorchDynamo traces: composite ops' symbolic rules (lerp's
    broadcast, ...) live there; without it they ask for concrete sizes."""

    def __enter__(self):
        from torch._dispatch.python import enable_python_dispatcher
        pd = enable_python_dispatcher()
        pd.__enter__()
        self.__dict__.setdefault("_kiln_pd", []).append(pd)
        try:
            return super().__enter__()
        except BaseException:
            self._kiln_pd.pop().__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._kiln_pd.pop().__exit__(None, None, None)


class _NotingShapeEnv(ShapeEnv):
    """torch's ShapeEnv, noting each symbol that a recording specialises to
    one value (`_specialised`): the code the recorder was running, and
    which input size it was.  A specialised size makes the next size record
    again, so this is what KILN_LOGS=dynamic prints and kiln.explain lists."""

    def _set_replacement(self, a, tgt, msg):
        was = self.replacements.get(a)
        super()._set_replacement(a, tgt, msg)
        now = self.replacements.get(a)
        if now is not None and now.is_number and not (was is not None and was.is_number):
            _specialised(self, a, now)


def _source_name(env, expr):
    """An input size's name (L['x'].size()[1]) for a symbol; an expression's
    text, its symbols named, for other expressions."""
    names = {}
    for sym in expr.free_symbols:
        for src in env.var_to_sources.get(sym, ()):
            name = src.name
            names[sym] = name() if callable(name) else name
            break
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, str(expr))
    return f"{expr} ({', '.join(f'{k} = {v}' for k, v in sorted(names.items(), key=str))})" if names else str(expr)


def _where():
    """'file:line in function' of the user code being recorded (innermost
    first, at most 3 frames), or '' outside a recording."""
    from . import _C
    return " < ".join(f"{f}:{line} in {fn}" for f, line, fn in _C.capture_where()[:3])


def _specialised(env, expr, value):
    from . import counters, logs
    counters.counts["sizes_specialised"] += 1
    where = _where()
    note = (_source_name(env, expr), int(value), where)
    counters.specialised.append(note)
    del counters.specialised[:-32]
    if logs.on("dynamic"):
        logs.emit("dynamic", "size %s specialised to %d by the recorded code at %s", note[0], note[1],
                  where or "(torch's own code, outside the recorded frames)")


def new_mode():
    """The fake mode of a recording with symbolic sizes."""
    # data-dependent outputs (nonzero, .item()) raise as in a static recording
    # (the recorder breaks there) instead of making unbacked symbols
    return _SymbolicFakeMode(shape_env=_NotingShapeEnv(specialize_zero_one=True, duck_shape=False,
                                                       allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False))


# ------------------------------------------------------------------ policy
def dims_for(state, key, t, mode, is_param):
    """The dims of input tensor t (read from source `key`) that are symbols
    in this recording, a tuple.  state: the code's dict of sizes seen per
    source (None where a size has changed: automatic dynamic); mode: the
    kiln.compile's dynamic= (-1 None: automatic dynamic, -2 None with
    config.automatic_dynamic_shapes off: the marks alone, 0 False, 1 True).
    Parameters and buffers, tensors that are not contiguous or are views of
    another tensor, and sizes 0 and 1 stay static; mark_static wins over everything, mark_dynamic makes a dim
    a symbol from the first recording."""
    shape = tuple(t.shape)
    if mode == 0 or not shape:
        return ()
    marks = set(getattr(t, "_dynamo_dynamic_indices", ())) | set(getattr(t, "_dynamo_weak_dynamic_indices", ()))
    if mode == -2 and not marks and key not in state:
        return ()   # (marks only: nothing to remember)
    seen = state.get(key)
    if seen is None or len(seen) != len(shape):
        seen = state[key] = list(shape)
    else:
        for d, n in enumerate(shape):
            if seen[d] is not None and seen[d] != n:
                _became_dynamic(key, d, seen[d], n, "its size changed")
                seen[d] = None
    if is_param or not t.is_contiguous() or t.storage_offset() != 0 or t._base is not None:
        return ()   # (a view of another tensor: its storage and offset would be symbols too)
    static = set(getattr(t, "_dynamo_static_indices", ()))
    for d in marks:   # a marked dim is dynamic for every later recording of this code
        if 0 <= d < len(seen) and d not in static and seen[d] is not None:
            _became_dynamic(key, d, seen[d], shape[d], "mark_dynamic")
            seen[d] = None
    auto = mode in (-1, 1)   # (-2: the marks alone)
    return tuple(d for d in range(len(shape))
                 if d not in static and shape[d] >= 2 and (mode == 1 or (seen[d] is None and (auto or d in marks))))


def _became_dynamic(key, d, was, now, why):
    from . import counters, logs
    counters.counts["dynamic_dims"] += 1
    if logs.on("dynamic"):
        logs.emit("dynamic", "dim %d of %s became dynamic (%s: %s, then %s)", d, key, why, was, now)


def int_dynamic(state, key, value, mode):
    """Whether int argument `value` (read from frame local `key`) is a
    symbol in this recording: under dynamic=True from the first recording,
    under automatic dynamic once its value has changed (as torch.compile
    treats int inputs); only for values >= 2 (0, 1 and negative values
    stay constants: the symbol is size-like, its guard `>= 2`), never
    under dynamic=False or the marks alone."""
    if mode not in (-1, 1) or type(value) is not int:
        return False
    k = ("int", key)
    seen = state.get(k)
    if seen is None:
        seen = state[k] = [value]
    elif seen[0] is not None and seen[0] != value:
        from . import counters, logs
        counters.counts["dynamic_dims"] += 1
        if logs.on("dynamic"):
            logs.emit("dynamic", "int %s became dynamic (its value changed: %s, then %s)", key, seen[0], value)
        seen[0] = None
    return value >= 2 and (mode == 1 or seen[0] is None)


def int_symbol(mode, value, name):
    """A SymInt for int argument `value` (>= 2) of local `name`: a fresh
    symbol of the recording's ShapeEnv, ranging over [2, inf) as a size's."""
    from torch._dynamo.source import LocalSource
    env = mode.shape_env
    src = LocalSource(name)
    sym = env.create_symbol(value, source=src, dynamic_dim=DimDynamic.DYNAMIC, positive=True)
    return env.create_symintnode(sym, hint=value, source=src)


def wants_symbols(state, mode):
    """Whether a recording of this code starts with a ShapeEnv."""
    return mode == 1 or any(None in v for v in state.values())


def symbolic_fake(mode, t, name, dims):
    """The fake of input t with `dims` symbolic (a SymInt each, a fresh symbol
    per dim); returns (fake, [(dim, SymInt)])."""
    from torch._dynamo.source import LocalSource
    n = t.dim()
    t = _canonical_strides(t)
    ctx = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if d in dims else DimDynamic.STATIC for d in range(n)],
        dynamic_strides=[DimDynamic.INFER_STRIDE] * n)
    fake = mode.from_tensor(t, source=LocalSource(name), symbolic_context=ctx)
    syms = [(d, fake.shape[d]) for d in dims if isinstance(fake.shape[d], torch.SymInt)]
    strict = set(getattr(t, "_dynamo_dynamic_indices", ()))   # (mark_dynamic; not maybe_mark_dynamic)
    if strict:
        marked = mode.__dict__.setdefault("_kiln_marked", {})
        for d, s in syms:
            if d in strict and isinstance(s.node.expr, sympy.Symbol):
                marked[s.node.expr] = f"{name}.size()[{d}]"
    return fake, syms


def _canonical_strides(t):
    """t, or for a contiguous t whose strides are not the ones its sizes give
    (a size-1 dim's stride is free: `x[::2]` of a (2, n, m) tensor is
    contiguous with a first stride of 2nm) a tensor of the same storage,
    sizes and grad with those strides.  Torch's fake gives such a stride a
    symbol of its own, which no size input carries, so a guard on it could
    not be checked; kiln's tensor guard accepts any contiguous tensor
    there, and a size-1 dim's stride addresses nothing."""
    if not t.is_contiguous():
        return t
    st, want, acc = t.stride(), [], 1
    for sz in reversed(t.shape):
        want.append(acc)
        acc *= max(int(sz), 1)
    want = tuple(reversed(want))
    if tuple(st) == want:
        return t
    with torch.no_grad():
        c = t.detach().as_strided(t.shape, want, t.storage_offset())
    return c.requires_grad_(t.requires_grad) if t.requires_grad else c


def _check_marks(mode, env):
    """A user error where a dim marked with mark_dynamic was specialised
    by the recorded code (torch.compile raises too: the mark promises a
    graph for every size)."""
    for s, where in getattr(mode, "_kiln_marked", {}).items():
        r = env.replacements.get(s)
        vr = env.var_to_range.get(s)
        val = r if r is not None and r.is_number else vr.lower if vr is not None and vr.lower == vr.upper else None
        if val is not None:
            from . import errors
            raise errors.UserError(
                f"kiln: {where} was marked dynamic (mark_dynamic), but the code specialised it to {val} (a branch "
                f"or an op that needs that exact size); remove the mark, use torch._dynamo.maybe_mark_dynamic, "
                f"or make the code work for every size")


def static_fake(mode, t):
    return mode.from_tensor(t, static_shapes=True) if mode.shape_env is not None else mode.from_tensor(t)


# ------------------------------------------------------------------ values
def is_symbolic(obj, _depth=0):
    if isinstance(obj, _SYM):
        return True
    if _depth < 4 and isinstance(obj, (tuple, list)):
        return any(is_symbolic(x, _depth + 1) for x in obj)
    if _depth < 4 and isinstance(obj, dict):
        return any(is_symbolic(x, _depth + 1) for x in obj.values())
    if isinstance(obj, slice):
        return is_symbolic((obj.start, obj.stop, obj.step), _depth + 1)
    return False


def concrete(obj, _depth=0):
    """obj with every SymInt/SymBool/SymFloat replaced by its value (each
    adds a guard that the value holds): for a value leaving the symbolic
    world (formatted, hashed, handed to Python code, returned)."""
    if isinstance(obj, torch.SymInt):
        e = _sym_value(obj)
        v = int(obj)
        if not e.is_number and not isinstance(e, sympy.Symbol):   # (a symbol: the ShapeEnv notes its replacement)
            _specialised(obj.node.shape_env, e, v)
        return v
    if isinstance(obj, torch.SymBool):
        return bool(obj)
    if isinstance(obj, torch.SymFloat):
        return float(obj)
    if _depth > 8 or not is_symbolic(obj):
        return obj
    if isinstance(obj, torch.Size):
        return torch.Size([concrete(x, _depth + 1) for x in obj])
    if isinstance(obj, tuple):
        vals = [concrete(x, _depth + 1) for x in obj]
        return type(obj)(*vals) if hasattr(obj, "_fields") else tuple(vals)
    if isinstance(obj, list):
        return [concrete(x, _depth + 1) for x in obj]
    if isinstance(obj, dict):
        return {k: concrete(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, slice):
        return slice(concrete(obj.start), concrete(obj.stop), concrete(obj.step))
    return obj


def _sym_value(s):
    """s's expression after the ShapeEnv's replacements."""
    node = s.node
    return node.shape_env.replace(node.expr) if node.shape_env is not None else node.expr


def fx_arg(graph, obj, symnodes):
    """obj, a graph argument, with each SymInt rebuilt as fx nodes over the
    size placeholders (symnodes: sympy Symbol -> placeholder node, and a memo
    of expressions built).  An expression outside + * // % and min/max is
    specialised (its value, guarded)."""
    if isinstance(obj, torch.SymInt):
        e = _sym_value(obj)
        out = _build(graph, e, symnodes)
        return int(obj) if out is None else out
    if isinstance(obj, (torch.SymBool, torch.SymFloat)):
        return concrete(obj)
    if isinstance(obj, torch.Size):
        return [fx_arg(graph, x, symnodes) for x in obj]
    if isinstance(obj, tuple):
        return tuple(fx_arg(graph, x, symnodes) for x in obj)
    if isinstance(obj, list):
        return [fx_arg(graph, x, symnodes) for x in obj]
    if isinstance(obj, dict):
        return {k: fx_arg(graph, v, symnodes) for k, v in obj.items()}
    if isinstance(obj, slice):
        return slice(*(fx_arg(graph, x, symnodes) for x in (obj.start, obj.stop, obj.step)))
    return obj


# KN_SZ_* (src/capture/capture.h, kn_sizeop)
SLOT, CONST, ADD, SUB, MUL, FLOORDIV, MOD, MIN, MAX, NEG, EQ, NE, LT, LE, AND, OR, NOT, CHECK = range(18)

# The size arithmetic kiln rebuilds, one row per sympy node (by class name:
# torch's FloorDiv, CleanDiv, PythonMod, sympy's Mod, Max, Min): the Python
# operator fx_arg's graph nodes call and the KN_SZ_ op of the guard and
# KN_P_SIZE programs.  Each folds its arguments left to right.
_ARITH = {
    "Add": (operator.add, ADD),
    "Mul": (operator.mul, MUL),
    "FloorDiv": (operator.floordiv, FLOORDIV),
    "CleanDiv": (operator.floordiv, FLOORDIV),
    "Mod": (operator.mod, MOD),
    "PythonMod": (operator.mod, MOD),
    "Max": (max, MAX),
    "Min": (min, MIN),
}


def _arith(e):
    """e's row of _ARITH, or None."""
    for cls in type(e).__mro__:
        row = _ARITH.get(cls.__name__)
        if row is not None:
            return row
    return None


def _build(graph, e, symnodes):
    """fx nodes computing sympy expression e, or None if it has a node kiln
    does not rebuild.  Integers become Python ints."""
    if isinstance(e, sympy.Integer) or (e.is_number and e.is_integer):
        return int(e)
    key = ("expr", e)
    if key in symnodes:
        return symnodes[key]
    if isinstance(e, sympy.Symbol):
        return symnodes.get(e)
    op = _arith(e)
    if op is None:
        return None
    args = [_build(graph, a, symnodes) for a in e.args]
    if any(a is None for a in args):
        return None
    op = op[0]
    out = args[0]
    for a in args[1:]:
        out = graph.call_function(op, (out, a))
    symnodes[key] = out
    return out


# ------------------------------------------------------------------ guards


class _Specialise(Exception):
    pass


def _values(env):
    return getattr(env, "backed_var_to_val", None) or env.var_to_val


def _emit(e, out, slots, env):
    if isinstance(e, sympy.Symbol):
        if e in slots:
            out += [SLOT, slots[e]]
            return
        r = env.replacements.get(e)
        if r is not None and r != e:
            return _emit(r, out, slots, env)
        raise _Specialise
    if e is sympy.true:
        out += [CONST, 1]
        return
    if e is sympy.false:
        out += [CONST, 0]
        return
    if e.is_number:
        if not e.is_integer:
            raise _Specialise
        v = int(e)
        if not -(2 ** 62) < v < 2 ** 62:
            raise _Specialise
        out += [CONST, v]
        return
    row = _arith(e)
    if row is not None:
        _emit(e.args[0], out, slots, env)
        for a in e.args[1:]:
            _emit(a, out, slots, env)
            out.append(row[1])
        return
    name = type(e).__name__
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and 1 <= int(e.exp) <= 8:
        _emit(e.base, out, slots, env)
        for _ in range(int(e.exp) - 1):
            _emit(e.base, out, slots, env)
            out.append(MUL)
        return
    rel = {"Equality": EQ, "Unequality": NE, "StrictLessThan": LT, "LessThan": LE}
    if name in rel:
        _emit(e.args[0], out, slots, env)
        _emit(e.args[1], out, slots, env)
        out.append(rel[name])
        return
    if name in ("StrictGreaterThan", "GreaterThan"):   # a > b is b < a
        _emit(e.args[1], out, slots, env)
        _emit(e.args[0], out, slots, env)
        out.append(LT if name == "StrictGreaterThan" else LE)
        return
    if name in ("And", "Or"):
        _emit(e.args[0], out, slots, env)
        for a in e.args[1:]:
            _emit(a, out, slots, env)
            out.append(AND if name == "And" else OR)
        return
    if name == "Not":
        _emit(e.args[0], out, slots, env)
        out.append(NOT)
        return
    raise _Specialise



def _finite(x):
    """x as an int, or None for an infinite bound (sympy's or torch's int_oo)."""
    if "Infinity" in type(x).__name__ or x in (sympy.oo, -sympy.oo):
        return None
    try:
        return int(x)
    except (TypeError, ValueError, OverflowError):
        return None


def guard_program(mode, slots):
    """The KN_G_SIZES guard of a recording: (program bytes, [relation
    strings], ((source, name), ...)), or None when it has no symbol.
    slots: sympy Symbol -> source index of its KN_SRC_SIZE input.  Every
    relation torch recorded is translated; one kiln cannot express becomes
    an equality of the symbols it mentions with their values (sound: only
    recompiles)."""
    env = getattr(mode, "shape_env", None)
    if env is None or not slots:
        return None
    _check_marks(mode, env)
    vals = _values(env)
    words, rels = [], []

    def add(e, text):
        out = []
        try:
            _emit(e, out, slots, env)
        except _Specialise:
            for s in sorted(e.free_symbols, key=str):
                if s not in slots or s not in vals:
                    raise RuntimeError(f"kiln.symbolic: a guard on {s}, which is no size input") from None
                words.extend([SLOT, slots[s], CONST, int(vals[s]), EQ, CHECK])
                rels.append(f"{s} == {int(vals[s])} (specialised: {text})")
            return
        words.extend(out + [CHECK])
        rels.append(text)

    for s in sorted(slots, key=str):
        vr = env.var_to_range.get(s)
        lo = _finite(vr.lower) if vr is not None else None
        lo = 2 if lo is None else lo
        add(sympy.Ge(s, lo, evaluate=False), f"{s} >= {lo}")
        hi = _finite(vr.upper) if vr is not None else None
        if hi is not None and hi < 2 ** 62:
            add(sympy.Le(s, hi, evaluate=False), f"{s} <= {hi}")
        r = env.replacements.get(s)
        if r is not None and r != s:
            add(sympy.Eq(s, r, evaluate=False), f"{s} == {r}")
    for g in env.guards:
        add(g.expr, str(g.expr))
    import struct
    names = tuple((src, str(s)) for s, src in sorted(slots.items(), key=lambda kv: str(kv[0])))
    return struct.pack(f"<{len(words)}q", *words), rels, names


def size_program(sym, slots):
    """KN_P_SIZE's program for SymInt sym (the replay computes it from this
    call's sizes), or None when it has a node kiln does not compute (the
    caller then takes its value, guarded)."""
    import struct
    node = sym.node
    env = node.shape_env
    if env is None:
        return None
    out = []
    try:
        _emit(env.replace(node.expr), out, slots, env)
    except _Specialise:
        return None
    return struct.pack(f"<{len(out)}q", *out)
