# no_grad / set_grad_enabled(False) blocks on a requires_grad input: 'a fresh recording fails its own guards' (internal error; cold cache only)
# found by the kiln fuzzer (capture seed 200015, entry kiln): kind=capture seed=200015
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    x = _f(g, (4, 4)).requires_grad_()
    return [x]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200015, 1, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(x):
    t0 = x * 2
    with torch.no_grad():
        c_t1 = t0 * 2
    t1 = t0 + c_t1
    with torch.set_grad_enabled(False):
        m_t2 = t1.mean()
    t2 = t1 - m_t2
    return t2


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
