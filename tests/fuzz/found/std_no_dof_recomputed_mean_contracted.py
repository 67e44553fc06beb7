# x - mean(x) of a size-1 row not 0: gcc contracted the two copies of gelu(x) differently, std (no degrees of freedom) inf, not NaN
# found by the kiln fuzzer (tensor seed 700651, entry kiln): kind=tensor seed=700651
import torch
import torch.nn.functional as F

SEED = 700651
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
    a0 = _f(g, (), torch.float32)
    a1 = _i(g, (2 * 2, 5, ), dtype=torch.int64)
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    v1 = F.gelu(a0)
    v3 = (v1 - v1.mean(-1, keepdim=True)) / (v1.std(-1, keepdim=True) + 1e-5)
    v5 = torch.eq(a1, v3).sum()
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
