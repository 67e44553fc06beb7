"""Soundness of the compiler path (issue 13): aliasing, mutation and autograd
semantics.  Every case runs through kiln.compile (kiln's capture) and
torch.compile(backend="kiln") (TorchDynamo's) and is compared with eager:
values, gradients, the inputs afterwards, which outputs share memory with
the inputs and with each other, and each output's sizes, strides and
storage offset."""
import os

import pytest
import torch

import kiln
from kiln import backends

MODES = ["kiln", "dynamo"]


def _compiled(fn, mode):
    torch._dynamo.reset()
    return kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _layout(t):
    return tuple(t.shape), t.stride(), t.storage_offset()


def _same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _run_both(fn, make, mode, after=None):
    """Runs fn eagerly and compiled on equal fresh inputs; returns
    (eager outputs, eager inputs, compiled outputs, compiled inputs)."""
    cf = _compiled(fn, mode)
    res = []
    for f in (fn, cf):
        torch.manual_seed(0)
        args = make()
        out = _tuple(f(*args))
        if after is not None:
            after(out)
        res.append((out, args))
    return res[0] + res[1]


# ---------------------------------------------------------------- 1. gradients through views
VIEW_GRADS = [
    ("select", lambda a: torch.sin(a[:, 0]), (3, 4)),
    ("select-row", lambda a: torch.sin(a[1]) * a[2], (3, 4)),
    ("unbind", lambda a: torch.sin(a.unbind(1)[0]) * torch.cos(a.unbind(1)[2]), (3, 4)),
    ("slice", lambda a: torch.sin(a[:, 1:3]), (3, 4)),
    ("narrow", lambda a: torch.exp(a.narrow(1, 1, 2)), (3, 4)),
    ("diagonal", lambda a: torch.sin(a.diagonal()), (4, 4)),
    ("expand", lambda a: torch.sin(a[:, :1].expand(3, 4)), (3, 4)),
    ("as_strided", lambda a: torch.sin(a.as_strided((2, 2), (1, 4), 1)), (3, 4)),
    ("unfold", lambda a: torch.sin(a.unfold(1, 2, 2)), (3, 4)),
    ("t", lambda a: torch.sin(a.t()) @ a, (4, 4)),
    ("permute", lambda a: torch.sin(a.permute(2, 0, 1)), (2, 3, 4)),
    ("index", lambda a: torch.sin(a[torch.tensor([0, 2, 2])]), (3, 4)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,shape", VIEW_GRADS, ids=[c[0] for c in VIEW_GRADS])
def test_gradients_through_views_match_eager(name, fn, shape, mode):
    torch.manual_seed(0)
    a = torch.randn(*shape, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    ref = fn(a)
    ref.sum().backward()
    out = _compiled(fn, mode)(b)
    out.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(b.grad, a.grad)


def test_saved_view_reaches_backward_with_its_strides():
    """The forward returns the saved column view of its input; the compiled
    backward was traced for that view's strides (not a packed copy's)."""
    f = lambda a: torch.sin(a[:, 0]) * torch.cos(a[:, 3])
    a = torch.randn(5, 4, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    f(a).sum().backward()
    _compiled(f, "dynamo")(b).sum().backward()
    torch.testing.assert_close(b.grad, a.grad)


# ---------------------------------------------------------------- 2. views of inputs are never written
def _unfolded(x):
    return x.unfold(-1, 2, 2)


INPUT_VIEWS = [
    ("mul", lambda x: _unfolded(x) * 2),
    ("relu", lambda x: torch.relu(_unfolded(x))),
    ("clamp", lambda x: _unfolded(x).clamp(0)),
    ("where", lambda x: torch.where(_unfolded(x) > 0, _unfolded(x), 0.0)),
    ("masked_fill", lambda x: _unfolded(x).masked_fill(_unfolded(x) > 0, 0.0)),
    ("overlapping-windows", lambda x: x.unfold(0, 2, 1).exp()),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", INPUT_VIEWS, ids=[c[0] for c in INPUT_VIEWS])
def test_views_of_inputs_are_never_written(name, fn, mode):
    eo, ei, co, ci = _run_both(fn, lambda: [torch.randn(3, 4)], mode)
    torch.testing.assert_close(ci[0], ei[0], rtol=0, atol=0)
    torch.testing.assert_close(co[0], eo[0])
    assert _same_storage(co[0], ci[0]) == _same_storage(eo[0], ei[0])


def test_view_of_intermediate_is_not_overwritten():
    """An extern view (unfold) of a matmul result that is read again after
    the kernel that consumes the view: the kernel must not store into it."""
    def f(a, b, c):
        y = a @ b
        w = y.unfold(-1, 2, 2) * 2 + 1
        return w.reshape(4, 8) @ c, y @ c

    for mode in MODES:
        eo, _, co, _ = _run_both(f, lambda: [torch.randn(4, 6), torch.randn(6, 8), torch.randn(8, 3)], mode)
        for c, e in zip(co, eo):
            torch.testing.assert_close(c, e)


# ---------------------------------------------------------------- 3. outputs that alias
def _bump_first(out):
    if not torch._debug_has_internal_overlap(out[0]):   # (an expanded output cannot be written)
        out[0].add_(1)


ALIASED_OUTPUTS = [
    ("b,b[1:]", lambda a: (lambda b: (b, b[1:]))(a * 2)),
    ("y,y.t()", lambda a: (lambda y: (y, y.t()))(a + 1)),
    ("y,y.view", lambda a: (lambda y: (y, y.view(-1)))(a + 1)),
    ("views of one value", lambda a: (lambda b: (b[1:], b[:2, 1:]))(a.exp())),
    ("x,x.t() of input", lambda x: (x, x.t())),
    ("x[1:] of input", lambda x: (x[1:], x * 2)),
    ("expanded", lambda a: ((a + 1).expand(2, 3, 4),)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", ALIASED_OUTPUTS, ids=[c[0] for c in ALIASED_OUTPUTS])
def test_outputs_alias_as_in_eager(name, fn, mode):
    eo, ei, co, ci = _run_both(fn, lambda: [torch.randn(3, 4)], mode, after=_bump_first)
    for c, e in zip(co, eo):
        torch.testing.assert_close(c, e)
        assert _layout(c) == _layout(e)
        assert _same_storage(c, ci[0]) == _same_storage(e, ei[0])
    torch.testing.assert_close(ci[0], ei[0])
    for j in range(len(eo)):
        for k in range(j + 1, len(eo)):
            assert _same_storage(co[j], co[k]) == _same_storage(eo[j], eo[k])


@pytest.mark.parametrize("mode", MODES)
def test_output_viewing_a_constant_is_fresh_each_call(mode):
    """A value computed from constants alone is folded at compile time; an
    output that views it must not hand every call the same storage."""
    def f(x):
        m = torch.ones(4, 4).tril().cumsum(0)
        return x + m, m.t()

    cf = _compiled(f, mode)
    x = torch.randn(4, 4)
    first = cf(x)[1]
    first.zero_()
    torch.testing.assert_close(cf(x)[1], f(x)[1])


# ---------------------------------------------------------------- 4. in-place metadata ops on strided inputs
def _strided():
    return torch.randn(5, 4)[1:4, ::2]


METADATA_OPS = [
    ("t_", lambda x: x.t_(), _strided),
    ("transpose_", lambda x: x.transpose_(0, 1), _strided),
    ("unsqueeze_", lambda x: x.unsqueeze_(0), _strided),
    ("squeeze_", lambda x: x.squeeze_(), lambda: torch.randn(5, 1, 4)[1:3]),
    ("as_strided_", lambda x: x.as_strided_((2, 2), (1, 4), 1), _strided),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,op,make", METADATA_OPS, ids=[c[0] for c in METADATA_OPS])
def test_inplace_metadata_ops_leave_the_callers_tensor_as_eager(name, op, make, mode):
    def f(x):
        op(x)
        return x + 1

    eo, ei, co, ci = _run_both(f, lambda: [make()], mode)
    assert _layout(ci[0]) == _layout(ei[0])
    torch.testing.assert_close(ci[0], ei[0])
    torch.testing.assert_close(co[0], eo[0])


# ---------------------------------------------------------------- 5. a 0-d input changed through a view
def _view_add(s, x):
    v = s.view(1)
    v.add_(1)
    return x + s, x - v


@pytest.mark.parametrize("mode", MODES)
def test_single_element_kernel_reads_no_store_of_its_own(mode):
    """A 0-d value stored once (a long expression read twice) and read by
    the other members of a kernel that has no loop: they must read it after
    it is stored."""
    def f(s, x):
        t = s
        for _ in range(20):
            t = t.sin() * 1.1 + 0.3
        return t * 2, t + x

    eo, _, co, _ = _run_both(f, lambda: [torch.tensor(0.7), torch.tensor(1.5)], mode)
    for c, e in zip(co, eo):
        torch.testing.assert_close(c, e)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sdt,xdt,xshape", [(torch.float64, torch.float32, ()), (torch.int64, torch.float32, (1,)),
                                            (torch.float32, torch.float32, (3, 4))])
def test_zero_dim_input_mutated_through_a_view(sdt, xdt, xshape, mode):
    make = lambda: [(torch.randn(()) * 5).to(sdt), torch.randn(xshape).to(xdt)]
    eo, ei, co, ci = _run_both(_view_add, make, mode)
    for c, e in zip(co, eo):
        torch.testing.assert_close(c, e)
    torch.testing.assert_close(ci[0], ei[0])


# ---------------------------------------------------------------- 6. the compiler fails only with a message
@pytest.mark.parametrize("mode", MODES)
def test_matmul_of_a_selected_view_and_its_transpose(mode):
    def f(x):
        v = x[0]
        return v @ v.mT

    x = torch.randn(3, 4, 4)
    torch.testing.assert_close(_compiled(f, mode)(x), f(x))


def test_compiler_stage_failure_names_the_stage(monkeypatch):
    """An internal failure of a C stage is a CompilerError naming the stage
    (never a bare NULL without an exception)."""
    from kiln import _C
    gm = torch.fx.symbolic_trace(lambda x: (x + 1,))
    x = torch.randn(3)
    from kiln import pipeline, trace
    aten = trace._lower(gm, [x])
    desc, _, _ = pipeline._describe(aten, torch.device("cpu"))
    nodes, inputs, outputs, ref = desc
    bad = [n[:8] + (len(nodes) + 5,) if n[0] != "input" else n for n in nodes]
    with pytest.raises(ValueError, match="shares the storage"):
        _C.compile((bad, inputs, outputs, ref), "kn_", False)


# ---------------------------------------------------------------- 7. failures in the backend
def test_cache_write_failure_leaves_no_tmp_files(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
    real_open = open

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

    def full_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        return Full(f) if str(path).endswith(".tmp") else f

    monkeypatch.setattr("builtins.open", full_open)
    f = lambda x: x * 2 + 1
    x = torch.randn(4, 5)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="kiln")(x), f(x))
    monkeypatch.undo()
    left = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert left == []


def test_internal_error_in_the_inference_path_raises_under_debug(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("kiln bug")

    monkeypatch.setattr(kiln.pipeline, "_describe", broken)
    gm = torch.fx.symbolic_trace(lambda x: (x * 2,))
    with pytest.raises(RuntimeError, match="kiln bug"):
        backends.kiln(gm, [torch.randn(3)])
    monkeypatch.setattr(kiln.config, "debug", False)
    with pytest.warns(RuntimeWarning):
        fn = backends.kiln(gm, [torch.randn(3)])
    x = torch.randn(3)
    torch.testing.assert_close(fn(x)[0], x * 2)


def test_mutating_graph_still_takes_aot_autograd_under_debug():
    """Input mutation and aliased outputs are not errors: the inference path
    declines and AOT autograd's wrappers handle them."""
    def f(x):
        x.mul_(2)
        return x[1:]

    gm = torch.fx.symbolic_trace(lambda x: (f(x),))
    x = torch.randn(3, 4)
    y = x.clone()
    out = backends.kiln(gm, [torch.randn(3, 4)])(x)[0]
    torch.testing.assert_close(x, y * 2)
    assert _same_storage(out, x) and out.storage_offset() == 4


# ---------------------------------------------------------------- narrowing casts
def _narrowing_casts():
    return [
        lambda x: x.half().float() * 2,
        lambda x: x.bfloat16().float() + 1,
        lambda x: x.double().half().double() * 2,
        lambda x: (x * 1000).long().half().float() + 0,
        lambda x: x.double().float().double() * 3,
        lambda x: x.to(torch.int64).double() * 1,
        lambda x: ((x * 1e9).to(torch.int64)).to(torch.int32).to(torch.int64) + 1,
        lambda x: (x * 0.3).bool().int() + 1,
    ]


@pytest.mark.parametrize("k", range(8))
def test_narrowing_cast_rounds_when_fused(k):
    """A cast to a narrower dtype rounds (wraps, truncates) even when the
    cast back is fused with it: x.half().float() is not x."""
    fn = _narrowing_casts()[k]
    x = torch.randn(257, generator=torch.Generator().manual_seed(k)) * 3
    e, got = fn(x), kiln.compile(fn)(x)
    assert e.dtype == got.dtype and torch.equal(e, got)


# ---------------------------------------------------------------- overlapping inputs
def _write_then_read(a0, a1):
    a0[1] = 0
    return torch.erf(a1)


def _zero_then_remainder(a0, a1):
    a0.zero_()
    return torch.remainder(a1, 3)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_write_then_read, _zero_then_remainder], ids=["write-read", "zero-remainder"])
def test_mutated_inputs_sharing_storage_take_aot_autograds_path(fn, mode):
    """AOT export refuses inputs that overlap in memory when one is mutated:
    the graph takes AOT autograd's full path (synthetic bases), not an error."""
    def make():
        base = torch.randn(5, 2)
        return [base[:-1], base[1:]]
    eo, ei, co, ci = _run_both(fn, make, mode)
    torch.testing.assert_close(co, eo)
    torch.testing.assert_close(ci, ei)


# ---------------------------------------------------------------- index checks
def test_two_checked_reductions_of_one_gather_in_a_kernel():
    """var() of gathered rows reduces the same checked index twice in one
    kernel: each reduction loop's check accumulators are its own (they were
    declared twice, and the generated C did not compile)."""
    fn = lambda x, i: x[i].var(0, correction=0)
    x, i = torch.randn(4, 4), torch.tensor([1, 3])
    torch.testing.assert_close(kiln.compile(fn)(x, i), fn(x, i))
    with pytest.raises(IndexError):
        kiln.compile(fn)(x, torch.tensor([1, 7]))


@pytest.mark.parametrize("mode", MODES)
def test_integer_addcmul_with_a_float_value(mode):
    """Eager converts addcmul's float `value` to the integer dtype; the
    reference decomposition raised ValueError."""
    def fn(a, b):
        c = a.clone()
        if mode == "kiln":   # (TorchDynamo rewrites addcmul_ itself, as c + value*b*b, before kiln sees it)
            c.addcmul_(b, b, value=-1.5)
        return torch.addcmul(a, a, b, value=2.7), c
    a, b = torch.arange(6).reshape(2, 3), torch.arange(6).reshape(2, 3) - 2
    for e, got in zip(fn(a, b), _compiled(fn, mode)(a, b)):
        assert torch.equal(e, got)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first", [False, True], ids=["warm", "first-call"])
def test_compiled_graph_under_a_device_mode(mode, first):
    """`with torch.device("meta")` changes where factories allocate; the
    compiled program's own allocations name their device (it crashed)."""
    fn = lambda x: (x * 2).sum(0).clamp(0) + 1
    x = torch.randn(4, 5)
    cf = _compiled(fn, mode)
    if not first:
        cf(x)
    with torch.device("meta"):
        ref = fn(x)
        got = cf(x)
    assert got.device == ref.device
    if ref.device.type != "meta":
        torch.testing.assert_close(got, ref)


def test_cuda_tuning_write_failure_leaves_no_tmp_files(tmp_path, monkeypatch):
    """kiln/cuda.py's cache writes (cubins, launch sizes) go through
    _cache_write: a failed write leaves no temporary file."""
    from kiln import cuda

    def no_replace(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cuda, "_tune_path", lambda index, name, b0, t: str(tmp_path / "tune" / f"{name}-{b0}x{t}"))
    monkeypatch.setattr(os, "replace", no_replace)

    class Program:
        def cuda_launch_sizes(self):
            return [("k0", 8, 4, 128, None)]

    cuda.save_tuning(Program(), torch.device("cuda", 0), [0])
    monkeypatch.undo()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def _unfold_tail(a):
    a.unfold(0, 2, 2).mul_(2)     # windows leave a[4] uncovered
    return a + 1


def _unfold_overlap(a):
    u = a.unfold(0, 2, 1)[1:]      # overlapping windows
    u *= 3
    return a * 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_unfold_tail, _unfold_overlap], ids=["tail", "overlap"])
def test_inplace_write_through_an_unfold_view(fn, mode):
    """Functionalization replays a write through unfold with unfold_backward
    (zeroes what no window covers): kiln runs such graphs as captured."""
    eo, ei, co, ci = _run_both(fn, lambda: [torch.arange(5.0) + 1], mode)
    torch.testing.assert_close(co, eo)
    torch.testing.assert_close(ci, ei)


OVERLAPPING_WRITES = [
    ("scatter_add-index-is-self", lambda i: i.scatter_add_(0, i, torch.ones_like(i)) * 1),
    ("index_add-source-is-self", lambda i: i.index_add_(0, i[0], i) * 1),
    ("index_put-values-view-of-self", lambda i: i.index_put_((i[0],), i[1]) * 1),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", OVERLAPPING_WRITES, ids=[c[0] for c in OVERLAPPING_WRITES])
def test_inplace_op_overlapping_its_arguments_raises_like_eager(name, fn, mode):
    """Eager's kernels refuse to write a tensor another argument overlaps;
    functionalization removes the overlap, so kiln must keep the check."""
    i = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(RuntimeError, match="single memory location"):
        fn(i.clone())
    with pytest.raises(RuntimeError, match="single memory location"):
        _compiled(fn, mode)(i.clone())


@pytest.mark.parametrize("mode", MODES)
def test_saved_tensor_written_in_place_raises_only_at_backward(mode):
    """AOT autograd traces the backward at compile time, where autograd's
    version check fails; eager fails only when backward runs."""
    def fn(a0, a1):
        v = torch.minimum(a1, a0)
        a0.floor_divide_(2)
        return v * 1
    a0 = torch.randint(-8, 8, (4, 4))
    a1 = torch.randn(4, 4, requires_grad=True)
    e0, c0 = a0.clone(), a0.clone()
    ref, out = fn(e0, a1), _compiled(fn, mode)(c0, a1)
    torch.testing.assert_close(out, ref)
    assert torch.equal(c0, e0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


DEAD_INDEXING = [
    ("index_put", lambda a, i: (a.var(0).index_put((i,), torch.tensor(1.5)), a * 2)[1]),
    ("gather-scatter_add", lambda a, i: (a.sum(1).scatter_add(0, i, a.sum(1).gather(0, i)), a + 1)[1]),
    ("index_select", lambda a, i: (a.index_select(0, i), a - 1)[1]),
    # used only by dead code (elu's result is unused)
    ("index_select-dead-chain", lambda a, i: (torch.nn.functional.elu(a.index_select(0, i)), a - 1)[1]),
    ("gather-dead-view-chain", lambda a, i: (a.gather(0, i.view(1, 1).expand(1, 4)).t() * 3, a + 2)[1]),
]


def _setitem_dead(a, i):
    v = a.clone()
    v[i] = 0          # a tensor key on a tensor nothing reads afterwards
    return a * 2


DEAD_INDEXING.append(("setitem-dead-target", _setitem_dead))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", DEAD_INDEXING, ids=[c[0] for c in DEAD_INDEXING])
def test_unused_indexing_still_checks_its_indices(name, fn, mode):
    """An indexing op whose result nobody uses still raises on an index out
    of range (lowering eliminated it as dead code)."""
    a, bad = torch.randn(3, 4), torch.tensor([9])
    with pytest.raises((IndexError, RuntimeError)) as eager:
        fn(a, bad)
    cf = _compiled(fn, mode)
    torch.testing.assert_close(cf(a, torch.tensor([1])), fn(a, torch.tensor([1])))
    with pytest.raises(eager.type):
        cf(a, bad)


@pytest.mark.parametrize("mode", MODES)
def test_unused_bitwise_op_on_floats_raises(mode):
    def fn(a):
        a.float() ^ 3
        return a * 2
    a = torch.ones(3, dtype=torch.int32)
    with pytest.raises(Exception) as eager:
        fn(a)
    with pytest.raises(eager.type):
        _compiled(fn, mode)(a)


# ---------------------------------------------------------------- in-place writes into expanded inputs

def _sel_add(a):
    a.select(0, 0).add_(1)
    return a * 2


def _item_iadd(a):
    v = a[1]
    v += 3
    return a.sum()


def _setitem(a, b):
    a[0] = b
    return a + b


def _type_as_select_mul(a):
    v = a.type_as(a)     # the tensor itself (same dtype): a write through it writes `a`
    v[0].mul_(3)
    return a.float() * 2


OVERLAPPING_WRITES = [
    ("select-add_", _sel_add, lambda: [torch.randn(1, 4).expand(5, 4)]),
    ("type_as-mul_", _type_as_select_mul, lambda: [torch.randn(1, 4).expand(2, 4)]),   # fuzzer 1902698
    ("getitem-iadd", _item_iadd, lambda: [torch.randn(4, 1).expand(4, 3).t()]),
    ("setitem", _setitem, lambda: [torch.randn(1, 4).expand(3, 4), torch.randn(4)]),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn,make", OVERLAPPING_WRITES, ids=[c[0] for c in OVERLAPPING_WRITES])
def test_inplace_write_into_an_expanded_input_matches_eager(name, fn, make, mode):
    """A write through a non-overlapping view of an expanded (stride 0)
    input is fine in eager; AOT autograd's write-back copy_ into the whole
    input raised 'more than one element ... refers to a single memory
    location' (fuzz seeds 500148, 500206, ...).  The graph runs as captured."""
    eo, ei, co, ci = _run_both(fn, make, mode)
    for c, e in zip(co + tuple(ci), eo + tuple(ei)):
        torch.testing.assert_close(c, e)


@pytest.mark.parametrize("mode", MODES)
def test_inplace_write_into_a_transposed_input_still_compiles(mode):
    """Only inputs with several elements at one address fall back."""
    before = len(backends.compiled_graphs)
    eo, ei, co, ci = _run_both(_sel_add, lambda: [torch.randn(4, 5).t()], mode)
    torch.testing.assert_close(co[0], eo[0])
    torch.testing.assert_close(ci[0], ei[0])
    assert not any(g.get("fallbacks") for g in backends.compiled_graphs[before:])


# ---------------------------------------------------------------- ops without a derivative
@pytest.mark.parametrize("mode", MODES)
def test_op_without_derivative_raises_at_backward_as_eager(mode):
    """`a // b` has no derivative: eager computes the forward and raises only
    when backward runs; kiln must not raise while compiling (found by the
    fuzzer: AOT autograd traces the backward at compile time)."""
    def fn(a, b):
        return (a // b) * 2 + a.sin()

    a, b = torch.randn(3, 4, requires_grad=True), torch.rand(4) + 0.5
    cf = _compiled(fn, mode)
    out = cf(a, b)
    torch.testing.assert_close(out, fn(a, b))
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide"):
        out.sum().backward()


@pytest.mark.parametrize("mode", MODES)
def test_unbind_view_whose_base_is_written_raises_where_eager_does(mode):
    """A view from unbind whose base is then written in place: eager
    computes the forward and autograd raises only where the view is used;
    kiln must not raise while compiling (found by the fuzzer, seed 903166)."""
    def fn(a):
        b = a * 1
        v = b.unbind(0)[1]
        b.add_(1)
        return v, b

    cf = _compiled(fn, mode)
    a = torch.randn(3, 4, requires_grad=True)
    for f in (fn, cf):
        v, b = f(a)
        torch.testing.assert_close(b, a.detach() + 1)
        with pytest.raises(RuntimeError, match="returns multiple views"):
            v.double()
