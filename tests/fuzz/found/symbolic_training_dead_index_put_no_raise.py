# kiln differential fuzzer program: kind=tensor seed=5950116
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 5950116, 4, (), 3, ('kiln-dynamic',), ()


def make_inputs(g, D, bad):
    return [_f(g, (1, 1, 1, ), torch.float32).expand(4, 1, 1),
            _i(g, (), dtype=torch.int64),
            _f(g, (), torch.float32).detach().requires_grad_(),
            _ix(g, (3,), D, lo=-D, bad=bad)]


def f(a0, a1, a2, i0):
    v0 = a2.contiguous()
    v1 = a0 <= v0
    v2 = v1.index_put((i0,), v1[i0], accumulate=True)
    v3 = i0.float()
    v4 = v0.masked_fill(v0 != v0, 0)
    v5 = a0.any()
    return (a0, v1, v4, v5, a0, )
