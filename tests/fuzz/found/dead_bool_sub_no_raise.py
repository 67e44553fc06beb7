# a dead float - bool subtraction: eager raises, kiln (fake tensors skip the check) did not
# found by the kiln fuzzer (tensor seed 700238, entries kiln and torch): kind=tensor seed=700238
import torch
import torch.nn.functional as F

SEED = 700238
NCALLS = 1
SHAPE_CALLS = ()
BAD_CALL = -1
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
    a0 = _f(g, (3, 2, 4, 3), torch.float32)
    return [a0]


def before_call(call):
    pass


def f(a0):
    v1 = torch.isinf(a0)
    v6 = a0 - v1
    return (a0 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
