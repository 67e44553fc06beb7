# v.copy_(v) on an expanded view: AOT functionalization raised 'more than one element of the written-to tensor refers to a single memory location'
# found by the kiln fuzzer (tensor seed 800984, entry kiln): kind=tensor seed=800984
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 800984, 2, (), -1, ('kiln',), ()


def make_inputs(g, D, bad):
    return [_i(g, (3, 1, D, ), dtype=torch.int64), _i(g, (4, D, ), dtype=torch.int64).transpose(-1, -2)]


def f(a0, a1):
    v0 = a0.squeeze()
    v1 = torch.minimum(a0, v0)
    v2 = a0.expand(2, *a0.shape)
    v3 = v2.broadcast_to(v2.shape)
    v4 = v3.as_strided((2, 2), (1, 1))
    v5 = v4.float()
    v3.copy_(v3)
    v6 = (v5 - v5.mean(1, keepdim=True)) / (v5.std(1, keepdim=True) + 1e-5)
    v7 = v6 ** v5
    return (v7, )
