# fill_ then squeeze_ of a sliced input: AOT's write-back re-strided it at offset 0 and wrote the other slice
# found by the kiln fuzzer (tensor seed 701478, entry kiln): kind=tensor seed=701478
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    _o2 = _f(g, ((1 + 1), 2, ), torch.float32)
    a2, a3 = _o2[:-1], _o2[1:]
    return [a2, a3]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 701478, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a2, a3):
    a3.fill_(3)
    a3.squeeze_()
    return ()


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
