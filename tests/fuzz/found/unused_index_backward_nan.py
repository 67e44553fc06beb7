# an unused indexed write (kept for its bounds check) takes part in backward: 0 * NaN makes the grad NaN
# found by the kiln fuzzer (tensor seed 700576): kind=tensor seed=700576
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 3, 2, ), torch.float64).detach().requires_grad_()
    a1 = _f(g, (), torch.float64).detach().requires_grad_()
    i0 = _ix(g, (3,), 2, lo=-2)
    return [a0, a1, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700576, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, a1, i0):
    v1 = a0 ** 0.5
    v3 = v1.mT @ v1
    v4 = torch.bmm(v3, v3)
    v4[:, i0] += 1
    v6 = torch.log_softmax(a1, -1)
    return (a0[0:], v6, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
