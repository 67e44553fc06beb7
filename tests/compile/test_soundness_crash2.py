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


# ------------------------------------------- fake conversion / functionalization refusals
def _write_grad_into_view(a0, a1, a2):
    a2[..., -1] = (a0 * 2).sum()     # a value requiring grad, written through one view of a base
    return a1 * 3, a0 + 1            # another view of that base, first read after the write


def test_view_of_a_base_written_with_grad_is_recorded_or_run_as_python():
    # the fake of a1 (made when first read) is a view of the fake base, which
    # requires grad after the write: torch's converter refused it (AssertionError)
    def make():
        g = torch.Generator().manual_seed(0)
        base = torch.randn(2, 4, generator=g)
        a0 = torch.randn(3, generator=g, dtype=torch.float64).requires_grad_()
        return a0, base[:-1], base[1:], base
    kiln.reset()
    fn = kiln.compile(_write_grad_into_view)
    res = []
    for f in (_write_grad_into_view, fn):
        a0, a1, a2, base = make()
        out = f(a0, a1, a2)
        (out[0].sum() + out[1].sum()).backward()
        res.append((out, base.detach().clone(), a0.grad))
    (oe, be, ge), (oc, bc, gc) = res
    for e, c in zip(oe, oc):
        torch.testing.assert_close(c, e)
        assert c.requires_grad == e.requires_grad
    torch.testing.assert_close(bc, be)
    torch.testing.assert_close(gc, ge)


def _copy_into_expanded(a0):
    v = a0.expand(2, *a0.shape)
    v.copy_(v)                       # eager: a no-op (self is src); functionalization's meta copy_ raises
    return v.float().sum(0) * 2


def test_write_into_an_expanded_view_runs_as_captured():
    kiln.reset()
    x = torch.arange(12).reshape(3, 1, 4)
    out = kiln.compile(_copy_into_expanded)(x)
    torch.testing.assert_close(out, _copy_into_expanded(x))


def test_an_assertion_inside_aot_autograd_is_a_counted_fallback(monkeypatch):
    """torch's AOT autograd asserting on a valid graph (torch 2.11: 'n=copy_,
    n.args[0]=empty_permuted') is torch's failure, not kiln's: the graph runs
    as captured with a counted reason, also under debug."""
    import os
    import torch
    from kiln import backends, trace
    path = os.path.join(os.path.dirname(torch.__file__), "_functorch", "aot_autograd.py")
    ns = {}
    exec(compile("def aot(*a, **k):\n    raise AssertionError('n=copy_, n.args[0]=empty_permuted')\n",
                 path, "exec"), ns)
    monkeypatch.setattr(trace, "aot_module_simplified", ns["aot"])

    def f(x):
        x.add_(1)
        return x * 2

    backends.compiled_graphs.clear()
    x0 = torch.randn(4)
    x, y = x0.clone(), x0.clone()
    out = backends.kiln(torch.fx.symbolic_trace(f), [x0.clone()])(x)
    torch.testing.assert_close(out, f(y))
    torch.testing.assert_close(x, y)
    assert any("AssertionError" in (g.get("reason") or "") for g in backends.compiled_graphs)

    def g(*a, **k):   # an assertion of kiln's own code is a kiln bug: raised under debug
        raise AssertionError("kiln bug")
    monkeypatch.setattr(trace, "aot_module_simplified", g)
    with pytest.raises(kiln.errors.InternalError, match="AssertionError: kiln bug"):
        backends.kiln(torch.fx.symbolic_trace(f), [x.clone()])
