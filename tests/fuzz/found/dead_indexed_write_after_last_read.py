# `t[i] = v` after the last read of a live t: the write was dead code, dropped with its index check (no IndexError)
# found by the kiln fuzzer (tensor seed 940901, entry kiln): kind=tensor seed=940901
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 940901, 1, (), 0, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (5, ), torch.float32), _ix(g, (2, 2), 5, lo=-5, bad=bad)]


def f(a0, i0):
    v1 = torch.zeros_like(a0)
    v2 = v1 @ a0.t()
    v1[i0] = 0
    return (v2, )
