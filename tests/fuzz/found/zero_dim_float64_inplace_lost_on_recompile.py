# a.logical_not_() on a 0-d float64 input, then a recompile for new sizes: the declined restart's
# float specialization stayed in TorchDynamo's state and the recompiled graph lost the write
# found by the kiln fuzzer (tensor seed 802374, entry torch): kind=tensor seed=802374
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 802374, 4, (3,), -1, ('torch',), ()


def make_inputs(g, D, bad):
    return [_f(g, (0, D, ), torch.float32), _f(g, (), torch.float64)]


def f(a1, a2):
    a2.logical_not_()
    v2 = a1.any()
    return (a2, )
