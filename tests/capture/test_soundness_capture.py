"""Soundness of kiln's capture (issue 13): no fake value reaches the user,
grad mode around graph breaks, constructors run once with their real state,
lambdas through map/filter/sorted/min/max, and aliasing of views kept across
graph breaks.  Every case is compared with eager."""
import collections
import contextlib
import dataclasses
import io

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import kiln


def brk():
    torch._dynamo.graph_break()


def _quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


# ---------------------------------------------------------------- 2. grad mode around breaks
def g_break_in_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y * 3
        print("b")
        w = z + 1
    return y + 1, z, w, w * x


def g_nested_enable(x):
    with torch.no_grad():
        z = x * 3
        with torch.enable_grad():
            u = x * 4
            print("b")
            v = x * 5
        k = x * 6
    return z, u, v, k, x * 7


def g_set_grad_call(x):
    torch.set_grad_enabled(False)
    a = x * 2
    print("b")
    b = x * 3
    torch.set_grad_enabled(True)
    return a, b, x * 4


def g_set_grad_ctx(x):
    with torch.set_grad_enabled(False):
        a = x * 2
        print("b")
        b = x * 3
    return a, b, x * 4


def g_enable_after_break(x):
    with torch.enable_grad():
        a = x * 2
        brk()
    return a, x * 3


def _h_set_false(x):
    torch.set_grad_enabled(False)
    y = x * 2
    brk()
    return y


def g_inlined_set_false(x):
    y = _h_set_false(x)
    z = x * 4
    torch.set_grad_enabled(True)
    return y, z, x * 5


@torch.enable_grad()
def _h_enable_deco(x):
    return x * 2


def g_enable_decorator(x):
    return _h_enable_deco(x), x * 3


@torch.no_grad()
def _h_no_grad_break(x):
    brk()
    return x * 2


def g_no_grad_decorator_break(x):
    return _h_no_grad_break(x), x * 3


GRAD_PROGRAMS = [g_break_in_no_grad, g_nested_enable, g_set_grad_call, g_set_grad_ctx, g_enable_after_break,
                 g_inlined_set_false, g_enable_decorator, g_no_grad_decorator_break]


def _grad_sig(outs):
    return [(t.requires_grad, t.grad_fn is not None) for t in outs]


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("fn", GRAD_PROGRAMS, ids=lambda f: f.__name__)
def test_grad_mode_around_breaks(fn, outer, backend):
    x = torch.randn(3, requires_grad=True)
    with torch.set_grad_enabled(outer):
        want = _quiet(fn, x)
        mode_after = torch.is_grad_enabled()
    cf = kiln.compile(fn, backend=backend)
    for _ in range(2):
        with torch.set_grad_enabled(outer):
            got = _quiet(cf, x)
            assert torch.is_grad_enabled() == mode_after
        assert _grad_sig(got) == _grad_sig(want)
        for a, b in zip(got, want):
            torch.testing.assert_close(a.detach(), b.detach())
