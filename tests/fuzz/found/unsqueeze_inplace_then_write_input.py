# unsqueeze_ then sub_ on a sliced input: AOT autograd writes it back with the fresh value's geometry (the caller's tensor gets storage offset 0, the values land at the wrong place) (issue 13)
# found by the kiln fuzzer (tensor seed 700885, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700885
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (3 + 1, 4, 1, D, ), torch.float32)[1:]
    a2 = _f(g, (), torch.float32)
    return [a1, a2]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700885, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a1, a2):
    a1.unsqueeze_(0)
    a1.sub_(a2, alpha=2)
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
