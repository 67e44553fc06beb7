# an unused a1[:, i0] (a copy of an input that requires grad, kept for its bounds check) was not detached: the input got a zero grad where eager's is None
# found by the kiln fuzzer (tensor seed 930685, entry kiln): kind=tensor seed=930685
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 930685, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 1, ), torch.float32).transpose(-1, -2).detach().requires_grad_(),
            _f(g, (D, D, 2, D, ), torch.float32).detach().requires_grad_(),
            _ix(g, (3,), D, lo=-D)]


def f(a1, a3, i0):
    v2 = a1[:, i0]
    v3 = a3 + a3
    return (v3, )
