# v0 saved for backward by cumprod, written through a view after a graph break (nonzero): kiln returned AOT autograd's saved detach(v0) as a tensor of its own (own version counter), so backward read the written values where eager raises
# found by the kiln fuzzer (tensor seed 962025, entry kiln): kind=tensor seed=962025
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 962025, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (1, 2, 3, ), torch.float32).expand(4, 2, 3).detach().requires_grad_()]


def f(a0):
    v0 = a0.cumprod(-3)
    v1 = v0.unsqueeze(-3)
    v2 = v1 @ v1.mT
    v3 = v2.nonzero()
    v1.div_(2)
    return (v0, v3, )
