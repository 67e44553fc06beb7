# a view of a base written with a value requiring grad through another view: capture's from_tensor raised 'AssertionError: False != True'
# found by the kiln fuzzer (tensor seed 800190, entry kiln): kind=tensor seed=800190
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800190, 3, (), 2, ('kiln',), ()


def make_inputs(g, D, bad):
    a0 = _f(g, (D + 1, 4, D, ), torch.float64)[1:].detach().requires_grad_()
    _o1 = _f(g, ((1 + 1), 4, ), torch.float32)
    a1, a2 = _o1[:-1], _o1[1:]
    i0 = _ix(g, (0,), D, lo=0, bad=bad)
    return [a0, a1, a2, i0]


def f(a0, a1, a2, i0):
    v0 = torch.index_select(a0, -1, i0)
    v1 = torch.log1p(v0)
    v2 = torch.floor(v0)
    v3 = v2.std(2)
    a2[..., -1] = v3.sum()
    return (a1, v0, )
