# a split of an expanded input that requires grad: the capture rebuilt the view with as_strided, whose backward averaged the gradient over the elements sharing an address
# found by the kiln fuzzer (tensor seed 905880, entry kiln): kind=tensor seed=905880
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (1, 2, ), torch.float32).expand(D, 2).detach().requires_grad_()
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 905880, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v7 = a0.split(2, 1)[0]
    v8 = a0.split(2, 0)[0].split(1, 0)[-1]
    return (v7, v8, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
