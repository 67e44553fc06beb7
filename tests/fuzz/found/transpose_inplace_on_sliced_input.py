# transpose_ on a sliced input leaves the caller's tensor with wrong strides/offset (issue 13 class 7)
# found by the kiln fuzzer (tensor seed 100414, entry kiln): kind=tensor seed=100414
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100414, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (3, 2, 2, 5))[1:]]


def f(a1):
    a1.transpose_(0, -1)
    return ()
