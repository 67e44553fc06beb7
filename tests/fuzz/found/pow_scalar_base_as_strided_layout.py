# (2.0 ** x).as_strided of a transposed x: eager's pow(Scalar, Tensor) is contiguous, its meta kept x's strides
# found by the kiln fuzzer (tensor seed 800294, entries kiln and torch): kind=tensor seed=800294
import torch
import torch.nn.functional as F

SEED = 800294
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
    a2 = _f(g, (3, 4, ), torch.float32).transpose(-1, -2)
    return [a2]


def before_call(call):
    pass


def f(a2):
    v1 = 2.0 ** a2
    v2 = v1.as_strided((2, 2), (1, 1))
    v5 = v2[1]
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
