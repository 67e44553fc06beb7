# v = a % b; v.zero_(): the remainder is dead once functionalized and its division-by-zero check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 904244, entry kiln), shrunk by hand: kind=tensor seed=904244
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 904244, 1, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    a0 = _i(g, (4, 3), dtype=torch.int64)
    a0[0, 0] = 0
    return [a0]


def f(a0):
    v3 = (a0 - 1) % a0
    v3.zero_()
    return (v3 + 1, )
