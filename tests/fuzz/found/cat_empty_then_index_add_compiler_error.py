# cat with an empty slice then index_add: 'a compiler stage failed without a message'
# found by the kiln fuzzer (tensor seed 100036, entry kiln): kind=tensor seed=100036
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a0 = _f(g, (4, 4))
    i0 = _ix(g, (2,), 4, lo=0)
    return [a0, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 100036, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, i0):
    v3 = torch.cat([a0, a0[:0]])
    v4 = v3.index_add(-1, i0, v3.index_select(-1, i0))
    return (v4, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
