# backward of scatter_add/gather on a 0-d tensor: CompilerError in the compiled backward
# found by the kiln fuzzer (tensor seed 100031, entry kiln): kind=tensor seed=100031
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100031, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 4)).detach().requires_grad_(), _ix(g, (3,), 1, lo=0)]


def f(a0, i0):
    v2 = a0.mean()
    v5 = v2.scatter_add(-1, i0, v2.gather(-1, i0))
    v6 = v5.T
    return (v6, )
