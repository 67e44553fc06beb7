# x - mean(x) and var(x) of rows constant along dim 0 (an expanded input): kiln's mean was sum * fl(1/n), not ATen's sum / n (a last bit that / (std + 1e-5) amplifies), and its two-pass variance from a float32 mean was ~1e-14, not Welford's exact 0 (remainder by it a number, not NaN)
# found by the kiln fuzzer (tensor seeds 901256, 903218, 900737), shrunk by hand
import torch
import torch.nn.functional as F

SEED = 903218
NCALLS = 2
SHAPE_CALLS = (1,)
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
    D = 4 + (call in SHAPE_CALLS)
    a0 = _f(g, (1, 5, D, ), torch.float32).expand(D, 5, D)
    a1 = _b(g, (5, D))
    return [a0, a1]


def before_call(call):
    pass


def f(a0, a1):
    v0 = (a0 - a0.mean(0, keepdim=True)) / (a0.std(0, keepdim=True) + 1e-5)
    v1 = torch.remainder(a1, a0.var(0, correction=0))
    return (v0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
