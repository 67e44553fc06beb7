# transpose_ on a sliced input leaves the caller's tensor with wrong strides/offset (issue 13 class 7)
# found by the kiln fuzzer (tensor seed 100414, entry kiln): kind=tensor seed=100414
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (3, 2, 2, 5))[1:]
    return [a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100414, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a1):
    a1.transpose_(0, -1)
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
