# a constant both an index_put argument and an output: 'kiln: internal error: buffer 10 has no tensor at this point'
# found by the kiln fuzzer (tensor seed 700597, entry torch): kind=tensor seed=700597
import torch
import torch.nn.functional as F

SEED = 700597
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
    a0 = _f(g, (2, 4, ), torch.float32, special=True).detach().requires_grad_()
    return [a0]


def before_call(call):
    pass


def f(a0):
    v0 = torch.frac(a0)
    v0.index_fill_(-2, torch.tensor([0]), -1)
    v1 = torch.sigmoid(v0)
    return (a0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
