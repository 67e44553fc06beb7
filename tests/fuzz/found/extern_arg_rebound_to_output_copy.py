# a constant both an index_put argument and an output: 'kiln: internal error: buffer 10 has no tensor at this point'
# found by the kiln fuzzer (tensor seed 700597, entry torch): kind=tensor seed=700597
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700597, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (2, 4, ), torch.float32, special=True).detach().requires_grad_()]


def f(a0):
    v0 = torch.frac(a0)
    v0.index_fill_(-2, torch.tensor([0]), -1)
    v1 = torch.sigmoid(v0)
    return (a0, v1, )
