# a global written in place before an out-of-range index raised: the write was lost (the compiled graph raised before AOT's write-back)
# found by the kiln fuzzer (tensor seed 701461, entry kiln): kind=tensor seed=701461
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701461, 4, (), 3, ('kiln',), ('W0',)


W0 = torch.linspace(-1, 1, 3)


def make_inputs(g, D, bad):
    return [_ix(g, (2,), 3, lo=0), _ix(g, (2,), 2, lo=0, bad=bad)]


def f(i0, i1):
    W0.index_put_((i0,), W0[i0] * 2, accumulate=True)
    i0[i1] = 0
    return ()
