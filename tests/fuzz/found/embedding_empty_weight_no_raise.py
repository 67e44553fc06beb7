# F.embedding of an empty-column weight with an out-of-range id does not raise (the check ran per output element, and there were none) (issue 13)
# found by the kiln fuzzer (tensor seed 900042, entry kiln), shrunk by hand: kind=tensor seed=900042
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 900042, 2, (), 1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [torch.zeros(2, 0), _ix(g, (3,), 2, lo=0, bad=bad)]


def f(w, i2):
    v2 = F.embedding(i2, w)
    v3 = v2 * 3 + 1
    return (i2 + 1, )
