# transpose_ on a view of an input: kiln's recorder rebuilt the returned view with the geometry it had when made, (0, 3) where eager has (3, 0) (issue 13)
# found by the kiln fuzzer (tensor seed 700485, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700485
import torch
import torch.nn.functional as F

SEED = 700485
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
    a0 = _f(g, (0, 2, 4, ), torch.float32)
    return [a0]


def before_call(call):
    pass


def f(a0):
    v0 = a0.reshape(-1, 3)
    v0.transpose_(0, -1)
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
