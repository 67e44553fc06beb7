# zero-argument super() in a compiled module's forward: RuntimeError __class__ cell not found (issue 13 crash list)
# found by the kiln fuzzer (capture seed 200112, entry kiln):
# kiln differential fuzzer program: kind=capture seed=200112
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200112, 1, (), -1, ('kiln',), ()


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


def make_inputs(g, D, bad):
    return [_f(g, (D, 4)), _f(g, (D, 4)), NT(_f(g, (D, 4)), _f(g, (D, 4)))]


def f(x, y, c):
    t0 = x * c.x + c.y
    t5 = RES(t0)
    return t5
