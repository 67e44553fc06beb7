# unsqueeze_ then sub_ on a sliced input: AOT autograd writes it back with the fresh value's geometry (the caller's tensor gets storage offset 0, the values land at the wrong place) (issue 13)
# found by the kiln fuzzer (tensor seed 700885, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700885
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700885, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (3 + 1, 4, 1, D, ), torch.float32)[1:], _f(g, (), torch.float32)]


def f(a1, a2):
    a1.unsqueeze_(0)
    a1.sub_(a2, alpha=2)
    return ()
