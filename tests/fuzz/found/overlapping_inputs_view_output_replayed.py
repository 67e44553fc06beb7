# an output viewing overlapping inputs, one written in place: AOT autograd's replay from the synthetic base returned other elements
# found by the kiln fuzzer (tensor seed 700800, entry torch): kind=tensor seed=700800
import torch
import torch.nn.functional as F

SEED = 700800
NCALLS = 2
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
    _o0 = _f(g, (5, 2, 4, ), torch.float32)
    a0, a1 = _o0[:-1], _o0[1:]
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    v0 = a1[1]
    a0.floor_divide_(2)
    v3 = v0.flatten()
    return (v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
