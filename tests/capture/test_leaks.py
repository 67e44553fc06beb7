"""kiln's caches must not keep the user's objects alive: a compiled model
whose last reference goes away is freed, even though the code of its class's
forward (shared by every instance) keeps its recorded segments."""
import gc
import weakref

import torch
import torch.nn as nn

import kiln


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _run_and_drop(backend):
    m = Net()
    cm = kiln.compile(m, backend=backend)
    x = torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))
        cm(x)
    refs = [weakref.ref(m), weakref.ref(m.a.weight), weakref.ref(cm)]
    del m, cm
    gc.collect()
    return refs


def test_compiled_module_is_freed():
    for backend in ("eager", "kiln"):
        refs = _run_and_drop(backend)
        assert all(r() is None for r in refs), f"{backend}: a compiled module outlived its last reference"


def test_freed_module_fails_its_identity_guard_not_the_next_instance():
    # a new instance of the same class records again (new identity), and is correct
    for _ in range(3):
        _run_and_drop("eager")
    m = Net()
    cm = kiln.compile(m, backend="eager")
    x = torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(cm(x), m(x))


def test_calls_do_not_leak_their_arguments():
    """Every compiled call ends its frame through CPython (which drops the
    frame's references): the arguments' reference counts stay flat."""
    import sys

    def f(x, y):
        return torch.relu(x) + y

    cf = kiln.compile(f, backend="eager")
    x, y = torch.randn(4), torch.randn(4)
    cf(x, y)
    before = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(20):
        cf(x, y)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before


def test_exception_from_a_call_kiln_runs_for_real_names_the_users_line():
    import traceback

    def boom(v):
        raise ValueError(f"bad value {v}")

    def f(x):
        y = x * 2
        boom(int(y.shape[0]))   # boom raises: recorded as a graph break, run for real
        return y

    cf = kiln.compile(f, backend="eager")
    for _ in range(2):
        try:
            cf(torch.ones(3))
        except ValueError as e:
            frames = [fs.name for fs in traceback.extract_tb(e.__traceback__)]
            assert "f" in frames and "boom" in frames and "bad value 3" in str(e)
        else:
            raise AssertionError("the exception was lost")
