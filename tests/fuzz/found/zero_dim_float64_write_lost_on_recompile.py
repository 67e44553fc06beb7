# a 0-d float64 input written in place loses the write when TorchDynamo recompiles for new sizes (a stale TensorifyState mark from the restart kiln declined)
# found by the kiln fuzzer (tensor seed 801488): kind=tensor seed=801488
import torch
import torch.nn.functional as F

SEED = 801488
NCALLS = 4
SHAPE_CALLS = (3,)
BAD_CALL = -1
ENTRIES = ('torch',)
STATE = ()

import os
import sys

if "__file__" in globals():   # run as a script (check_file execs this source again, path set)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.gen import HELPERS  # noqa: E402  (the input helpers every generated program holds)
exec(HELPERS)


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    a0 = _f(g, (D, ), torch.float32).detach().requires_grad_()
    a1 = _f(g, (), torch.float64)
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    a1.fill_(3)
    v0 = a0 * 2
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
