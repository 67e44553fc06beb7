# scatter_add_ into a 0-d tensor with a repeated index adds once instead of three times
# found by the kiln fuzzer (tensor seed 100048, entry torch): kind=tensor seed=100048
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (), torch.float64)
    i0 = _ix(g, (3,), 1, lo=0)
    return [a1, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100048, 1, (), -1, ('torch',), ()


def before_call(call):
    pass


def f(a1, i0):
    a1.scatter_add_(-1, i0, torch.ones_like(i0, dtype=a1.dtype))
    return (a1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
