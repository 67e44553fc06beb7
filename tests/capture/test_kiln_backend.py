"""A few capture cases end to end through kiln's own C backend (each graph
costs a C compile, so only a handful): ops, a graph break, guard-driven
recompiles, input mutation and a module with buffers."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from capture_harness import Call, calls_of, check

TEMP = 1.0
TOL = dict(rtol=1e-4, atol=1e-4)


def r(*shape):
    return torch.randn(*shape)


def test_kiln_pointwise_and_reductions():
    def f(x, y):
        z = torch.tanh(x * y + 1) - x.mean(-1, keepdim=True)
        return z.softmax(-1), z.amax(0)
    check(f, calls_of(lambda i: (r(4, 8), r(4, 8))), backend="kiln", **TOL)


def test_kiln_graph_break_print():
    def f(x):
        y = F.silu(x) * 2
        print("mid", tuple(y.shape))
        return (y + x).sum(0)
    check(f, [(r(3, 4),), (r(3, 4),), (r(5, 4),)], backend="kiln", **TOL)


def test_kiln_global_guard():
    def f(x):
        return (x / TEMP).softmax(-1)

    def set_temp(v):
        def before(ctx):
            ctx.g["TEMP"] = v
        return before
    check(f, [Call(r(2, 5)), Call(r(2, 5), before=set_temp(0.5)), Call(r(2, 5))], globs={"TEMP": 1.0}, backend="kiln",
          **TOL)


def test_kiln_inplace_input_mutation():
    def f(x, y):
        x.mul_(2).add_(y)
        return x.relu().sum()
    check(f, calls_of(lambda i: (r(6), r(6))), backend="kiln", **TOL)


def test_kiln_module_batchnorm_train():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    check(m, calls_of(lambda i: (r(5, 4),)), backend="kiln", **TOL)


def test_kiln_python_scalar_and_shape_changes():
    def f(x, k):
        return torch.clamp(x * k, -1, 1).cumsum(-1)
    check(f, [(r(2, 3), 2.0), (r(2, 3), 0.5), (r(3, 5), 0.5)], backend="kiln", **TOL)
