# inputs that share memory (a0 = s[:-1], a1 = s): erf(a1) is computed after the later write a0[i0] = 0 (issue 13 class 5)
# found by the kiln fuzzer (tensor seed 100073, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=100073
import torch
import torch.nn.functional as F

SEED = 100073
NCALLS = 1
SHAPE_CALLS = ()
BAD_CALL = -1
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
    _o0 = _f(g, ((4 + 1), 2, ), torch.bfloat16)
    a0, a1 = _o0[:-1], _o0
    i0 = _ix(g, (D,), D, lo=-D)
    return [a0, a1, i0]


def before_call(call):
    pass


def f(a0, a1, i0):
    v1 = torch.erf(a1)
    a0[i0] = 0
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
