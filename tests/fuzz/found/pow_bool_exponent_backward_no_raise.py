# pow with a bool exponent: eager's backward raises on the bool subtraction (exponent - 1), kiln's compiled backward did not
# found by the kiln fuzzer (tensor seed 800934): kind=tensor seed=800934
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (5, 1, 1, ), torch.float32).detach().requires_grad_()
    m = _b(g, (5, 1, 1, ))
    return [a0, m]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800934, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0, m):
    v5 = a0.bfloat16() ** m
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
