# an output that overlaps itself (as_strided) keeps one of the gradients of each shared element (AOT autograd's tangent coercion)
# found by the kiln fuzzer (tensor seed 700830): kind=tensor seed=700830
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    a1 = _f(g, (4 + 1, 3, D, ), torch.float32)[1:].detach().requires_grad_()
    return [a1]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 700830, 3, (), -1, ('torch',), ()


def before_call(call):
    pass


def f(a1):
    v0 = F.hardtanh(a1)
    v5 = v0.as_strided((2, 2), (1, 1))
    return (v5, )


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
