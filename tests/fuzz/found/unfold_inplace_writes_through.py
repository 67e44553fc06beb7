# an in-place op on an unfold view of an input is lost (issue 13 class 2)
# found by the kiln fuzzer (tensor seed 100152, entry kiln): kind=tensor seed=100152
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100152, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (3,))]


def f(a0):
    a0.unfold(0, 2, 2).mul_(2)
    return ()
