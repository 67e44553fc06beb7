"""Bytecode that differs between CPython 3.11, 3.12 and 3.13, recorded right.

Each program runs on every Python the suite runs on; where a construct
compiles to a version's own opcode (3.13: LOAD_FAST_LOAD_FAST,
STORE_FAST_STORE_FAST, STORE_FAST_LOAD_FAST, CALL_KW, TO_BOOL, COMPARE_OP's
bool flag, FORMAT_SIMPLE / FORMAT_WITH_SPEC / CONVERT_VALUE,
SET_FUNCTION_ATTRIBUTE, the callable-then-NULL call layout; 3.12: the
NULL-then-callable layout, LOAD_ATTR's method bit, RETURN_CONST), the test
first checks the program really contains it, so it cannot pass vacuously.
The programs also end segments on those instructions (a call done for real,
a branch done for real, a frame handed to CPython), where the frame's real
stack must be laid out as the version's evaluator expects.
"""
import dis
import sys

import pytest
import torch

import kiln
from capture_harness import CountingBackend, calls_of, check

PY313 = sys.version_info >= (3, 13)


def ops(fn):
    return {i.opname for i in dis.get_instructions(fn)}


def needs(fn, *names):
    """On 3.13, fn's bytecode contains each of names (so the case tests them)."""
    if PY313:
        missing = set(names) - ops(fn)
        assert not missing, f"{fn.__name__} lacks {missing}: the case no longer tests them"


def r(*shape):
    return torch.randn(*shape)


def swap_and_superinstructions(x, y):
    a, b = x, y             # STORE_FAST_STORE_FAST
    a, b = b, a
    c = a * b               # LOAD_FAST_LOAD_FAST
    d = [t * 2 for t in (a, c)]   # STORE_FAST_LOAD_FAST in the inlined comprehension
    return c + d[0] - d[1] + b


def keyword_call_recorded(x):
    return torch.nn.functional.softmax(x, dim=-1) + torch.sum(x, dim=0, keepdim=True)


def _noisy(x, *, scale):
    print("scale", scale)   # a print: the call is left to run for real
    return x * scale


def keyword_call_done_for_real(x):
    y = x + 1
    z = _noisy(y, scale=3)  # CALL_KW ends the segment: done for real on the frame's stack
    return z * 2


def method_and_function_calls(x):
    y = x.add(1).mul(2)                 # LOAD_ATTR method form
    z = torch.relu(y)                   # LOAD_ATTR of a module, then a function call
    f = torch.tanh
    return f(z) + abs(x.sum())          # a local called: PUSH_NULL after it on 3.13


def star_call(x):
    args = (x, 1)
    kw = {"alpha": 2}
    return torch.add(*args, **kw) + torch.mul(*args)   # CALL_FUNCTION_EX


def branch_on_compare(x):
    if x.sum() > 0:         # COMPARE_OP with the bool flag (3.13), a branch done for real
        return x * 2
    return x - 1


def branch_on_truth(x):
    m = x > 0
    if m.any():             # TO_BOOL (3.13) then POP_JUMP_IF_FALSE on a tensor
        return x + 1
    return x


def negated_truth(x):
    flag = not (x > 10).any()   # TO_BOOL, UNARY_NOT on a tensor: CPython runs the frame from there
    if flag:
        return x * 3
    return x


def branch_in_try(x):
    # a data-dependent test inside a try block: CPython runs the frame from
    # the jump, which on 3.13 reads only bools
    try:
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 2
    except ValueError:
        y = x
    return y + 1


def not_in_try(x):
    try:
        flag = not (x.mean() > 0)
        if flag:
            return x * 5
    except RuntimeError:
        pass
    return x


def fstrings(x):
    n = x.shape[0]
    tag = f"{n}-{n!r}-{n:>4}-{'k'!s:^5}-{n!a}"   # FORMAT_SIMPLE, CONVERT_VALUE, FORMAT_WITH_SPEC
    return x * len(tag)


def closures_with_defaults(x):
    k = 2

    def scale(t, m=3, *, off=1):   # MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE (defaults, kwdefaults, closure)
        return t * m * k + off

    g = lambda t, p=4: scale(t, p)  # noqa: E731
    return g(x) + scale(x, off=2)


def loop_with_generator(x):
    def gen(n):
        for i in range(n):
            yield i

    acc = x
    for i in gen(3):
        acc = acc + i
    return acc + sum(v for v in (1, 2, 3))


def global_call_form(x):
    return max(x.shape[0], 2) * torch.ones_like(x) + len(x.shape)   # LOAD_GLOBAL with its NULL


CASES = [
    (swap_and_superinstructions, ("STORE_FAST_STORE_FAST", "LOAD_FAST_LOAD_FAST"), lambda i: (r(3), r(3))),
    (keyword_call_recorded, ("CALL_KW",), lambda i: (r(2, 4),)),
    (keyword_call_done_for_real, ("CALL_KW",), lambda i: (r(3),)),
    (method_and_function_calls, (), lambda i: (r(4),)),
    (star_call, ("CALL_FUNCTION_EX",), lambda i: (r(3),)),
    (branch_on_compare, ("COMPARE_OP",), lambda i: ((-1) ** i * torch.ones(3),)),
    (branch_on_truth, ("TO_BOOL",), lambda i: ((-1) ** i * torch.ones(3),)),
    (negated_truth, ("TO_BOOL", "UNARY_NOT"), lambda i: (torch.full((3,), 20.0 * (i % 2)),)),
    (branch_in_try, (), lambda i: ((-1) ** i * torch.ones(3),)),
    (not_in_try, ("UNARY_NOT",), lambda i: ((-1) ** i * torch.ones(3),)),
    (fstrings, ("FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE"), lambda i: (r(2 + i),)),
    (closures_with_defaults, ("SET_FUNCTION_ATTRIBUTE",), lambda i: (r(3),)),
    (loop_with_generator, (), lambda i: (r(3),)),
    (global_call_form, (), lambda i: (r(2 + i),)),
]


@pytest.mark.parametrize("fn,opnames,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_recorded_like_eager(fn, opnames, make, capsys):
    needs(fn, *opnames)
    check(fn, calls_of(make, 4))


def test_keyword_call_left_to_run_keeps_the_graphs():
    # the print inside is done for real, the call's own code and the code
    # after the call are still compiled: the graph before the call, the one
    # in _noisy after its print, the one after the call (a fallback to
    # CPython at the CALL_KW would leave one)
    cb = CountingBackend()
    check(keyword_call_done_for_real, calls_of(lambda i: (r(3),)), backend=cb)
    assert cb.count == 3


def test_data_dependent_branch_keeps_recording_after_it():
    cb = CountingBackend()
    check(branch_on_truth, calls_of(lambda i: ((-1) ** i * torch.ones(3),), 4), backend=cb)
    # the graph before the branch and the one after it where x > 0 (the
    # other side returns x unchanged: no graph)
    assert cb.count == 2


def test_compare_flag_is_read_on_313():
    # COMPARE_OP's argument packs the bool flag (16) on 3.13; the comparison
    # itself must come from the high bits, or `<` would be recorded as another
    if PY313:
        arg = next(i.arg for i in dis.get_instructions(branch_on_compare) if i.opname == "COMPARE_OP")
        assert arg & 16
    def lt(x, y):
        if x.shape[0] < y.shape[0]:
            return x.sum()
        return y.sum()

    check(lt, [(r(2), r(3)), (r(3), r(2)), (r(2), r(2))])
    assert kiln.explain(lt)(r(2), r(3)).graph_count == 1
