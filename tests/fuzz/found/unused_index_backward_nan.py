# an unused indexed write (kept for its bounds check) takes part in backward: 0 * NaN makes the grad NaN
# found by the kiln fuzzer (tensor seed 700576): kind=tensor seed=700576
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700576, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 3, 2, ), torch.float64).detach().requires_grad_(),
            _f(g, (), torch.float64).detach().requires_grad_(),
            _ix(g, (3,), 2, lo=-2)]


def f(a0, a1, i0):
    v1 = a0 ** 0.5
    v3 = v1.mT @ v1
    v4 = torch.bmm(v3, v3)
    v4[:, i0] += 1
    v6 = torch.log_softmax(a1, -1)
    return (a0[0:], v6, )
