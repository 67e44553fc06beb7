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


def c_items_before_break(x):
    return [(brk(), x * i)[1] for i in range(4)]


def c_list_display_around_break(x):
    ys = [1, 2]
    return [x, *ys, brk(), x + 1]


PROGRAMS = [c_items_before_break, c_list_display_around_break]


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_comprehension_matches_eager(fn, backend):
    cf = kiln.compile(fn, backend=backend)
    for i in range(3):
        x = torch.randn(3) * (i + 1) - i
        torch.testing.assert_close(_materialize(cf(x), x * 3), _materialize(fn(x), x * 3))
        if i == 1:
            kiln.reset()   # recorded afresh (a reset once turned a crash mitigation off)
