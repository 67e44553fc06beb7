# advanced indexing with an out-of-range id does not raise (issue 13 class 3)
# found by the kiln fuzzer (tensor seed 100004, entry kiln): kind=tensor seed=100004
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (2, 4))
    i0 = _ix(g, (3,), 1, lo=0, bad=bad)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100004, 2, (), 1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, i0):
    v1 = a0[i0, i0]
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
