# fill_ then squeeze_ of a sliced input: AOT's write-back re-strided it at offset 0 and wrote the other slice
# found by the kiln fuzzer (tensor seed 701478, entry kiln): kind=tensor seed=701478
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701478, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    _o2 = _f(g, ((1 + 1), 2, ), torch.float32)
    a2, a3 = _o2[:-1], _o2[1:]
    return [a2, a3]


def f(a2, a3):
    a3.fill_(3)
    a3.squeeze_()
    return ()
