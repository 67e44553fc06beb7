# integer % by zero returns a value where eager raises ZeroDivisionError (issue 13 class 9)
# found by the kiln fuzzer (tensor seed 17, entry kiln): kind=tensor seed=17
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 17, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_ix(g, (3,), 4, lo=0)]


def f(i0):
    v1 = i0 % i0
    return (v1, )
