# x - mean(x) and var(x) of rows constant along dim 0 (an expanded input): kiln's mean was sum * fl(1/n), not ATen's sum / n (a last bit that / (std + 1e-5) amplifies), and its two-pass variance from a float32 mean was ~1e-14, not Welford's exact 0 (remainder by it a number, not NaN)
# found by the kiln fuzzer (tensor seeds 901256, 903218, 900737), shrunk by hand
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (1, 5, D, ), torch.float32).expand(D, 5, D)
    a1 = _b(g, (5, D))
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 903218, 2, (1,), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, a1):
    v0 = (a0 - a0.mean(0, keepdim=True)) / (a0.std(0, keepdim=True) + 1e-5)
    v1 = torch.remainder(a1, a0.var(0, correction=0))
    return (v0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
