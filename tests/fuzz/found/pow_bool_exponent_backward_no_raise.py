# pow with a bool exponent: eager's backward raises on the bool subtraction (exponent - 1), kiln's compiled backward did not
# found by the kiln fuzzer (tensor seed 800934): kind=tensor seed=800934
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800934, 2, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (5, 1, 1, ), torch.float32).detach().requires_grad_(), _b(g, (5, 1, 1, ))]


def f(a0, m):
    v5 = a0.bfloat16() ** m
    return (v5, )
