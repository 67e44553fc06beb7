# transpose_ on a sliced input leaves the caller's tensor with wrong strides/offset (issue 13 class 7)
# found by the kiln fuzzer (tensor seed 100414, entry kiln): kind=tensor seed=100414
import torch
import torch.nn.functional as F

SEED = 100414
NCALLS = 1
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln',)
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
    a1 = _f(g, (3, 2, 2, 5))[1:]
    return [a1]


def before_call(call):
    pass


def f(a1):
    a1.transpose_(0, -1)
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
