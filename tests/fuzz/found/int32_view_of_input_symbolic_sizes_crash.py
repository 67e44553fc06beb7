# an output viewing an input as int32 under symbolic sizes: AOT autograd rebuilt it with int64's itemsize (setStorage: out of bounds) (issue 13)
# found by the kiln fuzzer (tensor seed 901409, entry torch), shrunk by hand: kind=tensor seed=901409
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _i(g, (1, 4, D, ), dtype=torch.int64)
    return [a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 901409, 2, (1,), -1, ('torch',), ()


def before_call(call):
    pass


def f(a1):
    v1 = a1.flatten().view(torch.int32)
    return (v1, a1 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
