"""Calls: positional, keyword, *args, **kwargs, defaults, closures, methods,
super(), properties, staticmethod, classmethod, functools.partial, lambdas,
small recursion — both as the compiled entry point and as callees inlined into
it."""
import functools

import pytest
import torch

from capture_harness import Call, calls_of, check, check_program


torch.manual_seed(0)  # inputs in the case tables below are built at import


def r(*shape):
    return torch.randn(*shape)


def positional(a, b, c):
    return a * b - c


def keyword_only(x, *, scale, shift=0.0):
    return x * scale + shift


def defaults(x, k=2, s=None, flag=False):
    y = x * k
    if s is not None:
        y = y + s
    return -y if flag else y


def var_args(*xs):
    acc = xs[0]
    for t in xs[1:]:
        acc = acc + t
    return acc, len(xs)


def var_kwargs(x, **opts):
    for name in sorted(opts):
        x = x * opts[name] if name.startswith("m") else x + opts[name]
    return x


def helper(a, b=1.0, *rest, c=2.0, **kw):
    return a * b + c + sum(rest) + sum(kw.values())


def calls_helper(x):
    return (helper(x), helper(x, 2.0), helper(x, 2.0, 3.0, 4.0), helper(x, c=0.0), helper(x, 1.0, d=5.0, e=1.0),
            helper(*(x, 3.0)), helper(**{"a": x, "c": -1.0}))


def make_closure(k):
    def f(x):
        return x * k + k
    return f


def closure_chain(x, k):
    f = make_closure(k)
    g = make_closure(f(torch.tensor(1.0)))
    return g(x)


def nonlocal_counter(x, n):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    for _ in range(n):
        x = bump(x)
    return x, count


def lambdas(x, k):
    sq = lambda t: t * t  # noqa: E731
    add_k = lambda t, kk=k: t + kk  # noqa: E731
    return sq(add_k(x)), list(map(lambda t: t * 2, [x, x + 1])), sorted([3, 1, 2], key=lambda v: -v)


def partials(x, k):
    p = functools.partial(torch.clamp, min=-k, max=k)
    q = functools.partial(positional, x)
    return p(x * 3), q(2.0, k), functools.partial(keyword_only, scale=k)(x, shift=1.0)


def recursion(x, depth):
    if depth == 0:
        return x
    return recursion(x * 0.5 + depth, depth - 1)


def mutual_even(x, n):
    if n == 0:
        return x + 1
    return mutual_odd(x * 2, n - 1)


def mutual_odd(x, n):
    if n == 0:
        return x - 1
    return mutual_even(x + 3, n - 1)


class Base:
    scale = 2.0

    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k

    @property
    def double_k(self):
        return self.k * 2

    @staticmethod
    def twice(x):
        return x * 2

    @classmethod
    def scaled(cls, x):
        return x * cls.scale


class Child(Base):
    scale = 3.0

    def apply(self, x):
        return super().apply(x) + 1

    def both(self, x):
        return self.apply(x), Base.apply(self, x), self.twice(x), self.scaled(x), Child.scaled(x), self.double_k


class WithCall:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return x @ self.w

    def __getitem__(self, i):
        return self.w[i]

    def __len__(self):
        return self.w.shape[0]


def method_calls(obj, x):
    return obj.both(x)


def call_object(obj, x):
    return obj(x), obj[0], len(obj)


def bound_method_arg(fn, x):
    return fn(x) * 2


def builtin_calls(x, vals):
    return x * abs(-2) + max(vals) - min(vals), round(sum(vals), 3), divmod(7, len(vals)), pow(2, len(vals)), \
        int(3.7), float(len(vals)), bool(vals), getattr(x, "shape")[0], hasattr(x, "nope"), callable(len)


def torch_fn_as_arg(x, fn):
    return fn(x) + 1


def generator_expression_args(x, n):
    return torch.stack(tuple(x * i for i in range(n))), max((i * i for i in range(n)), default=0)


def kwargs_passthrough(x, **kw):
    return keyword_only(x, **kw)


def default_mutable(x, acc=[]):  # noqa: B006 - the shared default is the point
    acc.append(1)
    return x * len(acc)


def call_method_by_getattr(x, name):
    return getattr(x, name)() * 2


CASES = [
    ("positional", positional, calls_of(lambda i: (r(3), r(3), r(3)))),
    ("keyword-only", keyword_only, [Call(r(3), scale=2.0), Call(r(3), scale=0.5, shift=1.0), Call(r(3), shift=-1.0, scale=3.0)]),
    ("defaults", defaults, [Call(r(2)), Call(r(2), 3), Call(r(2), s=r(2)), Call(r(2), 1, r(2), True), Call(r(2), flag=True)]),
    ("var-args", var_args, [(r(2), r(2)), (r(2),), (r(2), r(2), r(2), r(2)), (r(2), r(2))]),
    ("var-kwargs", var_kwargs, [Call(r(2), m1=2.0), Call(r(2), a=1.0, m2=3.0), Call(r(2)), Call(r(2), b=0.5)]),
    ("calls-helper", calls_helper, calls_of(lambda i: (r(2),))),
    ("closure-chain", closure_chain, [(r(2), 2.0), (r(2), 3.0), (r(2), r(2))]),
    ("nonlocal-counter", nonlocal_counter, [(r(2), 2), (r(2), 4), (r(2), 0)]),
    ("lambdas", lambdas, [(r(2), 1.0), (r(2), 2.0), (r(3), -1.0)]),
    ("partials", partials, [(r(3), 0.5), (r(3), 1.0), (r(3), 0.25)]),
    ("recursion", recursion, [(r(2), 3), (r(2), 1), (r(2), 4)]),
    ("mutual-recursion", mutual_even, [(r(2), 3), (r(2), 0), (r(2), 4)]),
    ("methods-super-property", method_calls, [(Child(2.0), r(2)), (Child(3.0), r(2)), (Child(-1.0), r(3))]),
    ("callable-object", call_object, [(WithCall(r(3, 2)), r(1, 3)), (WithCall(r(3, 4)), r(2, 3)), (WithCall(r(3, 2)), r(1, 3))]),
    ("bound-method-arg", bound_method_arg, [(Child(2.0).apply, r(2)), (Base(3.0).apply, r(2)), (WithCall(r(2, 2)).__call__, r(1, 2))]),
    ("builtins", builtin_calls, [(r(2), [1, 2, 3]), (r(2), [5]), (r(2), [0.5, 0.25])]),
    ("torch-fn-as-arg", torch_fn_as_arg, [(r(3), torch.sin), (r(3), torch.relu), (r(3), torch.Tensor.exp)]),
    ("genexpr-args", generator_expression_args, [(r(2), 3), (r(2), 1), (r(2), 4)]),
    ("kwargs-passthrough", kwargs_passthrough, [Call(r(2), scale=2.0), Call(r(2), scale=1.0, shift=2.0), Call(r(2), scale=0.0)]),
    ("getattr-method", call_method_by_getattr, [(r(3), "exp"), (r(3), "sin"), (r(3), "exp")]),
]


@pytest.mark.parametrize("fn,calls", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_call(fn, calls):
    check(fn, calls)


def test_mutable_default_argument_is_shared():
    # The default list persists across calls (and across the eager run into
    # the compiled run), so reset it around each run through a before hook.
    def reset(ctx):
        if ctx.i == 0:
            default_mutable.__defaults__[0].clear()
    calls = [Call(r(2), before=reset), Call(r(2)), Call(r(2)), Call(r(2), [9])]
    check(default_mutable, calls)


def test_compiled_method_of_object():
    class Scaler:
        def __init__(self):
            self.k = 1.0
            self.calls = 0

        def run(self, x):
            self.calls += 1
            return x * self.k + self.calls

    def make(obj):
        return obj.run

    def set_k(k):
        def before(ctx):
            ctx.st.k = k
        return before

    check_program(make, [Call(r(2)), Call(r(2), before=set_k(3.0)), Call(r(2)), Call(r(2), before=set_k(-1.0))],
                  state=Scaler())


def test_decorator_usage():
    import kiln

    @kiln.compile(backend="eager")
    def decorated(x, y=2.0):
        return x.sin() * y

    def raw(x, y=2.0):
        return x.sin() * y

    for x, y in [(r(3), 2.0), (r(3), 0.5), (r(4), 0.5)]:
        torch.testing.assert_close(decorated(x, y), raw(x, y))
        torch.testing.assert_close(decorated(x), raw(x))
    check(raw, [(r(3), 2.0), (r(3), 0.5), (r(4), 0.5)])
