"""Issue 15: torch.compiler's markers mean under kiln what they mean under
torch.compile (each failed on the code before): allow_in_graph is one graph
node, assume_constant_result runs once while recording, reset clears kiln
too; kiln.disable / allow_in_graph / assume_constant_result are the same
markers; explain says so when a function captured nothing."""
import torch

import kiln

_CALLS = []


@torch.compiler.allow_in_graph
def _opaque(x):
    return x * 2 + 1


def _uses_opaque(x):
    return _opaque(x.sin()).cos()


def test_allow_in_graph_is_one_node_not_inlined():
    x = torch.randn(4)
    ex = kiln.explain(_uses_opaque, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count, ex.ops_per_graph) == (1, 0, [3]), ex
    torch.testing.assert_close(kiln.compile(_uses_opaque)(x), _uses_opaque(x))


@kiln.assume_constant_result
def _scale():
    _CALLS.append("scale")
    return 3.0


def _uses_scale(x):
    return x * _scale()


def test_assume_constant_result_runs_once_while_recording():
    x = torch.randn(4)
    _CALLS.clear()
    cf = kiln.compile(_uses_scale)
    for _ in range(3):
        torch.testing.assert_close(cf(x), x * 3)
    assert _CALLS == ["scale"]
    ex = kiln.explain(_uses_scale, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex


def test_torch_compiler_reset_clears_kiln():
    x = torch.randn(4)
    cf = kiln.compile(lambda t: t * 2 + 1)
    cf(x)
    n = len(kiln._capture.graphs)
    cf(x)
    assert len(kiln._capture.graphs) == n   # cached
    torch.compiler.reset()
    cf(x)
    assert len(kiln._capture.graphs) == n + 1   # recorded again


def test_kiln_markers_are_torch_compilers():
    @kiln.disable
    def off(t):
        return t + 1

    @kiln.allow_in_graph
    def node(t):
        return t * 2

    assert getattr(off, "_torchdynamo_disable", False) is True
    assert torch._dynamo.trace_rules.is_callable_allowed(node)


def test_explain_says_when_nothing_was_captured():
    def only_python(x):
        print("no tensors here")
        return x

    ex = kiln.explain(only_python, backend="eager")(torch.randn(2))
    assert ex.graph_count == 0 and "kiln captured nothing" in str(ex)
