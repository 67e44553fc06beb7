# v0 saved for backward by cumprod, written through a view after a graph break (nonzero): kiln returned AOT autograd's saved detach(v0) as a tensor of its own (own version counter), so backward read the written values where eager raises
# found by the kiln fuzzer (tensor seed 962025, entry kiln): kind=tensor seed=962025
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (1, 2, 3, ), torch.float32).expand(4, 2, 3).detach().requires_grad_()
    return [a0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 962025, 2, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a0):
    v0 = a0.cumprod(-3)
    v1 = v0.unsqueeze(-3)
    v2 = v1 @ v1.mT
    v3 = v2.nonzero()
    v1.div_(2)
    return (v0, v3, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
