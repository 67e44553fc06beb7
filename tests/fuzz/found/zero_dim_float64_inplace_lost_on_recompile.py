# a.logical_not_() on a 0-d float64 input, then a recompile for new sizes: the declined restart's
# float specialization stayed in TorchDynamo's state and the recompiled graph lost the write
# found by the kiln fuzzer (tensor seed 802374, entry torch): kind=tensor seed=802374
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (0, D, ), torch.float32)
    a2 = _f(g, (), torch.float64)
    return [a1, a2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 802374, 4, (3,), -1, ('torch',), ()


def before_call(call):
    pass


def f(a1, a2):
    a2.logical_not_()
    v2 = a1.any()
    return (a2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
