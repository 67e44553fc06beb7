# a.logical_not_() on a 0-d float64 input, then a recompile for new sizes: the declined restart's
# float specialization stayed in TorchDynamo's state and the recompiled graph lost the write
# found by the kiln fuzzer (tensor seed 802374, entry torch): kind=tensor seed=802374
import torch
import torch.nn.functional as F

SEED = 802374
NCALLS = 4
SHAPE_CALLS = (3,)
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
    a1 = _f(g, (0, D, ), torch.float32)
    a2 = _f(g, (), torch.float64)
    return [a1, a2]


def before_call(call):
    pass


def f(a1, a2):
    a2.logical_not_()
    v2 = a1.any()
    return (a2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
