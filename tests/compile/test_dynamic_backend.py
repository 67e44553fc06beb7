"""Graphs with symbolic sizes from TorchDynamo (torch.compile(backend="kiln")
with automatic dynamic, dynamic=True, mark_dynamic) compile in kiln, per size
(kiln/dynamic.py), instead of running through ATen."""
import pytest
import torch
import torch._dynamo

import kiln
from kiln import dynamic


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _pointwise(x, y):
    return (x * 2 + y).relu().sum(-1) + x.shape[0]


def test_dynamic_true_graph_compiles_in_kiln_per_size():
    cf = torch.compile(_pointwise, backend="kiln", dynamic=True)
    for n in (3, 5, 7, 9, 5, 3):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    st = kiln.stats()
    assert st["fallbacks"] == 0
    assert st["symbolic_graphs"] == 1
    assert st["specializations"] == 4          # 3, 5, 7, 9; the repeats hit
    # each size compiled or planned: the sizes whose kernels came from an
    # earlier size's parametric build are size plans, not compiles
    assert st["compiles"] + st["size_plans"] >= 4
    assert st["compiles"] >= 1


def test_automatic_dynamic_transformer_layer_no_fallback():
    torch.manual_seed(0)
    # train() with dropout 0 computes what eval() does; eval() under no_grad
    # takes torch's fused fast path (one native op in newer torch), not the layer's code
    m = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()
    cm = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for b in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11):
            x = torch.randn(b, 5, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["symbolic_graphs"] >= 1, st


def test_training_with_a_dynamic_batch():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    cm = torch.compile(m, backend="kiln", dynamic=True)
    for b in (3, 5, 2, 7, 5):
        x = torch.randn(b, 8)
        m.zero_grad()
        cm(x).square().sum().backward()
        got = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        m(x).square().sum().backward()
        for g, p in zip(got, m.parameters()):
            torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["specializations"] == 4


def _view_of_size(x):
    n = x.shape[0]
    return x.view(n * 2, -1) + 1, n * 3, x.t()


def test_a_data_independent_size_computation():
    cf = torch.compile(_view_of_size, backend="kiln", dynamic=True)
    for n in (4, 6, 8):
        x = torch.randn(n, 6)
        got, want = cf(x), _view_of_size(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
        torch.testing.assert_close(got[2], want[2])
        assert got[2].data_ptr() == x.data_ptr()    # still a view of the input
    assert kiln.stats()["fallbacks"] == 0


def _slice_by_size(x, y):
    return x * 2 + y[: x.shape[0]]


def test_mark_dynamic_is_symbolic_from_the_first_call():
    cf = torch.compile(_slice_by_size, backend="kiln")
    for n in (3, 4, 6):
        x, y = torch.randn(n, 4), torch.randn(8, 4)
        torch._dynamo.mark_dynamic(x, 0)
        torch.testing.assert_close(cf(x, y), _slice_by_size(x, y))
    st = kiln.stats()
    assert st["symbolic_graphs"] == 1 and st["fallbacks"] == 0, st   # one graph from TorchDynamo
    assert st["specializations"] == 3


def test_lru_keeps_the_newest_sizes(monkeypatch):
    monkeypatch.setattr(kiln.config, "dynamic_specializations", 2)
    cf = torch.compile(_pointwise, backend="kiln", dynamic=True)
    for n in (3, 4, 5, 3):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    assert kiln.stats()["specializations"] == 4   # 3 was evicted by 5, built again


def test_settings_are_applied_around_the_static_compile():
    got = []

    def compile_fn(g, tensors):
        got.append(kiln.config.chunk_kernels)
        return g.forward
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    saved = kiln.config.chunk_kernels
    kiln.config.chunk_kernels = 5
    try:
        ps = dynamic.PerSize(gm, [torch.randn(2)], compile_fn)
    finally:
        kiln.config.chunk_kernels = saved
    torch.testing.assert_close(ps(torch.ones(2)), torch.full((2,), 2.0))
    assert got == [5] and kiln.config.chunk_kernels == saved


def test_a_graph_that_cannot_be_specialised_runs_as_captured(monkeypatch):
    def boom(gm, args, positions):
        raise kiln.errors.Unsupported("a construct kiln cannot specialise")
    monkeypatch.setattr(dynamic, "specialize", boom)
    cf = torch.compile(_pointwise, backend="kiln", dynamic=True)
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    torch.testing.assert_close(cf(x, y), _pointwise(x, y))
    assert kiln.stats()["fallbacks"] == 1
