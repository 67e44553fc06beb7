"""A recording's own fakes (kiln/fakes.py): each rule gives exactly torch's
fake of the same call (sizes, strides, dtype, device), static and symbolic,
or leaves the call to torch; and a symbolic recording that takes them
compiles to eager's results."""
import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import kiln
from kiln import _capture, fakes
from kiln import symbolic as symbolic_


def _mode(symbolic):
    """a recording's fake mode (kiln.symbolic's: its ShapeEnv settings and
    torch's Python dispatcher while entered)"""
    return symbolic_.new_mode() if symbolic else FakeTensorMode()


def _fake(mode, t, symbolic=False):
    """a recording's fake of input t: every dim of size >= 2 a symbol where
    symbolic (kiln.symbolic.symbolic_fake), else static (parameters)"""
    if not symbolic:
        return symbolic_.static_fake(mode, t) if mode.shape_env is not None else mode.from_tensor(t)
    return symbolic_.symbolic_fake(mode, t, "x", tuple(d for d, n in enumerate(t.shape) if n >= 2))[0]


def _same(a, b):
    return (tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype and a.device == b.device and
            all(n < 2 or s == z for n, s, z in zip(a.shape, a.stride(), b.stride())))


_DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


def _inputs(shape, layout, device="cpu", dtype=torch.float32):
    x = torch.randn(*shape, device=device, dtype=dtype)
    if layout == "transposed" and x.dim() >= 2:
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    elif layout == "sliced":
        x = torch.randn(*shape[:-1], shape[-1] * 2, device=device, dtype=dtype)[..., ::2]
    elif layout == "expanded" and x.dim() >= 2:
        x = torch.randn(1, *shape[1:], device=device, dtype=dtype).expand(*shape)
    return x


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("shape,layout", [
    ((5,), "contiguous"), ((3, 5), "contiguous"), ((3, 5), "transposed"), ((1, 5), "contiguous"),
    ((2, 3, 5), "contiguous"), ((2, 3, 5), "transposed"), ((2, 3, 5), "sliced"), ((2, 3, 5), "expanded"),
    ((2, 1, 5), "contiguous"), ((4, 2, 3, 5), "contiguous"), ((4, 2, 3, 5), "transposed"),
])
@pytest.mark.parametrize("out_features,bias", [(7, True), (7, False), (1, True)])
@pytest.mark.parametrize("device", _DEVICES)
def test_linear_fake_is_torchs(shape, layout, out_features, bias, symbolic, device):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x, w = _inputs(shape, layout, device, dtype), torch.randn(out_features, shape[-1], device=device, dtype=dtype)
    b = torch.randn(out_features, device=device, dtype=dtype) if bias else None
    mode = _mode(symbolic)
    fx, fw = _fake(mode, x, symbolic), _fake(mode, w)
    fb = _fake(mode, b) if bias else None
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


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("shape,k", [((8,), 1), ((3, 8), 1), ((2, 3, 8), 1), ((2, 3, 8), 2), ((2, 1, 8), 1),
                                     ((4, 2, 3, 8), 3)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("device", _DEVICES)
def test_layer_norm_fake_is_torchs(shape, k, affine, dtype, symbolic, device):
    x = torch.randn(*shape, dtype=dtype, device=device)
    ns = shape[-k:]
    w = torch.randn(*ns, dtype=dtype, device=device) if affine != "none" else None
    b = torch.randn(*ns, dtype=dtype, device=device) if affine == "both" else None
    mode = _mode(symbolic)
    fx = _fake(mode, x, symbolic)
    fw, fb = (_fake(mode, t) if t is not None else None for t in (w, b))
    with mode, torch.no_grad():
        got = fakes.recorded_layer_norm(fx, ns, fw, fb, 1e-5)
        want = torch.nn.functional.layer_norm(fx, ns, fw, fb, 1e-5)
    assert got is not NotImplemented
    assert _same(got, want), (got.shape, got.stride(), want.shape, want.stride())
    assert _same(got, torch.nn.functional.layer_norm(x, ns, w, b, 1e-5))


@pytest.mark.parametrize("case", ["int input", "mixed dtypes", "shape differs", "weight shape", "transposed",
                                  "empty", "grad", "autocast", "symbolic normalized_shape"])
def test_layer_norm_fake_leaves_the_rest_to_torch(case):
    mode = _mode(True)
    x, w, b, ns = torch.randn(2, 3, 8), torch.randn(8), torch.randn(8), (8,)
    grad, autocast = False, False
    if case == "int input":
        x = x.long()
    elif case == "mixed dtypes":
        w = w.double()
    elif case == "shape differs":
        ns = (4,)
        w, b = torch.randn(4), torch.randn(4)
    elif case == "weight shape":
        w = torch.randn(1, 8)
    elif case == "transposed":
        x = torch.randn(3, 2, 8).transpose(0, 1)
    elif case == "empty":
        x = torch.randn(0, 3, 8)
    elif case == "grad":
        w.requires_grad_(True)
        grad = True
    elif case == "autocast":
        autocast = True
    fx, fw, fb = _fake(mode, x), _fake(mode, w), _fake(mode, b)
    if case == "symbolic normalized_shape":
        fx = _fake(mode, x.clone(), True)
        ns = (fx.shape[-1],)
    with mode, torch.set_grad_enabled(grad), torch.autocast("cpu", enabled=autocast):
        assert fakes.recorded_layer_norm(fx, ns, fw, fb, 1e-5) is NotImplemented


def test_the_table_names_the_rules():
    assert _capture.fake_overrides[torch._C._nn.linear] is fakes.recorded_linear
    assert _capture.fake_overrides[torch.nn.functional.layer_norm] is fakes.recorded_layer_norm


def test_a_symbolic_recording_takes_the_rules(monkeypatch):
    calls = []

    def counted(rule):
        def call(*a, **k):
            r = rule(*a, **k)
            calls.append((rule.__name__, r is not NotImplemented))
            return r
        return call

    for fn, rule in ((torch._C._nn.linear, fakes.recorded_linear),
                     (torch.nn.functional.layer_norm, fakes.recorded_layer_norm)):
        monkeypatch.setitem(_capture.fake_overrides, fn, counted(rule))
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                            torch.nn.Linear(32, 8)).eval()

    def f(x):
        h = m(x)
        return torch.nn.functional.linear(h, m[3].weight[:, :8], bias=None) + 1

    kiln.reset()
    fn = kiln.compile(f, dynamic=True)
    with torch.no_grad():
        for b, s in itertools.product((2, 3), (4, 9)):
            x = torch.randn(b, s, 16)
            torch.testing.assert_close(fn(x), f(x))
    assert {n for n, _ in calls} == {"recorded_linear", "recorded_layer_norm"} and all(t for _, t in calls)
    assert kiln.stats()["fallbacks"] == 0
