# an output viewing an input as int32 under symbolic sizes: AOT autograd rebuilt it with int64's itemsize (setStorage: out of bounds) (issue 13)
# found by the kiln fuzzer (tensor seed 901409, entry torch), shrunk by hand: kind=tensor seed=901409
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 901409, 2, (1,), -1, ('torch',), ()


def make_inputs(g, D, bad):
    return [_i(g, (1, 4, D, ), dtype=torch.int64)]


def f(a1):
    v1 = a1.flatten().view(torch.int32)
    return (v1, a1 + 1, )
