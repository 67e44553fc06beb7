# a global written in place before an out-of-range index raised: the write was lost (the compiled graph raised before AOT's write-back)
# found by the kiln fuzzer (tensor seed 701461, entry kiln): kind=tensor seed=701461
import torch
import torch.nn.functional as F

SEED = 701461
NCALLS = 4
SHAPE_CALLS = ()
BAD_CALL = 3
ENTRIES = ('kiln',)
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
    i0 = _ix(g, (2,), 3, lo=0)
    i1 = _ix(g, (2,), 2, lo=0, bad=bad)
    return [i0, i1]


def before_call(call):
    pass


def f(i0, i1):
    W0.index_put_((i0,), W0[i0] * 2, accumulate=True)
    i0[i1] = 0
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
