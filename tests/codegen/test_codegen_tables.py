"""The C core's tables are the one source of what they list: the dtype
order Python uses to describe graphs comes from kiln._C (src/kiln.h's
KN_DTYPES), not from a copy kept in step by comment."""
import torch

from kiln import _C, fx_bridge


def test_dtype_codes_come_from_the_c_table():
    assert isinstance(_C.DTYPES, tuple) and len(_C.DTYPES) == 10
    assert fx_bridge.DTYPES == tuple(getattr(torch, n) for n in _C.DTYPES)
    assert fx_bridge.DTYPE_CODE[torch.bfloat16] == _C.DTYPES.index("bfloat16")
    assert fx_bridge.DTYPE_CODE[torch.bool] == 0


def test_dtype_codes_reach_the_compiled_program():
    """A graph over every narrow dtype compiles and computes as eager: the
    codes fx_bridge sends name the dtypes C reads."""
    import kiln

    def f(a, b, c):
        return (a.float() + b.float()).to(torch.bfloat16), (c * 2).to(torch.float16)

    a = torch.randn(8).to(torch.float16)
    b = torch.randn(8).to(torch.bfloat16)
    c = torch.arange(8, dtype=torch.int16)
    out = torch.compile(f, backend="kiln")(a, b, c)
    ref = f(a, b, c)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype
        torch.testing.assert_close(o, r)
