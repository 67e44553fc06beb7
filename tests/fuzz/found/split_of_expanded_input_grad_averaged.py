# a split of an expanded input that requires grad: the capture rebuilt the view with as_strided, whose backward averaged the gradient over the elements sharing an address
# found by the kiln fuzzer (tensor seed 905880, entry kiln): kind=tensor seed=905880
import torch
import torch.nn.functional as F

SEED = 905880
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
    a0 = _f(g, (1, 2, ), torch.float32).expand(D, 2).detach().requires_grad_()
    return [a0]


def before_call(call):
    pass


def f(a0):
    v7 = a0.split(2, 1)[0]
    v8 = a0.split(2, 0)[0].split(1, 0)[-1]
    return (v7, v8, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
