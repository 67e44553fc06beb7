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


def _program(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    from kiln import pipeline
    gm = make_fx(fn)(*args)
    desc, _, _ = pipeline._describe(gm, torch.device("cpu"))
    return pipeline._program(desc, "kn_", torch.device("cpu"))


def test_a_value_read_only_by_matmuls_lives_in_the_arena():
    # a layer norm's output is computed by a kernel and read only by an
    # extern matmul, which returns a fresh tensor: its tensor is a view of
    # the call's arena (src/compile/plan.c plan_arena_tensors), so a call
    # takes no fresh memory for it
    def norm(t):
        return (t - t.mean(-1, keepdim=True)) * torch.rsqrt(t.var(-1, keepdim=True, unbiased=False) + 1e-5)

    def mlp(x, w1, w2):
        return norm(norm(x) @ w1) @ w2

    x, w1, w2 = torch.randn(64, 32), torch.randn(32, 128), torch.randn(128, 16)
    p = _program(mlp, x, w1, w2)
    assert p.stats["arena_bytes"] >= 64 * 128 * 4, p.stats
    torch.manual_seed(0)
    cf = kiln.compile(mlp)
    outs = []
    for _ in range(3):
        x = torch.randn(64, 32)
        outs.append((cf(x, w1, w2), mlp(x, w1, w2)))
    for got, want in outs:   # (earlier outputs untouched by later calls)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_value_an_output_views_or_another_op_reads_keeps_its_own_tensor():
    # an output that is a view of the value, or an extern that may keep or
    # return its argument (not a matmul), leaves the value its own tensor
    def viewed(x, w):
        h = torch.tanh(x) * 2
        return h @ w, h.t()

    def sorted_(x, w):
        h = torch.tanh(x) * 2
        return h @ w, torch.sort(h, -1)[0]

    x, w = torch.randn(16, 8), torch.randn(8, 4)
    for fn in (viewed, sorted_):
        p = _program(fn, x, w)
        assert p.stats["arena_bytes"] < 16 * 8 * 4, (fn.__name__, p.stats)
        cf = kiln.compile(fn)
        for _ in range(2):
            x = torch.randn(16, 8)
            for got, want in zip(cf(x, w), fn(x, w)):
                torch.testing.assert_close(got, want)
