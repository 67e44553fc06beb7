# inputs that share memory, one written in place, an output viewing the other: AOT autograd replays the view onto the synthetic base and asserts 'incorrect out shape after application of ViewMeta sequence' (issue 13)
# found by the kiln fuzzer (tensor seed 700603, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700603
import torch
import torch.nn.functional as F

SEED = 700603
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
    _o0 = _i(g, ((5 + 1), 5, 4, ), dtype=torch.int32)
    a0, a1 = _o0[:-1], _o0[1:]
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    v0 = a1.view(-1)
    a0.add_(1)
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
