# transpose_ on a view of an input: kiln's recorder rebuilt the returned view with the geometry it had when made, (0, 3) where eager has (3, 0) (issue 13)
# found by the kiln fuzzer (tensor seed 700485, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700485
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (0, 2, 4, ), torch.float32)
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700485, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0):
    v0 = a0.reshape(-1, 3)
    v0.transpose_(0, -1)
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
