# inputs that share memory, one written in place, an output viewing the other: AOT autograd replays the view onto the synthetic base and asserts 'incorrect out shape after application of ViewMeta sequence' (issue 13)
# found by the kiln fuzzer (tensor seed 700603, entry kiln):
# kiln differential fuzzer program: kind=tensor seed=700603
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    _o0 = _i(g, ((5 + 1), 5, 4, ), dtype=torch.int32)
    a0, a1 = _o0[:-1], _o0[1:]
    return [a0, a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700603, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(a0, a1):
    v0 = a1.view(-1)
    a0.add_(1)
    return (v0, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
