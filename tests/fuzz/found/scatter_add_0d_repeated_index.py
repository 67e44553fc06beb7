# scatter_add_ into a 0-d tensor with a repeated index adds once instead of three times
# found by the kiln fuzzer (tensor seed 100048, entry torch): kind=tensor seed=100048
import torch
import torch.nn.functional as F

SEED = 100048
NCALLS = 1
SHAPE_CALLS = ()
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
    a1 = _f(g, (), torch.float64)
    i0 = _ix(g, (3,), 1, lo=0)
    return [a1, i0]


def before_call(call):
    pass


def f(a1, i0):
    a1.scatter_add_(-1, i0, torch.ones_like(i0, dtype=a1.dtype))
    return (a1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
