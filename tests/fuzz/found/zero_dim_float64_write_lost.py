# a write into a 0-d float64 input vanished: AOT autograd restarted TorchDynamo, whose second graph lost it
# found by the kiln fuzzer (tensor seed 701032, entry torch): kind=tensor seed=701032
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701032, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (), torch.float64), _ix(g, (3,), 1, lo=0)]


def f(a0, i0):
    a0.index_fill_(0, i0, 1)
    v0 = i0.sum()
    return (v0, )
