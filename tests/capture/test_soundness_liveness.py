"""Soundness of capture: values the frame never reads again are no graph
outputs.  An extra output that requires grad joins the graph's one autograd
node, so an input reached only through it got a zero gradient where eager
gives None (fuzzer seed capture:300009): a local dead at a graph break, and
a cell only a comprehension closes over, stored before a return.  The
liveness that decides this must keep every local the rest of the frame can
read: loops, branches on data, handlers, locals(), escaping closures."""
import contextlib
import io

import pytest
import torch

import kiln

P = torch.nn.Parameter(torch.ones(4))


def _grads(fn, x, y):
    with contextlib.redirect_stdout(io.StringIO()):
        out = fn(x, y)
    outs = out if isinstance(out, tuple) else (out,)
    outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    g = torch.autograd.grad(sum((o * 1.5).sum() for o in outs), [x, P], allow_unused=True)
    return out, g


def _check(fn, backend="kiln"):
    kiln.reset()
    x = torch.randn(4, 4, requires_grad=True)
    y = torch.randn(4, 4)
    eo, eg = _grads(fn, x, y)
    cf = kiln.compile(fn, backend=backend)
    for _ in range(2):
        ko, kg = _grads(cf, x, y)
        for a, b in zip(eo if isinstance(eo, tuple) else (eo,), ko if isinstance(ko, tuple) else (ko,)):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(b, a)
                assert b.requires_grad == a.requires_grad
            else:
                assert a == b
        for a, b in zip(eg, kg):
            assert (a is None) == (b is None), (eg, kg)
            if a is not None:
                torch.testing.assert_close(b, a)


# ---------------------------------------------------------------- dead values are no outputs
def dead_local_at_break(x, y):
    t0 = x + y
    with torch.no_grad():
        t1 = t0 * 2
    t2 = t1 * P
    print("b")
    return t2 + 1


def dead_cell_at_return(x, y):
    t0 = x + y    # a cell: the comprehension closes over it (3.11)
    t2 = sum([t0 * i for i in range(3)])
    with torch.no_grad():
        t3 = (t2 + 1) * 2
    return t3 * P + t3


def dead_cell_at_break(x, y):
    t0 = x + y    # a cell (3.11), dead from the break on (fuzzer 1802971)
    t2 = sum([t0 * i for i in range(3)])
    with torch.no_grad():
        t3 = t2 * 2
    t6 = t3 * P
    s = sorted([t6 + 3, t6], key=lambda u: float(u.sum()))
    return s[0] - s[-1] + t6


@pytest.mark.parametrize("fn", [dead_local_at_break, dead_cell_at_return, dead_cell_at_break])
def test_dead_value_gives_no_gradient(fn):
    _check(fn)


# ---------------------------------------------------------------- live values stay live
def live_across_loop(x, y):
    acc = x * 0
    for i in range(3):
        t = acc + y
        print("b", i)
        acc = t * 2
    return acc


def live_after_data_branch(x, y):
    t = x * 2
    u = y + 1
    if (t.sum() > 0).item():
        return u * P
    return t - u


def live_in_handler(x, y):
    t = x * 2
    try:
        print("b")
        u = t + y
    except ValueError:
        u = t
    return u


def live_through_locals(x, y):
    t = x * 2
    print("b")
    return locals()["t"] + y


def escaping_closure(x, y):
    t = x * 3
    get = lambda: t
    t = t + y
    return get() * P


def cell_read_after_break(x, y):
    t0 = x + y
    t2 = sum([t0 * i for i in range(3)])
    print("b")
    return sum([t0 * i for i in range(2)]) + t2 * P


def dead_then_reassigned(x, y):
    t = x + y
    print("b")
    t = y * 2
    print("c")
    return t * P


@pytest.mark.parametrize("fn", [live_across_loop, live_after_data_branch, live_in_handler, live_through_locals,
                                escaping_closure, cell_read_after_break, dead_then_reassigned])
@pytest.mark.parametrize("backend", ["kiln", "eager"])
def test_live_values_are_kept(fn, backend):
    _check(fn, backend)


def test_dead_locals_analysis():
    from kiln import _capture

    def f(a, b):
        c = a + 1
        print(c)
        d = b * 2
        while d:
            d = d - c
        return d

    code = f.__code__
    offs = {i.offset // 2: i for i in __import__("dis").get_instructions(code)}
    call = min(o for o, i in offs.items() if i.opname == "CALL")
    dead = {code.co_varnames[i] for i in _capture.dead_locals(code, call)}
    assert dead == {"a", "d"}        # b and c are read later; d is stored before any read
    ret = max(o for o, i in offs.items() if i.opname == "RETURN_VALUE")
    assert {code.co_varnames[i] for i in _capture.dead_locals(code, ret)} == {"a", "b", "c", "d"}

    def g(a):
        print(a)
        return locals()

    assert _capture.dead_locals(g.__code__, 0) == ()


def test_super_keeps_only_the_first_argument_live():
    # zero-argument super() reads the first argument implicitly: that slot
    # stays live, the other locals keep their own liveness (counting them all
    # live made a dead value needing grad a graph output: fuzzer capture:713)
    import dis

    from kiln import _capture

    class B(torch.nn.Module):
        def forward(self, u):
            return u

    class C(B):
        def forward(self, x):
            t0 = super().forward(x * 2)
            print(t0)
            y = super().forward(x)
            return y

    code = C.forward.__code__
    call = max(i.offset // 2 for i in dis.get_instructions(code) if i.argval == "print")
    dead = {code.co_varnames[i] for i in _capture.dead_locals(code, call)}
    assert "self" not in dead and "t0" not in dead and "y" in dead

    def at_end(self, x):
        super()
        return x

    ret = max(i.offset // 2 for i in dis.get_instructions(at_end) if i.opname == "RETURN_VALUE")
    assert "self" not in {at_end.__code__.co_varnames[i] for i in _capture.dead_locals(at_end.__code__, ret)}
