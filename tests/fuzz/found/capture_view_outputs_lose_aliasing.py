# returned views of one result no longer share its memory (issue 13 class 4)
# found by the kiln fuzzer (capture seed 200007, entry kiln): kind=capture seed=200007
import torch
import torch.nn.functional as F

SEED = 200007
NCALLS = 2
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
    x = _f(g, (4, 4))
    return [x]


def before_call(call):
    pass


def f(x):
    t0 = x * 2
    return (t0, t0[1:], t0.t())


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
