# the grad of an output viewing an expanded input that requires grad is averaged over the input's shared elements
# found by the kiln fuzzer (tensor seed 700340): kind=tensor seed=700340
import torch
import torch.nn.functional as F

SEED = 700340
NCALLS = 2
SHAPE_CALLS = ()
BAD_CALL = 1
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
    a0 = _f(g, (1, 4, ), torch.float32).expand(2, 4).detach().requires_grad_()
    return [a0]


def before_call(call):
    pass


def f(a0):
    v1 = a0.unsqueeze(0)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
