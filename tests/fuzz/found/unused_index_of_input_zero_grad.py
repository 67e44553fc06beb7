# an unused a1[:, i0] (a copy of an input that requires grad, kept for its bounds check) was not detached: the input got a zero grad where eager's is None
# found by the kiln fuzzer (tensor seed 930685, entry kiln): kind=tensor seed=930685
import torch
import torch.nn.functional as F

SEED = 930685
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
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    a1 = _f(g, (4, 1, ), torch.float32).transpose(-1, -2).detach().requires_grad_()
    a3 = _f(g, (D, D, 2, D, ), torch.float32).detach().requires_grad_()
    i0 = _ix(g, (3,), D, lo=-D)
    return [a1, a3, i0]


def before_call(call):
    pass


def f(a1, a3, i0):
    v2 = a1[:, i0]
    v3 = a3 + a3
    return (v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
