# fill_ then squeeze_ of a sliced input: AOT's write-back re-strided it at offset 0 and wrote the other slice
# found by the kiln fuzzer (tensor seed 701478, entry kiln): kind=tensor seed=701478
import torch
import torch.nn.functional as F

SEED = 701478
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
    _o2 = _f(g, ((1 + 1), 2, ), torch.float32)
    a2, a3 = _o2[:-1], _o2[1:]
    return [a2, a3]


def before_call(call):
    pass


def f(a2, a3):
    a3.fill_(3)
    a3.squeeze_()
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
