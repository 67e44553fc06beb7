# sigmoid(x) read by amax (a scalar reduction loop) and by a division (a vectorised loop) was recomputed in both: libmvec's exp and glibc's scalar exp rounded apart, s / s.amax() truncated to 0
# found by the kiln fuzzer (tensor seed 942657, entry kiln): kind=tensor seed=942657
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 942657, 3, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_b(g, (5, D, D, 3, )), _f(g, (1, 2, ), torch.float64)]


def f(a0, a2):
    v0 = torch.sigmoid(a2)
    v1 = v0.amax(-2)
    v2 = torch.div(v0, v1, rounding_mode='trunc')
    v3 = a2[None]
    v4 = v3.diagonal()
    return (v2, v4, )
