# v = x[i]; v.fill_(3): the index's value is dead once functionalized and its bounds check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 905292, entry kiln), shrunk by hand: kind=tensor seed=905292
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 905292, 2, (), 1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 4), torch.float32), _ix(g, (2,), 4, lo=-4, bad=bad)]


def f(a0, i0):
    v4 = a0[i0]
    v4.fill_(3)
    return (torch.log_softmax(v4, 1), )
