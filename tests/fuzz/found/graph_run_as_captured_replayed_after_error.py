# a graph that runs as captured (symbolic sizes, a view of a written input returned) and raises was run a second time: its writes made twice, another error (issue 13)
# found by the kiln fuzzer (tensor seed 903012, entry torch), shrunk by hand: kind=tensor seed=903012
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 903012, 4, (3,), 3, ('torch',), ()


def make_inputs(g, D, bad):
    return [_ix(g, (3,), D, lo=0), _ix(g, (3,), 3, lo=0), _ix(g, (D,), 3, lo=0, bad=bad)]


def f(i0, i1, i2):
    v2 = torch.zeros(6)
    v2.scatter_add_(-1, i0, torch.ones_like(i0, dtype=v2.dtype))
    i0.index_put_((i1,), i0[i1] * 2, accumulate=True)
    i1.index_fill_(0, i2, 1)
    return (i0[:2], )
