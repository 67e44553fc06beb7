# v0 saved for backward by cumprod, written through a view after a graph break (nonzero): kiln returned AOT autograd's saved detach(v0) as a tensor of its own (own version counter), so backward read the written values where eager raises
# found by the kiln fuzzer (tensor seed 962025, entry kiln): kind=tensor seed=962025
import torch
import torch.nn.functional as F

SEED = 962025
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
    a0 = _f(g, (1, 2, 3, ), torch.float32).expand(4, 2, 3).detach().requires_grad_()
    return [a0]


def before_call(call):
    pass


def f(a0):
    v0 = a0.cumprod(-3)
    v1 = v0.unsqueeze(-3)
    v2 = v1 @ v1.mT
    v3 = v2.nonzero()
    v1.div_(2)
    return (v0, v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
