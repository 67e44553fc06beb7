# v0.split(...)[-1].copy_(x): the fast inference trace made the write functional, v0 kept its old values
# found by the kiln fuzzer (tensor seed 701029, entry torch): kind=tensor seed=701029
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a2 = _f(g, (4, 5, 4, 1, ), torch.float32).contiguous(memory_format=torch.channels_last)
    return [a2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701029, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a2):
    v0 = torch.cos(a2)
    v1 = v0.split(1, 3)[-1]
    v1.copy_(a2)
    v2 = v0 > v1
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
