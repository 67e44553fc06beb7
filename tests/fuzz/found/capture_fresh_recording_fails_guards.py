# no_grad / set_grad_enabled(False) blocks on a requires_grad input: 'a fresh recording fails its own guards' (internal error; cold cache only)
# found by the kiln fuzzer (capture seed 200015, entry kiln): kind=capture seed=200015
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200015, 1, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 4)).requires_grad_()]


def f(x):
    t0 = x * 2
    with torch.no_grad():
        c_t1 = t0 * 2
    t1 = t0 + c_t1
    with torch.set_grad_enabled(False):
        m_t2 = t1.mean()
    t2 = t1 - m_t2
    return t2
