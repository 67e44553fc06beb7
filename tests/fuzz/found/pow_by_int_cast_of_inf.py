# a ** x.int() with x = inf/NaN: the C cast was undefined, gcc folded (float)(int)x to trunc(x)
# found by the kiln fuzzer (tensor seed 701221, entry kiln): kind=tensor seed=701221
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (), torch.float32, special=True)
    a1 = _f(g, (), torch.float32)
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701221, 2, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1):
    v1 = a0.int()
    v2 = a1 ** v1
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
