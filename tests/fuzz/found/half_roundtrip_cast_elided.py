# x.half().float() does not round to float16 (the explicit narrowing cast is fused away)
# found by the kiln fuzzer (tensor seed 100181, entry kiln): kind=tensor seed=100181
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 3))
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100181, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0):
    v0 = a0.half().float()
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
