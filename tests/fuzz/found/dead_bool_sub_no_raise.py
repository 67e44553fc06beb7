# a dead float - bool subtraction: eager raises, kiln (fake tensors skip the check) did not
# found by the kiln fuzzer (tensor seed 700238, entries kiln and torch): kind=tensor seed=700238
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (3, 2, 4, 3), torch.float32)
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700238, 1, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v1 = torch.isinf(a0)
    v6 = a0 - v1
    return (a0 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
