# prod's result (eager saves it for backward) written after a graph break: AOT autograd's prod backward never reads it, so kiln returned a gradient where eager raises (kiln/_saved.py)
# found by the kiln fuzzer (tensor seed 970166, entry kiln): kind=tensor seed=970166
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 970166, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    a0 = _f(g, (5, 2, ), torch.float64).detach().requires_grad_()
    _o1 = _f(g, ((0 + 1), D, ), torch.float32)
    a1, a2 = _o1[:-1], _o1
    return [a0, a1, a2]


def f(a0, a1, a2):
    v1 = a0.prod()
    v2 = v1[v1 > 0]
    v1.div_(2)
    return (v1, )
