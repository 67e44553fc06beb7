"""Issue 15: graph breaks as TorchDynamo has them — counted once, and none
where Dynamo records the construct (each test failed on the code before)."""
import functools

import torch

import kiln


def _wrapped(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        return fn(*a, **k)
    return w


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    @_wrapped
    def forward(self, x):
        y = self.l(x).relu()
        print("between")
        return y * 2 + 1


def test_a_break_inside_an_inlined_call_counts_once(capsys):
    # noted where it stops the wrapper's inlining and again when forward,
    # run by CPython, is recorded itself: Dynamo counts one
    m, x = _Net(), torch.randn(2, 4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex
    assert "print" in ex.breaks[0].reason and ex.breaks[0].lineno == _Net.forward.__wrapped__.__code__.co_firstlineno + 3


def _scale(x, s):
    return x * s


SCALE = functools.partial(_scale, s=3.0)


def _uses_global_partial(x):
    return SCALE(x) + 1


def test_a_partial_read_from_a_global_is_recorded_and_guarded():
    global SCALE
    x = torch.randn(4)
    ex = kiln.explain(_uses_global_partial, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    cf = kiln.compile(_uses_global_partial)
    torch.testing.assert_close(cf(x), x * 3 + 1)
    old = SCALE
    try:
        SCALE.keywords["s"] = 5.0          # the one mutable part of a partial
        torch.testing.assert_close(cf(x), x * 5 + 1)
        SCALE = functools.partial(_scale, s=7.0)
        torch.testing.assert_close(cf(x), x * 7 + 1)
    finally:
        SCALE = old
        old.keywords["s"] = 3.0


class _Act(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def forward(self, x):
        return self.act(x) * 2


def test_a_partial_held_by_a_module_is_recorded():
    m, x = _Act(), torch.randn(4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    torch.testing.assert_close(kiln.compile(m)(x), m(x))


_SEEN = []


def _inner(x):
    _SEEN.append(torch.compiler.is_compiling())
    return x.cos()


@torch.compiler.disable
def _disabled(x):
    return _inner(x) * 3


def _calls_disabled(x):
    return _disabled(x.sin()) + 1


def test_torch_compiler_disable_breaks_and_runs_everything_below_eagerly():
    x = torch.randn(4)
    ex = kiln.explain(_calls_disabled, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex
    assert "torch.compiler.disable" in ex.breaks[0].reason
    _SEEN.clear()
    cf = kiln.compile(_calls_disabled)
    for _ in range(2):
        torch.testing.assert_close(cf(x), _calls_disabled(x))
    assert _SEEN and not any(_SEEN)   # _inner never recorded, never compiled


@torch.jit.script
def _scripted(x):
    return x * 2 + 1


@torch.jit.script
def _scripted_other(x):
    return x * 5


def _calls_script(x):
    return _scripted(x).sin()


def test_a_torchscript_function_is_inlined_from_its_python_source():
    global _scripted
    x = torch.randn(4)
    ex = kiln.explain(_calls_script, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0) and ex.ops_per_graph == [3], ex
    cf = kiln.compile(_calls_script)
    torch.testing.assert_close(cf(x), (x * 2 + 1).sin())
    old = _scripted
    try:
        _scripted = _scripted_other   # guarded by identity
        torch.testing.assert_close(cf(x), (x * 5).sin())
    finally:
        _scripted = old
