"""The harness must be able to fail: feed it deliberately wrong "compilers"
and check that each kind of divergence (value, input mutation, global write,
printed output, module state, identity, call count) is caught."""
import copy

import pytest
import torch
import torch.nn as nn

from capture_harness import Call, calls_of, check, check_program

COUNTER = 0


def _inplace(x):
    x.add_(1)
    return x * 2


def _bump(x):
    global COUNTER
    COUNTER += 1
    return x + COUNTER


def _printing(x):
    print("value", x.shape[0])
    return x + 1


def _returns_input(x):
    return x


def on_copies(fn, **kw):
    """A wrong compiler: runs the function on deep copies of its inputs, so
    in-place effects are lost."""
    def run(*args, **kwargs):
        return fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    return run


def frozen_first(fn, **kw):
    """A wrong compiler: caches the first result forever (an unsound guard)."""
    cache = []

    def run(*args, **kwargs):
        if not cache:
            cache.append(fn(*args, **kwargs))
        return cache[0]
    return run


def silent(fn, **kw):
    """A wrong compiler: swallows stdout."""
    import contextlib
    import io

    def run(*args, **kwargs):
        with contextlib.redirect_stdout(io.StringIO()):
            return fn(*args, **kwargs)
    return run


def test_detects_wrong_values():
    with pytest.raises(AssertionError):
        check(lambda x: x.sin(), calls_of(lambda i: (torch.randn(3),)), compiler=frozen_first)


def test_detects_lost_input_mutation():
    with pytest.raises(AssertionError, match="args"):
        check(_inplace, calls_of(lambda i: (torch.zeros(3),)), compiler=on_copies)


def test_detects_lost_global_write():
    def no_globals(fn, **kw):
        def run(x):
            g = fn.__globals__
            before = g["COUNTER"]
            out = fn(x)
            g["COUNTER"] = before
            return out
        return run

    with pytest.raises(AssertionError):
        check(_bump, calls_of(lambda i: (torch.zeros(2),)), globs={"COUNTER": 0}, compiler=no_globals)


def test_detects_lost_print():
    with pytest.raises(AssertionError, match="stdout"):
        check(_printing, calls_of(lambda i: (torch.zeros(2 + i),)), compiler=silent)


def test_detects_lost_module_state():
    def on_module_copy(m, **kw):
        return lambda x: copy.deepcopy(m)(x)

    bn = nn.BatchNorm1d(3).train()
    with pytest.raises(AssertionError, match="state"):
        check(bn, calls_of(lambda i: (torch.randn(4, 3),)), compiler=on_module_copy)


def test_detects_identity_change():
    def cloning(fn, **kw):
        return lambda x: fn(x).clone()

    check(_returns_input, calls_of(lambda i: (torch.randn(2),)), compiler=cloning)  # values equal ...
    with pytest.raises(AssertionError, match="identity"):  # ... identity differs
        check(_returns_input, calls_of(lambda i: (torch.randn(2),)), compiler=cloning, identity=True)


def test_detects_dtype_and_grad_differences():
    def to_double(fn, **kw):
        return lambda x: fn(x).double()

    with pytest.raises(AssertionError, match="dtype"):
        check(lambda x: x * 2, calls_of(lambda i: (torch.randn(2),)), compiler=to_double)

    def no_grad_run(fn, **kw):
        def run(x):
            with torch.no_grad():
                return fn(x)
        return run

    with pytest.raises(AssertionError, match="requires_grad"):
        check(lambda x: x * 2, calls_of(lambda i: (torch.randn(2, requires_grad=True),)), compiler=no_grad_run)


def test_requires_three_calls():
    with pytest.raises(AssertionError, match="at least 3"):
        check(lambda x: x, [(torch.ones(1),)])


def test_before_hooks_run_in_both_runs():
    seen = []

    def make(st):
        return lambda x: x * st["k"]

    def before(ctx):
        seen.append(ctx.compiled)
        ctx.st["k"] += 1

    check_program(make, [Call(torch.ones(2), before=before)] * 3, state={"k": 1})
    assert seen == [False] * 3 + [True] * 3
