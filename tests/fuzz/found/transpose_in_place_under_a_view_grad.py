# a tensor that requires grad transposed in place while a view of it is live: AOT autograd raises 'invalid gradient' tracing the backward
# found by the kiln fuzzer (tensor seed 802193): kind=tensor seed=802193
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 802193, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (D, 2, ), torch.float32).detach().requires_grad_()]


def f(a0):
    v0 = a0.masked_fill(a0 != a0, 0)
    v1 = v0.T
    v0.transpose_(0, -1)
    v4 = F.layer_norm(v1, v1.shape[-1:])
    return (v1, v4, )
