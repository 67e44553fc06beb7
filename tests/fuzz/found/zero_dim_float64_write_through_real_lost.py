# a write into a 0-d float64 input through `a.real` vanished: AOT autograd restarted TorchDynamo, and the getattr view hid the write from the check that keeps such graphs as captured
# found by the kiln fuzzer (tensor seed 946614, entry torch): kind=tensor seed=946614
import torch
import torch.nn.functional as F

SEED = 946614
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
    a0 = _b(g, ())
    a1 = _f(g, (), torch.float64)
    return [a1]


def before_call(call):
    pass


def f(a1):
    v0 = a1.real
    v0.mul_(2)
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
