# round() of a fused bfloat16 intermediate decided on its unrounded float32 value: x * rsqrt(mean(x^2)) = -1.4993 rounds to bfloat16 -1.5 in eager (round: -2), kiln rounded -1.4993 (-1)
# found by the kiln fuzzer (tensor seed 900256, both entries), shrunk by hand
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 5, 5, 3, ), torch.bfloat16).transpose(-1, -2)
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 900256, 2, (1,), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v4 = a0 * torch.rsqrt(a0.pow(2).mean(-1, keepdim=True) + 1e-6)
    v5 = torch.clamp(v4, min=-1.5)
    return (torch.round(v5), )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
