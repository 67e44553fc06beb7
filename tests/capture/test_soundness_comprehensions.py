"""Comprehensions, their variables and the cells closures make of them, with
graph breaks inside and around them.  Python 3.12 inlines list/set/dict
comprehensions into the enclosing frame (PEP 709): the frame saves the outer
value of each comprehension variable on its stack (LOAD_FAST_AND_CLEAR), a
variable a closure captures gets a fresh cell in the middle of the frame
(MAKE_CELL after RESUME) and the outer value comes back afterwards
(STORE_FAST).  Every case here runs on 3.11 too (comprehensions there are
functions of their own), where the answers must be the same."""
import pytest
import torch

import kiln


def brk():
    print(end="")   # kiln breaks the graph at print


def _materialize(o, x):
    if callable(o) and not isinstance(o, torch.Tensor):
        return _materialize(o(x) if o.__code__.co_argcount else o(), x)
    if isinstance(o, (list, tuple, set)):
        return [_materialize(i, x) for i in o]
    if isinstance(o, dict):
        return {k: _materialize(v, x) for k, v in o.items()}
    return o


def c_late_binding(x):
    fs = [lambda t: t * i for i in range(3)]   # one cell for i, made mid-frame on 3.12
    return [g(x) for g in fs]


def c_late_binding_returned(x):
    return [lambda: x * i for i in range(3)]


def c_shadows_outer_cell(x):
    i = 10
    g = lambda: x + i                          # the frame's own cell for i
    fs = [lambda t: t * i for i in range(3)]   # another cell, same slot on 3.12
    return g(), [f(x) for f in fs], i


def c_break_inside(x):
    fs = [(brk(), lambda t: t * i)[1] for i in range(3)]
    return [g(x) for g in fs]


def c_break_inside_shadows_cell(x):
    i = x.sum()
    g = lambda: i * 2
    fs = [(brk(), lambda t: t - i)[1] for i in range(3)]   # the outer cell waits on the stack
    return g(), [f(x) for f in fs], i


def c_break_after(x):
    fs = [lambda t: t * i + x for i in range(3)]
    ys = [f(x) for f in fs]
    brk()
    return fs, ys


def c_nested_cells(x):
    return [[lambda: x * i + j for j in range(2)] for i in range(3)]


def c_two_targets(x):
    fs = [lambda: x * a + b for a, b in [(1, 2), (3, 4)]]
    return [f() for f in fs]


def c_dict_set_comprehensions(x):
    d = {i: (lambda: x * i) for i in range(3)}
    s = {brk() or i * 2 for i in range(3)}
    return [d[k]() for k in sorted(d)], sorted(s)


def c_items_before_break(x):
    return [(brk(), x * i)[1] for i in range(4)]


def c_list_display_around_break(x):
    ys = [1, 2]
    return [x, *ys, brk(), x + 1]


def c_outer_value_kept(x, flag):
    if flag:
        i = 5
    ys = [brk() or x * i for i in range(2)]
    return ys, (i if flag else None)


PROGRAMS = [c_late_binding, c_late_binding_returned, c_shadows_outer_cell, c_break_inside,
            c_break_inside_shadows_cell, c_break_after, c_nested_cells, c_two_targets,
            c_dict_set_comprehensions, c_items_before_break, c_list_display_around_break]


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_comprehension_matches_eager(fn, backend):
    cf = kiln.compile(fn, backend=backend)
    for i in range(3):
        x = torch.randn(3) * (i + 1) - i
        torch.testing.assert_close(_materialize(cf(x), x * 3), _materialize(fn(x), x * 3))
        if i == 1:
            kiln.reset()   # recorded afresh (a reset once turned a crash mitigation off)


@pytest.mark.parametrize("order", [(False, True), (True, False)])
def test_outer_value_of_comprehension_variable_kept_across_break(order):
    # the segment resumed inside the comprehension keeps the saved outer
    # value of `i` (unbound on one call, 5 on the other) as it finds it
    cf = kiln.compile(c_outer_value_kept)
    x = torch.randn(2)
    for flag in order + order:
        torch.testing.assert_close(cf(x, flag), c_outer_value_kept(x, flag))


def test_late_binding_lambdas_record_one_graph():
    ex = kiln.explain(c_late_binding)(torch.randn(3))
    assert ex.graph_count == 1 and list(ex.breaks) == [], [b.reason for b in ex.breaks]


# ---------------------------------------------------------------- fast locals
def d_delete_maybe_unbound(x, flag):
    if flag:
        y = x
    del y   # raises UnboundLocalError when flag is false
    return x * 2


@pytest.mark.parametrize("order", [(True, False), (False, True)])
def test_delete_of_an_unbound_local_raises_as_in_eager(order):
    cf = kiln.compile(d_delete_maybe_unbound)
    x = torch.randn(2)
    for flag in order + order:
        if flag:
            torch.testing.assert_close(cf(x, flag), d_delete_maybe_unbound(x, flag))
        else:
            with pytest.raises(UnboundLocalError):
                cf(x, flag)
