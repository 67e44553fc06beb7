# cat with an empty slice then index_add: 'a compiler stage failed without a message'
# found by the kiln fuzzer (tensor seed 100036, entry kiln): kind=tensor seed=100036
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100036, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 4)), _ix(g, (2,), 4, lo=0)]


def f(a0, i0):
    v3 = torch.cat([a0, a0[:0]])
    v4 = v3.index_add(-1, i0, v3.index_select(-1, i0))
    return (v4, )
