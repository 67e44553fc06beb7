# an unused a1[:, i0] (a copy of an input that requires grad, kept for its bounds check) was not detached: the input got a zero grad where eager's is None
# found by the kiln fuzzer (tensor seed 930685, entry kiln): kind=tensor seed=930685
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (4, 1, ), torch.float32).transpose(-1, -2).detach().requires_grad_()
    a3 = _f(g, (D, D, 2, D, ), torch.float32).detach().requires_grad_()
    i0 = _ix(g, (3,), D, lo=-D)
    return [a1, a3, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 930685, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a1, a3, i0):
    v2 = a1[:, i0]
    v3 = a3 + a3
    return (v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
