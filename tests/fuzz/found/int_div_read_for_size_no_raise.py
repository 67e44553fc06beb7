# an integer floor division read only by full_like: eager raises ZeroDivisionError, kiln dropped it
# found by the kiln fuzzer (tensor seed 700545, entries kiln and torch): kind=tensor seed=700545
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700545, 3, (), -1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    return [_i(g, (2, 4, 3), dtype=torch.int64)]


def f(a1):
    v4 = torch.div(a1, a1, rounding_mode='floor')
    v5 = torch.full_like(v4, 2)
    return (a1 * 2, v5)
