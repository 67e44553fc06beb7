# unsqueeze_ then sub_ on a sliced input: AOT autograd writes it back with the fresh value's geometry (the caller's tensor gets storage offset 0, the values land at the wrong place) (issue 13)
# found by the kiln fuzzer (tensor seed 700885, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700885
import torch
import torch.nn.functional as F

SEED = 700885
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
    a1 = _f(g, (3 + 1, 4, 1, D, ), torch.float32)[1:]
    a2 = _f(g, (), torch.float32)
    return [a1, a2]


def before_call(call):
    pass


def f(a1, a2):
    a1.unsqueeze_(0)
    a1.sub_(a2, alpha=2)
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
