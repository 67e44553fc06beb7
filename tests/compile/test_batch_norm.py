"""Inference batch norm lowered whole in C (src/compile/lower_reduce.c
kn_lower_batch_norm) rather than decomposed while tracing, and its fakes
under symbolic sizes: the trace's (kiln/trace.py _batch_norm_fake) and the
recording's (kiln/fakes.py recorded_batch_norm).  Results equal eager's
(values, dtype, layout), with and without weight and bias, contiguous and
channels-last, parameters in another float dtype than x, on the CPU and
through the CUDA renderer (the emulator), with no ATen call."""
import pytest
import torch

import kiln
from kiln import _capture, config, fakes, trace


def _cases():
    for dt in (torch.float32, torch.bfloat16, torch.float64):
        for affine in (True, False):
            for cl in (False, True):
                yield dt, affine, cl


def _bn(c, dt, affine):
    bn = torch.nn.BatchNorm2d(c, affine=affine).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    return bn.to(dt)


@pytest.mark.parametrize("emulate", [False, True])
@pytest.mark.parametrize("dt,affine,cl", list(_cases()))
def test_batch_norm_lowered_whole_equals_eager(monkeypatch, emulate, dt, affine, cl):
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    torch.manual_seed(0)
    bn = _bn(6, dt, affine)

    def f(x):
        return torch.relu(bn(x * 2)) + 1
    x = torch.randn(2, 6, 5, 7, dtype=dt)
    if cl:
        x = x.to(memory_format=torch.channels_last)
    kiln.reset()
    with torch.no_grad():
        got, want = kiln.compile(f)(x), f(x)
    tol = 2e-2 if dt == torch.bfloat16 else 1e-5
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    st = kiln.stats()
    assert st["fallbacks"] == 0 and st.get("extern_ops", 0) == 0, st   # (no ATen call: lowered in C)


@pytest.mark.parametrize("emulate", [False, True])
def test_batch_norm_of_narrow_x_with_float32_statistics(monkeypatch, emulate):
    # eager computes in float32 and returns x's dtype; the statistics are
    # read in the compute dtype
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    torch.manual_seed(0)
    bn = _bn(4, torch.float32, True)

    def f(x):
        return bn(x)
    x = torch.randn(3, 4, 6, 5, dtype=torch.bfloat16)
    kiln.reset()
    with torch.no_grad():
        got, want = kiln.compile(f)(x), f(x)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


def test_batch_norm_statistics_results_equal_eager():
    # the op's other results (empty on the CPU) as eager gives them
    aten = torch.ops.aten

    def f(x, w, b, m, v):
        out, sm, sr = aten._native_batch_norm_legit_no_training.default(x * 2, w, b, m, v, 0.1, 1e-5)
        return out, sm, sr
    torch.manual_seed(0)
    x, w, b, m = torch.randn(2, 3, 4), torch.randn(3), torch.randn(3), torch.randn(3)
    v = torch.rand(3) + 0.5
    kiln.reset()
    got, want = kiln.compile(f)(x, w, b, m, v), f(x, w, b, m, v)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("emulate", [False, True])
@pytest.mark.parametrize("cl", [False, True])
def test_batch_norm_of_symbolic_sizes_takes_kilns_fakes(monkeypatch, tmp_path, emulate, cl):
    # (the tests run under KILN_DEBUG, where both fakes are checked against
    # torch's own at every use; an empty disk cache, where a lowering an
    # earlier run left would be taken without a trace; FakeTensorMode's
    # dispatch cache cleared, whose entries are its class's)
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    from torch._subclasses.fake_tensor import FakeTensorMode
    if hasattr(FakeTensorMode, "cache_clear"):
        FakeTensorMode.cache_clear()
    made = {"trace": 0, "record": 0}
    real_trace, real_record = trace._batch_norm_fake, fakes.recorded_batch_norm

    def counting_trace(me, slow):
        fake = real_trace(me, slow)

        def f(*a, **k):
            made["trace"] += 1
            return fake(*a, **k)
        return f

    def counting_record(*a, **k):
        r = real_record(*a, **k)
        made["record"] += r is not NotImplemented
        return r
    monkeypatch.setattr(trace, "_batch_norm_fake", counting_trace)
    monkeypatch.setitem(_capture.fake_overrides, torch.nn.functional.batch_norm, counting_record)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1).eval()
    bn = _bn(8, torch.float32, True)

    def f(x):
        # (channels-last inside the graph: a channels-last input itself is
        # recorded again at each shape, not made symbolic)
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        return torch.relu(bn(conv(x)))
    kiln.reset()
    g = kiln.compile(f)
    with torch.no_grad():
        for n in (5, 7, 9):
            x = torch.randn(n - 3, 3, n, n + 1)
            torch.testing.assert_close(g(x), f(x), atol=1e-4, rtol=1e-4)
    st = kiln.stats()
    assert made["trace"] and made["record"] and st["fallbacks"] == 0 and st["compiles"] <= 3, (made, st)
