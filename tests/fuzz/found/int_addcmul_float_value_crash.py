# addcmul on int tensors with value=0.5: ValueError 'cannot be safely cast' where eager computes
# found by the kiln fuzzer (tensor seed 100049, entry kiln): kind=tensor seed=100049
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100049, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_i(g, (5,), dtype=torch.int32), _b(g, (5,))]


def f(a0, a1):
    v7 = torch.addcmul(a0, a0, a1, value=0.5)
    return (v7, )
