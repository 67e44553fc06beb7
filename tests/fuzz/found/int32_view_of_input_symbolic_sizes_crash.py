# an output viewing an input as int32 under symbolic sizes: AOT autograd rebuilt it with int64's itemsize (setStorage: out of bounds) (issue 13)
# found by the kiln fuzzer (tensor seed 901409, entry torch), shrunk by hand: kind=tensor seed=901409
import torch
import torch.nn.functional as F

SEED = 901409
NCALLS = 2
SHAPE_CALLS = (1,)
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
    a1 = _i(g, (1, 4, D, ), dtype=torch.int64)
    return [a1]


def before_call(call):
    pass


def f(a1):
    v1 = a1.flatten().view(torch.int32)
    return (v1, a1 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
