# x.scatter_add_(0, x, ...) (index aliases the written tensor): eager raises, kiln does not
# found by the kiln fuzzer (tensor seed 100463, entry kiln): kind=tensor seed=100463
import torch
import torch.nn.functional as F

SEED = 100463
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
    i1 = _ix(g, (2, 2), 2, lo=0)
    return [i1]


def before_call(call):
    pass


def f(i1):
    i1.scatter_add_(0, i1, torch.ones_like(i1))
    return (i1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
