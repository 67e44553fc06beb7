# a ** x.int() with x = inf/NaN: the C cast was undefined, gcc folded (float)(int)x to trunc(x)
# found by the kiln fuzzer (tensor seed 701221, entry kiln): kind=tensor seed=701221
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701221, 2, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (), torch.float32, special=True), _f(g, (), torch.float32)]


def f(a0, a1):
    v1 = a0.int()
    v2 = a1 ** v1
    return (v2, )
