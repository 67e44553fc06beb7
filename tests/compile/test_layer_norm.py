"""native_layer_norm lowered whole in C (src/compile/lower_reduce.c
kn_lower_layer_norm) rather than decomposed while tracing, and its fake under
symbolic sizes (kiln/trace.py _layer_norm_fake): results equal eager's, all
three outputs, with and without weight and bias, over one or two normalized
dims, on the CPU and through the CUDA renderer (the emulator)."""
import pytest
import torch

import kiln
from kiln import config, trace

aten = torch.ops.aten


def _cases():
    for dt in (torch.float32, torch.bfloat16, torch.float64):
        for affine in ("both", "weight", "none"):
            for norm in ((16,), (4, 16)):
                yield dt, affine, norm


@pytest.mark.parametrize("emulate", [False, True])
@pytest.mark.parametrize("dt,affine,norm", list(_cases()))
def test_native_layer_norm_lowered_whole_equals_eager(monkeypatch, emulate, dt, affine, norm):
    monkeypatch.setattr(config, "cuda_emulate", emulate)

    def f(x, w, b):
        out, mean, rstd = aten.native_layer_norm.default(x * 2, list(norm), w if affine != "none" else None,
                                                          b if affine == "both" else None, 1e-5)
        return out + 1, mean, rstd
    kiln.reset()
    torch.manual_seed(0)
    x = torch.randn(3, 4, 16, dtype=dt)
    w, b = torch.randn(norm, dtype=dt), torch.randn(norm, dtype=dt)
    got, want = kiln.compile(f)(x, w, b), f(x, w, b)
    tol = 2e-2 if dt == torch.bfloat16 else 1e-5
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, atol=tol, rtol=tol)
    st = kiln.stats()
    assert st["fallbacks"] == 0 and st.get("extern_ops", 0) == 0, st   # (no ATen call: lowered in C)


@pytest.mark.parametrize("emulate", [False, True])
def test_layer_norm_of_symbolic_sizes_takes_kilns_fake(monkeypatch, tmp_path, emulate):
    # (the tests run under KILN_DEBUG, where the fake is checked against
    # torch's own at every use; an empty disk cache, where a lowering an
    # earlier run left would be taken without a trace)
    monkeypatch.setattr(config, "cuda_emulate", emulate)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    # (FakeTensorMode's dispatch cache is its class's: an entry another test
    # left for these sizes would answer without any fake being asked)
    from torch._subclasses.fake_tensor import FakeTensorMode
    if hasattr(FakeTensorMode, "cache_clear"):
        FakeTensorMode.cache_clear()
    made = []
    real = trace._layer_norm_fake

    def counting(me, slow):
        fake = real(me, slow)

        def f(*a, **k):
            made.append(1)
            return fake(*a, **k)
        return f
    monkeypatch.setattr(trace, "_layer_norm_fake", counting)
    ln = torch.nn.LayerNorm(16)

    def f(x):
        return ln(x * 2) + 1
    kiln.reset()
    g = kiln.compile(f, dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 7):
            x = torch.randn(n, n + 1, 16)
            torch.testing.assert_close(g(x), f(x), atol=1e-5, rtol=1e-5)
    assert made and kiln.stats()["fallbacks"] == 0
