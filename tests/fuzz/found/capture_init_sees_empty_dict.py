# an object built in the compiled function whose __init__ reads self.__dict__ sees it empty (issue 13 class 10)
# found by the kiln fuzzer (capture seed 200002, entry kiln): kind=capture seed=200002
if "__file__" in globals(): import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers, start, run)


REGISTRY = []


class Node:
    def __init__(self, t):
        self.t = t
        self.n = len(self.__dict__)
        REGISTRY.append(type(self).__name__)

    def value(self):
        return self.t * self.n


def make_inputs(call):
    g, D, bad = start(call, SEED, SHAPE_CALLS, BAD_CALL)
    x = _f(g, (4, 4))
    return [x]


SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200002, 2, (), -1, ('kiln',), ()


def before_call(call):
    pass


def f(x):
    nd = Node(x)
    t1 = nd.value()
    return t1


if __name__ == "__main__":   # compare eager with kiln: prints OK or MISMATCH
    run(__file__)
