# x.scatter_add_(0, x, ...) (index aliases the written tensor): eager raises, kiln does not
# found by the kiln fuzzer (tensor seed 100463, entry kiln): kind=tensor seed=100463
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    i1 = _ix(g, (2, 2), 2, lo=0)
    return [i1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100463, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(i1):
    i1.scatter_add_(0, i1, torch.ones_like(i1))
    return (i1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
