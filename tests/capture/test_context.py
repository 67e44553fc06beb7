"""Context managers: torch.no_grad, torch.enable_grad, set_grad_enabled,
torch.autocast on CPU with bfloat16 (inside and around the compiled code),
and user-defined context managers with side effects."""
import contextlib

import torch
import torch.nn as nn

from capture_harness import Call, calls_of, check, check_program


def r(*shape, **kw):
    return torch.randn(*shape, **kw)


def test_no_grad_inside():
    def f(x, w):
        with torch.no_grad():
            y = x @ w
        z = y * x.sum()
        return y, z, y.requires_grad, z.requires_grad
    check(f, calls_of(lambda i: (r(2, 3, requires_grad=True), r(3, 3, requires_grad=i != 1))))


def test_enable_grad_inside_outer_no_grad():
    def f(x):
        with torch.enable_grad():
            y = x * 2
        return y, y.requires_grad, torch.is_grad_enabled()

    def under_no_grad(ctx, x):
        with torch.no_grad():
            return ctx.f(x)
    check(f, [Call(r(3, requires_grad=True), invoke=under_no_grad), Call(r(3, requires_grad=True)),
              Call(r(3, requires_grad=True), invoke=under_no_grad)])


def test_set_grad_enabled_flag():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x.exp()
        return y, y.requires_grad
    check(f, [(r(2, requires_grad=True), True), (r(2, requires_grad=True), False), (r(2, requires_grad=True), True)])


def test_nested_grad_modes():
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
            c = x * 4
        return a.requires_grad, b.requires_grad, c.requires_grad, a + b + c
    check(f, calls_of(lambda i: (r(2, requires_grad=True),)))


def test_autocast_bf16_inside():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            z = torch.relu(y) + 1
        return y, z, y.dtype, (z.float() * 2).dtype
    check(f, calls_of(lambda i: (r(4, 8), r(8, 4))))


def test_autocast_bf16_around_compiled_module():
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))

    def under_autocast(ctx, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ctx.f(x)
    check(m, [Call(r(3, 8), invoke=under_autocast), Call(r(3, 8)), Call(r(3, 8), invoke=under_autocast)])


def test_autocast_disabled_region():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = x @ w
            with torch.autocast("cpu", enabled=False):
                b = x @ w
        return a, b
    check(f, calls_of(lambda i: (r(3, 4), r(4, 2))))


def test_inference_mode_around_call():
    def f(x):
        return x.sin() * 2

    def under_inference(ctx, x):
        with torch.inference_mode():
            y = ctx.f(x)
        return y.clone(), y.is_inference()
    check(f, [Call(r(3), invoke=under_inference), Call(r(3)), Call(r(3), invoke=under_inference)])


@contextlib.contextmanager
def _tagged(log, tag):
    log.append(("enter", tag))
    try:
        yield tag.upper()
    finally:
        log.append(("exit", tag))


def test_user_contextmanager_generator():
    def make(st):
        def f(x, tag):
            with _tagged(st["log"], tag) as t:
                y = x * len(t)
            return y + 1
        return f
    check_program(make, [(r(2), "a"), (r(2), "bb"), (r(2), "ccc")], state={"log": []})


class Timer:
    def __init__(self):
        self.depth = 0
        self.entered = 0

    def __enter__(self):
        self.depth += 1
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        return False


def test_user_context_manager_class():
    def make(st):
        def f(x):
            with st:
                y = x.cos() * st.depth
            return y, st.entered
        return f
    check_program(make, calls_of(lambda i: (r(3),), 4), state=Timer())


def test_context_manager_suppresses_exception():
    def f(x, d):
        y = x * 2
        with contextlib.suppress(KeyError):
            y = y + d["k"]
        return y
    check(f, [(r(2), {"k": 1.0}), (r(2), {"k": 2.0}), (r(2), {"k": -1.0})])
