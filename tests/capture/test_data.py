"""Data structures: tuples, lists, dicts, sets; building, indexing,
unpacking, iterating; * and ** unpacking; slicing; dict methods; namedtuple;
dataclass returns.  Mutations of container arguments are compared too."""
import collections
import dataclasses
from typing import NamedTuple

import pytest
import torch

from capture_harness import Call, check


torch.manual_seed(0)  # inputs in the case tables below are built at import


def r(*shape):
    return torch.randn(*shape)


Pair = collections.namedtuple("Pair", ["a", "b"])


class Stats(NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor
    n: int


@dataclasses.dataclass
class Out:
    y: torch.Tensor
    score: torch.Tensor
    tag: str = "out"


def tuple_build_index(x, y):
    t = (x, y, x + y)
    a, b, c = t
    return t[2] * 2, t[-1] - a, len(t), t[::2], (b,) + t[:1]


def star_unpack(x):
    first, *rest = x.unbind(0)
    *init, last = [x[0], x[1], x[2]]
    return first + last, len(rest), torch.stack(rest), torch.stack(init)


def nested_unpack(pairs):
    (a, b), (c, d) = pairs
    return a * d - b * c


def list_methods(xs, y):
    lst = list(xs)
    lst.append(y)
    lst.insert(0, y * 2)
    lst.extend([y + 1, y + 2])
    popped = lst.pop()
    if len(lst) > 4:
        del lst[1]
    lst.reverse()
    return lst, popped, lst.index(lst[0]) if lst else -1, len(lst)


def list_mutation_arg(lst, x):
    lst.append(x * 2)
    lst[0] = lst[0] + 1
    del lst[1]
    return len(lst)


def list_slicing(xs):
    head, tail = xs[:1], xs[1:]
    scaled = [t * (i + 1) for i, t in enumerate(xs[::-1])]
    return tail, xs[:-1], scaled, xs[::2], xs[1:3] + head, torch.cat(xs[::2] + xs[-1:]).sum()


def list_slice_assign(xs, y):
    xs[1:3] = [y, y * 2, y * 3]
    return sum(t.sum() for t in xs)


def dict_methods(d, x):
    out = dict(d)
    out["new"] = x
    out.update({"u": x * 2}, v=x * 3)
    g = out.get("missing", x * 0)
    s = out.setdefault("sd", x + 1)
    p = out.pop("u")
    keys = list(out.keys())
    vals = sum(v.sum() for v in out.values())
    items = [(k, v * 2) for k, v in out.items()]
    return out, g, s, p, keys, vals, items, "new" in out, len(out)


def dict_mutation_arg(d, x):
    d["out"] = x.sum()
    d["count"] = d.get("count", 0) + 1
    if "drop" in d:
        del d["drop"]
    return d["count"]


def dict_comprehension_and_kwargs(x, **kw):
    scaled = {k: x * v for k, v in kw.items()}
    return scaled, sorted(kw)


def call_with_star_star(x, args, kwargs):
    def inner(a, b, c=1.0, *more, d=2.0, **extra):
        return a * b + c - d + sum(more) + sum(extra.values())

    return inner(x, *args, **kwargs)


def sets(x, names):
    s = set(names)
    s.add("z")
    s.discard("a")
    t = s | {"q"}
    u = s & {"b", "z"}
    return x * len(s), sorted(t), sorted(u), "b" in s, frozenset(u) == frozenset({"z"}) or len(u)


def namedtuple_build(x):
    p = Pair(x, x * 2)
    q = p._replace(b=x * 3)
    a, b = q
    return p, q.b - b, p.a + a, Pair(*q)


def namedtuple_typed(x):
    return Stats(x.mean(0), x.std(0), x.shape[0])


def namedtuple_arg(s):
    return s.mean + s.std * s.n, s[0] * 2


def dataclass_return(x, w):
    y = x @ w
    return Out(y=y, score=y.sum())


def dataclass_arg(o):
    return o.y * 2 + o.score, o.tag


def dataclass_mutate(o, x):
    o.y = o.y + x
    o.tag = "seen"
    return o.score * 2


def zip_dict_build(keys, x):
    d = dict(zip(keys, x.unbind(0)))
    return {k: v + 1 for k, v in sorted(d.items())}


def tensor_in_list_sum(xs):
    return sum(xs), max(len(xs), 2), torch.cat(xs).mean()


def nested_containers(data):
    out = {}
    for name, (t, scales) in data.items():
        out[name] = [t * s for s in scales]
    return out, [len(v) for v in out.values()]


def tuple_compare_sort(x, pairs):
    pairs = sorted(pairs, key=lambda p: p[1])
    return x * pairs[0][1], [p[0] for p in pairs], min(pairs)[0]


def string_ops(x, name):
    tag = name.upper() + "_" + str(x.shape[0])
    parts = "a,b,c".split(",")
    return x * len(tag), tag, "-".join(parts), f"{name}:{x.shape[0]}"


def shape_tuple_math(x):
    n, *rest = x.shape
    size = x.size()
    return x.reshape(n, -1).sum(-1), list(rest), size[-1] * 2, tuple(size) + (1,), x.new_zeros(size[1:])


def list_of_lists_to_tensor(x, rows):
    t = torch.tensor(rows, dtype=torch.float32)
    return x[: t.shape[0]] * t.sum(1)


def ordered_dict_and_defaultdict(x, keys):
    od = collections.OrderedDict()
    dd = collections.defaultdict(list)
    for i, k in enumerate(keys):
        od[k] = x * i
        dd[k[0]].append(i)
    od.move_to_end(keys[0])
    return list(od.items()), dict(dd)


CASES = [
    ("tuple-build-index", tuple_build_index, [(r(2), r(2)), (r(3), r(3)), (r(2), r(2))]),
    ("star-unpack", star_unpack, [(r(4, 2),), (r(3, 2),), (r(6, 2),)]),
    ("nested-unpack", nested_unpack, [(((r(2), r(2)), (r(2), r(2))),), (((r(3), r(3)), [r(3), r(3)]),), (([r(1), r(1)], (r(1), r(1))),)]),
    ("list-methods", list_methods, [([r(2), r(2)], r(2)), ([r(2)], r(2)), ([r(2), r(2), r(2)], r(2))]),
    ("list-mutation-arg", list_mutation_arg, [([r(2), r(2), r(2)], r(2)), ([r(2), r(2)], r(2)), ([r(2)] * 4, r(2))]),
    ("list-slicing", list_slicing, [([r(1), r(2), r(3), r(4)],), ([r(1), r(2)],), ([r(2)] * 5,)]),
    ("list-slice-assign", list_slice_assign, [([r(2), r(2), r(2), r(2)], r(2)), ([r(2)] * 3, r(2)), ([r(2)] * 5, r(2))]),
    ("dict-methods", dict_methods, [({"a": r(2)}, r(2)), ({"a": r(2), "b": r(2)}, r(2)), ({}, r(2))]),
    ("dict-mutation-arg", dict_mutation_arg, [({"drop": 1}, r(2)), ({"count": 3}, r(2)), ({"x": r(1), "drop": 0}, r(2))]),
    ("star-star-call", call_with_star_star, [(r(2), (2.0,), {}), (r(2), (2.0, 3.0, 4.0, 5.0), {"d": 1.0}),
                                             (r(2), (1.0,), {"c": 0.5, "e": 7.0})]),
    ("sets", sets, [(r(2), ["a", "b"]), (r(2), ["c"]), (r(2), ["a", "b", "c", "z"])]),
    ("namedtuple-build", namedtuple_build, [(r(2),), (r(3),), (r(2),)]),
    ("namedtuple-typed", namedtuple_typed, [(r(3, 2),), (r(4, 2),), (r(2, 2),)]),
    ("namedtuple-arg", namedtuple_arg, [(Stats(r(2), r(2), 3),), (Stats(r(2), r(2), 1),), (Stats(r(3), r(3), 2),)]),
    ("dataclass-return", dataclass_return, [(r(2, 3), r(3, 2)), (r(1, 3), r(3, 2)), (r(2, 3), r(3, 4))]),
    ("dataclass-arg", dataclass_arg, [(Out(r(2), r(())),), (Out(r(3), r(()), "x"),), (Out(r(2), r(()), "y"),)]),
    ("dataclass-mutate", dataclass_mutate, [(Out(r(2), r(())), r(2)), (Out(r(2), r(()), "z"), r(2)), (Out(r(3), r(())), r(3))]),
    ("zip-dict-build", zip_dict_build, [(["b", "a"], r(2, 2)), (["x", "y", "z"], r(3, 2)), (["q"], r(1, 2))]),
    ("tensor-list-sum", tensor_in_list_sum, [([r(2), r(2)],), ([r(2)],), ([r(2), r(2), r(2)],)]),
    ("nested-containers", nested_containers, [({"a": (r(2), [1, 2])},), ({"a": (r(2), [3]), "b": (r(1), (1, 2, 3))},),
                                              ({"c": (r(2), [])},)]),
    ("tuple-compare-sort", tuple_compare_sort, [(r(2), [("a", 3), ("b", 1)]), (r(2), [("c", 2)]), (r(2), [("x", 5), ("y", 4), ("z", 6)])]),
    ("string-ops", string_ops, [(r(2), "ab"), (r(3), "xyz"), (r(2), "")]),
    ("shape-tuple-math", shape_tuple_math, [(r(2, 3),), (r(4, 3, 2),), (r(3, 1),)]),
    ("list-to-tensor", list_of_lists_to_tensor, [(r(3), [[1, 2], [3, 4]]), (r(3), [[0.5, 1.5, 2.0]] * 3), (r(3), [[1.0]])]),
    ("ordered-default-dict", ordered_dict_and_defaultdict, [(r(2), ["ab", "ac", "b"]), (r(2), ["x"]), (r(2), ["b", "bb", "c", "a"])]),
]


@pytest.mark.parametrize("fn,calls", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_data(fn, calls):
    check(fn, calls)


def test_kwargs_dict_keys_change():
    check(dict_comprehension_and_kwargs,
          [Call(r(2), a=1.0), Call(r(2), a=2.0, b=3.0), Call(r(2)), Call(r(2), z=0.5, a=1.0)])
