# an in-place op on an unfold view of an input is lost (issue 13 class 2)
# found by the kiln fuzzer (tensor seed 100152, entry kiln): kind=tensor seed=100152
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (3,))
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100152, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0):
    a0.unfold(0, 2, 2).mul_(2)
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
