"""Issue 15: graph breaks as TorchDynamo has them — counted once, and none
where Dynamo records the construct (each test failed on the code before)."""
import functools

import torch

import kiln


def _wrapped(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        return fn(*a, **k)
    return w


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    @_wrapped
    def forward(self, x):
        y = self.l(x).relu()
        print("between")
        return y * 2 + 1


def test_a_break_inside_an_inlined_call_counts_once(capsys):
    # noted where it stops the wrapper's inlining and again when forward,
    # run by CPython, is recorded itself: Dynamo counts one
    m, x = _Net(), torch.randn(2, 4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex
    assert "print" in ex.breaks[0].reason and ex.breaks[0].lineno == _Net.forward.__wrapped__.__code__.co_firstlineno + 3
