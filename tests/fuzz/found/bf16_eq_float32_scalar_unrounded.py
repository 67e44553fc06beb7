# a bfloat16 tensor compared with a 0-d float32 mean: eager rounds the mean to bfloat16 first, kiln compared unrounded
# found by the kiln fuzzer (tensor seed 962203, entries kiln and torch): kind=tensor seed=962203
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


W0 = torch.linspace(-1, 1, 1)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, ), torch.float32)
    a1 = _f(g, (D, 2, ), torch.bfloat16)
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 962203, 4, (), -1, ('kiln', 'torch'), ('W0',)


def before_call(call):
    W0.mul_(1.5)


def f(a0, a1):
    v0 = a0.mean()
    v1 = torch.addcmul(a1, a1, a1, value=0.5)
    v2 = v1.detach()
    v3 = v1 == v0
    return (a0, W0, v0, v2, v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
