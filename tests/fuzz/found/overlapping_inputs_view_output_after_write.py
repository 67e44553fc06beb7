# inputs that share memory, one written in place, an output viewing the other: AOT autograd replays the view onto the synthetic base and asserts 'incorrect out shape after application of ViewMeta sequence' (issue 13)
# found by the kiln fuzzer (tensor seed 700603, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700603
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700603, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    _o0 = _i(g, ((5 + 1), 5, 4, ), dtype=torch.int32)
    a0, a1 = _o0[:-1], _o0[1:]
    return [a0, a1]


def f(a0, a1):
    v0 = a1.view(-1)
    a0.add_(1)
    return (v0, )
