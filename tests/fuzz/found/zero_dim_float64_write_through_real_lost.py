# a write into a 0-d float64 input through `a.real` vanished: AOT autograd restarted TorchDynamo, and the getattr view hid the write from the check that keeps such graphs as captured
# found by the kiln fuzzer (tensor seed 946614, entry torch): kind=tensor seed=946614
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 946614, 1, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    a0 = _b(g, ())
    a1 = _f(g, (), torch.float64)
    return [a1]


def f(a1):
    v0 = a1.real
    v0.mul_(2)
    return (v0, )
