# log(a) saved for amin's backward came from a vectorised loop (glibc's libmvec), amin's kernel recomputed it with the scalar log, an ulp apart: amin's backward found no element equal to the minimum, NaN grad
# found by the kiln fuzzer (tensor seed 950097, entry both): kind=tensor seed=950097
import torch
import torch.nn.functional as F

SEED = 950097
NCALLS = 3
SHAPE_CALLS = ()
BAD_CALL = 2
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
    a0 = _i(g, (D, 5, 5, ), dtype=torch.int32).transpose(-1, -2)
    a1 = _f(g, (D, 4, 5, D, ), torch.float64).detach().requires_grad_()
    a2 = _i(g, (2, ), dtype=torch.int64)
    a3 = _f(g, (D, D, D, 1, ), torch.float64).contiguous(memory_format=torch.channels_last).detach().requires_grad_()
    return [a0, a1, a2, a3]


def before_call(call):
    pass


def f(a0, a1, a2, a3):
    v0 = torch.remainder(a2, -3)
    v1 = torch.log(a3)
    v2 = v1.var(-1, correction=0)
    v3 = torch.sqrt(v0)
    v4 = v2 < a3
    v5 = a2.real
    v6 = v1.amin(-1)
    v7 = torch.where(v6 > 0, v6, v6)
    return (v6, v7, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
