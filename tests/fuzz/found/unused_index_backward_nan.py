# an unused indexed write (kept for its bounds check) takes part in backward: 0 * NaN makes the grad NaN
# found by the kiln fuzzer (tensor seed 700576): kind=tensor seed=700576
import torch
import torch.nn.functional as F

SEED = 700576
NCALLS = 2
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln', 'torch')
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
    a0 = _f(g, (4, 3, 2, ), torch.float64).detach().requires_grad_()
    a1 = _f(g, (), torch.float64).detach().requires_grad_()
    i0 = _ix(g, (3,), 2, lo=-2)
    return [a0, a1, i0]


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
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
