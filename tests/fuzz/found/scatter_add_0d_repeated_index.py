# scatter_add_ into a 0-d tensor with a repeated index adds once instead of three times
# found by the kiln fuzzer (tensor seed 100048, entry torch): kind=tensor seed=100048
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100048, 1, (), -1, ('torch',), ()


def make_inputs(g, D, bad):
    return [_f(g, (), torch.float64), _ix(g, (3,), 1, lo=0)]


def f(a1, i0):
    a1.scatter_add_(-1, i0, torch.ones_like(i0, dtype=a1.dtype))
    return (a1, )
