# Tensor.take with an out-of-range id does not raise (issue 13 class 3)
# found by the kiln fuzzer (tensor seed 100415, entry kiln): kind=tensor seed=100415
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100415, 2, (), 1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (2, 5)), _ix(g, (3,), 10, lo=0, bad=bad)]


def f(a0, i0):
    v0 = a0.take(i0)
    return (v0, )
