# returned views of one result no longer share its memory (issue 13 class 4)
# found by the kiln fuzzer (capture seed 200007, entry kiln): kind=capture seed=200007
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    x = _f(g, (4, 4))
    return [x]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200007, 2, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(x):
    t0 = x * 2
    return (t0, t0[1:], t0.t())


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
