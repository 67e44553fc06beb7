# an integer floor division read only by full_like: eager raises ZeroDivisionError, kiln dropped it
# found by the kiln fuzzer (tensor seed 700545, entries kiln and torch): kind=tensor seed=700545
import torch
import torch.nn.functional as F

SEED = 700545
NCALLS = 3
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
    a1 = _i(g, (2, 4, 3), dtype=torch.int64)
    return [a1]


def before_call(call):
    pass


def f(a1):
    v4 = torch.div(a1, a1, rounding_mode='floor')
    v5 = torch.full_like(v4, 2)
    return (a1 * 2, v5)


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
