# a[i, i] with a size-0 dim: the gather loaded through an index clamped to -1 from a NULL data pointer (SIGSEGV)
# found by the kiln fuzzer (tensor seed 940440, entries kiln and torch): kind=tensor seed=940440
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (1, 0, ), torch.float32).expand(4, 0)
    i0 = _ix(g, (D,), D, lo=0, bad=bad)
    return [a1, i0]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 940440, 2, (), 1, ('kiln', 'torch'), ()


def before_call(call):
    pass


def f(a1, i0):
    v3 = a1[i0, i0]
    return (v3 * 2, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
