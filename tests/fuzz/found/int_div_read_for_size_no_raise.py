# an integer floor division read only by full_like: eager raises ZeroDivisionError, kiln dropped it
# found by the kiln fuzzer (tensor seed 700545, entries kiln and torch): kind=tensor seed=700545
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _i(g, (2, 4, 3), dtype=torch.int64)
    return [a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700545, 3, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a1):
    v4 = torch.div(a1, a1, rounding_mode='floor')
    v5 = torch.full_like(v4, 2)
    return (a1 * 2, v5)


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
