# (fixed 2026-12-04: a function read from the frame and guarded by its code is read again from its source at the replay, not the recording's object) two instances of a ModelOutput-like OrderedDict dataclass, one passed in (c) and one built in the compiled
# function: the built one's to_tuple() returns the items of the one passed in, from the first call on
# (kiln's lo + hi is c's logits + hidden; eager's is 110 * t0)
# found by the kiln fuzzer (capture seed 3 with issue 15's constructs, entry kiln; also in the CI slice)
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 3, 1, (), -1, ('kiln',), ()


import collections
import dataclasses


class ModelOutput(collections.OrderedDict):
    def __post_init__(self):
        for fl in dataclasses.fields(self):
            v = getattr(self, fl.name)
            if v is not None:
                self[fl.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class Out(ModelOutput):
    logits: torch.Tensor = None
    hidden: torch.Tensor = None


def make_inputs(g, D, bad):
    return [_f(g, (D, 4)), Out(logits=_f(g, (D, 4)), hidden=_f(g, (4,)))]


def f(x, c):
    t0 = x + c[1]
    lo, hi = Out(t0 * 10, t0 * 100).to_tuple()
    return lo + hi
