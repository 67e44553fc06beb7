"""kiln.compile's API and the capture stage's promises that are not about
one program's values: fullgraph errors, KILN_DISABLE, reset, the module
wrapper, explain's counts, guard strings, warnings instead of crashes, and
that compiled graphs are really used (not a silent fallback)."""
import inspect
import warnings
from contextlib import nullcontext

import pytest
import torch
import torch.nn as nn

import kiln


def _line(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    return [start + i for i, l in enumerate(lines) if needle in l and not l.lstrip().startswith("def ")][0]


def with_print(x):
    y = x * 2
    print("in the middle")
    return y + 1


def test_fullgraph_break_is_an_error_naming_file_line_and_reason():
    f = kiln.compile(with_print, fullgraph=True, backend="eager")
    with pytest.raises(RuntimeError) as e:
        f(torch.ones(2))
    msg = str(e.value)
    assert __file__.split("/")[-1] in msg and str(_line(with_print, "print(")) in msg
    assert "print" in msg and "fullgraph" in msg


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="function or torch.nn.Module"):
        kiln.compile(42)
    with pytest.raises(ValueError, match="unknown backend"):
        kiln.compile(with_print, backend="nope")
    with pytest.raises(TypeError, match="backend must be"):
        kiln.compile(with_print, backend=3)


def test_decorator_form_and_counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @kiln.compile(backend=backend)
    def f(x, y):
        return torch.tanh(x) + y * 3

    x, y = torch.randn(3), torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(f(x, y), torch.tanh(x) + y * 3)
    assert len(graphs) == 1   # recorded once, then cache hits


def test_guard_miss_records_again_and_limit_warns_then_runs_python():
    graphs = []

    def backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    # (dynamic=False: every shape its own recording, as without automatic dynamic)
    f = kiln.compile(lambda x: x.sum(0) * 2, backend=backend, dynamic=False)
    for n in range(1, 4):
        torch.testing.assert_close(f(torch.ones(n, 2)), torch.full((2,), 2.0 * n))
    assert len(graphs) == 3
    old = kiln.config.cache_size_limit
    kiln.config.cache_size_limit = 2
    try:
        g = kiln.compile(lambda x: x * 2 + 1, backend=backend, dynamic=False)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for n in range(1, 6):
                torch.testing.assert_close(g(torch.ones(n)), torch.full((n,), 3.0))
        assert any("cache_size_limit" in str(x.message) for x in w)
    finally:
        kiln.config.cache_size_limit = old


def test_disable_returns_the_function(monkeypatch):
    monkeypatch.setattr(kiln.config, "disable", True)
    assert kiln.compile(with_print) is with_print


def test_reset_drops_recordings():
    graphs = []

    def backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    f = kiln.compile(lambda x: x + 1, backend=backend)
    f(torch.ones(2))
    kiln.reset()
    f(torch.ones(2))
    assert len(graphs) == 2


def test_module_wrapper_keeps_state_dict_attributes_and_modes():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cm = kiln.compile(m, backend="eager")
    assert isinstance(cm, nn.Module)
    assert list(cm.state_dict()) == list(m.state_dict())
    assert cm[0] is m[0] and len(list(cm.parameters())) == 2
    cm.eval()
    assert not m.training and not m[1].training
    x = torch.randn(2, 4)
    torch.testing.assert_close(cm(x), m(x))
    cm.train()
    assert m.training
    cm.new_attr = 5
    assert m.new_attr == 5


def test_explain_counts_and_guards():
    ex = kiln.explain(with_print, backend="eager")(torch.ones(3))
    assert ex.graph_count == 2 and ex.graph_break_count == 1
    b = ex.breaks[0]
    assert b.lineno == _line(with_print, "print(") and "print" in b.source and b.reason
    assert any(g.startswith("x: Tensor") for g in ex.guards)
    assert "graph break" in str(ex)


def test_kernels_per_graph_with_kiln_backend():
    def f(x):
        return torch.softmax(x * 2, dim=-1)

    ex = kiln.explain(f)(torch.randn(4, 8))
    assert ex.graph_count == 1 and ex.kernels_per_graph == [1]


def test_autocast_and_nullcontext_blocks_are_recorded():
    def f(x, w):
        with nullcontext():
            y = x @ w
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = x @ w
        return y, z

    x, w = torch.randn(4, 4), torch.randn(4, 4)
    ex = kiln.explain(f, backend="eager")(x, w)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    y, z = kiln.compile(f, backend="eager")(x, w)
    assert z.dtype == torch.bfloat16 and not torch.is_autocast_enabled("cpu")
    torch.testing.assert_close(y, x @ w)


def test_user_backend_error_reaches_the_user(monkeypatch):
    # a backend the user passed that raises is the user's bug: it is raised
    # where they called kiln, debug mode or not (as torch.compile does)
    monkeypatch.setattr(kiln.config, "debug", False)

    def broken(gm, ex):
        raise RuntimeError("backend exploded")

    f = kiln.compile(lambda x: x * 3, backend=broken)
    with pytest.raises(kiln.BackendCompilerFailed, match="backend exploded") as e:
        f(torch.ones(2))
    assert isinstance(e.value.__cause__, RuntimeError)


def test_debug_mode_raises_internal_capture_errors(monkeypatch):
    monkeypatch.setattr(kiln.config, "debug", True)

    def broken(gm, ex):
        raise RuntimeError("backend exploded")

    f = kiln.compile(lambda x: x * 3, backend=broken)
    with pytest.raises(RuntimeError, match="backend exploded"):
        f(torch.ones(2))


def test_graph_error_reaches_users_except_clause():
    def f(a, b):
        try:
            return a @ b
        except RuntimeError:
            return None

    cf = kiln.compile(f, backend="eager")
    assert cf(torch.ones(2, 3), torch.ones(3, 2)) is not None
    assert cf(torch.ones(2, 3), torch.ones(2, 3)) is None   # shapes mismatch: the user's handler runs


def test_nested_function_frames_are_captured_after_a_break():
    graphs = []

    def backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    def inner(x):
        print("inner")
        return x.cos() * 2

    def outer(x):
        return inner(x.sin()) + 1

    f = kiln.compile(outer, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), outer(x))
    # outer before the call (sin), inner after its print (cos * 2), outer after (+ 1);
    # inner has no tensor work before the print, so no graph there
    assert len(graphs) == 3


@pytest.mark.parametrize("backend", ["eager", "kiln"])
def test_training_step_gradients_match_eager(backend):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    ref = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    ref.load_state_dict(m.state_dict())
    cm = kiln.compile(m, backend=backend)
    for step in range(3):
        x = torch.randn(5, 6, requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        loss = (cm(x) ** 2).mean()
        loss_ref = (ref(xr) ** 2).mean()
        loss.backward()
        loss_ref.backward()
        torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
        with torch.no_grad():   # an optimizer step between calls: parameters change in place
            for p, q in zip(m.parameters(), ref.parameters()):
                p.sub_(0.1 * p.grad)
                q.sub_(0.1 * q.grad)
                p.grad = None
                q.grad = None


def test_dump_guards_prints_each_recording():
    import os
    import subprocess
    import sys

    code = "import torch, kiln\ndef f(x, n):\n    return x * n\nkiln.compile(f, backend='eager')(torch.ones(2), 3)\n"
    env = dict(os.environ, KILN_DUMP="guards")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "recorded f" in out.stderr and "n == 3" in out.stderr and "x: Tensor" in out.stderr
    assert "recorded f" not in out.stdout   # (dumps go to stderr, through kiln/logs.py)


def test_bound_methods_and_callable_objects_compile_and_guard_their_state():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return torch.tanh(x) * self.k

        def __call__(self, x):
            return x.cos() + self.k

    graphs = []

    def backend(gm, ex):
        graphs.append(gm)
        return gm.forward

    s = Scaler(3.0)
    x = torch.randn(4)
    f = kiln.compile(s.apply, backend=backend)
    torch.testing.assert_close(f(x), s.apply(x))
    s.k = 5.0                      # the attribute is guarded: a new recording
    torch.testing.assert_close(f(x), s.apply(x))
    g = kiln.compile(s, backend=backend)
    torch.testing.assert_close(g(x), s(x))
    assert len(graphs) == 3
