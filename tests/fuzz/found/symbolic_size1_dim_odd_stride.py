# a contiguous input whose size-1 dim has a stride its sizes do not give (x[::2] of a (2, n, m) tensor), made symbolic: torch's fake gave that stride a symbol no size input carries, and a guard on it was an internal error (kiln/symbolic.py _canonical_strides)
# found by the kiln fuzzer (tensor seed 4811697, entry kiln-dynamic)
# kiln differential fuzzer program: kind=tensor seed=4811697
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 4811697, 1, (), -1, ('kiln-dynamic',), ()


def make_inputs(g, D, bad):
    return [_f(g, (1 * 2, 2, 5, ), torch.float64)[::2].detach().requires_grad_()]


def f(a0):
    v4 = F.log_softmax(a0.float(), -1)
    return ()
