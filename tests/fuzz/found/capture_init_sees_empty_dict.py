# an object built in the compiled function whose __init__ reads self.__dict__ sees it empty (issue 13 class 10)
# found by the kiln fuzzer (capture seed 200002, entry kiln): kind=capture seed=200002
import torch
import torch.nn.functional as F

SEED = 200002
NCALLS = 2
SHAPE_CALLS = ()
BAD_CALL = -1
ENTRIES = ('kiln',)
STATE = ()

import os
import sys

if "__file__" in globals():   # run as a script (check_file execs this source again, path set)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.gen import HELPERS  # noqa: E402  (the input helpers every generated program holds)
exec(HELPERS)

REGISTRY = []


class Node:
    def __init__(self, t):
        self.t = t
        self.n = len(self.__dict__)
        REGISTRY.append(type(self).__name__)

    def value(self):
        return self.t * self.n


def make_inputs(call):
    g = torch.Generator().manual_seed(SEED * 1000 + call)
    D = 4 + (call in SHAPE_CALLS)
    bad = call == BAD_CALL
    x = _f(g, (4, 4))
    return [x]


def before_call(call):
    pass


def f(x):
    nd = Node(x)
    t1 = nd.value()
    return t1


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    from tests.fuzz.run import check_file
    sys.exit(check_file(__file__))
