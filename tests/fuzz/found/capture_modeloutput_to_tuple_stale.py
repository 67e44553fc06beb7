# (fixed 2026-12-04: a function read from the frame and guarded by its code is read again from its source at the replay, not the recording's object) a ModelOutput-like dataclass deriving from OrderedDict, built in the compiled function: its to_tuple()
# (`tuple(self[k] for k in self.keys())`, __getitem__ by str = `dict(self.items())[k]`) gives the first
# call's tensors on every later call (eager 3.0, kiln 0.0 at call 1); indexing it by str gives the right values
# found by the kiln fuzzer (capture seeds 2, 23, 125, ... with issue 15's constructs, entry kiln), minimised by hand
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 23, 2, (), -1, ('kiln',), ()


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
    return [_f(g, (D, 4))]


def f(x):
    mo = Out(logits=x, hidden=x * 3)
    return mo[1]
