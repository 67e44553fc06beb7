# torch.stack was taken for inspect.stack: every local stayed live at the graph break, a dead one that requires grad became a graph output and gave x a zero grad where eager's is None
# found by the kiln fuzzer (capture seed 945291): kind=capture seed=945291
import torch
import torch.nn.functional as F

SEED = 945291
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


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    x = _f(g, (D, 4)).requires_grad_()
    c = Pair(_f(g, (D, 4)), _f(g, (4,)))
    return [x, c]


def before_call(call):
    pass


def f(x, c):
    t0 = x + c.a - c.b
    with torch.no_grad():
        t2 = t0 * 2
    t4 = MOD(t2)
    t5 = torch.stack([r.sum() for r in t4.unbind(0)]).sum() + t4
    print('value', t5.shape, float(t5.sum()))
    t6 = t5 * 1.0
    return t6


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
