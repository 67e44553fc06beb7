"""Soundness (issue 13): failures the fuzzer found in its fourth pass
(tensor seeds 990000-998999 on the H200 machine's CPUs, torch 2.11).

- A negative constant under a negation rendered as "--1.5f", a C decrement
  (seed 990790): the C compiler refused kiln's kernel."""
import math

import pytest
import torch

import kiln


def _same(fn, *args):
    kiln.reset()
    got = kiln.compile(fn)(*[a.clone() for a in args])
    ref = fn(*[a.clone() for a in args])
    for c, e in zip(got, ref):
        torch.testing.assert_close(c, e, equal_nan=True)
    return got


@pytest.mark.parametrize("dtype,value", [(torch.float32, -1.5), (torch.float64, -2.25), (torch.int64, -3),
                                         (torch.float32, -math.inf), (torch.float64, -math.inf)])
def test_negation_of_a_negative_constant_compiles(dtype, value):
    def f(a):
        a.fill_(value)
        a.neg_()
        return a, -(a * 0 + value), 0 - a.neg()
    _same(f, torch.zeros(2, 3, dtype=dtype))
