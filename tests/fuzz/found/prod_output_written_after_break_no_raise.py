# prod's result (eager saves it for backward) written after a graph break: AOT autograd's prod backward never reads it, so kiln returned a gradient where eager raises (kiln/_saved.py)
# found by the kiln fuzzer (tensor seed 970166, entry kiln): kind=tensor seed=970166
import torch
import torch.nn.functional as F

SEED = 970166
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
    a0 = _f(g, (5, 2, ), torch.float64).detach().requires_grad_()
    _o1 = _f(g, ((0 + 1), D, ), torch.float32)
    a1, a2 = _o1[:-1], _o1
    return [a0, a1, a2]


def before_call(call):
    pass


def f(a0, a1, a2):
    v1 = a0.prod()
    v2 = v1[v1 > 0]
    v1.div_(2)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    import os, sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
