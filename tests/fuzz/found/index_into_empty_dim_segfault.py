# a[i, i] with a size-0 dim: the gather loaded through an index clamped to -1 from a NULL data pointer (SIGSEGV)
# found by the kiln fuzzer (tensor seed 940440, entries kiln and torch): kind=tensor seed=940440
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 940440, 2, (), 1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (1, 0, ), torch.float32).expand(4, 0), _ix(g, (D,), D, lo=0, bad=bad)]


def f(a1, i0):
    v3 = a1[i0, i0]
    return (v3 * 2, )
