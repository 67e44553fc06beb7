# a graph that runs as captured (symbolic sizes, a view of a written input returned) and raises was run a second time: its writes made twice, another error (issue 13)
# found by the kiln fuzzer (tensor seed 903012, entry torch), shrunk by hand: kind=tensor seed=903012
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    i0 = _ix(g, (3,), D, lo=0)
    i1 = _ix(g, (3,), 3, lo=0)
    i2 = _ix(g, (D,), 3, lo=0, bad=bad)
    return [i0, i1, i2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 903012, 4, (3,), 3, ('torch',), ()


def before_call(call):
    pass


def f(i0, i1, i2):
    v2 = torch.zeros(6)
    v2.scatter_add_(-1, i0, torch.ones_like(i0, dtype=v2.dtype))
    i0.index_put_((i1,), i0[i1] * 2, accumulate=True)
    i1.index_fill_(0, i2, 1)
    return (i0[:2], )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
