"""Soundness (issue 13): crashes the fuzzer found in the compiler path.

- A packed-linear step (oneDNN, with ATen's addmm/mm as its other path)
  whose input is a graph output copied late ('buffer N has no tensor').
- Graphs the fake-tensor / functionalization machinery cannot trace where
  eager runs fine: kiln.compile must run them (as captured or as Python),
  never crash."""
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import backends, config


# ------------------------------------------------- packed linear, late output copy
def _linear_saved_input(a0, a1, w, b):
    mul = a0 * 1                 # an alias of a0, saved for backward: an output copied after the linear
    a1 += 1                      # a 0-d input written in place
    return a1, torch.relu(F.linear(mul, w, b)) + a1


@pytest.mark.parametrize("entry", ["fx", "kiln"])
@pytest.mark.parametrize("packed", [True, False])
def test_packed_linear_reads_the_buffer_it_was_lowered_with(packed, entry, monkeypatch):
    # the LINEAR step's ATen path filled its node references from the node's
    # latest binding (the output copy, made by a later kernel), not from the
    # buffer the step was lowered with
    monkeypatch.setattr(config, "packed_linear", packed)
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    if entry == "fx":   # (symbolic_trace records `a1 += 1` out of place)
        ref = torch.fx.symbolic_trace(_linear_saved_input)
        fn = backends.kiln(ref, [x, torch.zeros(()), lin.weight, lin.bias])
    else:
        kiln.reset()
        ref, fn = _linear_saved_input, kiln.compile(_linear_saved_input)
    a1c, a1e = torch.zeros(()), torch.zeros(())
    outc = fn(x, a1c, lin.weight, lin.bias)
    outc[1].sum().backward()
    gc = (lin.weight.grad.clone(), lin.bias.grad.clone())
    lin.zero_grad()
    oute = ref(x, a1e, lin.weight, lin.bias)
    oute[1].sum().backward()
    assert torch.equal(a1c, a1e)
    for c, e in zip(outc, oute):
        torch.testing.assert_close(c, e)
    torch.testing.assert_close(gc[0], lin.weight.grad)
    torch.testing.assert_close(gc[1], lin.bias.grad)
