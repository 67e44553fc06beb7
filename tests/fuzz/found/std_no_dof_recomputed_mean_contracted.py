# x - mean(x) of a size-1 row not 0: gcc contracted the two copies of gelu(x) differently, std (no degrees of freedom) inf, not NaN
# found by the kiln fuzzer (tensor seed 700651, entry kiln): kind=tensor seed=700651
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (), torch.float32)
    a1 = _i(g, (2 * 2, 5, ), dtype=torch.int64)
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700651, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1):
    v1 = F.gelu(a0)
    v3 = (v1 - v1.mean(-1, keepdim=True)) / (v1.std(-1, keepdim=True) + 1e-5)
    v5 = torch.eq(a1, v3).sum()
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
