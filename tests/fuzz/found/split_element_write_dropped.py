# v0.split(...)[-1].copy_(x): the fast inference trace made the write functional, v0 kept its old values
# found by the kiln fuzzer (tensor seed 701029, entry torch): kind=tensor seed=701029
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701029, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 5, 4, 1, ), torch.float32).contiguous(memory_format=torch.channels_last)]


def f(a2):
    v0 = torch.cos(a2)
    v1 = v0.split(1, 3)[-1]
    v1.copy_(a2)
    v2 = v0 > v1
    return (v2, )
