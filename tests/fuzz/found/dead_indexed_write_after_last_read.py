# `t[i] = v` after the last read of a live t: the write was dead code, dropped with its index check (no IndexError)
# found by the kiln fuzzer (tensor seed 940901, entry kiln): kind=tensor seed=940901
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (5, ), torch.float32)
    i0 = _ix(g, (2, 2), 5, lo=-5, bad=bad)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 940901, 1, (), 0, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, i0):
    v1 = torch.zeros_like(a0)
    v2 = v1 @ a0.t()
    v1[i0] = 0
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
