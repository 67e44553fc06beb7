"""A function read from the frame is guarded by its code, not its identity:
each call's closure may hold other objects.  Across a break, the replay
must hand on the function of this call (read again from its source), not
the object the recording saw -- it was the first call's, and its closure
gave later calls the first call's tensors (found by the capture fuzzer:
tests/fuzz/found/capture_*_stale.py)."""
import collections

import torch

import kiln


def _closure_called_after_a_break(x, c):
    def inner(k):
        return c[k]
    v = inner(list(c.keys())[1])      # c.keys() on an OrderedDict: a break before the call
    return x * v


def _comprehension_over_keys(x, c):
    vals = [c[k] for k in c.keys()]
    return x * vals[1]


def test_a_closure_on_the_stack_at_a_break_is_this_calls():
    for fn in (_closure_called_after_a_break, _comprehension_over_keys):
        cf = kiln.compile(fn, backend="eager")
        for i in range(3):
            c = collections.OrderedDict(a=torch.full((2,), float(i)), b=torch.full((2,), float(i + 1)))
            torch.testing.assert_close(cf(torch.ones(2), c), torch.full((2,), float(i + 1)))
