# a constant both an index_put argument and an output: 'kiln: internal error: buffer 10 has no tensor at this point'
# found by the kiln fuzzer (tensor seed 700597, entry torch): kind=tensor seed=700597
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (2, 4, ), torch.float32, special=True).detach().requires_grad_()
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700597, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v0 = torch.frac(a0)
    v0.index_fill_(-2, torch.tensor([0]), -1)
    v1 = torch.sigmoid(v0)
    return (a0, v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
