"""Mutation and aliasing: in-place ops on inputs and on views of inputs,
returning an input, returning one tensor twice, list mutation, global dict
writes, setattr on objects and modules.  Inputs are compared after every call,
and (identity=True) which returned tensors *are* inputs or each other."""
import torch
import torch.nn as nn

from capture_harness import Call, calls_of, check, check_program

REGISTRY = {}
COUNT = 0
HISTORY = []


torch.manual_seed(0)  # inputs in the case tables below are built at import


def r(*shape):
    return torch.randn(*shape)


def test_inplace_on_input_returned():
    def f(x, y):
        x.mul_(y).add_(1)
        return x
    check(f, calls_of(lambda i: (r(3), r(3))), identity=True)


def test_inplace_on_view_of_input():
    def f(x):
        v = x[1:, :2]
        v.mul_(10)
        x.diagonal().zero_()
        return v.sum(), x
    check(f, calls_of(lambda i: (r(3, 3),)), identity=True)


def test_view_of_input_returned_then_mutated_by_caller():
    def f(x):
        return x.view(-1)[:2]

    def invoke(ctx, x):
        v = ctx.f(x)
        v.fill_(42.0)  # must write through to x in both runs
        return x.clone(), v.clone()
    check(f, [Call(r(2, 2), invoke=invoke), Call(r(3, 2), invoke=invoke), Call(r(2, 2), invoke=invoke)])


def test_return_input_unchanged():
    def f(x, y):
        return x, y * 2, x
    check(f, calls_of(lambda i: (r(2), r(2))), identity=True)


def test_return_same_tensor_twice():
    def f(x):
        y = x + 1
        return y, y, [y], {"y": y}
    check(f, calls_of(lambda i: (r(3),)), identity=True)


def test_return_same_tensor_twice_mutation_visible():
    def f(x):
        y = x * 2
        return y, y

    def invoke(ctx, x):
        a, b = ctx.f(x)
        a.add_(100)
        return b  # b is a, so it sees the +100
    check(f, [Call(r(2), invoke=invoke) for _ in range(3)])


def test_inplace_on_two_aliased_inputs():
    def f(a, b):
        a.add_(1)
        return b * 2  # b is a view of a: sees the update

    def invoke(ctx, base):
        return ctx.f(base, base[::2]), base
    check(f, [Call(r(4), invoke=invoke), Call(r(6), invoke=invoke), Call(r(4), invoke=invoke)])


def test_same_tensor_passed_twice():
    def f(a, b):
        a.mul_(2)
        return a + b

    def invoke(ctx, x):
        return ctx.f(x, x), x
    check(f, [Call(r(3), invoke=invoke), Call(r(3), invoke=invoke), Call(r(2), invoke=invoke)])


def test_list_argument_mutation():
    def f(lst, x):
        lst.append(x.sum())
        lst.insert(0, len(lst))
        if len(lst) > 3:
            lst.pop(1)
        lst[-1] = lst[-1] * 2
        return len(lst)
    check(f, [([], r(2)), ([1.0], r(2)), ([1, 2, 3], r(2)), ([torch.ones(())], r(3))])


def test_list_in_state_accumulates():
    def make(st):
        def f(x):
            st["acts"].append(x.relu())
            st["n"] += 1
            return torch.stack(st["acts"]).sum(0)
        return f
    check_program(make, calls_of(lambda i: (r(3),), 4), state={"acts": [], "n": 0})


def test_global_dict_writes():
    def f(x, key):
        REGISTRY[key] = x * 2
        REGISTRY.setdefault("first", key)
        if "drop" in REGISTRY and key == "c":
            del REGISTRY["drop"]
        return len(REGISTRY)
    check(f, [(r(2), "a"), (r(2), "b"), (r(2), "c"), (r(2), "a")], globs={"REGISTRY": {"drop": 0}})


def test_global_counter_and_history():
    def f(x):
        global COUNT, HISTORY
        COUNT += 1
        HISTORY = HISTORY + [COUNT]
        return x * COUNT
    check(f, calls_of(lambda i: (r(2),), 4), globs={"COUNT": 0, "HISTORY": []})


def test_global_tensor_mutated_in_place():
    def f(x):
        BUF.add_(x)
        return BUF * 1
    g = f.__globals__
    check(f, calls_of(lambda i: (r(3),)), globs={"BUF": torch.zeros(3)}, g=g)


def test_setattr_on_plain_object():
    class Box:
        def __init__(self):
            self.value = None
            self.count = 0

    def f(box, x):
        box.value = x * 3
        box.count += 1
        box.last_shape = tuple(x.shape)
        return box.count
    check(f, [(Box(), r(2)), (Box(), r(3)), (Box(), r(2))])


def test_setattr_on_object_in_state():
    class Box:
        def __init__(self):
            self.total = torch.zeros(2)
            self.calls = 0

    def make(box):
        def f(x):
            box.total = box.total + x
            box.calls += 1
            return box.total * box.calls
        return f
    check_program(make, calls_of(lambda i: (r(2),), 4), state=Box())


def test_setattr_on_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.steps = 0
            self.last = None

        def forward(self, x):
            self.steps += 1
            y = self.lin(x)
            self.last = y.detach()
            self.mode = "odd" if self.steps % 2 else "even"
            return y * self.steps
    check(M(), calls_of(lambda i: (r(3, 2),), 4))


def test_buffer_updated_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("ema", torch.zeros(3))
            self.register_buffer("n", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.ema.mul_(0.9).add_(x.mean(0) * 0.1)
            self.n += 1
            return x - self.ema
    check(M(), calls_of(lambda i: (r(4, 3),), 4))


def test_inplace_on_input_under_no_grad():
    def f(x, w):
        with torch.no_grad():
            w.sub_(0.1 * x)
        return (w * x).sum()
    check(f, calls_of(lambda i: (r(3), r(3))))


def test_clone_then_mutate_leaves_input():
    def f(x):
        y = x.clone()
        y[0] = 99.0
        y.add_(1)
        return y, x
    check(f, calls_of(lambda i: (r(3),)), identity=True)


def test_resize_and_set_via_copy():
    def f(dst, src):
        dst.copy_(src * 2)
        dst[0].copy_(src.sum())
        return dst.mean()
    check(f, calls_of(lambda i: (torch.zeros(3), r(3))))


def test_dict_argument_gets_tensor_outputs():
    def f(out, x):
        out["sq"] = x * x
        out["sum"] = out["sq"].sum()
        out.pop("tmp", None)
        return None
    check(f, [({"tmp": 1}, r(2)), ({}, r(3)), ({"sq": 0}, r(2))])


def test_mutation_through_alias_in_list():
    def f(items):
        a = items[0]
        a.mul_(2)
        items[1].add_(a)
        return items[0] is items[1]

    def invoke_shared(ctx, x):
        return ctx.f([x, x]), x
    check(f, [Call([r(2), r(2)]), Call(r(2), invoke=invoke_shared), Call([r(3), r(3)])])
