# (2.0 ** x).as_strided of a transposed x: eager's pow(Scalar, Tensor) is contiguous, its meta kept x's strides
# found by the kiln fuzzer (tensor seed 800294, entries kiln and torch): kind=tensor seed=800294
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a2 = _f(g, (3, 4, ), torch.float32).transpose(-1, -2)
    return [a2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800294, 1, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a2):
    v1 = 2.0 ** a2
    v2 = v1.as_strided((2, 2), (1, 1))
    v5 = v2[1]
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
