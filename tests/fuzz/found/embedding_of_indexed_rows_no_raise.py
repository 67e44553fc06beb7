# an index op's result read only through F.embedding's weight (which reads some of its rows): its own bounds check, fused into the embedding, saw only those rows, so an out-of-range index elsewhere did not raise (kiln/index_checks.py _indexes)
# found by the kiln fuzzer (tensor seed 5501032, entries kiln and torch)
# kiln differential fuzzer program: kind=tensor seed=5501032
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 5501032, 2, (), 1, ('kiln', 'torch'), ()


def make_inputs(g, D, bad):
    a1 = _f(g, (5 + 1, D, ), torch.float32)
    _o2 = _f(g, ((3 + 1), 4, ), torch.float32)
    a2, a3 = _o2[:-1], _o2
    i2 = _ix(g, (D,), 5, lo=0, bad=bad)
    i3 = _ix(g, (2,), 4, lo=0)
    return [a1, a2, a3, i2, i3]


def f(a1, a2, a3, i2, i3):
    v2 = a1[i2]
    v3 = F.embedding(i3, v2)
    return (v3, )
