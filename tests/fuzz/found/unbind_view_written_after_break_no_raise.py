# a view of unbind's written in place after a graph break: eager refuses (autograd's multi-output view check); kiln's rebuilt view (as_strided of its anchor) lost how autograd made it and took the write (kiln/_capture.py regen_view keeps the CreationMeta)
# found by the kiln fuzzer (tensor seed 4811817, entries kiln and kiln-dynamic)
# kiln differential fuzzer program: kind=tensor seed=4811817
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 4811817, 1, (), -1, ("kiln", "kiln-dynamic"), ()


def make_inputs(g, D, bad):
    a0 = _f(g, (2, 4, ), torch.float32).detach().requires_grad_()
    a1 = a0
    return [a0, a1]


def f(a0, a1):
    v0 = (a1 - a1.mean(-1, keepdim=True)) / (a1.std(-1, keepdim=True) + 1.0)
    v1 = v0.select(-2, 1)
    v2 = v1.unbind(0)[1]
    v2.t().sub_(1)
    return (v2, )
