# index_fill_ on an empty tensor raised in kiln (its decomposition into index_put checks the index) where eager does not (issue 13)
# found by the kiln fuzzer (tensor seed 930817, entry torch), shrunk by hand: kind=tensor seed=930817
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 930817, 1, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_i(g, (2, 0, ), dtype=torch.int64), _ix(g, (0,), 2, lo=0)]


def f(a3, i0):
    v0 = F.embedding(i0, a3)
    v0.index_fill_(1, torch.tensor([0]), -1)
    return (a3, v0, )
