# index_fill_ on an empty tensor raised in kiln (its decomposition into index_put checks the index) where eager does not (issue 13)
# found by the kiln fuzzer (tensor seed 930817, entry torch), shrunk by hand: kind=tensor seed=930817
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a3 = _i(g, (2, 0, ), dtype=torch.int64)
    i0 = _ix(g, (0,), 2, lo=0)
    return [a3, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 930817, 1, (), -1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a3, i0):
    v0 = F.embedding(i0, a3)
    v0.index_fill_(1, torch.tensor([0]), -1)
    return (a3, v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
