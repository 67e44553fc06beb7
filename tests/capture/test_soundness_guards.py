"""Guards kiln's capture was missing (issue 13, classes 5 and 6): memory
shared between tensor inputs that the graph writes to, global torch state
(default dtype, default device, autocast), torch functions and methods the
user replaces, and functions given a new ``__code__``.  Each case compiled
once under one condition, then called under another, must agree with eager.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
from capture_harness import CountingBackend


def aot_eager(gm, example_inputs):
    """A functionalizing backend (AOT autograd, ATen run eagerly): like kiln's
    own, it compiles for the aliasing it was shown, so a graph reused for
    inputs that overlap differently goes stale."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified
    return aot_module_simplified(gm, example_inputs, lambda g, ex: make_boxed_func(g.forward))


def _same(a, b):
    assert a.dtype == b.dtype and a.device == b.device and a.shape == b.shape
    if a.device.type != "meta":
        torch.testing.assert_close(a, b)


# -- class 5: inputs that share memory ----------------------------------------

def write_a_read_b(a, b):
    a.mul_(2)
    return b + 0


@pytest.mark.parametrize("backend", ["kiln", aot_eager])
def test_overlapping_inputs_after_separate_ones(backend):
    cf = kiln.compile(write_a_read_b, backend=backend)
    cf(torch.ones(4), torch.ones(4))
    s, s_ref = torch.arange(5.0), torch.arange(5.0)
    out = cf(s[:4], s[1:])
    ref = write_a_read_b(s_ref[:4], s_ref[1:])
    _same(out, ref)
    _same(s, s_ref)


def test_separate_inputs_after_overlapping_ones():
    cf = kiln.compile(write_a_read_b)
    s = torch.arange(5.0)
    cf(s[:4], s[1:])
    a, b = torch.ones(4), torch.full((4,), 3.0)
    out = cf(a, b)
    _same(out, torch.full((4,), 3.0))
    _same(a, torch.full((4,), 2.0))


def test_same_storage_disjoint_halves():
    # views of one storage that do not overlap, then one storage aliasing
    cf = kiln.compile(write_a_read_b)
    s = torch.arange(8.0)
    _same(cf(s[:4], s[4:]), torch.arange(4.0, 8.0))
    t, t_ref = torch.arange(8.0), torch.arange(8.0)
    _same(cf(t[:4], t[2:6]), write_a_read_b(t_ref[:4], t_ref[2:6]))
    _same(t, t_ref)


def test_aliasing_inputs_without_writes_reuse_the_graph():
    # no input is written: sharing memory cannot matter, no new graph
    def add(a, b):
        return a * 2 + b
    be = CountingBackend()
    cf = kiln.compile(add, backend=be)
    cf(torch.ones(4), torch.ones(4))
    s = torch.arange(5.0)
    _same(cf(s[:4], s[1:]), add(s[:4], s[1:]))
    assert be.count == 1


G = torch.zeros(6)


def write_global_read_input(x):
    G.add_(1)
    return x * 2


@pytest.mark.parametrize("backend", [aot_eager, "kiln"])
def test_input_view_of_a_written_global(backend):
    global G
    G = torch.zeros(6)
    cf = kiln.compile(write_global_read_input, backend=backend)
    cf(torch.ones(3))
    out = cf(G[1:4])   # x sees the global's update in eager
    _same(out, torch.full((3,), 4.0))
    _same(G, torch.full((6,), 2.0))


class Stats(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("run", torch.zeros(4))

    def forward(self, x):
        self.run.add_(1)
        return x * 3


@pytest.mark.parametrize("backend", [aot_eager, "kiln"])
def test_input_view_of_a_written_buffer(backend):
    m = Stats()
    cm = kiln.compile(m, backend=backend)
    cm(torch.ones(4))
    out = cm(m.run[:])   # the buffer itself, a different tensor object
    _same(out, torch.full((4,), 6.0))
    _same(m.run, torch.full((4,), 2.0))


# -- class 6: global state ---------------------------------------------------

@pytest.fixture
def restore_default_dtype():
    d = torch.get_default_dtype()
    yield
    torch.set_default_dtype(d)


def factories(x):
    return torch.zeros(3) + torch.tensor([1.5]) + torch.arange(0.0, 3.0, 1.0) + x


def promotes(x):
    return x + 1.5


@pytest.mark.parametrize("fn,make", [(factories, lambda: torch.ones(3, dtype=torch.float16)),
                                     (promotes, lambda: torch.ones(3, dtype=torch.int64))])
def test_default_dtype_records_anew(restore_default_dtype, fn, make):
    be = CountingBackend()
    cf = kiln.compile(fn, backend=be)
    x = make()
    _same(cf(x), fn(x))
    torch.set_default_dtype(torch.float64)
    _same(cf(x), fn(x))
    assert be.count == 2
    torch.set_default_dtype(torch.float32)
    _same(cf(x), fn(x))
    assert be.count == 2   # the first graph again


def test_default_dtype_kiln_backend(restore_default_dtype):
    cf = kiln.compile(promotes)
    x = torch.ones(3, dtype=torch.int64)
    cf(x)
    torch.set_default_dtype(torch.float64)
    _same(cf(x), promotes(x))


def no_inputs():
    return torch.ones(2) * 3


def test_default_device_records_anew():
    be = CountingBackend()
    cf = kiln.compile(no_inputs, backend=be)
    _same(cf(), no_inputs())
    with torch.device("meta"):
        _same(cf(), no_inputs())
    assert be.count == 2
    _same(cf(), no_inputs())


def matmul(a, b):
    return a @ b


def test_outer_autocast_records_anew():
    be = CountingBackend()
    cf = kiln.compile(matmul, backend=be)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    _same(cf(a, b), matmul(a, b))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _same(cf(a, b), matmul(a, b))
    assert be.count == 2
    with torch.autocast("cpu", dtype=torch.float16):
        _same(cf(a, b), matmul(a, b))
    assert be.count == 3
    _same(cf(a, b), matmul(a, b))
    assert be.count == 3


# -- class 6: torch functions and methods replaced by the user --------------

@pytest.fixture
def patch():
    undo = []

    def set_(obj, name, value):
        undo.append((obj, name, obj.__dict__.get(name, undo)))
        setattr(obj, name, value)
    yield set_
    for obj, name, old in reversed(undo):
        if old is undo:
            delattr(obj, name)
        else:
            setattr(obj, name, old)


def uses_gelu(x):
    return F.gelu(x) + 1


def uses_torch_sin(x):
    return torch.sin(x) * 2


def uses_silu_module(x):
    return nn.functional.silu(x)


def uses_tensor_method(x):
    return torch.relu(x).sin()


@pytest.mark.parametrize("fn,obj,name", [(uses_gelu, F, "gelu"), (uses_torch_sin, torch, "sin"),
                                         (uses_silu_module, nn.functional, "silu"),
                                         (uses_tensor_method, torch.Tensor, "sin")])
def test_replaced_torch_callable(patch, fn, obj, name):
    cf = kiln.compile(fn)
    x = torch.randn(5)
    _same(cf(x), fn(x))
    patch(obj, name, lambda t, *a, **k: t * 0 - 7)
    _same(cf(x), fn(x))


def test_replaced_functional_inside_a_torch_module(patch):
    m = nn.Sequential(nn.Linear(4, 4), nn.GELU())
    cm = kiln.compile(m)
    x = torch.randn(2, 4)
    _same(cm(x), m(x))
    patch(F, "gelu", lambda t, approximate="none": t * 0 + 5)
    _same(cm(x), m(x))


class Block(nn.Module):
    def helper(self, x):
        return x + 1

    def forward(self, x):
        return self.helper(x) * 2


def test_replaced_method_on_class_and_instance(patch):
    m = Block()
    cm = kiln.compile(m)
    x = torch.randn(3)
    _same(cm(x), m(x))
    patch(Block, "helper", lambda self, x: x - 1)
    _same(cm(x), m(x))
    m.helper = lambda x: x * 100
    _same(cm(x), m(x))


# -- class 6: functions given a new __code__ or defaults -------------------

def inner(x, k=1.0):
    return x + k


def inner_other(x, k=1.0):
    return x - k


def calls_inner(x):
    return inner(x)


def test_inlined_function_code_swapped():
    code, defaults = inner.__code__, inner.__defaults__
    try:
        cf = kiln.compile(calls_inner)
        x = torch.randn(3)
        _same(cf(x), calls_inner(x))
        inner.__code__ = inner_other.__code__
        _same(cf(x), calls_inner(x))
        inner.__code__ = code
        inner.__defaults__ = (10.0,)
        _same(cf(x), calls_inner(x))
    finally:
        inner.__code__, inner.__defaults__ = code, defaults


def test_compiled_function_code_swapped():
    def own(x):
        return x * 2
    cf = kiln.compile(own)
    x = torch.randn(3)
    _same(cf(x), own(x))
    own.__code__ = (lambda x: x - 1).__code__
    _same(cf(x), own(x))


def test_guards_are_described():
    cf = kiln.compile(write_a_read_b)
    cf(torch.ones(4), torch.ones(4))
    text = "\n".join(g for seg in kiln._C.capture_guards(write_a_read_b.__code__) for g in seg)
    assert "get_default_dtype() == torch.float32" in text
    assert "overlap in memory as recorded" in text
