# x.scatter_add_(0, x, ...) (index aliases the written tensor): eager raises, kiln does not
# found by the kiln fuzzer (tensor seed 100463, entry kiln): kind=tensor seed=100463
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100463, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_ix(g, (2, 2), 2, lo=0)]


def f(i1):
    i1.scatter_add_(0, i1, torch.ones_like(i1))
    return (i1, )
