# F.embedding of an empty-column weight with an out-of-range id does not raise (the check ran per output element, and there were none) (issue 13)
# found by the kiln fuzzer (tensor seed 900042, entry kiln), shrunk by hand: kind=tensor seed=900042
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    w = torch.zeros(2, 0)
    i2 = _ix(g, (3,), 2, lo=0, bad=bad)
    return [w, i2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 900042, 2, (), 1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(w, i2):
    v2 = F.embedding(i2, w)
    v3 = v2 * 3 + 1
    return (i2 + 1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
