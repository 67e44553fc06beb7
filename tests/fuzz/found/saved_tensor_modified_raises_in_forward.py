# an input saved for backward then changed in place: kiln raises the autograd version error at the call (eager only at backward)
# found by the kiln fuzzer (tensor seed 100221, entry kiln): kind=tensor seed=100221
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100221, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_i(g, (4, 4)), _f(g, (4, 4)).detach().requires_grad_()]


def f(a0, a1):
    v2 = torch.minimum(a1, a0)
    a0.floor_divide_(2)
    return (v2, )
