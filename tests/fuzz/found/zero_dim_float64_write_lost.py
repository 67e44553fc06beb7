# a write into a 0-d float64 input vanished: AOT autograd restarted TorchDynamo, whose second graph lost it
# found by the kiln fuzzer (tensor seed 701032, entry torch): kind=tensor seed=701032
import torch
import torch.nn.functional as F

SEED = 701032
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
    a0 = _f(g, (), torch.float64)
    i0 = _ix(g, (3,), 1, lo=0)
    return [a0, i0]


def before_call(call):
    pass


def f(a0, i0):
    a0.index_fill_(0, i0, 1)
    v0 = i0.sum()
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
