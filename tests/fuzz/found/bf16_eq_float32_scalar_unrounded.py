# a bfloat16 tensor compared with a 0-d float32 mean: eager rounds the mean to bfloat16 first, kiln compared unrounded
# found by the kiln fuzzer (tensor seed 962203, entries kiln and torch): kind=tensor seed=962203
import torch
import torch.nn.functional as F

SEED = 962203
NCALLS = 4
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln', 'torch')
STATE = ('W0',)

import os
import sys

if "__file__" in globals():   # run as a script (check_file execs this source again, path set)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.gen import HELPERS  # noqa: E402  (the input helpers every generated program holds)
exec(HELPERS)

W0 = torch.linspace(-1, 1, 1)


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    a0 = _f(g, (4, ), torch.float32)
    a1 = _f(g, (D, 2, ), torch.bfloat16)
    return [a0, a1]


def before_call(call):
    W0.mul_(1.5)


def f(a0, a1):
    v0 = a0.mean()
    v1 = torch.addcmul(a1, a1, a1, value=0.5)
    v2 = v1.detach()
    v3 = v1 == v0
    return (a0, W0, v0, v2, v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
