# a dead float - bool subtraction: eager raises, kiln (fake tensors skip the check) did not
# found by the kiln fuzzer (tensor seed 700238, entries kiln and torch): kind=tensor seed=700238
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700238, 1, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (3, 2, 4, 3), torch.float32)]


def f(a0):
    v1 = torch.isinf(a0)
    v6 = a0 - v1
    return (a0 + 1, )
