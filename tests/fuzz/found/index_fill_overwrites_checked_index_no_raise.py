# v = x[i]; v.fill_(3): the index's value is dead once functionalized and its bounds check went with it (issue 13)
# found by the kiln fuzzer (tensor seed 905292, entry kiln), shrunk by hand: kind=tensor seed=905292
import torch
import torch.nn.functional as F

SEED = 905292
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
    a0 = _f(g, (4, 4), torch.float32)
    i0 = _ix(g, (2,), 4, lo=-4, bad=bad)
    return [a0, i0]


def before_call(call):
    pass


def f(a0, i0):
    v4 = a0[i0]
    v4.fill_(3)
    return (torch.log_softmax(v4, 1), )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
