# `t[i] = v` after the last read of a live t: the write was dead code, dropped with its index check (no IndexError)
# found by the kiln fuzzer (tensor seed 940901, entry kiln): kind=tensor seed=940901
import torch
import torch.nn.functional as F

SEED = 940901
NCALLS = 1
SHAPE_CALLS = ()
BAD_CALL = 0
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
    bad = call == BAD_CALL
    a0 = _f(g, (5, ), torch.float32)
    i0 = _ix(g, (2, 2), 5, lo=-5, bad=bad)
    return [a0, i0]


def before_call(call):
    pass


def f(a0, i0):
    v1 = torch.zeros_like(a0)
    v2 = v1 @ a0.t()
    v1[i0] = 0
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
