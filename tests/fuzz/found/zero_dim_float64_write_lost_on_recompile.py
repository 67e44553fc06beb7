# a 0-d float64 input written in place loses the write when TorchDynamo recompiles for new sizes (a stale TensorifyState mark from the restart kiln declined)
# found by the kiln fuzzer (tensor seed 801488): kind=tensor seed=801488
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 801488, 4, (3,), -1, ('torch',), ()


def make_inputs(g, D, bad):
    return [_f(g, (D, ), torch.float32).detach().requires_grad_(), _f(g, (), torch.float64)]


def f(a0, a1):
    a1.fill_(3)
    v0 = a0 * 2
    return (v0, )
