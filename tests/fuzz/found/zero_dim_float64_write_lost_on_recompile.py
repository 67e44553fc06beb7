# a 0-d float64 input written in place loses the write when TorchDynamo recompiles for new sizes (a stale TensorifyState mark from the restart kiln declined)
# found by the kiln fuzzer (tensor seed 801488): kind=tensor seed=801488
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (D, ), torch.float32).detach().requires_grad_()
    a1 = _f(g, (), torch.float64)
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 801488, 4, (3,), -1, ('torch',), ()


def before_call(call):
    pass


def f(a0, a1):
    a1.fill_(3)
    v0 = a0 * 2
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
