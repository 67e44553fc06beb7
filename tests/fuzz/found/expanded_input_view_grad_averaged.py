# the grad of an output viewing an expanded input that requires grad is averaged over the input's shared elements
# found by the kiln fuzzer (tensor seed 700340): kind=tensor seed=700340
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700340, 2, (), 1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (1, 4, ), torch.float32).expand(2, 4).detach().requires_grad_()]


def f(a0):
    v1 = a0.unsqueeze(0)
    return (v1, )
