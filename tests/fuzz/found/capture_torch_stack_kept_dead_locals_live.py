# torch.stack was taken for inspect.stack: every local stayed live at the graph break, a dead one that requires grad became a graph output and gave x a zero grad where eager's is None
# found by the kiln fuzzer (capture seed 945291): kind=capture seed=945291
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 945291, 1, (), -1, ('kiln',), ()


import dataclasses

@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor

class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer('steps', torch.zeros(()))

    def forward(self, u):
        self.steps += 1
        return torch.relu(self.lin(u)) + self.steps


torch.manual_seed(0)
MOD = Small()


def make_inputs(g, D, bad):
    return [_f(g, (D, 4)).requires_grad_(), Pair(_f(g, (D, 4)), _f(g, (4,)))]


def f(x, c):
    t0 = x + c.a - c.b
    with torch.no_grad():
        t2 = t0 * 2
    t4 = MOD(t2)
    t5 = torch.stack([r.sum() for r in t4.unbind(0)]).sum() + t4
    print('value', t5.shape, float(t5.sum()))
    t6 = t5 * 1.0
    return t6
