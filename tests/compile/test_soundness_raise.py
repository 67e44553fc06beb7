"""Issue 13: eager raises and kiln must too, with eager's exception, where
kiln's checks used to be lost: an index op whose result is empty, a checked
value overwritten in place before it is read, an index into a constant
(`zeros_like(x).take(i)`), a branch a constant condition drops; a graph
that runs as captured and raises is not run a second time; an output
viewing an input as another dtype under symbolic sizes (AOT autograd
rebuilt it out of bounds).  And kiln must not raise where eager does not:
index_add/index_copy/index_fill on an empty tensor (their decomposition
into index_put checks what eager skips)."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import kiln

MODES = ["kiln", "dynamo"]


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _compiled(fn, mode, **kw):
    return kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln", **kw)


def _outcome(fn, args):
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e).split("\n")[0], args
    return None, None, args


def _same_error(fn, args, mode):
    want_t, want_m, want_args = _outcome(fn, args)
    got_t, got_m, got_args = _outcome(_compiled(fn, mode), args)
    assert want_t is not None
    assert (got_t, got_m) == (want_t, want_m)
    for w, g in zip(want_args, got_args):
        assert torch.equal(w, g)


# ---------------------------------------------------------------- empty results
# kiln checks an index where an output element reads it; an index op whose
# result is empty (a 0-size dim of the data) reads none, where ATen checks
# every index: such an op is ATen's call.
def _embedding_no_columns(ids, w):
    F.embedding(ids, w)
    return ids + 1


def _embedding_no_columns_used(ids, w):
    return F.embedding(ids, w) * 2


def _index_select_empty(x, i):
    return x.index_select(-2, i) + 1


def _index_select_empty_then_index_add(x, i):
    return x.index_add(-2, i, x.index_select(-2, i)) % 2


EMPTY = [
    ("embedding-dead", _embedding_no_columns, lambda: (torch.tensor([0, 5]), torch.zeros(2, 0))),
    ("embedding-used", _embedding_no_columns_used, lambda: (torch.tensor([1, -3]), torch.zeros(2, 0))),
    ("index_select", _index_select_empty, lambda: (torch.zeros(2, 3, 0), torch.tensor([0, 5]))),
    ("index_select-index_add", _index_select_empty_then_index_add,
     lambda: (torch.zeros(2, 3, 0), torch.tensor([1, 0, 6]))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,make", EMPTY, ids=[c[0] for c in EMPTY])
def test_index_checks_run_when_the_result_is_empty(name, fn, make, mode):
    _same_error(fn, make(), mode)


def _index_dim1(x, i):
    return x[:, i] + 1


@pytest.mark.parametrize("mode", MODES)
def test_index_into_a_size_0_dim_with_an_empty_result_raises(mode):
    # ATen's index raises when an indexed dim has size 0 (and the index is
    # not empty), even where the result is empty
    _same_error(_index_dim1, (torch.zeros(0, 0), torch.tensor([0])), mode)


# index_add/index_copy/index_fill decomposed into index_put, which checks the
# indices where eager's kernels, with nothing to write, do not
def _index_fill_empty(x, i):
    v = x + 1
    v.index_fill_(1, i, -1)
    return v


def _index_add_empty(x, i):
    return x.index_add(1, i, torch.ones(x.shape[0], 1))


def _index_copy_empty(x, i):
    return x.index_copy(0, i, torch.ones(1, x.shape[1]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,shape", [(_index_fill_empty, (0, 0)), (_index_add_empty, (2, 0)),
                                      (_index_copy_empty, (0, 0))], ids=["index_fill_", "index_add", "index_copy"])
def test_index_ops_on_an_empty_tensor_do_not_raise(fn, shape, mode):
    x, i = torch.zeros(shape), torch.tensor([5])
    want = fn(x, i)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # (not eager's result after a compiled graph raised)
        got = _compiled(fn, mode)(x, i)
    assert got.shape == want.shape


def test_empty_index_results_stay_empty_without_raising():
    ids, w = torch.tensor([0, 1]), torch.zeros(2, 0)
    got = kiln.compile(_embedding_no_columns_used)(ids, w)
    assert got.shape == (2, 0)
    x = torch.zeros(3, 0)
    assert kiln.compile(lambda x, i: x[i] + 1)(x, torch.tensor([0, 7])).shape == (2, 0)   # eager: no check


# ---------------------------------------------------------------- overwritten before read
# `v = a % b; v.zero_()`: functionalized, the remainder is dead (zeros_like
# replaces it), and its check went with it.  A copy taken before the write
# is kept as an extra output.
def _remainder_zeroed(a, b):
    v = a % b
    v.zero_()
    return v + 1


def _floordiv_view_filled(a, b):
    v = a // b
    v.view(-1).fill_(2)
    return v + 1


def _remainder_copied_over(a, b):
    v = a % b
    v.copy_(b)
    return v * 3


def _remainder_all_set(a, b):
    v = a % b
    v[:] = 3
    return v + 1


def _index_filled(x, i):
    v = x[i]
    v.fill_(3)
    return torch.log_softmax(v, 1)


def _index_filled_grad(x, i):
    v = x[i]
    v.fill_(3)
    return v.sum()


A, B = torch.tensor([[1, 2], [3, 4]]), torch.tensor([[0, 1], [2, 3]])
OVERWRITTEN = [
    ("remainder-zero_", _remainder_zeroed, lambda: (A, B)),
    ("floordiv-view-fill_", _floordiv_view_filled, lambda: (A, B)),
    ("remainder-copy_", _remainder_copied_over, lambda: (A, B)),
    ("remainder-setitem", _remainder_all_set, lambda: (A, B)),
    ("index-fill_", _index_filled, lambda: (torch.randn(4, 4), torch.tensor([0, -9]))),
    ("index-fill_-grad", _index_filled_grad, lambda: (torch.randn(4, 4, requires_grad=True), torch.tensor([6]))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,make", OVERWRITTEN, ids=[c[0] for c in OVERWRITTEN])
def test_checks_of_a_value_overwritten_in_place_still_run(name, fn, make, mode):
    _same_error(fn, make(), mode)


@pytest.mark.parametrize("mode", MODES)
def test_overwritten_checked_values_give_eager_results_when_valid(mode):
    b = torch.tensor([[5, 1], [2, 3]])
    for fn in (_remainder_zeroed, _floordiv_view_filled, _remainder_copied_over, _remainder_all_set):
        torch._dynamo.reset()
        assert torch.equal(_compiled(fn, mode)(A, b), fn(A, b))
    x, i = torch.randn(4, 4), torch.tensor([0, -2])
    torch.testing.assert_close(_compiled(_index_filled, mode)(x, i), _index_filled(x, i))


# ---------------------------------------------------------------- index into a constant
# The load of a constant body (zeros_like) kept its index check as
# where(idx < 0, 0, r), which folds to r when r is that same 0.
def _take_of_zeros(x, i):
    return torch.zeros_like(x).take(i) + 0, x + 1


def _index_of_full(x, i):
    return torch.full_like(x, 0)[i] * 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn,make", [
    (_take_of_zeros, lambda: (torch.zeros(2, 2), torch.tensor([0, 7]))),
    (_index_of_full, lambda: (torch.ones(3, 2), torch.tensor([1, -5]))),
], ids=["take-zeros_like", "index-full_like"])
def test_index_checks_of_a_constant_source(fn, make, mode):
    _same_error(fn, make(), mode)


# ---------------------------------------------------------------- constant conditions
# where(const, x, y) and const && / || folded to one operand, dropping a
# division or index check in the other that eager computed
def _remainder_masked_by_all_true(a, b):
    v = a % b
    v.masked_fill_(torch.ones(3, dtype=torch.bool), 0)
    return v


def _and_of_false(a, b):
    return torch.logical_and(torch.zeros(3, dtype=torch.bool), (a // b) > 0)


def _or_of_true(a, b):
    return torch.logical_or(torch.ones(3, dtype=torch.bool), (a // b) > 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_remainder_masked_by_all_true, _and_of_false, _or_of_true],
                         ids=["masked_fill_-all-true", "and-false", "or-true"])
def test_a_constant_condition_keeps_the_checks_of_the_branch_it_drops(fn, mode):
    _same_error(fn, (torch.tensor([1, 2, 3]), torch.tensor([1, 0, 2])), mode)
    torch._dynamo.reset()
    good = (torch.tensor([1, 2, 3]), torch.tensor([1, 5, 2]))
    assert torch.equal(_compiled(fn, mode)(*good), fn(*good))


# ---------------------------------------------------------------- no second run
# A graph with a dead index check that runs as captured (here: it returns a
# view of an input it writes, under symbolic sizes) was still wrapped to run
# the captured graph again on an error: eager's writes before the failing op
# were applied twice, and the second run raised another error.
def _write_then_bad_index(i0, w, i1):
    i0.mul_(4)
    w.index_select(0, i1)   # dead: kept as an extra output for its check
    w.index_select(0, i0)
    return i0[:1]


def test_a_graph_run_as_captured_is_not_run_again_after_an_error():
    cf = torch.compile(_write_then_bad_index, backend="kiln", dynamic=True)
    w = torch.randn(3, 2)
    cf(torch.tensor([0, 0]), w, torch.tensor([0]))
    args = (torch.tensor([1, 0, 1]), w, torch.tensor([2]))
    want_t, want_m, want_args = _outcome(_write_then_bad_index, args)
    got_t, got_m, got_args = _outcome(cf, args)
    assert want_t is IndexError and (got_t, got_m) == (want_t, want_m)
    assert torch.equal(got_args[0], want_args[0])   # multiplied once


# ---------------------------------------------------------------- dtype views under symbolic sizes
def _view_as_int32(a):
    return a.flatten().view(torch.int32), a + 1


def test_output_viewing_an_input_as_another_dtype_under_symbolic_sizes():
    cf = torch.compile(_view_as_int32, backend="kiln", dynamic=True)
    for n in (4, 5):
        a = torch.arange(2 * n).reshape(2, n)
        got, want = cf(a), _view_as_int32(a)
        for g, w in zip(got, want):
            assert torch.equal(g, w)
        assert got[0].untyped_storage().data_ptr() == a.untyped_storage().data_ptr()


# ---------------------------------------------------------------- a write after the last read of a live tensor
def _read_then_bad_write(x, w, i):
    t = x * 2
    y = t @ w            # t is live, but only read before the write below
    t[i] = 0             # dead write: its index check must still raise
    return y


def test_dead_indexed_write_to_a_tensor_read_only_before_it_still_raises():
    args = (torch.randn(5), torch.randn(5), torch.tensor([[1, 2], [3, 8]]))
    want_t, want_m, _ = _outcome(_read_then_bad_write, args)
    assert want_t is IndexError
    for cf in (kiln.compile(_read_then_bad_write), torch.compile(_read_then_bad_write, backend="kiln")):
        got_t, got_m, _ = _outcome(cf, args)
        assert (got_t, got_m) == (want_t, want_m)
