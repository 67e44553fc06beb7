# kiln differential fuzzer program: kind=capture seed=713 (grad: a forward calling super() made every local live, so a dead value needing grad became a graph output and x got a zero gradient where eager gives None)
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 713, 1, (), -1, ('kiln',), ()


import dataclasses

@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor

class RootBase(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.full((4,), 0.5))

    def forward(self, u):
        return u * self.gain + 1

KP = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4))
KSTATE = {KP: torch.ones(4)}


def make_inputs(g, D, bad):
    return [_f(g, (D, 4)).requires_grad_(), Pair(_f(g, (D, 4)), _f(g, (4,)))]


class Root(RootBase):
    def forward(self, x, c):
        t0 = super().forward(x + c.a - c.b)
        with torch.no_grad():
            e_t2 = t0 + 1
            torch._dynamo.graph_break()
            t2 = e_t2 * 2
        t3 = t2 + (KSTATE[KP] * KP).sum()
        t5 = t3 * max(d for d in t3.shape) - min((i * i for i in range(1, 3)), default=0)
        return t5


f = Root()
