# a global written in place before an out-of-range index raised: the write was lost (the compiled graph raised before AOT's write-back)
# found by the kiln fuzzer (tensor seed 701461, entry kiln): kind=tensor seed=701461
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


W0 = torch.linspace(-1, 1, 3)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    i0 = _ix(g, (2,), 3, lo=0)
    i1 = _ix(g, (2,), 2, lo=0, bad=bad)
    return [i0, i1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701461, 4, (), 3, ('kiln',), ('W0',)


def before_call(call):
    pass


def f(i0, i1):
    W0.index_put_((i0,), W0[i0] * 2, accumulate=True)
    i0[i1] = 0
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
