# kiln differential fuzzer program: kind=tensor seed=5950613
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 5950613, 3, (), -1, ('kiln-dynamic',), ()


def make_inputs(g, D, bad):
    return [_f(g, (4, 5, 1, D, ), torch.float32).detach().requires_grad_(),
            _i(g, (), dtype=torch.int64),
            _f(g, (), torch.float32, special=True),
            _ix(g, (3,), 1, lo=0)]


def f(a0, a1, a2, i0):
    v0 = a2 <= a1
    v1 = v0 ^ v0
    v2 = v1.t()
    v3 = a1 * 3 + 1
    v2.index_fill_(0, i0, 1)
    v4 = torch.ceil(a0)
    v5 = F.silu(a0)
    v6 = torch.log_softmax(v5, -1)
    v7 = a2.prod(-1)
    a1.unsqueeze_(0)
    return (v2, v6, )
