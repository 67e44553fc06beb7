"""CPU programs share a few arenas (src/runtime/run.c, arena_take /
arena_give): the sizes of a symbolic graph, each a program of its own, and
a program called while another one's arena is in use (from inside an extern
step) must never see each other's intermediates."""
import torch

import kiln


def test_a_call_inside_another_takes_its_own_arena():
    inner = kiln.compile(lambda t: ((t * 0.5).exp() + t.sin()).sum(-1, keepdim=True) * t)

    @torch.library.custom_op("kiln_test::calls_kiln", mutates_args=())
    def calls_kiln(t: torch.Tensor) -> torch.Tensor:
        return inner(t.clone())

    @calls_kiln.register_fake
    def _(t):
        return torch.empty_like(t)

    def outer(x):
        a = (x * 2).tanh() + x.cos()          # intermediates in the outer arena
        b = torch.ops.kiln_test.calls_kiln(a)  # an extern step: the inner program runs here
        return (a * b).softmax(-1) + a.sum(0)

    def reference(x):
        a = (x * 2).tanh() + x.cos()
        t = a.clone()
        b = ((t * 0.5).exp() + t.sin()).sum(-1, keepdim=True) * t
        return (a * b).softmax(-1) + a.sum(0)

    torch.manual_seed(0)
    fast = kiln.compile(outer, dynamic=True)
    for n, m in ((8, 16), (5, 40), (33, 7), (8, 16), (64, 64), (3, 5)):
        x = torch.randn(n, m)
        torch.testing.assert_close(fast(x), reference(x), rtol=1e-4, atol=1e-4)


def test_sizes_of_a_graph_alternating_share_arenas_soundly():
    def f(x, y):
        h = (x @ y).relu() * 2 + x.sum(-1, keepdim=True)
        return (h - h.mean(-1, keepdim=True)) / (h.std(-1, keepdim=True) + 1), h.amax(0)

    torch.manual_seed(0)
    cf = kiln.compile(f, dynamic=True)
    shapes = [(4, 8, 6), (40, 32, 30), (4, 8, 6), (17, 9, 50), (40, 32, 30), (2, 3, 4)] * 2
    for n, k, m in shapes:
        x, y = torch.randn(n, k), torch.randn(k, m)
        for g, w in zip(cf(x, y), f(x, y)):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
