# transpose_ on a view of an input: kiln's recorder rebuilt the returned view with the geometry it had when made, (0, 3) where eager has (3, 0) (issue 13)
# found by the kiln fuzzer (tensor seed 700485, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700485
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700485, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (0, 2, 4, ), torch.float32)]


def f(a0):
    v0 = a0.reshape(-1, 3)
    v0.transpose_(0, -1)
    return (v0, )
