# prod's result (eager saves it for backward) written after a graph break: AOT autograd's prod backward never reads it, so kiln returned a gradient where eager raises (kiln/_saved.py)
# found by the kiln fuzzer (tensor seed 970166, entry kiln): kind=tensor seed=970166
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (5, 2, ), torch.float64).detach().requires_grad_()
    _o1 = _f(g, ((0 + 1), D, ), torch.float32)
    a1, a2 = _o1[:-1], _o1
    return [a0, a1, a2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 970166, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1, a2):
    v1 = a0.prod()
    v2 = v1[v1 > 0]
    v1.div_(2)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
