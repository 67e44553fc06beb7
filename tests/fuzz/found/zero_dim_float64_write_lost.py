# a write into a 0-d float64 input vanished: AOT autograd restarted TorchDynamo, whose second graph lost it
# found by the kiln fuzzer (tensor seed 701032, entry torch): kind=tensor seed=701032
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (), torch.float64)
    i0 = _ix(g, (3,), 1, lo=0)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701032, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, i0):
    a0.index_fill_(0, i0, 1)
    v0 = i0.sum()
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
