"""Soundness of gradients through kiln (issue 13, found by the differential
fuzzer): every case runs through kiln.compile (kiln's capture) and
torch.compile(backend="kiln") (TorchDynamo's), takes the grads of
sum(out * weights) and compares them with eager's."""
import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import run_as_captured

MODES = ["kiln", "dynamo"]


def _compiled(fn, mode):
    torch._dynamo.reset()
    kiln.reset()
    return kiln.compile(fn) if mode == "kiln" else torch.compile(fn, backend="kiln")


def _grads(fn, make, calls=1):
    """Per call: the outputs and the grads of the inputs that require grad."""
    res = []
    for call in range(calls):
        torch.manual_seed(call)
        args = make()
        out = fn(*args)
        out = out if isinstance(out, tuple) else (out,)
        ins = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        g = torch.Generator().manual_seed(7 + call)
        loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() for o in out if o.requires_grad)
        res.append((args, out, torch.autograd.grad(loss, ins)))
    return res


def _check(fn, make, mode, calls=1):
    want = _grads(fn, make, calls)
    got = _grads(_compiled(fn, mode), make, calls)
    for (_, wo, wg), (_, go, gg) in zip(want, got):
        for a, b in zip(wo, go):
            torch.testing.assert_close(b, a, equal_nan=True)
        for a, b in zip(wg, gg):
            torch.testing.assert_close(b, a)
    return want, got


def _expanded():
    return [torch.randn(1, 4).expand(2, 4).detach().requires_grad_()]


# An output that views an input which overlaps itself (expanded): kiln's
# capture rebuilt it with as_strided from the input, whose backward averages
# the gradient over the input's shared elements (eager: unsqueeze's backward).
VIEWS_OF_EXPANDED = [
    ("unsqueeze", lambda a: a.unsqueeze(0)),
    ("narrow", lambda a: a.narrow(-1, 1, 1)),
    ("select", lambda a: a[-1]),
    ("two-views", lambda a: (a.unsqueeze(0), a.t())),
    ("view-and-value", lambda a: (a[0], a.sin())),
    # multi-output views: AOT autograd returns them as fresh tensors (no
    # view to keep), the capture rebuilt them with as_strided
    ("split", lambda a: a.split(2, 1)[0]),
    ("split-of-split", lambda a: a.split(2, 0)[0].split(1, 0)[-1]),
    ("unbind", lambda a: a.unbind(0)[1]),
    ("chunk", lambda a: (a.chunk(2, 0)[1], a.chunk(2, 1)[0])),
    ("split-and-view", lambda a: (a.split(1, 0)[1], a.t(), a * 2)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", VIEWS_OF_EXPANDED, ids=[v[0] for v in VIEWS_OF_EXPANDED])
def test_view_of_an_expanded_input_has_eagers_grad(name, fn, mode):
    want, got = _check(fn, _expanded, mode)

    def shared(args, out):   # and the views still share the input's memory
        return [o.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr() for o in out]
    assert shared(*got[0][:2]) == shared(*want[0][:2])


def _sqrt_unused_index(a, i):
    b = a ** 0.5          # NaN derivative where a < 0
    b[:, i]               # unused: kept only for its bounds check
    return a * 2


def _sqrt_unused_index_put(a, i):
    b = a ** 0.5
    b = torch.bmm(b.mT @ b, b.mT @ b)
    b[:, i] += 1          # an in-place write nobody reads
    return a[0:], torch.log_softmax(a[0, 0, 0], -1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_sqrt_unused_index, _sqrt_unused_index_put])
def test_unused_index_check_takes_no_part_in_backward(fn, mode):
    """The dead index ops kept as extra outputs (so that their bounds
    checks run) required grad: AOT autograd ran their backward with zero
    gradients, and 0 * NaN made the input's grad NaN."""
    _check(fn, lambda: [torch.randn(4, 3, 2, dtype=torch.float64).requires_grad_(), torch.tensor([0, 1, -1])], mode)


def _unused_index_of_input(a, b, i):
    a[:, i]               # a copy of `a` (a tensor index), kept only for its bounds check
    return b * 2


def _unused_index_of_input_view(a, b, i):
    a.t()[i]
    return b * 2, a[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_unused_index_of_input, _unused_index_of_input_view])
def test_input_read_only_by_unused_index_check_gets_no_grad(fn, mode):
    """A dead index op on an input that requires grad, kept as an extra
    output for its bounds check, was not detached (taken for a view of the
    input, `a[:, i]` a getitem): the input got a zero grad where eager's is
    None (fuzzer tensor:930685)."""
    def make():
        return [torch.randn(4, 1).t().detach().requires_grad_(), torch.randn(3, requires_grad=True),
                torch.tensor([0, -2, 3])]

    for f in (fn, _compiled(fn, mode)):
        a, b, i = make()
        out = f(a, b, i)
        out = out if isinstance(out, tuple) else (out,)
        grads = torch.autograd.grad(out[0].sum(), (a, b), allow_unused=True)
        assert grads[0] is None and torch.equal(grads[1], torch.full((3,), 2.0))


def _as_strided_overlapping(a):
    return F.hardtanh(a).as_strided((2, 2), (1, 1))


@pytest.mark.parametrize("mode", MODES)
def test_output_overlapping_itself_sums_its_gradients(mode):
    """An as_strided output whose elements share addresses: AOT autograd
    copies the incoming gradient into the output's layout (keeping one of
    the two gradients of a shared element); eager sums them."""
    _check(_as_strided_overlapping, lambda: [torch.randn(5, 3, 4)[1:].detach().requires_grad_()], mode, calls=3)


def test_may_overlap_geometry():
    t = torch.empty(16)
    assert run_as_captured._may_overlap(t.as_strided((2, 2), (1, 1)))
    assert run_as_captured._may_overlap(t.as_strided((3, 2), (1, 2)))
    assert not run_as_captured._may_overlap(t.as_strided((2, 2), (1, 2)))
    assert not run_as_captured._may_overlap(t.as_strided((2, 2), (4, 1)))   # sliced, not dense: no overlap
    assert not run_as_captured._may_overlap(t.as_strided((2, 4), (0, 1)))   # stride 0: AOT autograd handles it
    assert not run_as_captured._may_overlap(t.as_strided((4, 1), (1, 1)))


def _transpose_under_a_view(a):
    v0 = a * 1
    v1 = v0.T
    v0.transpose_(0, -1)
    return v1 * 2


def _t_under_a_view(a):
    v0 = a * 1
    v1 = v0[1:]
    v0.t_()
    return v1 + 1, v0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fn", [_transpose_under_a_view, _t_under_a_view])
def test_metadata_change_of_a_tensor_with_a_live_view(fn, mode):
    # AOT autograd traces the view's backward with the changed layout and
    # raises "invalid gradient" (aot_eager alike): the graph runs as captured
    # (fuzzer tensor:802193)
    _check(fn, lambda: [torch.randn(4, 2, requires_grad=True)], mode)


@pytest.mark.parametrize("mode", MODES)
def test_backward_eager_rejects_raises_at_backward(mode):
    # pow's derivative for a bool exponent subtracts 1 from it: eager raises
    # when backward runs, kiln's compiled backward must too (fuzzer tensor:800934)
    def fn(a, m):
        return a ** m

    m = torch.tensor([True, False, True])
    for f in (fn, _compiled(fn, mode)):
        out = f(torch.randn(3, requires_grad=True), m)
        with pytest.raises(RuntimeError, match="with a bool tensor is not supported"):
            out.sum().backward()


def _saves_its_output(a):
    return a.cumprod(0) * 1, a.cumprod(0).exp()   # exp's (and cumprod's) backward reads its output


@pytest.mark.parametrize("mode", MODES)
def test_output_saved_for_backward_then_written_raises_at_backward(mode):
    """AOT autograd saves detach(out) for out's backward; kiln returned it
    as a tensor of its own over out's memory (its own version counter), so
    a write into out after the call went unnoticed and backward read the
    written values: a wrong gradient where eager raises (fuzzer
    tensor:962025, across a graph break)."""
    for f in (_saves_its_output, _compiled(_saves_its_output, mode)):
        _, out = f(torch.randn(4, 3, requires_grad=True))
        out.unsqueeze(0).div_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


# eager's backward reads these ops' own results (kiln/_saved.py's table):
# each row (name, op) must make eager raise when its output is written before
# backward, and kiln must raise alike, also when the write is after a break
_SAVING = [
    ("exp", torch.exp), ("tanh", lambda t: t.tanh()), ("sigmoid", torch.sigmoid),
    ("sqrt", lambda t: t.sqrt()), ("rsqrt", torch.rsqrt), ("reciprocal", torch.reciprocal),
    ("relu", F.relu), ("relu_module", torch.nn.ReLU()), ("prod", lambda t: t.prod()),
    ("prod_dim", lambda t: t.prod(1)), ("cumprod", lambda t: t.cumprod(0)),
    ("softmax", lambda t: t.softmax(-1)), ("log_softmax", lambda t: F.log_softmax(t, -1)),
    ("logsumexp", lambda t: t.logsumexp(1)), ("amax", lambda t: t.amax(1)), ("max", lambda t: t.max()),
    ("std", lambda t: t.std(1)), ("norm", lambda t: t.norm(dim=1)),
    ("vector_norm", lambda t: torch.linalg.vector_norm(t)), ("pow_tensor_exp", lambda t: t ** t),
    ("pow_number_base", lambda t: 2 ** t), ("exp_of_view", lambda t: t.exp()[1:]),
]
# and these do not: kiln must not raise either
_NOT_SAVING = [
    ("pow_number_exp", lambda t: t.pow(2)), ("max_dim", lambda t: t.max(1)[0]), ("var", lambda t: t.var(1)),
    ("elu", F.elu), ("index_of_exp", lambda t: t.exp()[torch.tensor([1, 0])]), ("exp_times_1", lambda t: t.exp() * 1),
]


def _then_break(op):
    def f(x):
        y = op(x)
        print("break")
        return y
    return f


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,op", _SAVING + _NOT_SAVING, ids=[n for n, _ in _SAVING + _NOT_SAVING])
@pytest.mark.parametrize("brk", [False, True], ids=["whole", "break"])
def test_saved_result_written_before_backward(name, op, mode, brk, capsys):
    """A write into an output whose op's eager backward reads it (prod, exp,
    softmax, ...) raises at backward as eager does; AOT autograd recomputes
    or saves a copy, so kiln returned a gradient eager refuses (fuzzer
    tensor:970166: prod written after a break).  Outputs eager does not
    save stay writable."""
    fn = _then_break(op) if brk else op
    saves = (name, op) in _SAVING
    for f in (fn, _compiled(fn, mode)):
        x = (torch.rand(3, 4, dtype=torch.float64) + 0.5).requires_grad_()
        y = f(x)
        with torch.no_grad():
            y.add_(1)
        if saves:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        else:
            y.sum().backward()
            assert x.grad is not None


@pytest.mark.parametrize("mode", MODES)
def test_saved_result_written_but_not_differentiated_through(mode):
    """The check fires only where eager's node would run: a written prod
    output that backward never reaches raises nothing.  (A softmax output
    raises here, as under torch.compile: AOT autograd saves the output
    itself and its one backward node checks every saved tensor.)"""
    def f(x):
        return x.prod(-1), x * 2
    for g in (f, _compiled(f, mode)):
        x = torch.randn(3, 4, requires_grad=True)
        s, d = g(x)
        with torch.no_grad():
            s.mul_(2)
        d.sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3, 4), 2.0))


_LIN = torch.nn.Linear(4, 4)


def _dead_local_before_break_with_torch_stack(x):
    t0 = x + 1
    with torch.no_grad():
        t2 = t0 * 2
    t4 = _LIN(t2)
    t5 = torch.stack([r.sum() for r in t4.unbind(0)]) + t4
    print("break")        # t0 (requires grad) is dead here
    return t5 * 1.0


def test_torch_stack_is_no_frame_introspection(capsys):
    """`torch.stack` in the code was taken for `inspect.stack` (frame
    introspection): every local counted as live at the graph break, so the
    dead `t0` became a graph output that requires grad, and x, reached only
    through it, got a zero grad where eager's is None (fuzzer capture:945291)."""
    fn = _dead_local_before_break_with_torch_stack
    for f in (fn, kiln.compile(fn)):
        x = torch.randn(4, 4, requires_grad=True)
        out = f(x)
        assert torch.autograd.grad(out.sum(), [x], allow_unused=True) == (None,)


LIBM_FNS = [
    ("log", lambda a: a.abs().log()),
    ("exp", lambda a: a.exp()),
    ("tanh", lambda a: (a * 0.3).tanh()),
    ("erf", lambda a: torch.special.erf(a * 0.3)),
    ("sin", lambda a: (a * 3).sin()),
    ("sigmoid", lambda a: a.sigmoid()),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name,op", LIBM_FNS, ids=[v[0] for v in LIBM_FNS])
def test_libm_value_stored_and_reduced_is_one_value(name, op, dtype, mode):
    """A value kiln both stores (saved for backward) and recomputes inline in
    another kernel must be the same bits in both: the stored v = log(a) came
    from a vectorised loop (glibc's libmvec), amin's kernel recomputed it with
    the scalar libm, an ulp apart, so amin's backward found no element equal
    to the minimum (0/0: NaN gradients, fuzzer seed tensor:950097)."""
    kiln.reset()   # one code object for every op: a fresh cache each case

    def fn(a):
        v = op(a)
        return v, v.amin(-1), v.amax(-1)

    def make():
        return [torch.randn(257, 1, dtype=dtype).add(0.5).requires_grad_()]

    def make_rows():
        return [torch.randn(129, 3, dtype=dtype).add(0.5).requires_grad_()]

    for mk in (make, make_rows):
        want, got = _check(fn, mk, mode)
        v, lo, hi = got[0][1]
        assert (v == lo.detach().unsqueeze(-1)).any(-1).all()
        assert (v == hi.detach().unsqueeze(-1)).any(-1).all()


def test_output_viewing_a_saved_intermediate_keeps_its_gradient():
    """The forward graph returned `index_select` (saved for backward) and
    its `alias` (the base AOT autograd regenerates the output view from) as
    one tensor object; AOT autograd marks saved tensors non-differentiable by
    object, so the output `v[-1:]` came back a leaf with no grad_fn and its
    gradient was lost (fuzzer seed tensor:971697)."""
    kiln.reset()

    def fn(a, i):
        v = torch.index_select(torch.logit(a), 0, i)
        return (v[-1:],)

    a = torch.tensor([[-0.5, 0.3]])
    i = torch.zeros(4, dtype=torch.long)
    x = a.clone().requires_grad_()
    fn(x, i)[0].sum().backward()
    y = a.clone().requires_grad_()
    out = torch.compile(fn, backend="kiln")(y, i)[0]
    assert out.grad_fn is not None
    out.sum().backward()
    torch.testing.assert_close(y.grad, x.grad, equal_nan=True)


def _bool_view_written(a0, a2):
    v8 = torch.isfinite(a2).squeeze(1)
    v8[..., 2] = a2.sum()     # a view the graph returned, written under grad mode
    return a0 * 2, v8


def test_a_no_grad_view_out_of_a_training_graph_can_be_written_in_place():
    """A view that needs no grad (of a base that needs none) out of AOT
    autograd's Function was a view made inside a custom Function, which
    autograd forbids writing in place under grad mode; eager's may be
    written (fuzzer 2102010)."""
    kiln.reset()
    a0 = torch.randn(4)
    a2 = torch.randn(5, 4)[1:].detach().requires_grad_()
    want = _bool_view_written(a0, a2)
    got = kiln.compile(_bool_view_written)(a0, a2)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def _detach_and_expand(a1):
    v1 = a1.T.to(torch.float64)
    return v1.detach(), v1.expand(2, *v1.shape)   # both aliases of v1


def test_detach_under_symbolic_sizes_needs_no_grad():
    """Under dynamic shapes AOT autograd took a decomposed detach for an
    alias of its input: the output required grad and the input's gradient
    was wrong (fuzzer 2200240).  kiln keeps aten.detach whole."""
    torch._dynamo.reset()
    cf = torch.compile(_detach_and_expand, backend="kiln", dynamic=True)
    for n in (4, 5):
        a = torch.randn(n, 3, requires_grad=True)
        b = a.detach().clone().requires_grad_()
        want, got = _detach_and_expand(a), cf(b)
        assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
        (want[1].sum() + (want[0] * want[1][0]).sum()).backward()
        (got[1].sum() + (got[0] * got[1][0]).sum()).backward()
        torch.testing.assert_close(b.grad, a.grad)
