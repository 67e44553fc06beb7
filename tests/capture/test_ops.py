"""Ops: arithmetic, torch functions, Tensor methods, operators,
torch.nn.functional, reductions, views, indexing, dtype casts and in-place ops.
Each program runs three times on fresh inputs (some with changing shapes) and
must match eager, including in-place effects on its inputs."""
import operator

import pytest
import torch
import torch.nn.functional as F

from capture_harness import CountingBackend, calls_of, check


def r(*shape):
    return torch.randn(*shape)


def _addcmul_inplace(x, y, z):
    x.addcmul_(y, z, value=0.5)
    return x.sum()


def _mixed_scalar(x, k):
    return x * k + k ** 2 - x / (k + 1)


def _index_put(x, idx):
    x[idx] = -1.0
    return x * 2


def _masked(x):
    y = x.clone()
    y[y < 0] = 0.0
    return y, x[x > 0.5]


def _setitem_slice(x, v):
    x[1:3, ::2] = v
    return x + 0


def _chain_inplace(x):
    x.mul_(2).add_(1).clamp_(-1, 1)
    return x


def _op_augassign(x, y):
    z = x.clone()
    z += y
    z *= 2
    z -= y
    z /= 3
    return z


def _int_ops(a, b):
    return a // b, a % b, a & b, a | b, a ^ b, a << 1, a >> 1, ~a


def _compare_ops(x, y):
    return x < y, x <= y, x == y, x != y, x > y, x >= y, (x > 0) & (y > 0), (x > 0) | ~(y > 0)


def _unary_ops(x):
    return -x, +x, abs(x), x ** 2, 2 ** x, 1 - x, 2 / (x.abs() + 1)


def _matmul_ops(a, b, v):
    return a @ b, torch.mm(a, b), a.matmul(b) @ v, torch.einsum("ij,jk->ik", a, b), torch.bmm(a[None], b[None])


def _reductions(x):
    return (x.sum(), x.mean(1), x.amax(0), x.amin(-1, keepdim=True), x.prod(1), x.std(0), x.var(1, unbiased=False),
            x.norm(), x.logsumexp(1), x.max(1).values, x.min(0).indices, x.argmax(), x.cumsum(0), x.cumprod(1))


def _views(x):
    a = x.view(2, -1)
    b = x.reshape(-1)
    c = x.t().contiguous()
    d = x.unsqueeze(0).squeeze(0)
    e = x.permute(1, 0)
    f = x.flatten()
    g = x.unflatten(1, (2, 3))
    h = x.transpose(0, 1).reshape(3, -1, 2)
    return a * 1, b[2:], c, d + e.t(), f.narrow(0, 1, 3), g.sum(-1), h, x.expand(2, 4, 6).sum(0)


def _split_cat(x):
    a, b = x.split([2, 4], dim=1)
    c = torch.chunk(x, 3, dim=1)
    u = x.unbind(0)
    return torch.cat([b, a], 1), torch.stack(c, 0), torch.hstack(u), torch.vstack([a, a])


def _indexing(x, i):
    return x[0], x[-1, 1:], x[:, i], x[..., 0], x[None, :, None].shape, x[[0, 2]], x[1::2, ::2], x[i, i]


def _gather_scatter(x, idx):
    g = x.gather(1, idx)
    s = torch.zeros_like(x).scatter_add(1, idx, torch.ones_like(g))
    return g, s, x.index_select(0, idx[:, 0]), torch.take_along_dim(x, idx, 1)


def _where_clamp(x, y):
    return torch.where(x > y, x, y), x.clamp(min=-0.5), torch.clamp(y, -0.2, 0.3), torch.maximum(x, y), torch.minimum(x, y)


def _dtype_casts(x):
    return (x.to(torch.float64), x.int(), x.long() + 1, x.bool(), x.half().float(), x.to(torch.int32).float() / 2,
            x.type(torch.float64), (x > 0).to(x.dtype), x.double().sum().float())


def _creation(x):
    n = x.shape[0]
    return (torch.zeros(n, 2), torch.ones_like(x), torch.full((n,), 3.5), torch.arange(n) * 2, torch.eye(n),
            torch.linspace(0, 1, n), x.new_zeros(3), x.new_ones((2, n)), torch.empty(n).fill_(2.0), torch.tril(torch.ones(n, n)))


def _nn_functional(x, w, b):
    return (F.relu(x), F.gelu(x), F.silu(x), F.softmax(x, -1), F.log_softmax(x, 0), F.linear(x, w, b),
            F.layer_norm(x, x.shape[-1:]), F.normalize(x, dim=-1), F.leaky_relu(x, 0.1), F.elu(x), F.hardtanh(x),
            F.softplus(x), F.mse_loss(x, x.flip(0)), F.dropout(x, 0.5, training=False), F.pad(x, (1, 2)))


def _conv_pool(x, w):
    y = F.conv2d(x, w, padding=1)
    return y, F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1).flatten(1), F.interpolate(y, scale_factor=2.0)


def _cross_entropy(logits, target):
    return F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, 1), target, reduction="none")


def _sort_topk(x):
    v, i = x.sort(1, descending=True)
    tv, ti = x.topk(2, dim=1)
    return v, i, tv, ti, x.argsort(0), torch.flip(x, [0]), torch.roll(x, 1, 1)


def _tensor_methods(x):
    return (x.exp(), x.sin().cos(), x.tanh(), x.sigmoid(), x.abs().sqrt(), x.abs().add(1).log(), x.pow(3),
            x.floor(), x.ceil(), x.round(), x.sign(), x.reciprocal().nan_to_num(0.0, 1e3, -1e3), x.lerp(x * 2, 0.25), x.rsqrt().isnan())


def _inplace_input(x, y):
    x.add_(y)
    y.mul_(0.5)
    return (x * y).sum()


def _inplace_view(x):
    x[0].zero_()
    x[:, 1].fill_(7.0)
    x.t()[2].add_(1.0)
    return x.sum(0)


def _out_variant(x, y):
    buf = torch.empty_like(x)
    torch.add(x, y, out=buf)
    return buf


def _scalar_tensor_mix(x):
    s = x.sum()
    return x / s, s * 2 + 1, (x - x.mean()) / (x.std() + 1e-5)


def _broadcasting(a, b, c):
    return a + b, a * c, (a[:, None] - b[None]).abs().sum(-1), torch.broadcast_tensors(a, c)[1]


def _complex_chain(x, y):
    z = torch.tanh(x @ y.t()) * torch.sigmoid(x.sum(1, keepdim=True))
    return z.softmax(-1).max(1)


def _triu_diag(x):
    return x.triu(1), x.diagonal(), torch.diag(x.diagonal()), x.trace(), torch.diag_embed(x[0])


def _bool_reductions(x):
    return (x > 0).any(), (x > -3).all(), (x > 0).sum(1), torch.count_nonzero(x > 0), (x > 0).float().mean()


def _repeat_tile(x):
    return x.repeat(2, 1), x.tile((1, 2)), x.repeat_interleave(2, dim=0), x.expand(3, -1, -1).contiguous()


def _operator_module(x, y):
    return operator.add(x, y), operator.mul(x, 2), operator.neg(y), operator.getitem(x, 0), operator.matmul(x, y.t())


def _integer_tensor(a):
    return a.sum(), a.max(), (a * 2).float().mean(), a.bincount(minlength=10), torch.unique(a, sorted=True)


def _in_place_ops_functional(x):
    y = x.clone()
    y.relu_()
    y.sqrt_()
    y.sub_(x, alpha=0.5)
    y.div_(2)
    torch.sigmoid_(y)
    return y


CASES = [
    ("arith", lambda x, y: x * y + x / (y.abs() + 1) - 2 * x, lambda i: (r(4, 5), r(4, 5))),
    ("arith-shapes", lambda x, y: (x + y) * (x - y), lambda i: (r(2 + i, 3), r(2 + i, 3))),
    ("mixed-scalar", _mixed_scalar, lambda i: (r(5), 1.5 + i)),
    ("augassign", _op_augassign, lambda i: (r(3, 4), r(3, 4))),
    ("int-ops", _int_ops, lambda i: (torch.randint(1, 50, (6,)), torch.randint(1, 7, (6,)))),
    ("compare-ops", _compare_ops, lambda i: (r(7), r(7))),
    ("unary-ops", _unary_ops, lambda i: (r(3, 3),)),
    ("matmul", _matmul_ops, lambda i: (r(3, 4), r(4, 5), r(5))),
    ("reductions", _reductions, lambda i: (r(4, 6),)),
    ("views", _views, lambda i: (r(4, 6),)),
    ("split-cat", _split_cat, lambda i: (r(3, 6),)),
    ("indexing", _indexing, lambda i: (r(4, 5), i)),
    ("gather-scatter", _gather_scatter, lambda i: (r(4, 5), torch.randint(0, 4, (4, 3)))),
    ("where-clamp", _where_clamp, lambda i: (r(6), r(6))),
    ("dtype-casts", _dtype_casts, lambda i: (r(5) * 4,)),
    ("creation", _creation, lambda i: (r(3 + i, 2),)),
    ("nn-functional", _nn_functional, lambda i: (r(4, 6), r(3, 6), r(3))),
    ("conv-pool", _conv_pool, lambda i: (r(1, 2, 6, 6), r(3, 2, 3, 3))),
    ("cross-entropy", _cross_entropy, lambda i: (r(5, 4), torch.randint(0, 4, (5,)))),
    ("sort-topk", _sort_topk, lambda i: (r(4, 5),)),
    ("tensor-methods", _tensor_methods, lambda i: (r(4, 4),)),
    ("inplace-input", _inplace_input, lambda i: (r(4), r(4))),
    ("inplace-view-of-input", _inplace_view, lambda i: (r(3, 4),)),
    ("inplace-chain", _chain_inplace, lambda i: (r(5),)),
    ("addcmul-inplace", _addcmul_inplace, lambda i: (r(3), r(3), r(3))),
    ("index-put", _index_put, lambda i: (r(5), torch.tensor([i, 4 - i]))),
    ("masked", _masked, lambda i: (r(8),)),
    ("setitem-slice", _setitem_slice, lambda i: (r(4, 4), float(i))),
    ("out-variant", _out_variant, lambda i: (r(3), r(3))),
    ("scalar-tensor-mix", _scalar_tensor_mix, lambda i: (r(6) + 3,)),
    ("broadcasting", _broadcasting, lambda i: (r(4, 3), r(3), r(1, 3))),
    ("complex-chain", _complex_chain, lambda i: (r(3, 4), r(5, 4))),
    ("triu-diag", _triu_diag, lambda i: (r(4, 4),)),
    ("bool-reductions", _bool_reductions, lambda i: (r(3, 5),)),
    ("repeat-tile", _repeat_tile, lambda i: (r(2, 3),)),
    ("operator-module", _operator_module, lambda i: (r(3, 3), r(3, 3))),
    ("integer-tensor", _integer_tensor, lambda i: (torch.randint(0, 10, (12,)),)),
    ("inplace-functional", _in_place_ops_functional, lambda i: (r(6),)),
    ("float64", lambda x: (x * x).sum(0) / x.shape[0], lambda i: (r(3, 2).double(),)),
    ("zero-dim", lambda x, y: x * y + x.exp(), lambda i: (torch.tensor(float(i) - 1), torch.tensor(2.0))),
]


@pytest.mark.parametrize("fn,make", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_op(fn, make):
    check(fn, calls_of(make, 3))


def test_counting_backend_sees_one_graph_for_plain_ops():
    cb = CountingBackend()

    def f(x, y):
        return torch.relu(x @ y) + y.sum() * 2

    check(f, calls_of(lambda i: (r(3, 3), r(3, 3)), 3), backend=cb)
    assert cb.count == 1
    assert cb.op_counts[0] >= 4
