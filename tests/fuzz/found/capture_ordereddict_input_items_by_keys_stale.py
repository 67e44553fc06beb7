# (fixed 2026-12-04: a function read from the frame and guarded by its code is read again from its source at the replay, not the recording's object) an OrderedDict (or any dict subclass) passed in: `[c[k] for k in c.keys()]` gives the first call's
# tensors on every later call (a plain dict is right, and so is `[c[k] for k in c]`); the fuzzer's
# ModelOutput input, whose `c[1]` is `tuple(self[k] for k in self.keys())[1]`, fails the same way
# found by the kiln fuzzer (capture seed 191 with issue 15's constructs, entry kiln), minimised by hand
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 191, 2, (), -1, ('kiln',), ()


import collections


def make_inputs(g, D, bad):
    return [_f(g, (D, 4)), collections.OrderedDict(a=_f(g, (D, 4)), b=_f(g, (D, 4)))]


def f(x, c):
    vals = [c[k] for k in c.keys()]
    return x * vals[1]
