"""Control flow: if/while on shapes, Python numbers and flags; for over
range/list/tuple/dict/zip/enumerate/reversed/modules; break/continue; nested
functions; comprehensions; early return.  The branch taken changes between
calls, so a compiled program that froze one path fails."""
import pytest
import torch
import torch.nn as nn

from capture_harness import Call, CountingBackend, calls_of, check, check_program


torch.manual_seed(0)  # inputs in the case tables below are built at import


def r(*shape):
    return torch.randn(*shape)


def if_on_shape(x):
    if x.shape[0] > 3:
        return x.sum(0)
    elif x.shape[0] == 3:
        return x.mean(0) * 10
    return x.max(0).values


def if_on_ndim(x):
    if x.dim() == 1:
        return x * 2
    return x.sum(-1)


def if_on_number(x, n):
    if n > 2:
        y = x * n
    else:
        y = x - n
    return y


def if_on_flag(x, flag):
    if flag:
        return x.relu()
    return x.neg()


def if_on_none(x, bias=None):
    y = x * 2
    if bias is not None:
        y = y + bias
    return y


def while_on_number(x, n):
    i = 0
    while i < n:
        x = x * 0.9 + i
        i += 1
    return x


def while_on_shape(x):
    while x.shape[-1] > 1:
        x = x[..., ::2] + x[..., 1::2] if x.shape[-1] % 2 == 0 else x[..., :-1]
    return x


def for_range(x, n):
    acc = torch.zeros_like(x)
    for i in range(n):
        acc = acc + x * i
    return acc


def for_range_step(x):
    out = []
    for i in range(x.shape[0] - 1, -1, -2):
        out.append(x[i])
    return torch.stack(out)


def for_list(xs):
    total = 0
    for t in xs:
        total = total + t.sum()
    return total


def for_tuple_of_params(x, ws):
    for w in ws:
        x = torch.tanh(x @ w)
    return x


def for_dict(x, d):
    out = x
    for k, v in d.items():
        out = out + v * len(k)
    for k in d:
        out = out * 0.5 if k.startswith("a") else out
    return out


def for_zip_enumerate(xs, ys):
    acc = []
    for i, (a, b) in enumerate(zip(xs, ys)):
        acc.append(a * b + i)
    return acc


def for_reversed(xs):
    y = xs[0]
    for t in reversed(xs):
        y = y * 0.5 + t
    return y


def for_enumerate_start(x):
    s = x.new_zeros(())
    for i, row in enumerate(x, start=1):
        s = s + row.sum() * i
    return s


def break_continue(x, stop):
    out = x.clone()
    for i in range(10):
        if i % 2 == 1:
            continue
        if i >= stop:
            break
        out = out + i
    return out


def for_else(x, target):
    for i in range(5):
        if i == target:
            x = x + 100
            break
    else:
        x = x - 100
    return x


def nested_loops(x):
    n, m = x.shape
    acc = x.new_zeros(())
    for i in range(n):
        for j in range(m):
            if (i + j) % 3 == 0:
                continue
            acc = acc + x[i, j] * (i - j)
    return acc


def nested_function(x, k):
    def inner(y, s=2):
        return y * s + k

    def outer(y):
        return inner(inner(y), s=k)

    return outer(x)


def comprehensions(x, n):
    lst = [x * i for i in range(n)]
    filt = [t.sum() for t in lst if True]
    dct = {f"k{i}": t + 1 for i, t in enumerate(lst)}
    st = {i * i for i in range(n)}
    gen = sum(t.mean() for t in lst)
    nested = [[a * b for b in range(2)] for a in range(n)]
    cond = [t for i, t in enumerate(lst) if i % 2 == 0]
    return lst, filt, dct, sorted(st), gen, nested, torch.stack(cond)


def early_return(x, mode):
    if mode == "a":
        return x + 1
    y = x * 2
    if mode == "b":
        return y
    z = y.sin()
    return z, y


def ternary_and_bool_ops(x, a, b):
    s = x * (2 if a else 3)
    t = (a and b) or (not a and 7)
    u = a or 0.5
    return s + t, s * u


def loop_over_modules(x, mods):
    for m in mods:
        x = m(x)
    return x


def loop_shape_dependent(x):
    outs = []
    for i in range(x.size(0)):
        outs.append(x[i] * i)
    return torch.stack(outs).sum(0)


def while_true_break(x, limit):
    n = 0
    while True:
        x = x * 2
        n += 1
        if n >= limit:
            break
    return x, n


def any_all_builtins(x, flags):
    a = any(flags)
    b = all(flags)
    return x * (1 + a) - int(b), min(len(flags), 3), max(flags, default=False)


def match_statement(x, kind):
    match kind:
        case "relu":
            return x.relu()
        case ("scale", k):
            return x * k
        case {"shift": s}:
            return x + s
        case _:
            return x


def isinstance_dispatch(x, v):
    if isinstance(v, torch.Tensor):
        return x + v
    if isinstance(v, (int, float)):
        return x * v
    if isinstance(v, (list, tuple)):
        return x + len(v)
    return x


def range_len_list(x, lst):
    for i in range(len(lst)):
        x = x + lst[i] * i
    return x


FUNCS = [
    ("if-shape", if_on_shape, [(r(5, 2),), (r(3, 2),), (r(2, 2),), (r(6, 2),)]),
    ("if-ndim", if_on_ndim, [(r(4),), (r(3, 4),), (r(5),)]),
    ("if-number", if_on_number, [(r(3), 3), (r(3), 1), (r(3), 5), (r(3), 2.5)]),
    ("if-flag", if_on_flag, [(r(3), True), (r(3), False), (r(3), True)]),
    ("if-none", if_on_none, [(r(3),), (r(3), r(3)), (r(3), None), (r(3), r(3))]),
    ("while-number", while_on_number, [(r(2), 3), (r(2), 0), (r(2), 5)]),
    ("while-shape", while_on_shape, [(r(2, 8),), (r(2, 6),), (r(2, 5),)]),
    ("for-range", for_range, [(r(3), 4), (r(3), 1), (r(3), 6)]),
    ("for-range-step", for_range_step, [(r(5, 2),), (r(4, 2),), (r(7, 2),)]),
    ("for-list", for_list, [([r(2), r(3)],), ([r(2)],), ([r(1), r(4), r(2)],)]),
    ("for-tuple", for_tuple_of_params, [(r(2, 3), (r(3, 3), r(3, 3))), (r(2, 3), (r(3, 3),)), (r(2, 3), (r(3, 3),) * 3)]),
    ("for-dict", for_dict, [(r(2), {"a": r(2), "bb": r(2)}), (r(2), {"ccc": r(2)}), (r(2), {"a": r(2), "ab": r(2), "x": r(2)})]),
    ("zip-enumerate", for_zip_enumerate, [([r(2), r(2)], [r(2), r(2)]), ([r(2)], [r(2), r(2)]), ([r(3)] * 3, [r(3)] * 3)]),
    ("reversed", for_reversed, [([r(2), r(2), r(2)],), ([r(2)],), ([r(2), r(2)],)]),
    ("enumerate-start", for_enumerate_start, [(r(3, 2),), (r(4, 2),), (r(1, 2),)]),
    ("break-continue", break_continue, [(r(3), 5), (r(3), 0), (r(3), 9)]),
    ("for-else", for_else, [(r(3), 2), (r(3), 7), (r(3), 0)]),
    ("nested-loops", nested_loops, [(r(3, 3),), (r(2, 4),), (r(3, 3),)]),
    ("nested-function", nested_function, [(r(3), 2), (r(3), 3), (r(3), -1.5)]),
    ("comprehensions", comprehensions, [(r(2), 3), (r(2), 4), (r(2), 1)]),
    ("early-return", early_return, [(r(3), "a"), (r(3), "b"), (r(3), "c"), (r(3), "a")]),
    ("ternary-bool-ops", ternary_and_bool_ops, [(r(2), True, False), (r(2), False, True), (r(2), True, True)]),
    ("loop-shape-dependent", loop_shape_dependent, [(r(3, 2),), (r(5, 2),), (r(2, 2),)]),
    ("while-true-break", while_true_break, [(r(2), 1), (r(2), 3), (r(2), 2)]),
    ("any-all-builtins", any_all_builtins, [(r(2), [True, False]), (r(2), [True, True, True, True]), (r(2), [])]),
    ("match-statement", match_statement, [(r(3), "relu"), (r(3), ("scale", 3)), (r(3), {"shift": 2.0}), (r(3), 0)]),
    ("isinstance-dispatch", isinstance_dispatch, [(r(2), r(2)), (r(2), 3), (r(2), [1, 2]), (r(2), "s"), (r(2), 0.5)]),
    ("range-len-list", range_len_list, [(r(2), [1.0, 2.0]), (r(2), [3.0]), (r(2), [1.0, 2.0, 3.0, 4.0])]),
]


@pytest.mark.parametrize("fn,calls", [c[1:] for c in FUNCS], ids=[c[0] for c in FUNCS])
def test_control(fn, calls):
    check(fn, calls)


def test_loop_over_module_list():
    torch.manual_seed(1)
    mods = nn.ModuleList([nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh()])
    check_program(lambda st: (lambda x: loop_over_modules(x, st)), calls_of(lambda i: (r(2 + i, 4),)), state=mods)


def test_counting_backend_unrolled_loop_is_one_graph():
    cb = CountingBackend()

    def f(x):
        for i in range(4):
            x = x * 2 + i
        return x

    check(f, calls_of(lambda i: (r(3),)), backend=cb)
    assert cb.count == 1
    assert cb.op_counts[0] >= 8


def test_loop_count_changes_via_state():
    def make(st):
        def f(x):
            for _ in range(st["n"]):
                x = x + 1
            return x
        return f

    def set_n(n):
        def before(ctx):
            ctx.st["n"] = n
        return before

    check_program(make, [Call(r(2)), Call(r(2), before=set_n(5)), Call(r(2), before=set_n(0)), Call(r(2))],
                  state={"n": 2})
