# inputs that share memory (a0 = s[:-1], a1 = s): erf(a1) is computed after the later write a0[i0] = 0 (issue 13 class 5)
# found by the kiln fuzzer (tensor seed 100073, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=100073
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100073, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    _o0 = _f(g, ((4 + 1), 2, ), torch.bfloat16)
    a0, a1 = _o0[:-1], _o0
    i0 = _ix(g, (D,), D, lo=-D)
    return [a0, a1, i0]


def f(a0, a1, i0):
    v1 = torch.erf(a1)
    a0[i0] = 0
    return (v1, )
