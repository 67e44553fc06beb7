# prod's result (eager saves it for backward) written after a graph break: AOT autograd's prod backward never reads it, so kiln returned a gradient where eager raises (kiln/_saved.py)
# found by the kiln fuzzer (tensor seed 970166, entry kiln): kind=tensor seed=970166
import torch
import torch.nn.functional as F

SEED = 970166
NCALLS = 1
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln',)
STATE = ()

def _f(g, shape, dtype=torch.float32, special=False):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    m = torch.rand(shape, generator=g, dtype=torch.float64)
    if special:
        x[m < 0.08] = float("nan")
        x[(m >= 0.08) & (m < 0.13)] = float("inf")
        x[(m >= 0.13) & (m < 0.18)] = -float("inf")
    return x.to(dtype)


def _i(g, shape, lo=-8, hi=8, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def _b(g, shape):
    return torch.rand(shape, generator=g) < 0.5


def _ix(g, shape, n, lo=0, bad=False):
    x = torch.randint(lo, max(n, lo + 1), shape, generator=g)
    if bad and x.numel():
        x.view(-1)[-1] = n + 3 if int(torch.randint(0, 2, (), generator=g)) else -n - 5
    return x


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    a0 = _f(g, (5, 2, ), torch.float64).detach().requires_grad_()
    _o1 = _f(g, ((0 + 1), D, ), torch.float32)
    a1, a2 = _o1[:-1], _o1
    return [a0, a1, a2]


def before_call(call):
    pass


def f(a0, a1, a2):
    v1 = a0.prod()
    v2 = v1[v1 > 0]
    v1.div_(2)
    return (v1, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    import os, sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
