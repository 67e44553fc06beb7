# log(a) saved for amin's backward came from a vectorised loop (glibc's libmvec), amin's kernel recomputed it with the scalar log, an ulp apart: amin's backward found no element equal to the minimum, NaN grad
# found by the kiln fuzzer (tensor seed 950097, entry both): kind=tensor seed=950097
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 950097, 3, (), 2, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_i(g, (D, 5, 5, ), dtype=torch.int32).transpose(-1, -2),
            _f(g, (D, 4, 5, D, ), torch.float64).detach().requires_grad_(),
            _i(g, (2, ), dtype=torch.int64),
            _f(g, (D, D, D, 1, ), torch.float64).contiguous(memory_format=torch.channels_last).detach().requires_grad_()]


def f(a0, a1, a2, a3):
    v0 = torch.remainder(a2, -3)
    v1 = torch.log(a3)
    v2 = v1.var(-1, correction=0)
    v3 = torch.sqrt(v0)
    v4 = v2 < a3
    v5 = a2.real
    v6 = v1.amin(-1)
    v7 = torch.where(v6 > 0, v6, v6)
    return (v6, v7, )
