# zeros_like(x).take(i) with an out-of-range id does not raise (the check's where(i < 0, 0, 0) folded to 0) (issue 13)
# found by the kiln fuzzer (tensor seed 901346, entry kiln), shrunk by hand: kind=tensor seed=901346
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 901346, 2, (), 1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (2, 2), torch.float32), _ix(g, (2, 2), 4, lo=0, bad=bad)]


def f(a1, i1):
    v3 = torch.zeros_like(a1)
    v4 = v3.take(i1)
    return (v4 * 2, a1 + 1, )
