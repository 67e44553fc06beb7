# a global written in place before an op eager's kernel rejects (index_fill_ on an empty tensor): the graph ran as captured and, keeping a dead index check, was run again after it raised, so the write happened twice
# found by the kiln fuzzer (tensor seed 901289, entries kiln and torch): kind=tensor seed=901289
import torch
import torch.nn.functional as F

SEED = 901289
NCALLS = 3
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln', 'torch')
STATE = ('W0',)

import os
import sys

if "__file__" in globals():   # run as a script (check_file execs this source again, path set)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.gen import HELPERS  # noqa: E402  (the input helpers every generated program holds)
exec(HELPERS)


W0 = torch.linspace(-1, 1, 3)


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    a1 = _i(g, (D, 4, ), dtype=torch.int64)
    i0 = _ix(g, (0,), 16, lo=0)
    i1 = _ix(g, (3,), 0, lo=0)
    return [a1, i0, i1]


def before_call(call):
    global W0
    W0 = W0 + call


def f(a1, i0, i1):
    W0.pow_(2)
    v1 = a1.take(i0)
    v1.index_fill_(-1, i1, 1)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
