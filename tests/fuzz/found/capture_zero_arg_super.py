# zero-argument super() in a compiled module's forward: RuntimeError __class__ cell not found (issue 13 crash list)
# found by the kiln fuzzer (capture seed 200112, entry kiln):
# kiln differential fuzzer program: kind=capture seed=200112
import torch
import torch.nn.functional as F

SEED = 200112
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

class Res(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, u):
        return u * self.scale + u


class Res2(Res):
    def forward(self, u):
        return super().forward(u).tanh()


RES = Res2()

import collections

NT = collections.namedtuple('NT', ['x', 'y'])


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    x = _f(g, (D, 4))
    y = _f(g, (D, 4))
    c = NT(_f(g, (D, 4)), _f(g, (D, 4)))
    return [x, y, c]


def before_call(call):
    pass


def f(x, y, c):
    t0 = x * c.x + c.y
    t5 = RES(t0)
    return t5


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
