# backward of scatter_add/gather on a 0-d tensor: CompilerError in the compiled backward
# found by the kiln fuzzer (tensor seed 100031, entry kiln): kind=tensor seed=100031
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 4)).detach().requires_grad_()
    i0 = _ix(g, (3,), 1, lo=0)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100031, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, i0):
    v2 = a0.mean()
    v5 = v2.scatter_add(-1, i0, v2.gather(-1, i0))
    v6 = v5.T
    return (v6, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
