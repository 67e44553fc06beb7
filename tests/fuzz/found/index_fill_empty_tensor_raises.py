# index_fill_ on an empty tensor raised in kiln (its decomposition into index_put checks the index) where eager does not (issue 13)
# found by the kiln fuzzer (tensor seed 930817, entry torch), shrunk by hand: kind=tensor seed=930817
import torch
import torch.nn.functional as F

SEED = 930817
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
    a3 = _i(g, (2, 0, ), dtype=torch.int64)
    i0 = _ix(g, (0,), 2, lo=0)
    return [a3, i0]


def before_call(call):
    pass


def f(a3, i0):
    v0 = F.embedding(i0, a3)
    v0.index_fill_(1, torch.tensor([0]), -1)
    return (a3, v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
