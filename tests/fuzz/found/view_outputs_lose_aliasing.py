# outputs that are views of one another no longer share memory (issue 13 class 4)
# found by the kiln fuzzer (tensor seed 100002, entry kiln): kind=tensor seed=100002
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (5,))
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100002, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0):
    v0 = torch.sigmoid(a0)
    v1 = v0.unbind(-1)[2]
    return (v0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
