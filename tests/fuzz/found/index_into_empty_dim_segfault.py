# a[i, i] with a size-0 dim: the gather loaded through an index clamped to -1 from a NULL data pointer (SIGSEGV)
# found by the kiln fuzzer (tensor seed 940440, entries kiln and torch): kind=tensor seed=940440
import torch
import torch.nn.functional as F

SEED = 940440
NCALLS = 2
SHAPE_CALLS = ()
BAD_CALL = 1
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
    a1 = _f(g, (1, 0, ), torch.float32).expand(4, 0)
    i0 = _ix(g, (D,), D, lo=0, bad=bad)
    return [a1, i0]


def before_call(call):
    pass


def f(a1, i0):
    v3 = a1[i0, i0]
    return (v3 * 2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
