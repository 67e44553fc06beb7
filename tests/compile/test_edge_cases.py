"""Shapes and dtypes at the edges: empty and zero-dim tensors, NaN in
argmax, integer floor division and remainder, float16, non-contiguous inputs,
expanded outputs — each compiled by kiln and compared with eager."""
import gc
import resource

import pytest
import torch

from kiln import backends

CASES = [
    ("zero-size", lambda x: (x * 2).sum(0), lambda: torch.randn(0, 5)),
    ("zero-dim", lambda x: x.exp() + 1, lambda: torch.tensor(2.0)),
    ("full-sum", lambda x: x.sum(), lambda: torch.randn(7, 3)),
    ("bool", lambda x: (x > 0).all(-1) | (x < -1).any(-1), lambda: torch.randn(6, 4)),
    ("int", lambda x: (x * 3 - 1) // 2 % 5, lambda: torch.randint(-9, 9, (5, 5))),
    ("float16-softmax", lambda x: torch.softmax(x, -1), lambda: torch.randn(4, 33).half()),
    ("non-contiguous", lambda x: x.t().relu() + 1, lambda: torch.randn(6, 9)[:, ::2]),
    ("expanded-output", lambda x: x.expand(3, 4, 5) * 1, lambda: torch.randn(4, 5)),
    ("cumsum-flip", lambda x: x.cumsum(1).flip(0), lambda: torch.randn(5, 7)),
    ("argmax-nan", lambda x: x.argmax(-1), lambda: torch.tensor([[1.0, float("nan"), 3.0], [2.0, 5.0, 5.0]])),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_edge_case_matches_eager(name, fn, make):
    x = make()
    torch._dynamo.reset()
    out = torch.compile(fn, backend="kiln")(x)
    ref = fn(x)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out, ref, equal_nan=True, rtol=2e-3, atol=2e-3)


def test_repeated_calls_do_not_grow_memory():
    m = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.LayerNorm(32)).eval()
    x = torch.randn(64, 32)
    torch._dynamo.reset()
    backends.reset()
    f = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for _ in range(200):
            f(x)
        gc.collect()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for _ in range(3000):
            f(x)
        gc.collect()
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 4096, f"peak RSS grew by {after - before} KiB over 3000 calls"
