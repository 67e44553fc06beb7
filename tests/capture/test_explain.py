"""kiln.explain as it will be once kiln captures with its own recorder:

    ex = kiln.explain(fn)(*args, **kwargs)

ex.graph_count, ex.graph_break_count, ex.breaks (each with .reason,
.filename, .lineno, .source), ex.ops_per_graph, ex.kernels_per_graph (kiln
backend), ex.guards (list of str); str(ex) is a readable report.

Some of these are expected to fail against the TorchDynamo-based kiln (no
structured breaks, no guards); the capture work makes them pass."""
import inspect
import os

import torch
import torch.nn as nn

import kiln


def three_ops(x, y):
    a = x * y
    b = a + 1
    return torch.relu(b)


def with_print(x):
    y = x.sin() * 2
    print("between graphs")
    return y.cos() + 1


def scaled(activations, *, scale=1.0):
    return (activations * scale).tanh() + activations


def _line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(lines) if needle in line]
    assert len(hits) == 1, hits
    return hits[0]


def test_plain_function_is_one_graph():
    ex = kiln.explain(three_ops)(torch.randn(3, 4), torch.randn(3, 4))
    assert ex.graph_count == 1
    assert ex.graph_break_count == 0
    assert list(ex.breaks) == []
    assert len(ex.ops_per_graph) == 1 and all(isinstance(n, int) for n in ex.ops_per_graph)
    assert ex.ops_per_graph[0] >= 3


def test_plain_function_kernels_per_graph():
    ex = kiln.explain(three_ops)(torch.randn(3, 4), torch.randn(3, 4))
    assert len(ex.kernels_per_graph) == ex.graph_count == 1
    assert all(isinstance(n, int) for n in ex.kernels_per_graph)
    assert ex.kernels_per_graph[0] >= 1


def test_sequential_is_one_graph():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    ex = kiln.explain(m)(torch.randn(3, 4))
    assert ex.graph_count == 1
    assert ex.graph_break_count == 0
    assert len(ex.ops_per_graph) == 1 and ex.ops_per_graph[0] >= 3


def test_print_splits_into_two_graphs():
    ex = kiln.explain(with_print)(torch.randn(5))
    assert ex.graph_count == 2
    assert ex.graph_break_count == 1
    assert len(ex.breaks) == 1
    assert len(ex.ops_per_graph) == 2


def test_break_location_and_source():
    ex = kiln.explain(with_print)(torch.randn(5))
    assert len(ex.breaks) == 1
    b = ex.breaks[0]
    assert isinstance(b.reason, str) and b.reason
    assert isinstance(b.filename, str) and os.path.basename(b.filename) == os.path.basename(__file__)
    assert isinstance(b.lineno, int)
    assert b.lineno == _line_of(with_print, "print(\"")
    assert isinstance(b.source, str)
    assert "print" in b.source
    assert b.source == b.source.strip()


def test_guards_mention_tensor_argument():
    ex = kiln.explain(scaled)(torch.randn(2, 3), scale=2.0)
    assert isinstance(ex.guards, list) and ex.guards
    assert all(isinstance(g, str) for g in ex.guards)
    assert any("activations" in g for g in ex.guards), ex.guards


def test_report_is_readable():
    ex = kiln.explain(with_print)(torch.randn(5))
    text = str(ex)
    assert isinstance(text, str)
    assert "graph" in text
    assert "2" in text  # the graph count appears


def test_explain_leaves_function_usable():
    ex = kiln.explain(three_ops)(torch.ones(2), torch.ones(2))
    assert ex.graph_count == 1
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(three_ops(x, y), torch.relu(x * y + 1))
    f = kiln.compile(three_ops, backend="eager")
    torch.testing.assert_close(f(x, y), torch.relu(x * y + 1))
