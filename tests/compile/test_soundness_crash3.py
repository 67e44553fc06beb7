"""Soundness (issue 13): crashes the fuzzer found (tensor seeds 940440,
947300, 946364, 947890, 948230, 950057, 944873).

- A read of a buffer with no elements (an index into a size-0 dim) loaded
  through an index clamped to -1: a segfault when the tensor's data pointer
  is NULL.  Such reads now touch no memory.
- view(dtype) to another element size on a value kiln laid out differently
  from eager (a size-1 dim's stride, an empty tensor's strides): ATen's
  stride checks refused it where eager's view succeeds.
- Writes that functionalization cannot replay (through an empty view(dtype);
  into an expanded input reached through broadcast_to) run as captured."""
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import backends


def _same(fn, *args, fx=False):
    kiln.reset()
    # (fx: the backend on a symbolic trace, where a compiled graph that raises
    # where eager does not fails the test under debug)
    out = backends.kiln(torch.fx.symbolic_trace(fn), list(args))(*args) if fx else kiln.compile(fn)(*args)
    ref = fn(*args)
    for c, e in zip(out, ref):
        torch.testing.assert_close(c, e)
        assert c.shape == e.shape
    return out, ref


# ------------------------------------------------- reads of empty buffers
def _index_empty_dim(a, i):
    return (a[i, i] * 2,)


def test_an_index_into_a_size0_dim_raises_and_reads_nothing():
    a = torch.randn(1, 0).expand(4, 0)          # a NULL data pointer
    i = torch.tensor([0, 1, 2, 3])
    with pytest.raises(IndexError):
        _index_empty_dim(a, i)
    kiln.reset()
    with pytest.raises(IndexError, match="out of bounds"):
        kiln.compile(_index_empty_dim)(a, i)


# ------------------------------------------------- view(dtype) strides
def _dtype_round_trip(a0):
    return a0, a0.view(torch.int32).view(a0.dtype)


def test_view_dtype_of_a_size1_last_dim_keeps_eagers_strides():
    # bf16 (4, 2, 2) -> int32 (4, 2, 1): the alias kiln handed the second
    # view had stride 0 for the size-1 last dim, which view(bf16) refuses
    out, ref = _same(_dtype_round_trip, torch.randn(4, 2, 2).bfloat16(), fx=True)
    assert out[1].stride() == ref[1].stride()


def _dtype_view_empty(a0, a1):
    v0 = a0 @ a0.mT
    return v0.view(-1), a1.view(torch.int32).view(a1.dtype)


def test_view_dtype_of_an_empty_tensor():
    _same(_dtype_view_empty, torch.randn(3, 2, dtype=torch.float64), torch.randn(0).bfloat16(), fx=True)


def _relu_dtype_view(a0, a1):
    v = torch.relu(1.0 / a1)
    return a0 * 2, v.view(torch.int32).view(v.dtype).var(-1)


def test_view_dtype_of_a_computed_value_with_a_size1_last_dim():
    _same(_relu_dtype_view, torch.randn(3), torch.randn(4, 3, 2).bfloat16(), fx=True)


# ------------------------------------------------- writes run as captured
def _neg_through_empty_dtype_view(a0, a1):
    a0[::2].zero_()
    v1 = a0[..., 1:-1].view(torch.int32)
    v1.neg_()
    return a0 * 1, a1 * 2


def test_write_through_an_empty_dtype_view_runs_as_captured():
    a1 = torch.randn(4, 4)
    mk = lambda: (torch.zeros(1, 1, 4, 0, dtype=torch.int64).expand(1, 1, 4, 0), a1)
    kiln.reset()
    out = kiln.compile(_neg_through_empty_dtype_view)(*mk())
    for c, e in zip(out, _neg_through_empty_dtype_view(*mk())):
        torch.testing.assert_close(c, e)


def _copy_into_broadcast_input(a0, a2):
    v0 = a2.broadcast_to(a2.shape)
    v2 = v0[-1:]
    v2.copy_(v2)                      # eager: self is src, a no-op
    return a0 * 2, torch.addcmul(v0, v0, a2, value=0.5)


def test_write_into_an_expanded_input_through_broadcast_to_runs_as_captured():
    a0 = torch.randn(2, 5)
    a2 = torch.randn(1, 3, 2, 3).bfloat16().expand(3, 3, 2, 3)
    _same(_copy_into_broadcast_input, a0, a2)
