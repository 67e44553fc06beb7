# outputs that are views of one another no longer share memory (issue 13 class 4)
# found by the kiln fuzzer (tensor seed 100002, entry kiln): kind=tensor seed=100002
import torch
import torch.nn.functional as F

SEED = 100002
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
    a0 = _f(g, (5,))
    return [a0]


def before_call(call):
    pass


def f(a0):
    v0 = torch.sigmoid(a0)
    v1 = v0.unbind(-1)[2]
    return (v0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
