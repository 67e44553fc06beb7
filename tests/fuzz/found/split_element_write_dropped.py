# v0.split(...)[-1].copy_(x): the fast inference trace made the write functional, v0 kept its old values
# found by the kiln fuzzer (tensor seed 701029, entry torch): kind=tensor seed=701029
import torch
import torch.nn.functional as F

SEED = 701029
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
    a2 = _f(g, (4, 5, 4, 1, ), torch.float32).contiguous(memory_format=torch.channels_last)
    return [a2]


def before_call(call):
    pass


def f(a2):
    v0 = torch.cos(a2)
    v1 = v0.split(1, 3)[-1]
    v1.copy_(a2)
    v2 = v0 > v1
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
