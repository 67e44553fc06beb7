# an input saved for backward then changed in place: kiln raises the autograd version error at the call (eager only at backward)
# found by the kiln fuzzer (tensor seed 100221, entry kiln): kind=tensor seed=100221
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _i(g, (4, 4))
    a1 = _f(g, (4, 4)).detach().requires_grad_()
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100221, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1):
    v2 = torch.minimum(a1, a0)
    a0.floor_divide_(2)
    return (v2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
