# the grad of an output viewing an expanded input that requires grad is averaged over the input's shared elements
# found by the kiln fuzzer (tensor seed 700340): kind=tensor seed=700340
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (1, 4, ), torch.float32).expand(2, 4).detach().requires_grad_()
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700340, 2, (), 1, ('kiln',), ()


def before_call(call):
    pass


def f(a0):
    v1 = a0.unsqueeze(0)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
