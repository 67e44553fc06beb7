# returned views of one result no longer share its memory (issue 13 class 4)
# found by the kiln fuzzer (capture seed 200007, entry kiln): kind=capture seed=200007
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200007, 2, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 4))]


def f(x):
    t0 = x * 2
    return (t0, t0[1:], t0.t())
