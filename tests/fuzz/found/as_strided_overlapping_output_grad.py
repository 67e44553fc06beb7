# an output that overlaps itself (as_strided) keeps one of the gradients of each shared element (AOT autograd's tangent coercion)
# found by the kiln fuzzer (tensor seed 700830): kind=tensor seed=700830
import torch
import torch.nn.functional as F

SEED = 700830
NCALLS = 3
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('torch',)
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
    a1 = _f(g, (4 + 1, 3, D, ), torch.float32)[1:].detach().requires_grad_()
    return [a1]


def before_call(call):
    pass


def f(a1):
    v0 = F.hardtanh(a1)
    v5 = v0.as_strided((2, 2), (1, 1))
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
