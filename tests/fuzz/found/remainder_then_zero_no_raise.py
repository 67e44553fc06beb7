# v = a % b; v.zero_(): the remainder is dead once functionalized and its division-by-zero check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 904244, entry kiln), shrunk by hand: kind=tensor seed=904244
import torch
import torch.nn.functional as F

SEED = 904244
NCALLS = 1
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
    a0 = _i(g, (4, 3), dtype=torch.int64)
    a0[0, 0] = 0
    return [a0]


def before_call(call):
    pass


def f(a0):
    v3 = (a0 - 1) % a0
    v3.zero_()
    return (v3 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
