# x.half().float() does not round to float16 (the explicit narrowing cast is fused away)
# found by the kiln fuzzer (tensor seed 100181, entry kiln): kind=tensor seed=100181
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100181, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 3))]


def f(a0):
    v0 = a0.half().float()
    return (v0, )
