# integer % by zero returns a value where eager raises ZeroDivisionError (issue 13 class 9)
# found by the kiln fuzzer (tensor seed 17, entry kiln): kind=tensor seed=17
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    i0 = _ix(g, (3,), 4, lo=0)
    return [i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 17, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(i0):
    v1 = i0 % i0
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
