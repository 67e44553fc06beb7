"""Soundness of values on special inputs (issue 13): NaN, inf and
out-of-range numbers, and expressions a fused kernel recomputes.  Each case
runs through kiln.compile and torch.compile(backend="kiln") and is compared
with eager, NaN positions strictly."""
import warnings

import pytest
import torch

import kiln

MODES = ["kiln", "dynamo"]


def _compiled(fn, mode):
    torch._dynamo.reset()
    return kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")


def _check(fn, args, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # std/var: degrees of freedom <= 0
        want = fn(*args)
        got = _compiled(fn, mode)(*args)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for i, (w, g) in enumerate(zip(want, got)):
        assert w.dtype == g.dtype and w.shape == g.shape, i
        if w.is_floating_point():
            assert torch.equal(w.isnan(), g.isnan()), (i, w, g)
            torch.testing.assert_close(g, w, equal_nan=True)
        else:
            assert torch.equal(w, g), (i, w, g)


# ---------------------------------------------------------------- x - mean(x) recomputed
# A fused kernel recomputes an expression that another kernel reduced (the
# mean); gcc's default -ffp-contract=fast contracted the two copies into
# different multiply-adds, so x - mean(x) of a constant row was not 0 and
# std/var with no degrees of freedom gave inf / a number instead of NaN.
def _normalise_gelu(a0, a1):
    v1 = torch.nn.functional.gelu(a0)
    v3 = (v1 - v1.mean(-1, keepdim=True)) / (v1.std(-1, keepdim=True) + 1e-5)
    return torch.eq(a1, v3).sum()


def _var_of_constant_row(w):
    w = w.unsqueeze(0).clone()
    w[-1] = 7
    return w.var() / 0.0, (w - w.mean()) * 1e9


def _normalise_columns(a, b):
    v = torch.maximum(b, a)
    return (v - v.mean(-2, keepdim=True)) / (v.std(-2, keepdim=True) + 1e-5)


RECOMPUTED = [
    ("gelu-0d-std", _normalise_gelu, lambda: (torch.tensor(0.3), torch.zeros(4, 5, dtype=torch.int64))),
    ("var-constant-row", _var_of_constant_row, lambda: (torch.linspace(-1, 1, 5),)),
    ("std-constant-column", _normalise_columns, lambda: (torch.randn(5, 5), torch.full((1, 5), 9.0))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,make", RECOMPUTED, ids=[c[0] for c in RECOMPUTED])
def test_recomputed_expression_has_one_value(name, fn, make, mode):
    torch.manual_seed(0)
    _check(fn, make(), mode)


# ---------------------------------------------------------------- float -> integer casts
# A C cast of NaN, inf or an out-of-range float is undefined: gcc folded
# (float)(int)x into trunc(x), so a ** x.int() of x = inf was pow(a, inf).
SPECIAL = [float("inf"), float("-inf"), float("nan"), 3e9, -3e9, 1e20, 2.0**31, -(2.0**31) - 256, 2.0**63,
           -(2.0**63), 300.7, -300.7, 70000.5, -70000.5, -1.5, 5.9, -0.0]
INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dst", INT_DTYPES, ids=str)
def test_float_to_int_cast_of_special_values(src, dst, mode):
    x = torch.tensor(SPECIAL * 3, dtype=torch.float64).to(src)

    def fn(t):
        i = t.to(dst)
        return i, i.to(t.dtype) * 1

    _check(fn, (x,), mode)
    _check(fn, (x[2:3],), mode)


@pytest.mark.parametrize("mode", MODES)
def test_pow_by_int_of_nonfinite(mode):
    def fn(a0, a1):
        v1 = a0.int()
        return v1, a1 ** v1

    for x in (float("inf"), float("-inf"), float("nan")):
        _check(fn, (torch.tensor(x), torch.tensor(0.5)), mode)
        _check(fn, (torch.tensor(x), torch.tensor(-1.5)), mode)
