# an object built in the compiled function whose __init__ reads self.__dict__ sees it empty (issue 13 class 10);
# and its constructor's side effect (append to a global list) not repeated on the second call
# found by the kiln fuzzer (capture seeds 200002 and 200018, entry kiln): kind=capture seed=200002
from tests.fuzz.found import *  # noqa: F401,F403  (torch, F, the input helpers)

SEED, NCALLS, SHAPE_CALLS, BAD_CALL, ENTRIES, STATE = 200002, 2, (), -1, ('kiln',), ('REGISTRY',)


REGISTRY = []


class Node:
    def __init__(self, t):
        self.t = t
        self.n = len(self.__dict__)
        REGISTRY.append(type(self).__name__)

    def value(self):
        return self.t * self.n


def make_inputs(g, D, bad):
    return [_f(g, (4, 4))]


def f(x):
    nd = Node(x)
    t1 = nd.value()
    return t1
