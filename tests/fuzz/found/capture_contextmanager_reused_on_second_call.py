# (fixed 2026-12-04: a stdlib call making a generator or context manager breaks) `with tagged(3) as k:` of a contextlib.contextmanager in the compiled function: the first call was
# right, the second raises AttributeError: '_GeneratorContextManager' object has no attribute 'args'
# (contextlib's __enter__ deletes them: the object made on the first call is entered again); eager does not raise
# found by the kiln fuzzer (capture seeds 44, 2, 37, 125, ... with issue 15's constructs, entry kiln)
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 44, 2, (), -1, ('kiln',), ('SCOPES',)


import contextlib

SCOPES = []


@contextlib.contextmanager
def tagged(k):
    SCOPES.append(k)
    try:
        yield k * 2
    finally:
        SCOPES.append(-k)


def make_inputs(g, D, bad):
    return [_f(g, (D, 4))]


def f(x):
    with tagged(3) as k:
        t = x * k
    return t
