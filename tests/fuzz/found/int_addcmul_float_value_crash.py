# addcmul on int tensors with value=0.5: ValueError 'cannot be safely cast' where eager computes
# found by the kiln fuzzer (tensor seed 100049, entry kiln): kind=tensor seed=100049
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _i(g, (5,), dtype=torch.int32)
    a1 = _b(g, (5,))
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100049, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1):
    v7 = torch.addcmul(a0, a0, a1, value=0.5)
    return (v7, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
