# cat with an empty slice then index_add: 'a compiler stage failed without a message'
# found by the kiln fuzzer (tensor seed 100036, entry kiln): kind=tensor seed=100036
import torch
import torch.nn.functional as F

SEED = 100036
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
    a0 = _f(g, (4, 4))
    i0 = _ix(g, (2,), 4, lo=0)
    return [a0, i0]


def before_call(call):
    pass


def f(a0, i0):
    v3 = torch.cat([a0, a0[:0]])
    v4 = v3.index_add(-1, i0, v3.index_select(-1, i0))
    return (v4, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
