# a split of an expanded input that requires grad: the capture rebuilt the view with as_strided, whose backward averaged the gradient over the elements sharing an address
# found by the kiln fuzzer (tensor seed 905880, entry kiln): kind=tensor seed=905880
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 905880, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (1, 2, ), torch.float32).expand(D, 2).detach().requires_grad_()]


def f(a0):
    v7 = a0.split(2, 1)[0]
    v8 = a0.split(2, 0)[0].split(1, 0)[-1]
    return (v7, v8, )
