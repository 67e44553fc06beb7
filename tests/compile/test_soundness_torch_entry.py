"""Soundness of kiln's handling of the graphs it is given (issue 13, failures
the fuzzer found through torch.compile(fn, backend="kiln")): in-place writes
into an element of a view op's list, an extern's argument that is also a
graph output kiln copies, and writes into a 0-d float64 input (for which
AOT autograd restarts TorchDynamo's analysis)."""
import pytest
import torch

import kiln
from kiln import backends

MODES = ["kiln", "dynamo"]


def _compiled(fn, mode):
    torch._dynamo.reset()
    kiln.reset()
    return kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")


def _check(fn, make, mode, calls=2):
    """fn eagerly and compiled, on equal fresh inputs, a few calls: outputs
    and the inputs afterwards are equal (NaNs in the same places)."""
    cf = _compiled(fn, mode)
    for call in range(calls):
        torch.manual_seed(call)
        ea = make()
        torch.manual_seed(call)
        ca = make()
        eo, co = fn(*ea), cf(*ca)
        eo, co = (eo if isinstance(eo, tuple) else (eo,)), (co if isinstance(co, tuple) else (co,))
        for e, c in zip(eo, co):
            torch.testing.assert_close(c, e, equal_nan=True)
        for e, c in zip(ea, ca):
            torch.testing.assert_close(c, e, equal_nan=True)


# ------------------------------------------- 1. writes through an element of split / chunk / unbind
def _split_copy(a):
    v0 = torch.cos(a)
    v1 = v0.split(1, 3)[-1]     # the whole of v0 (size 1 along dim 3), a view
    v1.copy_(a)
    return v0 > v1, v0 + 0       # eager: all False, v0 == a


def _chunk_fill_input(a, b):
    b.chunk(2, 0)[-1].fill_(3)   # a write into the input b
    return b * 2


def _unbind_add(a):
    t = a * 2
    t.unbind(0)[1].add_(1)       # an intermediate written through unbind
    return t.sum(0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,make", [
    (_split_copy, lambda: [torch.randn(4, 5, 4, 1).contiguous(memory_format=torch.channels_last)]),
    (_chunk_fill_input, lambda: [torch.randn(2, 3), torch.randn(4, 4, 4)]),
    (_unbind_add, lambda: [torch.randn(3, 4)]),
], ids=["split-copy", "chunk-fill-input", "unbind-add"])
def test_inplace_write_through_an_element_of_a_view_list(fn, make, mode):
    # the fast inference trace took `getitem(split(x))` for a fresh tensor and
    # made the write functional: the write never reached x (nor the input)
    _check(fn, make, mode)


@pytest.mark.parametrize("mode", MODES)
def test_inplace_write_into_overlapping_inputs_through_chunk(mode):
    def f(a2, a3):
        v0 = a3.chunk(2, 0)[-1]
        v1 = torch.copysign(v0, v0)
        v0.fill_(3)
        return v1 + 1, a2 * 1

    def make():
        o = torch.randn(5, 4, 4)
        o[3, 0, 3] = float("nan")
        return [o[:-1], o[1:]]
    _check(f, make, mode)


# ------------------------------------------- 2. an extern's argument that is also a copied output
def test_extern_argument_that_is_also_a_copied_output():
    # index_put (an ATen call) reads a constant that is also returned (as a
    # fresh copy): the call must get the constant, not the copy made later
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        c = torch.tensor([0])
        y = torch.ops.aten.index_put.default(x, [c], torch.ones(1, 4))
        return (y, c)
    x = torch.randn(2, 4)
    gm = make_fx(f)(x)
    out = backends.compile_graph(gm, [x]).run(x)
    for o, e in zip(out, f(x)):
        torch.testing.assert_close(o, e)


@pytest.mark.parametrize("mode", MODES)
def test_index_fill_with_a_constant_index_under_autograd(mode):
    def f(a0, a3):
        v0 = torch.frac(a0)
        v0.index_fill_(-2, torch.tensor([0]), -1)
        return a0, a3, torch.sigmoid(v0)

    def make():
        o = torch.arange(5)
        return [torch.randn(2, 4).requires_grad_(), o[1:]]
    cf = _compiled(f, mode)
    a = make()
    b = [a[0].detach().clone().requires_grad_(), a[1].clone()]
    eo, co = f(*a), cf(*b)
    for e, c in zip(eo, co):
        torch.testing.assert_close(c, e)
    eo[2].sum().backward()
    co[2].sum().backward()
    torch.testing.assert_close(b[0].grad, a[0].grad)


# ------------------------------------------- 3. writes into a 0-d float64 input
def _mul_(a):
    a.mul_(2)
    return a + 0


def _logical_not_(a, b):
    a.logical_not_()
    return b * 2, torch.nan_to_num(a)


def _index_fill_(a, i):
    a.index_fill_(0, i, 1)
    return i.sum()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,make", [
    (_mul_, lambda: [torch.randn((), dtype=torch.float64)]),
    (_logical_not_, lambda: [torch.randn((), dtype=torch.float64), torch.randn(3)]),
    (_index_fill_, lambda: [torch.randn((), dtype=torch.float64), torch.zeros(3, dtype=torch.int64)]),
], ids=["mul_", "logical_not_", "index_fill_"])
def test_inplace_write_into_a_zero_dim_float64_input(fn, make, mode):
    # AOT autograd restarts TorchDynamo's analysis for such an input, and the
    # graph captured again has lost the write (backend "aot_eager" too)
    _check(fn, make, mode)



def test_inplace_write_into_a_zero_dim_float64_input_after_a_recompile():
    # kiln declines AOT autograd's restart for the first graph; the float it
    # marked for specialization must not stay marked, or TorchDynamo drops
    # the write when it recompiles for a new size (fuzzer tensor:801488)
    def fn(a0, a1):
        a1.fill_(3)
        return a0 * 2

    cf = _compiled(fn, "dynamo")
    for n in (2, 3, 4):
        a1 = torch.zeros((), dtype=torch.float64)
        torch.testing.assert_close(cf(torch.ones(n, requires_grad=True), a1), torch.full((n,), 2.0))
        assert a1.item() == 3.0, n

# ------------------------------------------- 4. outputs viewing inputs the graph writes into
def _row_after_write(a0, a1):
    v0 = a1[1]
    a0.floor_divide_(2)
    return v0.flatten()


def _row_of_other_input(a0, a1):
    a0.mul_(2)
    return a1[1]


def _chunk_after_write(a0, a1):
    v0 = a1.chunk(2, 0)[-1]
    a1.mul_(2)
    return v0, a0 + 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_row_after_write, _row_of_other_input, _chunk_after_write],
                         ids=["row-after-write", "row-of-other-input", "chunk-after-write"])
def test_output_viewing_an_overlapping_input_written_in_place(fn, mode):
    # AOT autograd rebuilds the view from the inputs' synthetic base after the
    # call, and gets it wrong (or raises) in torch 2.13
    def make():
        o = torch.randn(5, 2, 4)
        return [o[:-1], o[1:]]
    _check(fn, make, mode)


@pytest.mark.parametrize("mode", MODES)
def test_chunk_of_an_offset_input_written_in_place_under_dynamic_shapes(mode):
    # the second size recompiles with symbolic sizes: AOT autograd's replay of
    # the chunk onto the input lost the input's storage offset
    def f(a):
        v0 = a.chunk(2, 0)[-1]
        a.mul_(2)
        return (v0,)
    cf = _compiled(f, mode)
    for d in (4, 5, 7):
        base = torch.randn(d + 1, 3, 2)
        ea, ca = base.clone()[1:], base.clone()[1:]
        eo, co = f(ea), cf(ca)
        torch.testing.assert_close(co[0], eo[0])
        torch.testing.assert_close(ca, ea)


# ------------------------------------------- 5. `t[i] = v` through an unfold view
@pytest.mark.parametrize("mode", MODES)
def test_setitem_through_an_unfold_view_of_an_input(mode):
    # functionalization replays the write with unfold_backward, which zeroes
    # what no window covers; the unfold check missed writes by setitem
    def f(a, i):
        v = a.unfold(1, 2, 2)
        v[i] = 0
        return a * 2

    _check(f, lambda: [torch.randn(3, 5), torch.tensor([1])], mode)


def _flatten_one_dim_then_squeeze(a0, a1):
    v0 = a1.flatten(-1)   # no dim flattened: eager returns a1 itself
    a1.squeeze_()
    return (v0,)


def test_an_output_that_is_an_input_itself_sees_later_metadata_changes():
    """`x.flatten(-1)` is x: the graph's output must be the input object, so
    the squeeze_ run after the graph (a break) changes it too (fuzzer
    2302673: kiln's detaching of no-grad views took it for a view to copy)."""
    o = torch.randn(1, 3, 3, 1)
    want = _flatten_one_dim_then_squeeze(o[:-1], o[1:])[0]
    for entry in (lambda f: torch.compile(f, backend="kiln"), kiln.compile):
        torch._dynamo.reset()
        kiln.reset()
        o = torch.randn(1, 3, 3, 1)
        a1 = o[1:]
        got = entry(_flatten_one_dim_then_squeeze)(o[:-1], a1)[0]
        assert got.shape == want.shape and got is a1
