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
