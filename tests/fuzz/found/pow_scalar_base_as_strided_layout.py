# (2.0 ** x).as_strided of a transposed x: eager's pow(Scalar, Tensor) is contiguous, its meta kept x's strides
# found by the kiln fuzzer (tensor seed 800294, entries kiln and torch): kind=tensor seed=800294
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800294, 1, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_f(g, (3, 4, ), torch.float32).transpose(-1, -2)]


def f(a2):
    v1 = 2.0 ** a2
    v2 = v1.as_strided((2, 2), (1, 1))
    v5 = v2[1]
    return (v5, )
