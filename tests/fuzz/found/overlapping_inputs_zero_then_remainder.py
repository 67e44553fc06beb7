# inputs that share memory: a1.zero_(); a1 % 0 returns NaN in the aliased output a0 where eager returns 0 (issue 13 class 5)
# found by the kiln fuzzer (tensor seed 100227, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=100227
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100227, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    _o0 = _f(g, ((3 + 1), 2, 1, ), torch.float32)
    a0, a1 = _o0[:-1], _o0
    return [a0, a1]


def f(a0, a1):
    a1.zero_()
    v4 = a1 % 0
    return (a0, v4, )
