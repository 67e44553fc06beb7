# pow with a bool exponent: eager's backward raises on the bool subtraction (exponent - 1), kiln's compiled backward did not
# found by the kiln fuzzer (tensor seed 800934): kind=tensor seed=800934
import torch
import torch.nn.functional as F

SEED = 800934
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
    a0 = _f(g, (5, 1, 1, ), torch.float32).detach().requires_grad_()
    m = _b(g, (5, 1, 1, ))
    return [a0, m]


def before_call(call):
    pass


def f(a0, m):
    v5 = a0.bfloat16() ** m
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
