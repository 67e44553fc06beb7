# a tensor that requires grad transposed in place while a view of it is live: AOT autograd raises 'invalid gradient' tracing the backward
# found by the kiln fuzzer (tensor seed 802193): kind=tensor seed=802193
import torch
import torch.nn.functional as F

SEED = 802193
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
    a0 = _f(g, (D, 2, ), torch.float32).detach().requires_grad_()
    return [a0]


def before_call(call):
    pass


def f(a0):
    v0 = a0.masked_fill(a0 != a0, 0)
    v1 = v0.T
    v0.transpose_(0, -1)
    v4 = F.layer_norm(v1, v1.shape[-1:])
    return (v1, v4, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
