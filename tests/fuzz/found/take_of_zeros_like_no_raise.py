# zeros_like(x).take(i) with an out-of-range id does not raise (the check's where(i < 0, 0, 0) folded to 0) (issue 13)
# found by the kiln fuzzer (tensor seed 901346, entry kiln), shrunk by hand: kind=tensor seed=901346
import torch
import torch.nn.functional as F

SEED = 901346
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
    bad = call == BAD_CALL
    a1 = _f(g, (2, 2), torch.float32)
    i1 = _ix(g, (2, 2), 4, lo=0, bad=bad)
    return [a1, i1]


def before_call(call):
    pass


def f(a1, i1):
    v3 = torch.zeros_like(a1)
    v4 = v3.take(i1)
    return (v4 * 2, a1 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
