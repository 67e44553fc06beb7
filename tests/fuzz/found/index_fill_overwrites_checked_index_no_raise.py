# v = x[i]; v.fill_(3): the index's value is dead once functionalized and its bounds check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 905292, entry kiln), shrunk by hand: kind=tensor seed=905292
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 4), torch.float32)
    i0 = _ix(g, (2,), 4, lo=-4, bad=bad)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 905292, 2, (), 1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, i0):
    v4 = a0[i0]
    v4.fill_(3)
    return (torch.log_softmax(v4, 1), )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
