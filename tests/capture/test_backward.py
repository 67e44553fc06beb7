"""Backward through the compiled forward: gradients of inputs and
parameters (accumulated over several calls, zeroed, stepped by an optimizer)
must equal eager's.  The harness compares .grad of every leaf argument and
every module parameter after each call."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from capture_harness import Call, check, check_program


def r(*shape, **kw):
    return torch.randn(*shape, **kw)


def backward_sum(ctx, *args, **kwargs):
    out = ctx.f(*args, **kwargs)
    loss = out if out.dim() == 0 else out.square().sum()
    loss.backward()
    return out.detach()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def test_input_grads():
    def f(x, y):
        return (x.sin() * y).sum(-1) + (x @ y.t()).mean()
    check(f, [Call(r(3, 4, requires_grad=True), r(3, 4, requires_grad=True), invoke=backward_sum) for _ in range(3)])


def test_input_grads_changing_shapes_and_requires_grad():
    def f(x, y):
        return torch.tanh(x) * y + x
    check(f, [Call(r(3, requires_grad=True), r(3, requires_grad=True), invoke=backward_sum),
              Call(r(5, requires_grad=True), r(5), invoke=backward_sum),
              Call(r(4), r(4, requires_grad=True), invoke=backward_sum)])


def test_parameter_grads_accumulate():
    check(mlp(), [Call(r(2, 4), invoke=backward_sum) for _ in range(4)])


def test_parameter_grads_zeroed_between_calls():
    def zero(ctx):
        ctx.st.zero_grad()
    check(mlp(), [Call(r(2, 4), invoke=backward_sum), Call(r(2, 4), before=zero, invoke=backward_sum),
                  Call(r(3, 4), before=zero, invoke=backward_sum)])


def test_sgd_training_loop():
    def make(st):
        return st["model"]

    def step(ctx, x, target):
        out = ctx.f(x)
        loss = F.mse_loss(out, target)
        ctx.st["opt"].zero_grad()
        loss.backward()
        ctx.st["opt"].step()
        return loss.detach()

    model = mlp()
    state = {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)}
    check_program(make, [Call(r(4, 4), r(4, 3), invoke=step) for _ in range(5)], state=state, rtol=1e-4, atol=1e-5)


def test_adam_with_batchnorm_train():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
    state = {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=0.01)}

    def step(ctx, x):
        ctx.st["opt"].zero_grad()
        loss = ctx.f(x).pow(2).mean()
        loss.backward()
        ctx.st["opt"].step()
        return loss.detach()
    check_program(lambda st: st["model"], [Call(r(5, 3), invoke=step) for _ in range(4)], state=state,
                  rtol=1e-4, atol=1e-5)


def test_backward_through_graph_break():
    def f(x, w):
        h = torch.relu(x @ w)
        print("hidden", tuple(h.shape))
        return (h * w.sum()).sum()
    check(f, [Call(r(2, 3, requires_grad=True), r(3, 3, requires_grad=True), invoke=backward_sum) for _ in range(3)])


def test_backward_through_data_dependent_branch():
    def f(x):
        y = x * 3
        if y.sum() > 0:
            return (y.exp()).sum()
        return (y ** 2).sum()
    check(f, [Call((r(4) + s).requires_grad_(), invoke=backward_sum) for s in (2.0, -2.0, 2.0)])


def test_autograd_grad_of_inputs():
    def f(x):
        return (x.sigmoid() * x).sum()

    def grads(ctx, x):
        out = ctx.f(x)
        (g,) = torch.autograd.grad(out, x)
        return out.detach(), g
    check(f, [Call(r(3, requires_grad=True), invoke=grads) for _ in range(3)])


def test_inplace_on_intermediate_then_backward():
    def f(x):
        y = x * 2
        y.add_(1).relu_()
        z = y.clone()
        z[0] = 0.0
        return z.sum() + y.mean()
    check(f, [Call(r(4, requires_grad=True), invoke=backward_sum) for _ in range(3)])


def test_detach_and_no_grad_parts():
    def f(x, w):
        base = (x @ w).detach()
        with torch.no_grad():
            scale = w.norm()
        return (base * scale + x @ w).sum()
    check(f, [Call(r(2, 3, requires_grad=True), r(3, 2, requires_grad=True), invoke=backward_sum) for _ in range(3)])


def test_retain_graph_double_backward_call():
    def f(x):
        return (x.exp() * x).sum()

    def twice(ctx, x):
        out = ctx.f(x)
        out.backward(retain_graph=True)
        out.backward()
        return out.detach()
    check(f, [Call(r(3, requires_grad=True), invoke=twice) for _ in range(3)])


def test_backward_with_kiln_backend():
    def f(x, w, b):
        return F.gelu(x @ w + b).sum(-1)
    check(f, [Call(r(3, 4, requires_grad=True), r(4, 5, requires_grad=True), r(5, requires_grad=True), invoke=backward_sum)
              for _ in range(3)], backend="kiln", rtol=1e-4, atol=1e-4)


def test_module_backward_with_kiln_backend():
    check(mlp(), [Call(r(2, 4), invoke=backward_sum) for _ in range(3)], backend="kiln", rtol=1e-4, atol=1e-4)
