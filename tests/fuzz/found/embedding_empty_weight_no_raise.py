# F.embedding of an empty-column weight with an out-of-range id does not raise (the check ran per output element, and there were none) (issue 13)
# found by the kiln fuzzer (tensor seed 900042, entry kiln), shrunk by hand: kind=tensor seed=900042
import torch
import torch.nn.functional as F

SEED = 900042
NCALLS = 2
SHAPE_CALLS = ()
BAD_CALL = 1
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
    bad = call == BAD_CALL
    w = torch.zeros(2, 0)
    i2 = _ix(g, (3,), 2, lo=0, bad=bad)
    return [w, i2]


def before_call(call):
    pass


def f(w, i2):
    v2 = F.embedding(i2, w)
    v3 = v2 * 3 + 1
    return (i2 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
