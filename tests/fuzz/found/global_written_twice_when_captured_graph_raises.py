# a global written in place before an op eager's kernel rejects (index_fill_ on an empty tensor): the graph ran as captured and, keeping a dead index check, was run again after it raised, so the write happened twice
# found by the kiln fuzzer (tensor seed 901289, entries kiln and torch): kind=tensor seed=901289
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 901289, 3, (), -1, ('kiln', 'torch'), ('W0',)


W0 = torch.linspace(-1, 1, 3)


def make_inputs(g, D, bad):
    return [_i(g, (D, 4, ), dtype=torch.int64), _ix(g, (0,), 16, lo=0), _ix(g, (3,), 0, lo=0)]


def before_call(call):
    global W0
    W0 = W0 + call


def f(a1, i0, i1):
    W0.pow_(2)
    v1 = a1.take(i0)
    v1.index_fill_(-1, i1, 1)
    return (v1, )
