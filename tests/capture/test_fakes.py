"""A recording's own fakes (kiln/fakes.py): each rule gives exactly torch's
fake of the same call (sizes, strides, dtype, device), static and symbolic,
or leaves the call to torch; and a symbolic recording that takes them
compiles to eager's results."""
import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import kiln
from kiln import _capture, fakes


def _mode(symbolic):
    return FakeTensorMode(shape_env=ShapeEnv()) if symbolic else FakeTensorMode()


def _fake(mode, t, symbolic):
    if not symbolic:
        return mode.from_tensor(t)
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if n >= 2 else DimDynamic.STATIC
                                                  for n in t.shape])
    return mode.from_tensor(t, symbolic_context=ctx)


def _same(a, b):
    return (tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype and a.device == b.device and
            all(n < 2 or s == z for n, s, z in zip(a.shape, a.stride(), b.stride())))


def _inputs(shape, layout):
    x = torch.randn(*shape)
    if layout == "transposed" and x.dim() >= 2:
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "sliced":
        x = torch.randn(*shape[:-1], shape[-1] * 2)[..., ::2]
    elif layout == "expanded" and x.dim() >= 2:
        x = torch.randn(1, *shape[1:]).expand(*shape)
    return x


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("shape,layout", [
    ((5,), "contiguous"), ((3, 5), "contiguous"), ((3, 5), "transposed"), ((1, 5), "contiguous"),
    ((2, 3, 5), "contiguous"), ((2, 3, 5), "transposed"), ((2, 3, 5), "sliced"), ((2, 3, 5), "expanded"),
    ((2, 1, 5), "contiguous"), ((4, 2, 3, 5), "contiguous"), ((4, 2, 3, 5), "transposed"),
])
@pytest.mark.parametrize("out_features,bias", [(7, True), (7, False), (1, True)])
def test_linear_fake_is_torchs(shape, layout, out_features, bias, symbolic):
    x, w = _inputs(shape, layout), torch.randn(out_features, shape[-1])
    b = torch.randn(out_features) if bias else None
    mode = _mode(symbolic)
    fx, fw = _fake(mode, x, symbolic), mode.from_tensor(w)
    fb = mode.from_tensor(b) if bias else None
    with mode, torch.no_grad():
        got = fakes.recorded_linear(fx, fw, fb)
        want = torch._C._nn.linear(fx, fw, fb)
    assert got is not NotImplemented
    assert _same(got, want), (got.shape, got.stride(), want.shape, want.stride())
    assert _same(got, torch._C._nn.linear(x, w, b))   # and eager's result's


@pytest.mark.parametrize("case", ["int", "mixed dtypes", "weight 1-d", "bias 2-d", "sizes differ", "empty",
                                  "grad", "autocast", "real tensors"])
def test_linear_fake_leaves_the_rest_to_torch(case):
    mode = FakeTensorMode()
    x, w, b = torch.randn(2, 3, 5), torch.randn(7, 5), torch.randn(7)
    grad, autocast = False, False
    if case == "int":
        x, w, b = x.long(), w.long(), b.long()
    elif case == "mixed dtypes":
        w = w.double()
    elif case == "weight 1-d":
        w = torch.randn(5)
    elif case == "bias 2-d":
        b = torch.randn(3, 7)
    elif case == "sizes differ":
        w = torch.randn(7, 4)
    elif case == "empty":
        x = torch.randn(0, 3, 5)
    elif case == "grad":
        w.requires_grad_(True)
        grad = True
    elif case == "autocast":
        autocast = True
    if case == "real tensors":
        with mode:
            assert fakes.recorded_linear(x, w, b) is NotImplemented
        return
    fx, fw, fb = mode.from_tensor(x), mode.from_tensor(w), mode.from_tensor(b)
    with mode, torch.set_grad_enabled(grad), torch.autocast("cpu", enabled=autocast):
        assert fakes.recorded_linear(fx, fw, fb) is NotImplemented


def test_the_table_names_the_rule():
    assert _capture.fake_overrides[torch._C._nn.linear] is fakes.recorded_linear


def test_a_symbolic_recording_takes_the_linear_fake(monkeypatch):
    calls = []

    def counted(*a, **k):
        r = fakes.recorded_linear(*a, **k)
        calls.append(r is not NotImplemented)
        return r

    monkeypatch.setitem(_capture.fake_overrides, torch._C._nn.linear, counted)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()

    def f(x):
        h = m(x)
        return torch.nn.functional.linear(h, m[2].weight[:, :8], bias=None) + 1

    kiln.reset()
    fn = kiln.compile(f, dynamic=True)
    with torch.no_grad():
        for b, s in itertools.product((2, 3), (4, 9)):
            x = torch.randn(b, s, 16)
            torch.testing.assert_close(fn(x), f(x))
    assert calls and all(calls)
    assert kiln.stats()["fallbacks"] == 0
