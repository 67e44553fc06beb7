# outputs that are views of one another no longer share memory (issue 13 class 4)
# found by the kiln fuzzer (tensor seed 100002, entry kiln): kind=tensor seed=100002
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100002, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (5,))]


def f(a0):
    v0 = torch.sigmoid(a0)
    v1 = v0.unbind(-1)[2]
    return (v0, v1, )
