# zeros_like(x).take(i) with an out-of-range id does not raise (the check's where(i < 0, 0, 0) folded to 0) (issue 13)
# found by the kiln fuzzer (tensor seed 901346, entry kiln), shrunk by hand: kind=tensor seed=901346
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (2, 2), torch.float32)
    i1 = _ix(g, (2, 2), 4, lo=0, bad=bad)
    return [a1, i1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 901346, 2, (), 1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a1, i1):
    v3 = torch.zeros_like(a1)
    v4 = v3.take(i1)
    return (v4 * 2, a1 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
