"""The index algebra of src/compile/expr.c (kn_iadd, kn_imul, kn_idiv,
kn_imod), checked through the test hook kiln._C.index_expr: the canonical
forms fusion depends on (a flat index split back into its coordinates is
those coordinates; terms cancel), and, over random expressions, that the
canonical form has the same value as the expression at every point of its
variables' ranges."""
import itertools
import random
import re

import pytest

from kiln import _C

I, J, K = ("v", 0, 8), ("v", 1, 4), ("v", 2, 3)


def flat(*pairs):
    """sum of coordinate * stride"""
    e = None
    for v, s in pairs:
        t = ("*", v, s)
        e = t if e is None else ("+", e, t)
    return e


@pytest.mark.parametrize("spec,want", [
    (flat((I, 4), (J, 1)), "ADD(MUL(p0, 4), p1)"),
    (("//", flat((I, 4), (J, 1)), 4), "p0"),                       # the row of a flat index
    (("%", flat((I, 4), (J, 1)), 4), "p1"),                        # its column
    (("//", flat((I, 12), (J, 3), (K, 1)), 3), "ADD(MUL(p0, 4), p1)"),
    (("%", ("//", flat((I, 12), (J, 3), (K, 1)), 3), 4), "p1"),     # a middle coordinate
    (("+", ("+", J, ("c", 3)), ("*", J, -1)), "3"),                # terms cancel
    (("*", ("+", I, ("c", 1)), 3), "ADD(MUL(p0, 3), 3)"),          # distributes
    (("%", J, 4), "p1"),                                           # within its range: itself
    (("//", J, 4), "0"),
    (("*", I, 0), "0"),
    # terms in loop-variable order, not in the order their nodes were made
    # (a variable's node is shared by every kernel with a loop of its extent)
    (("+", ("*", K, 5), I), "ADD(p0, MUL(p2, 5))"),
    (("+", ("+", ("*", K, 5), J), ("*", I, 7)), "ADD(ADD(MUL(p0, 7), p1), MUL(p2, 5))"),
])
def test_canonical_forms(spec, want):
    assert _C.index_expr(spec) == want


def test_bad_specs_are_user_errors_not_crashes():
    with pytest.raises(ValueError):
        _C.index_expr(("//", I, 0))
    with pytest.raises(ValueError):
        _C.index_expr(("v", 99, 4))
    with pytest.raises(TypeError):
        _C.index_expr(3)
    deep = I
    for _ in range(100):
        deep = ("+", deep, ("c", 1))
    with pytest.raises(ValueError):
        _C.index_expr(deep)


def _eval_spec(e, env):
    op = e[0]
    if op == "v":
        return env[e[1]]
    if op == "c":
        return e[1]
    a = _eval_spec(e[1], env)
    if op == "+":
        return a + _eval_spec(e[2], env)
    return {"*": a * e[2], "//": a // e[2] if e[2] else None, "%": a % e[2] if e[2] else None}[op]


def _eval_printed(s, env):
    """Evaluate kn_print_expr's text: ADD, MUL, IDIV (floor), IMOD, p<n>, ints."""
    toks = re.findall(r"[A-Z]+|p\d+|-?\d+|[(),]", s)
    pos = 0

    def parse():
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t.startswith("p"):
            return env[int(t[1:])]
        if re.fullmatch(r"-?\d+", t):
            return int(t)
        assert toks[pos] == "("
        pos += 1
        args = [parse()]
        while toks[pos] == ",":
            pos += 1
            args.append(parse())
        assert toks[pos] == ")"
        pos += 1
        if t == "ADD":
            return sum(args)
        if t == "MUL":
            return args[0] * args[1]
        if t == "IDIV":
            return args[0] // args[1]
        if t == "IMOD":
            return args[0] % args[1]
        raise AssertionError("unexpected op %s in %s" % (t, s))
    v = parse()
    assert pos == len(toks)
    return v


def _random_nonneg(r, depth):
    """A random expression that is >= 0 over its variables' ranges."""
    if depth == 0 or r.random() < 0.3:
        return r.choice([I, J, K, ("c", r.randrange(0, 7))])
    op = r.choice(["+", "*", "//", "%"])
    a = _random_nonneg(r, depth - 1)
    if op == "+":
        return ("+", a, _random_nonneg(r, depth - 1))
    return (op, a, r.choice([1, 2, 3, 4, 6, 8, 12]) if op != "*" else r.randrange(0, 9))


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_keep_their_values(seed):
    r = random.Random(seed)
    for _ in range(150):
        spec = _random_nonneg(r, 4)
        printed = _C.index_expr(spec)
        for vals in itertools.product(range(8), range(4), range(3)):
            env = dict(enumerate(vals))
            assert _eval_printed(printed, env) == _eval_spec(spec, env), (spec, printed, vals)
