# v = a % b; v.zero_(): the remainder is dead once functionalized and its division-by-zero check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 904244, entry kiln), shrunk by hand: kind=tensor seed=904244
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _i(g, (4, 3), dtype=torch.int64)
    a0[0, 0] = 0
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 904244, 1, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v3 = (a0 - 1) % a0
    v3.zero_()
    return (v3 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
