"""Issue 13, crash-proofing of capture: kiln never crashes the user's process,
and the user's own errors reach them.

- recursion: frames kiln runs count against Python's recursion limit (and the
  thread's C stack), so unbounded recursion raises RecursionError as in eager;
- tensors kiln cannot record (nested, sparse, quantized, subclasses with
  __torch_function__/__torch_dispatch__) run as Python with a reason;
- kiln.reset() and recording are safe against other threads' calls;
- zero-argument super() in the compiled function itself and everywhere below;
- a backend the user passed that raises is the user's error.

Reproducers that once killed the process run in a subprocess, so a regression
fails one test instead of the suite.
"""
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch

import kiln
from kiln import _capture

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_py(code, timeout=300):
    """Run code in a fresh interpreter with kiln importable, debug on."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["KILN_DEBUG"] = "1"
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=env)
    for fatal in ("Segmentation fault", "Fatal Python error", "terminate called", "AddressSanitizer"):
        assert fatal not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 0, f"exit code {p.returncode}\n{p.stderr[-3000:]}"
    return p.stdout


def break_reasons():
    return [b["reason"] for b in _capture.breaks]


# ---------------------------------------------------------------- 1. recursion

def _endless(x):
    return _endless(x + 1)


def test_unbounded_recursion_raises_recursion_error_in_process():
    f = kiln.compile(_endless, backend="eager")
    with pytest.raises(RecursionError) as ei:
        f(torch.ones(2))
    # raised in the user's frames, as in eager
    assert ei.traceback[-1].name == "_endless"
    # kiln keeps working afterwards
    g = kiln.compile(lambda x: x * 2 + 1)
    torch.testing.assert_close(g(torch.ones(3)), torch.full((3,), 3.0))
    with pytest.raises(RecursionError):
        f(torch.ones(2))


def test_unbounded_recursion_subprocess():
    out = run_py("""
        import torch, kiln
        def f(x):
            return f(x + 1)
        cf = kiln.compile(f, backend="eager")
        for _ in range(2):
            try:
                cf(torch.ones(2))
            except RecursionError:
                print("recursion-error")
        print(kiln.compile(lambda x: x * 2)(torch.ones(2)).tolist())
    """)
    assert out.split() == ["recursion-error", "recursion-error", "[2.0,", "2.0]"]


def test_raised_recursion_limit_does_not_overflow_the_c_stack():
    # under the hook every Python call recurses in C: with a huge limit the
    # C stack runs out first, which must raise, never crash
    out = run_py("""
        import sys, torch, kiln
        sys.setrecursionlimit(10 ** 6)
        def f(x):
            return f(x + 1)
        try:
            kiln.compile(f, backend="eager")(torch.ones(2))
        except RecursionError as e:
            print("recursion-error")
    """)
    assert out.split() == ["recursion-error"]


def test_deeply_nested_container_input_subprocess():
    # wrapping an input recurses over its containers in C: it must stop
    # (a graph break) before the C stack runs out
    out = run_py("""
        import sys, torch, kiln
        sys.setrecursionlimit(10 ** 6)
        deep = cur = []
        for _ in range(300000):
            cur.append([])
            cur = cur[0]
        def f(x, d):
            return x * len(d) + 1
        print(kiln.compile(f)(torch.ones(2), deep).tolist())
    """)
    assert out.split() == ["[2.0,", "2.0]"]


def _chain(x, n):
    if n == 0:
        return x
    return _chain(x * 1.001, n - 1)


@pytest.mark.parametrize("depth", [200, 900])
def test_deep_finite_recursion_matches_eager(depth):
    x = torch.randn(4)
    f = kiln.compile(_chain, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the depth argument outruns cache_size_limit
        torch.testing.assert_close(f(x, depth), _chain(x, depth))
        torch.testing.assert_close(f(x, depth), _chain(x, depth))


def _near_limit(n, fn, x):
    if n == 0:
        return fn(x)
    return _near_limit(n - 1, fn, x)


def test_compiled_call_near_the_recursion_limit_matches_eager():
    # recording needs Python frames of its own (fake tensors, fx): close to
    # the limit kiln runs the frame as Python instead of failing
    def f(x):
        return torch.relu(x) * 2 + x.sum()

    cf = kiln.compile(f)
    x = torch.randn(5)
    depth = sys.getrecursionlimit() - len(__import__("inspect").stack(0)) - 60
    torch.testing.assert_close(_near_limit(depth, cf, x), f(x))
    assert kiln._C.capture_stats().get("recursion_fallbacks", 0) >= 1


# ---------------------------------------------------------------- 2. tensors kiln cannot record

class TFSub(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Wrapper(torch.Tensor):
    """A __torch_dispatch__ wrapper subclass (DTensor-like)."""

    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype, device=elem.device)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(t):
            return t.elem if isinstance(t, Wrapper) else t

        def wrap(t):
            return Wrapper(t) if isinstance(t, torch.Tensor) else t

        args = torch.utils._pytree.tree_map(unwrap, args)
        kwargs = torch.utils._pytree.tree_map(unwrap, kwargs or {})
        return torch.utils._pytree.tree_map(wrap, func(*args, **kwargs))


def _dense(t):
    if isinstance(t, Wrapper):
        return t.elem
    if t.is_nested:
        return torch.cat([u.flatten() for u in t.unbind()])
    if t.is_quantized:
        return t.dequantize()
    if t.layout != torch.strided:
        return t.to_dense()
    return t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t


def _nested():
    return torch.nested.nested_tensor([torch.arange(2.0), torch.arange(3.0)])


def _quantized():
    return torch.quantize_per_tensor(torch.arange(4.0), 0.5, 0, torch.quint8)


UNSUPPORTED = {
    "nested": (_nested, lambda x: x * 2, "nested"),
    "sparse_coo": (lambda: torch.eye(3).to_sparse(), lambda x: x * 2, "sparse_coo"),
    "sparse_csr": (lambda: torch.eye(3).to_sparse_csr(), lambda x: x * 2, "sparse_csr"),
    "quantized": (_quantized, lambda x: x.dequantize() * 2, "quantized"),
    "torch_function_subclass": (lambda: torch.arange(3.0).as_subclass(TFSub), lambda x: x * 2 + 1, "TFSub"),
    "torch_dispatch_subclass": (lambda: Wrapper(torch.arange(3.0)), lambda x: x * 2 + 1, "Wrapper"),
}


@pytest.mark.parametrize("kind", sorted(UNSUPPORTED))
def test_unsupported_tensor_input_runs_as_python(kind):
    make, fn, why = UNSUPPORTED[kind]

    def f(x):
        return fn(x)

    x = make()
    expect = f(x)
    cf = kiln.compile(f)
    for _ in range(2):
        got = cf(x)
        assert type(got) is type(expect)
        torch.testing.assert_close(_dense(got), _dense(expect))
    ex = kiln.explain(f)(x)
    assert any(why in str(b.reason) for b in ex.breaks), ex


@pytest.mark.parametrize("kind", ["nested", "sparse_coo", "quantized"])
def test_dense_recording_is_not_reused_for_unsupported_tensors(kind):
    make, fn, _ = UNSUPPORTED[kind]
    x = make()
    dense = _dense(x).reshape(x.shape) if not x.is_nested else torch.ones(2)

    def f(t):
        return fn(t)

    cf = kiln.compile(f)
    if kind != "quantized":
        torch.testing.assert_close(cf(dense), f(dense))
    torch.testing.assert_close(_dense(cf(x)), _dense(f(x)))


def test_nested_tensor_input_subprocess():
    # once: "FakeTensorMode already exists" aborted the process
    out = run_py("""
        import torch, kiln
        x = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        f = kiln.compile(lambda t: t * 2 + 1)
        for _ in range(3):
            y = f(x)
        print(y.unbind()[1].tolist())
        print(kiln.compile(lambda t: t.sin())(torch.zeros(2)).tolist())
    """)
    assert out.split() == ["[3.0,", "3.0,", "3.0]", "[0.0,", "0.0]"]


def test_unsupported_tensor_made_inside_the_function():
    def f(x):
        s = x.to_sparse()
        return (s * 2).to_dense() + x

    x = torch.eye(3)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))
    assert any("sparse" in r for r in break_reasons())


def test_meta_and_complex_inputs_match_eager():
    f = kiln.compile(lambda x: x * 2 + 1, backend="eager")
    m = f(torch.ones(3, device="meta"))
    assert m.device.type == "meta" and m.shape == (3,)

    def g(z):
        return z * 2 + z.conj()

    z = torch.randn(3, 2, dtype=torch.complex64)
    cg = kiln.compile(g)
    torch.testing.assert_close(cg(z), g(z))
    torch.testing.assert_close(cg(z.conj()), g(z.conj()))


# ---------------------------------------------------------------- 3. threads

def _helper(y):
    return y - 1


def _with_breaks(x):
    y = x * 2
    y = _helper(y)
    print(end="")       # a call done for real between segments
    z = y + 1
    print(end="")
    return z * 3


def _hammer(fn, x, stop, errors, expect):
    while not stop.is_set():
        try:
            got = fn(x)
            if not torch.equal(got, expect):
                errors.append(f"wrong value {got}")
        except Exception as e:   # noqa: BLE001 - every failure is reported
            errors.append(repr(e))


def test_reset_while_other_threads_call():
    f = kiln.compile(_with_breaks, backend="eager")
    x = torch.ones(3)
    expect = _with_breaks(x)
    stop, errors = threading.Event(), []
    ts = [threading.Thread(target=_hammer, args=(f, x, stop, errors, expect)) for _ in range(3)]
    for t in ts:
        t.start()
    try:
        for _ in range(300):
            kiln.reset()
    finally:
        stop.set()
        for t in ts:
            t.join()
    assert errors == []
    torch.testing.assert_close(f(x), expect)


def test_reset_while_other_threads_call_subprocess():
    out = run_py("""
        import threading, time, torch, kiln
        def h(y):
            return y - 1
        def f(x):
            y = h(x * 2)
            print(end="")
            z = y + 1
            print(end="")
            return z * 3
        cf = kiln.compile(f, backend="eager")
        stop, errors = threading.Event(), []
        def work():
            x = torch.ones(3)
            while not stop.is_set():
                try:
                    if not torch.equal(cf(x), f(x)):
                        errors.append("value")
                except Exception as e:
                    errors.append(repr(e))
        ts = [threading.Thread(target=work) for _ in range(3)]
        for t in ts:
            t.start()
        for _ in range(500):
            kiln.reset()
            time.sleep(0.0002)
        stop.set()
        for t in ts:
            t.join()
        print("errors", len(errors), errors[:2])
    """)
    assert "errors 0 []" in out


def test_threads_record_the_same_function_at_once():
    for _ in range(5):
        kiln.reset()
        f = kiln.compile(_with_breaks, backend="eager")
        barrier = threading.Barrier(4)
        errors = []

        def work(i):
            x = torch.full((3,), float(i))
            expect = _with_breaks(x)
            barrier.wait()
            for _ in range(30):
                try:
                    got = f(x)
                    if not torch.equal(got, expect):
                        errors.append("value")
                except Exception as e:   # noqa: BLE001
                    errors.append(repr(e))

        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []


def test_call_while_another_thread_records():
    g = kiln.compile(_with_breaks, backend="eager")
    x = torch.ones(3)
    expect = _with_breaks(x)
    g(x)
    stop, errors = threading.Event(), []
    t = threading.Thread(target=_hammer, args=(g, x, stop, errors, expect))
    t.start()
    try:
        for n in range(1, 40):   # a new shape each time: a new recording
            def f(a):
                return torch.tanh(a) * 2 + a.sum()

            cf = kiln.compile(f)
            a = torch.randn(n)
            torch.testing.assert_close(cf(a), f(a))
    finally:
        stop.set()
        t.join()
    assert errors == []


# ---------------------------------------------------------------- 4. super()

class Base(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x)


class RootSuper(Base):
    def forward(self, x):
        return super().forward(x) * 2


class InlinedSuper(Base):
    def helper(self, x):
        return super().forward(x) + 1

    def forward(self, x):
        return self.helper(x) * 2


class Box:
    def __init__(self, t):
        self.t = t


class DoubleBox(Box):
    def __init__(self, t):
        super().__init__(t * 2)


class TwoArgSuperAndCtor(Base):
    def forward(self, x):
        return DoubleBox(x).t + super(TwoArgSuperAndCtor, self).forward(x)


class Left(Base):
    def forward(self, x):
        return super().forward(x) + 1


class Right(Base):
    def forward(self, x):
        return super().forward(x) * 3


class Diamond(Left, Right):
    def forward(self, x):
        return super().forward(x) - 1


class CellSelf(Base):
    def forward(self, x):
        y = super().forward(x)
        return (lambda: self.lin(y))()   # self is a cell variable here


@pytest.mark.parametrize("cls", [RootSuper, InlinedSuper, TwoArgSuperAndCtor, Diamond, CellSelf],
                         ids=lambda c: c.__name__)
def test_super_matches_eager(cls):
    m = cls()
    x = torch.randn(2, 3)
    cm = kiln.compile(m)
    for _ in range(2):
        torch.testing.assert_close(cm(x), m(x))
    assert not any("super" in r for r in break_reasons())


def _make_class(scale):
    class Scaled(Base):
        def forward(self, x):
            return super().forward(x) * scale

    return Scaled


def test_super_in_classes_sharing_one_code_object():
    # two classes made by one function share forward's code: the __class__
    # cell must be read (and guarded) per call, not baked into the recording
    A, B = _make_class(2.0), _make_class(3.0)
    a, b = A(), B()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 3)
    ca, cb = kiln.compile(a), kiln.compile(b)
    torch.testing.assert_close(ca(x), a(x))
    torch.testing.assert_close(cb(x), b(x))


def _frame_name():
    return sys._getframe(1).f_code.co_name


def test_calls_made_for_the_frame_see_it_as_current():
    # a call kiln does for real (a graph break) runs with the user's frame
    # as its caller, as under CPython
    def user_fn(x):
        name = _frame_name_opaque()
        return x + 1, name

    y, name = kiln.compile(user_fn)(torch.ones(2))
    assert name == "user_fn"


_frame_name_opaque = type("Opaque", (), {"__call__": lambda self: sys._getframe(1).f_code.co_name})()


def test_zero_arg_super_called_for_real_in_the_frame():
    class Weird(Base):
        def forward(self, x):
            s = super()
            print(end="")   # a break right after
            return s.forward(x) + 1

    m = Weird()
    x = torch.randn(2, 3)
    torch.testing.assert_close(kiln.compile(m)(x), m(x))


# ---------------------------------------------------------------- 5. backends

def _broken_backend(gm, example_inputs):
    raise ValueError("user backend bug")


@pytest.mark.parametrize("debug", [True, False])
def test_user_backend_error_reaches_the_user(monkeypatch, debug):
    monkeypatch.setattr(kiln.config, "debug", debug)
    f = kiln.compile(lambda x: x * 3, backend=_broken_backend)
    with pytest.raises(kiln.BackendCompilerFailed) as ei:
        f(torch.ones(2))
    e = ei.value
    assert isinstance(e, torch._dynamo.exc.BackendCompilerFailed)
    assert isinstance(e.__cause__, ValueError) and "user backend bug" in str(e.__cause__)
    assert "_broken_backend" in str(e) and "user backend bug" in str(e)


def test_user_backend_returning_a_non_callable_is_the_users_error():
    f = kiln.compile(lambda x: x * 3, backend=lambda gm, ex: None)
    with pytest.raises(kiln.BackendCompilerFailed, match="not a callable"):
        f(torch.ones(2))


def test_user_backend_returning_too_few_outputs_raises_subprocess():
    # the replay reads the graph's outputs by index: a short result must raise
    out = run_py("""
        import torch, kiln
        def short(gm, ex):
            return lambda *args: ()
        def f(x):
            y = x * 2
            print(end="")   # y lives across the break: a graph output
            return y + 1
        try:
            kiln.compile(f, backend=short)(torch.ones(2))
        except RuntimeError as e:
            print("raised", "outputs" in str(e))
    """)
    assert out.split() == ["raised", "True"]


def test_kilns_own_backend_failure_is_internal(monkeypatch):
    from kiln import backends

    def exploding(gm, example_inputs):
        raise RuntimeError("kiln backend bug")

    monkeypatch.setattr(backends, "kiln", exploding)
    monkeypatch.setattr(kiln.config, "debug", True)
    with pytest.raises(RuntimeError, match="kiln backend bug") as ei:
        kiln.compile(lambda x: x * 3)(torch.ones(2))
    assert not isinstance(ei.value, kiln.BackendCompilerFailed)
    kiln.reset()
    monkeypatch.setattr(kiln.config, "debug", False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.testing.assert_close(kiln.compile(lambda x: x * 3)(torch.ones(2)), torch.full((2,), 3.0))
    assert any("kiln backend bug" in str(x.message) for x in w)


def test_gpu_kernel_index_error_is_raised_not_replayed(monkeypatch):
    # A GPU kernel's index error is raised where the graph ran, never by
    # re-running the segment eagerly: on a real GPU eager's kernel would trip
    # a device-side assert (the context is lost), and an asynchronously found
    # error belongs to an earlier call's inputs, which a re-run with this
    # call's good inputs would not see (so it would be lost).  The CUDA
    # emulator takes the same path.
    import torch.nn.functional as F
    w = torch.randn(10, 4)
    monkeypatch.setattr(kiln.config, "cuda_emulate", True)
    monkeypatch.setattr(kiln.config, "cuda_index_errors", "async")
    kiln.reset()

    def f(i):
        return F.embedding(i, w) * 2

    cf = kiln.compile(f)
    good, bad = torch.tensor([1, 0, 9]), torch.tensor([1, 12, 2])
    torch.testing.assert_close(cf(good), f(good))
    cf(bad)                                   # found after the call returned
    with pytest.raises(IndexError, match="earlier call"):
        cf(good)                              # reported here, not lost to a re-run
    torch.testing.assert_close(cf(good), f(good))
