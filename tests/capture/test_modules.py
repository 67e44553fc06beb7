"""Modules: Sequential, ModuleList, ModuleDict, nested custom modules,
buffers, forward hooks and pre-hooks, state_dict / attribute access and
train()/eval() through the compiled wrapper, BatchNorm running statistics.
Parameters, buffers, training flags and plain attributes of the module are
compared after every call."""
import collections

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from capture_harness import Call, CountingBackend, calls_of, check, check_program


def r(*shape):
    return torch.randn(*shape)


def seeded(build, seed=0):
    torch.manual_seed(seed)
    return build()


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Encoder(nn.Module):
    def __init__(self, d=4, n=2):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class IndexedList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x, k):
        for i in range(len(self.layers)):
            if i < k:
                x = torch.relu(self.layers[i](x))
        return self.layers[-1](x) + len(self.layers[:k])


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Sequential(nn.Linear(3, 2), nn.Tanh())})

    def forward(self, x, which):
        outs = {k: m(x) for k, m in self.heads.items()}
        return self.heads[which](x), outs, list(self.heads.keys()), "a" in self.heads


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("scratch", torch.ones(3), persistent=False)

    def forward(self, x):
        return self.lin(x - self.mean) * self.scratch


class Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.log = []

    def forward(self, x):
        return self.lin(x).relu()


def record_output(mod, inp, out):
    mod.log.append(("out", round(float(out.detach().sum()), 4), tuple(out.shape)))


def double_output(mod, inp, out):
    return out * 2


def shift_input(mod, args):
    return (args[0] + 1,)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.proj = nn.Linear(4, 10, bias=False)
        self.proj.weight = self.emb.weight

    def forward(self, idx):
        return self.proj(self.emb(idx))


class Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 3))
        self.extra = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(2)])
        self.named = nn.ParameterDict({"s": nn.Parameter(torch.ones(()))})

    @property
    def effective(self):
        return self.weight * self.named["s"]

    def helper(self, x):
        return F.linear(x, self.effective, self.extra[0]) + self.extra[1]

    def forward(self, x, bias=None, *, scale=1.0):
        y = self.helper(x) * scale
        return y if bias is None else y + bias


Result = collections.namedtuple("Result", "logits probs")


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)

    def forward(self, x):
        logits = self.lin(x)
        return {"res": Result(logits, logits.softmax(-1)), "n": x.shape[0]}


MODULES = [
    ("sequential", lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), lambda i: (r(3 + i, 4),)),
    ("nested-custom", lambda: Encoder(), lambda i: (r(2, 3, 4),)),
    ("moduledict", lambda: Router(), None),
    ("buffers", lambda: WithBuffers(), lambda i: (r(2, 3),)),
    ("conv-bn-eval", lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).eval(),
     lambda i: (r(2, 2, 6, 6),)),
    ("embedding-layernorm", lambda: nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4), nn.Linear(4, 3)),
     lambda i: (torch.randint(0, 10, (2, 5)),)),
    ("tied-weights", lambda: Tied(), lambda i: (torch.randint(0, 10, (3,)),)),
    ("conv1d-groupnorm", lambda: nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.SiLU()),
     lambda i: (r(2, 2, 5 + i),)),
    ("mha-eval", lambda: nn.MultiheadAttention(4, 2, batch_first=True).eval(), lambda i: (r(2, 3, 4), r(2, 3, 4), r(2, 3, 4))),
    ("transformer-layer-eval", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True).eval(),
     lambda i: (r(2, 3, 8),)),
    ("lstm", lambda: nn.LSTM(3, 4, batch_first=True), lambda i: (r(2, 3, 3),)),
    ("dict-namedtuple-out", lambda: DictOut(), lambda i: (r(2 + i, 3),)),
]


@pytest.mark.parametrize("build,make", [m[1:] for m in MODULES], ids=[m[0] for m in MODULES])
def test_module(build, make):
    mod = seeded(build)
    if make is None:  # Router
        calls = [(r(2, 3), "a"), (r(2, 3), "b"), (r(2, 3), "a")]
    else:
        calls = calls_of(make)
    check(mod, calls, rtol=1e-4, atol=1e-5)


def test_module_list_indexing_and_slicing():
    check(seeded(IndexedList), [(r(2, 3), 1), (r(2, 3), 3), (r(2, 3), 0), (r(2, 3), 2)])


def test_functional_params_property_kwargs():
    m = seeded(Functional)
    check(m, [Call(r(2, 3)), Call(r(2, 3), r(3)), Call(r(2, 3), scale=2.0), Call(r(2, 3), None, scale=0.5)])


def test_sequential_is_one_graph():
    cb = CountingBackend()
    check(seeded(lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))), calls_of(lambda i: (r(3, 4),)),
          backend=cb)
    assert cb.count == 1
    assert cb.op_counts[0] >= 3


def test_batchnorm_running_stats_train_then_eval():
    def to_eval(ctx):
        ctx.f.eval()  # through the wrapper in the compiled run

    def to_train(ctx):
        ctx.f.train()
    m = seeded(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=0.3), nn.ReLU()))
    check(m, [Call(r(5, 3)), Call(r(6, 3) * 2), Call(r(5, 3), before=to_eval), Call(r(5, 3)),
              Call(r(4, 3), before=to_train)])


def test_batchnorm2d_train_momentum_none():
    m = seeded(lambda: nn.BatchNorm2d(3, momentum=None))
    check(m, calls_of(lambda i: (r(2, 3, 4, 4) + i,), 4))


def test_train_eval_through_wrapper_with_dropout():
    m = seeded(lambda: nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.BatchNorm1d(3)))

    def set_mode(train):
        def before(ctx):
            ctx.f.train(train)
            assert ctx.f.training == train and ctx.st.training == train and ctx.st[1].training == train
        return before
    # Dropout is active in the train-mode calls; both runs start from the same
    # seed and draw the same random numbers in the same order
    check(m, [Call(r(4, 3), before=set_mode(False)), Call(r(4, 3)), Call(r(4, 3), before=set_mode(True)),
              Call(r(4, 3), before=set_mode(False))])


def test_forward_hook_records():
    m = seeded(Recorder)
    m.register_forward_hook(record_output)
    check(m, calls_of(lambda i: (r(2, 3),), 4))


def test_forward_hook_modifies_output_and_pre_hook_modifies_input():
    m = seeded(lambda: nn.Sequential(nn.Linear(3, 3), nn.Tanh()))
    m[0].register_forward_pre_hook(shift_input)
    m[1].register_forward_hook(double_output)
    check(m, calls_of(lambda i: (r(2, 3),)))


def test_hook_added_and_removed_between_calls():
    def add(ctx):
        ctx.st.handle = ctx.st.register_forward_hook(double_output)

    def remove(ctx):
        ctx.st.handle.remove()
        del ctx.st.handle
    m = seeded(Recorder)
    check(m, [Call(r(2, 3)), Call(r(2, 3), before=add), Call(r(2, 3)), Call(r(2, 3), before=remove), Call(r(2, 3))])


def test_pre_hook_with_kwargs():
    def pre(mod, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = kwargs.get("scale", 1.0) * 10
        return args, kwargs
    m = seeded(Functional)
    m.register_forward_pre_hook(pre, with_kwargs=True)
    check(m, [Call(r(2, 3)), Call(r(2, 3), scale=0.5), Call(r(2, 3), r(3), scale=2.0)])


def _strip(sd):
    return {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v for k, v in sd.items()}


def test_state_dict_and_attributes_through_wrapper():
    def read(ctx, x):
        f = ctx.f
        sd = _strip(f.state_dict())
        names = sorted(n for n, _ in f.named_parameters())
        names = [n[len("_orig_mod."):] if n.startswith("_orig_mod.") else n for n in names]
        return (f(x), sorted(sd), [sd[k] for k in sorted(sd)], names, f.lin.weight, f.mean, f.training,
                sum(p.numel() for p in f.parameters()))

    def load(ctx):
        sd = {k: torch.full_like(v, 0.25) for k, v in ctx.st.state_dict().items()}
        ctx.st.load_state_dict(sd)

    def setattr_through_wrapper(ctx):
        ctx.f.mean = torch.full((3,), 2.0)  # a buffer reassigned through the wrapper
        with torch.no_grad():
            ctx.f.lin.bias.fill_(-1.0)
    m = seeded(WithBuffers)
    check(m, [Call(r(2, 3), invoke=read), Call(r(2, 3), before=load, invoke=read),
              Call(r(2, 3), before=setattr_through_wrapper, invoke=read), Call(r(2, 3), invoke=read)])


def test_wrapper_forwards_attributes():
    import kiln
    m = seeded(WithBuffers)
    w = kiln.compile(m, backend="eager")
    assert w.lin is m.lin and w.mean is m.mean
    x = r(2, 3)
    torch.testing.assert_close(w(x), m(x))
    w.eval()
    assert not m.training and not m.lin.training
    w.train()
    assert m.training
    w.extra_flag = 5  # setattr through the wrapper reaches the module
    assert m.extra_flag == 5 and w.extra_flag == 5
    w.lin = nn.Linear(3, 3, bias=False)
    assert m.lin is w.lin and m.lin.bias is None
    torch.testing.assert_close(w(x), m(x))


def test_compile_bound_forward_method():
    def make(m):
        return m.forward
    check_program(make, calls_of(lambda i: (r(2, 4),)), state=seeded(lambda: Encoder()), rtol=1e-4, atol=1e-5)


def test_module_called_inside_function():
    def make(st):
        def f(x, y):
            return st["enc"](x) + st["lin"](y)
        return f

    def bump(ctx):
        with torch.no_grad():
            ctx.st["lin"].weight.mul_(2)
    state = {"enc": seeded(lambda: Encoder()), "lin": seeded(lambda: nn.Linear(3, 2), 1)}
    check_program(make, [Call(r(2, 4), r(2, 3)), Call(r(2, 4), r(2, 3), before=bump), Call(r(2, 4), r(2, 3))],
                  state=state, rtol=1e-4, atol=1e-5)


def test_module_with_kiln_backend():
    m = seeded(lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    check(m, calls_of(lambda i: (r(3, 4),)), backend="kiln", rtol=1e-4, atol=1e-4)
