"""Soundness of views of mutated inputs (issue 13): inputs that share
storage with an input written in place, writes through views, in-place
changes of an input's shape.  Each case runs through kiln.compile and
torch.compile(backend="kiln") and is compared with eager: outputs (values and
layout), the inputs afterwards (values and layout), the storage behind them."""
import pytest
import torch

import kiln
from kiln import backends

MODES = ["kiln", "dynamo"]


def _layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset()


def _check(fn, make, mode):
    """fn eagerly and compiled on equal fresh inputs (make() returns the
    storage's owner and the arguments): everything the caller can see after
    the call must match."""
    torch._dynamo.reset()
    cf = kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")
    res = []
    for f in (fn, cf):
        owner, args = make()
        out = f(*args)
        res.append((owner, args, out if isinstance(out, tuple) else (out,)))
    (eb, ea, eo), (cb, ca, co) = res
    assert torch.equal(cb, eb)
    for e, c in list(zip(ea, ca)) + list(zip(eo, co)):
        if e.numel() or any(e is a for a in ea):
            assert _layout(c) == _layout(e)
        else:   # a fresh empty result: its strides carry nothing
            assert (c.shape, c.storage_offset()) == (e.shape, e.storage_offset())
        assert torch.equal(c, e)
    for e, c in zip(eo, co):   # an output that shares the caller's storage does so as in eager
        assert (c.untyped_storage().data_ptr() == cb.untyped_storage().data_ptr()) == \
            (e.untyped_storage().data_ptr() == eb.untyped_storage().data_ptr())


def _overlapping():
    base = torch.arange(24.0).reshape(6, 4)
    return base, [base[:-1], base[1:]]


# ---------------------------------------------------------------- an output viewing one of several overlapping inputs
def _write_x_view_y(x, y):
    x.add_(1)
    return y.view(-1), y[1:].t()


def _write_y_return_x(x, y):
    y[2] = 7
    return x.permute(1, 0) * 1, x.view(-1)


def _write_through_view_return_view(x, y):
    v = x.unsqueeze(0)
    v[0, 1] = 0
    return (v, y + 1)


def _write_x_split_y(x, y):
    v = y.split(1, -2)[0]
    x.logical_not_()
    v.sub_(v, alpha=2)
    return (v,)


def _disjoint_rows():
    base = torch.arange(8.0).reshape(2, 4) - 3
    return base, [base[:1], base[1:]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,make", [(_write_x_view_y, _overlapping), (_write_y_return_x, _overlapping),
                                     (_write_through_view_return_view, _overlapping),
                                     (_write_x_split_y, _disjoint_rows)],
                         ids=["write-x-view-y", "write-y-view-x", "write-through-view", "disjoint-split"])
def test_output_viewing_an_input_that_shares_storage_with_a_mutated_one(fn, make, mode):
    """A write into one of several inputs that share storage makes AOT
    autograd stand a synthetic base for them; an output viewing an input is
    then rebuilt from it wrongly: by replaying the input's view ops onto the
    base (it asserted 'incorrect out shape after application of ViewMeta
    sequence', or an op raised on the wrong shape) or, with view replay off,
    at another input's elements (disjoint-split).  kiln runs such graphs as
    captured."""
    _check(fn, make, mode)


# ---------------------------------------------------------------- a `t[i] = v` through an unfold view
def _setitem_through_unfold(x, i):
    v = x.unfold(1, 2, 3)      # windows leave x[:, 2] and x[:, 4] uncovered
    v[i] = 0
    return x + 1


@pytest.mark.parametrize("mode", MODES)
def test_setitem_through_an_unfold_view(mode):
    """Functionalization replays a write through unfold onto the base with
    unfold_backward (zeroing what no window covers): a `t[i] = v` through an
    unfold view runs as captured, like the in-place methods."""
    def make():
        x = torch.arange(20.0).reshape(4, 5) + 1
        return x, [x, torch.tensor([0, 2])]
    _check(_setitem_through_unfold, make, mode)


# ---------------------------------------------------------------- an input's shape changed in place and written
def _unsqueeze_then_add(a):
    a.unsqueeze_(0)
    a.add_(1)
    return a * 2


def _setitem_then_unsqueeze(a, i):
    a[i] = 0
    a.unsqueeze_(0)
    return (a,)


def _t_then_mul(a):
    a.t_()
    a.mul_(3)
    return a.sum(0)


def _view_written_after_transpose(a):
    v = a[1:]
    a.transpose_(0, 1)
    v.sub_(1)
    return a + 0


INPUT_LAYOUTS = {
    "offset": lambda base: base[1:],
    "transposed": lambda base: base.t()[1:],
}


@pytest.mark.parametrize("layout", list(INPUT_LAYOUTS))
@pytest.mark.parametrize("fn", [_unsqueeze_then_add, _setitem_then_unsqueeze, _t_then_mul,
                                _view_written_after_transpose],
                         ids=["unsqueeze-add", "setitem-unsqueeze", "t-mul", "view-written-after-transpose"])
def test_input_reshaped_in_place_and_written(fn, layout):
    """AOT autograd writes an input whose geometry and elements both change
    back with as_strided_ to the geometry of the freshly computed value
    (offset 0, contiguous) and then copy_: the caller's tensor got the wrong
    strides and offset and the values landed elsewhere in its storage.  kiln
    runs such graphs as captured, with a reason.  (kiln.compile only:
    TorchDynamo breaks the graph at an in-place shape change of an input.)"""
    def make():
        base = torch.arange(24.0).reshape(6, 4)
        args = [INPUT_LAYOUTS[layout](base)]
        if fn is _setitem_then_unsqueeze:
            args.append(torch.tensor([1]))
        return base, args
    backends.reset()
    _check(fn, make, "kiln")
    assert any("sizes/strides are both changed" in g.get("reason", "") for g in backends.compiled_graphs)


@pytest.mark.parametrize("mode", MODES)
def test_input_reshaped_in_place_without_a_write_still_compiles(mode):
    """Only the shape changing, the graph still compiles (AOT autograd
    rebuilds the input's geometry from a view of it, which is exact)."""
    def fn(a):
        a.unsqueeze_(0)
        return a + 1

    def make():
        base = torch.arange(24.0).reshape(6, 4)
        return base, [base[1:]]
    backends.reset()
    _check(fn, make, mode)
    assert backends.compiled_graphs and not any(g.get("fallbacks") for g in backends.compiled_graphs)


# ---------------------------------------------------------------- kiln's capture: a view reshaped in place
def _view_transposed_in_place(a):
    v = a.view(3, 4)
    v.transpose_(0, 1)
    return v, a * 1


def _view_unsqueezed_in_place(a):
    v = a[1:]
    v.unsqueeze_(1)
    return (v,)


def _empty_view_transposed_in_place(a, i):
    a.abs_()
    v = a.reshape(-1, 3)
    v.transpose_(0, -1)
    return v, v.index_put((i,), v[i], accumulate=True)


@pytest.mark.parametrize("fn,make", [
    (_view_transposed_in_place, lambda: (lambda x: (x, [x]))(torch.arange(12.0).reshape(4, 3))),
    (_view_unsqueezed_in_place, lambda: (lambda x: (x, [x]))(torch.arange(12.0).reshape(4, 3))),
    (_empty_view_transposed_in_place, lambda: (lambda x: (x, [x, torch.tensor([0, 2])]))(torch.zeros(0, 2, 4))),
], ids=["transpose_", "unsqueeze_", "empty-transpose_"])
def test_output_view_changed_in_place_keeps_its_new_shape(fn, make):
    """kiln's recorder notes a view's geometry (to rebuild it from the tensor
    it views after the graph) when the view is made; an in-place metadata op
    on the view afterwards left that note stale, and the caller got the view
    with its old shape.  The geometry is read when the segment is finished."""
    _check(fn, make, "kiln")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("step", [1, 2])
def test_as_strided_of_a_view_of_a_computed_value_indexes_the_base_storage(step, mode):
    """`(1 / a)[:, ::2].as_strided(...)` addresses the storage of 1 / a, not a
    compact copy of the slice (fuzzer tensor:1702321)."""
    def fn(a):
        v = (1.0 / a)[:, ::step]
        return torch.expm1(v.as_strided((2, 2), (1, 1))), v.as_strided((3,), (2,), 1) * 2

    a = torch.randn(2, 4, 2)
    want = fn(a.clone())
    kiln.reset()
    torch._dynamo.reset()
    cf = kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")
    for w, g in zip(want, cf(a.clone())):
        torch.testing.assert_close(g, w)
