# inputs that share memory: a1.zero_(); a1 % 0 returns NaN in the aliased output a0 where eager returns 0 (issue 13 class 5)
# found by the kiln fuzzer (tensor seed 100227, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=100227
import torch
import torch.nn.functional as F

SEED = 100227
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
    _o0 = _f(g, ((3 + 1), 2, 1, ), torch.float32)
    a0, a1 = _o0[:-1], _o0
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    a1.zero_()
    v4 = a1 % 0
    return (a0, v4, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
