# sigmoid(x) read by amax (a scalar reduction loop) and by a division (a vectorised loop) was recomputed in both: libmvec's exp and glibc's scalar exp rounded apart, s / s.amax() truncated to 0
# found by the kiln fuzzer (tensor seed 942657, entry kiln): kind=tensor seed=942657
import torch
import torch.nn.functional as F

SEED = 942657
NCALLS = 3
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
    a0 = _b(g, (5, D, D, 3, ))
    a2 = _f(g, (1, 2, ), torch.float64)
    return [a0, a2]


def before_call(call):
    pass


def f(a0, a2):
    v0 = torch.sigmoid(a2)
    v1 = v0.amax(-2)
    v2 = torch.div(v0, v1, rounding_mode='trunc')
    v3 = a2[None]
    v4 = v3.diagonal()
    return (v2, v4, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
