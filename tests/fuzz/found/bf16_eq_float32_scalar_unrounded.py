# a bfloat16 tensor compared with a 0-d float32 mean: eager rounds the mean to bfloat16 first, kiln compared unrounded
# found by the kiln fuzzer (tensor seed 962203, entries kiln and torch): kind=tensor seed=962203
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 962203, 4, (), -1, ('kiln', 'torch'), ('W0',)


W0 = torch.linspace(-1, 1, 1)


def make_inputs(g, D, bad):
    return [_f(g, (4, ), torch.float32), _f(g, (D, 2, ), torch.bfloat16)]


def before_call(call):
    W0.mul_(1.5)


def f(a0, a1):
    v0 = a0.mean()
    v1 = torch.addcmul(a1, a1, a1, value=0.5)
    v2 = v1.detach()
    v3 = v1 == v0
    return (a0, W0, v0, v2, v3, )
