# no_grad / set_grad_enabled(False) blocks on a requires_grad input: 'a fresh recording fails its own guards' (internal error; cold cache only)
# found by the kiln fuzzer (capture seed 200015, entry kiln): kind=capture seed=200015
import torch
import torch.nn.functional as F

SEED = 200015
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
    x = _f(g, (4, 4)).requires_grad_()
    return [x]


def before_call(call):
    pass


def f(x):
    t0 = x * 2
    with torch.no_grad():
        c_t1 = t0 * 2
    t1 = t0 + c_t1
    with torch.set_grad_enabled(False):
        m_t2 = t1.mean()
    t2 = t1 - m_t2
    return t2


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
