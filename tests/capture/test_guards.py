"""Guard soundness: something the compiled code specialised on changes
between calls, and the compiled function must notice (re-check, recompile or
fall back) and still agree with eager."""
import pytest
import torch
import torch.nn as nn

from capture_harness import Call, calls_of, check, check_program

SCALE = 1.0
FLAG = False
OFFSET_T = torch.zeros(3)
NAMES = ["a"]
CONFIG = {"mode": "add"}


torch.manual_seed(0)  # inputs in the case tables below are built at import


def r(*shape, **kw):
    return torch.randn(*shape, **kw)


def set_global(name, value):
    def before(ctx):
        ctx.g[name] = value
    return before


def set_state(key, value):
    def before(ctx):
        ctx.st[key] = value
    return before


# -- globals -----------------------------------------------------------------

def uses_global_scalar(x):
    return x * SCALE + 1


def uses_global_flag(x):
    if FLAG:
        return x.relu()
    return x.sigmoid()


def uses_global_tensor(x):
    return x + OFFSET_T


def uses_global_list(x):
    return x * len(NAMES), NAMES[-1]


def uses_global_dict(x):
    if CONFIG["mode"] == "add":
        return x + CONFIG.get("k", 1.0)
    return x * CONFIG.get("k", 1.0)


def _helper_a(t):
    return t + 1


def _helper_b(t):
    return t * 10


HELPER = _helper_a


def uses_global_function(x):
    return HELPER(x) - 1


def test_global_scalar_changes():
    check(uses_global_scalar, [Call(r(3)), Call(r(3), before=set_global("SCALE", 2.5)), Call(r(3)),
                               Call(r(3), before=set_global("SCALE", -1.0))], globs={"SCALE": 1.0})


def test_global_flag_changes():
    check(uses_global_flag, [Call(r(3)), Call(r(3), before=set_global("FLAG", True)),
                             Call(r(3), before=set_global("FLAG", False))], globs={"FLAG": False})


def test_global_tensor_rebound_and_mutated():
    # (hooks build fresh tensors: a tensor captured by a hook would be shared
    # by the eager and the compiled run)
    def mutate(ctx):
        ctx.g["OFFSET_T"].add_(5.0)

    def rebind(make):
        def before(ctx):
            ctx.g["OFFSET_T"] = make()
        return before
    check(uses_global_tensor, [Call(r(3)), Call(r(3), before=rebind(lambda: torch.ones(3))),
                               Call(r(3), before=mutate), Call(r(3), before=rebind(lambda: torch.full((1,), 2.0)))],
          globs={"OFFSET_T": torch.zeros(3)})


def test_global_list_length_changes():
    def append(v):
        def before(ctx):
            ctx.g["NAMES"].append(v)
        return before
    check(uses_global_list, [Call(r(2)), Call(r(2), before=append("b")), Call(r(2), before=append("c")),
                             Call(r(2), before=set_global("NAMES", ["z"]))], globs={"NAMES": ["a"]})


def test_global_dict_entries_change():
    def put(k, v):
        def before(ctx):
            ctx.g["CONFIG"][k] = v
        return before
    check(uses_global_dict, [Call(r(2)), Call(r(2), before=put("k", 3.0)), Call(r(2), before=put("mode", "mul")),
                             Call(r(2), before=put("k", 0.5))], globs={"CONFIG": {"mode": "add"}})


def test_global_function_rebound():
    check(uses_global_function, [Call(r(2)), Call(r(2), before=set_global("HELPER", _helper_b)), Call(r(2)),
                                 Call(r(2), before=set_global("HELPER", torch.sin))], globs={"HELPER": _helper_a})


# -- closures ------------------------------------------------------------------

def test_closure_cell_rebound():
    def make(st):
        k = st["k"]

        def f(x):
            return x * k + (1 if k > 1 else 0)

        def set_k(v):
            nonlocal k
            k = v
        st["set_k"] = set_k
        return f

    def set_k(v):
        def before(ctx):
            ctx.st["set_k"](v)
        return before

    check_program(make, [Call(r(2)), Call(r(2), before=set_k(3.0)), Call(r(2), before=set_k(0.5)),
                         Call(r(2), before=set_k(2))], state={"k": 1.0})


def test_closure_over_tensor_mutated_and_rebound():
    def make(st):
        w = st["w"]

        def f(x):
            return x @ w

        def set_w(v):
            nonlocal w
            w = v
        st["set_w"] = set_w
        st["get_w"] = lambda: w
        return f

    def mutate(ctx):
        ctx.st["get_w"]().mul_(2)

    def rebind(ctx):
        ctx.st["set_w"](torch.ones(3, 4))

    check_program(make, [Call(r(2, 3)), Call(r(2, 3), before=mutate), Call(r(2, 3), before=rebind), Call(r(2, 3))],
                  state={"w": torch.randn(3, 2)})


# -- objects and modules ---------------------------------------------------------

class Flagged(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.use_act = True
        self.scale = 1.0

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.use_act:
            y = torch.tanh(y)
        return y


class TrainBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if self.training:
            return y * 2, "train"
        return y - 1, "eval"


def module_setattr(key, value):
    def before(ctx):
        setattr(ctx.st, key, value)
    return before


def test_module_flag_attribute():
    check(Flagged(), [Call(r(2, 3)), Call(r(2, 3), before=module_setattr("use_act", False)),
                      Call(r(2, 3), before=module_setattr("scale", 3.0)), Call(r(2, 3), before=module_setattr("use_act", True))])


def test_train_eval_switch():
    def train(mode):
        def before(ctx):
            ctx.st.train(mode)
        return before
    check(TrainBranch(), [Call(r(2, 3)), Call(r(2, 3), before=train(False)), Call(r(2, 3)),
                          Call(r(2, 3), before=train(True))])


def test_parameter_updated_in_place():
    def bump(ctx):
        with torch.no_grad():
            ctx.st.lin.weight.add_(1)
            ctx.st.lin.bias.mul_(-2)
    check(Flagged(), [Call(r(2, 3)), Call(r(2, 3), before=bump), Call(r(2, 3), before=bump), Call(r(2, 3))])


def test_parameter_replaced():
    def replace(v):
        def before(ctx):
            ctx.st.lin.weight = nn.Parameter(torch.full((3, 3), v))
        return before
    check(Flagged(), [Call(r(2, 3)), Call(r(2, 3), before=replace(0.5)), Call(r(2, 3)), Call(r(2, 3), before=replace(-0.25))])


def test_submodule_replaced():
    def swap(ctx):
        torch.manual_seed(7)  # same fresh weights in both runs
        ctx.st.lin = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    check(Flagged(), [Call(r(2, 3)), Call(r(2, 3), before=swap), Call(r(2, 3))])


def test_plain_object_attribute():
    class Cfg:
        def __init__(self):
            self.k = 2
            self.mode = "mul"

    def make(cfg):
        def f(x):
            return x * cfg.k if cfg.mode == "mul" else x + cfg.k
        return f

    check_program(make, [Call(r(2)), Call(r(2), before=module_setattr("k", 5)), Call(r(2), before=module_setattr("mode", "add")),
                         Call(r(2), before=module_setattr("k", 0.5))], state=Cfg())


def test_class_attribute_changes():
    class Holder:
        factor = 2.0

        def run(self, x):
            return x * type(self).factor

    def make(st):
        return st["obj"].run

    def set_factor(v):
        def before(ctx):
            type(ctx.st["obj"]).factor = v
        return before

    check_program(make, [Call(r(2), before=set_factor(2.0)), Call(r(2), before=set_factor(4.0)), Call(r(2)),
                         Call(r(2), before=set_factor(-1.0))], state={"obj": Holder()})


# -- arguments -----------------------------------------------------------------

def shape_specialised(x):
    if x.shape[0] % 2 == 0:
        return x.reshape(2, -1).sum(0)
    return x * x.shape[0]


def dtype_specialised(x):
    if x.dtype == torch.float64:
        return x * 2
    if x.is_floating_point():
        return x + 0.5
    return x // 2


def scalar_specialised(x, n, s):
    return x[:n] * s + n


def list_length(x, items):
    out = x
    for t in items:
        out = out + t
    return out * len(items)


def dict_keys(x, d):
    return {k: x * v for k, v in d.items() if not k.startswith("_")}


def requires_grad_branch(x):
    if x.requires_grad:
        return x * 2
    return x * 3


def none_vs_tensor(x, mask=None):
    if mask is None:
        return x.sum()
    return (x * mask).sum()


def stride_sensitive(x):
    return x.contiguous().view(-1)[:4] + x.is_contiguous()


def string_arg(x, act):
    return getattr(torch, act)(x)


def grad_mode_sensitive(x):
    y = x * 2
    return y, torch.is_grad_enabled(), y.requires_grad


def tuple_length(x, dims):
    return x.permute(*dims).sum(dims[0]) if len(dims) == x.dim() else x.sum()


ARG_CASES = [
    ("shapes", shape_specialised, [(r(4),), (r(3),), (r(6),), (r(5),), (r(4),)]),
    ("dtypes", dtype_specialised, [(r(3),), (r(3).double(),), (torch.arange(5),), (r(3).half(),), (r(3),)]),
    ("python-scalars", scalar_specialised, [(r(5), 2, 1.0), (r(5), 3, 1.0), (r(5), 3, 2.5), (r(5), 1, -1.0)]),
    ("list-lengths", list_length, [(r(2), [r(2)]), (r(2), [r(2), r(2)]), (r(2), []), (r(2), [r(2)] * 4)]),
    ("dict-keys", dict_keys, [(r(2), {"a": 1}), (r(2), {"a": 1, "b": 2}), (r(2), {"_h": 1, "c": 3}), (r(2), {"a": 5})]),
    ("requires-grad", requires_grad_branch, [(r(2),), (r(2, requires_grad=True),), (r(2),), (r(2, requires_grad=True),)]),
    ("none-vs-tensor", none_vs_tensor, [(r(3),), (r(3), r(3)), (r(3), None), (r(3), torch.ones(3))]),
    ("strides", stride_sensitive, [(r(3, 4),), (r(4, 3).t(),), (r(3, 4),), (r(3, 8)[:, ::2],)]),
    ("string-arg", string_arg, [(r(3), "sin"), (r(3), "cos"), (r(3), "sin"), (r(3), "tanh")]),
    ("tuple-length", tuple_length, [(r(2, 3), (1, 0)), (r(2, 3, 4), (2, 0, 1)), (r(2, 3), (0,)), (r(2, 3), (0, 1))]),
]


@pytest.mark.parametrize("fn,calls", [c[1:] for c in ARG_CASES], ids=[c[0] for c in ARG_CASES])
def test_argument_guard(fn, calls):
    check(fn, calls)


def test_grad_mode_changes():
    def no_grad_call(ctx, x):
        with torch.no_grad():
            return ctx.f(x)
    calls = [Call(r(2, requires_grad=True)), Call(r(2, requires_grad=True), invoke=no_grad_call),
             Call(r(2, requires_grad=True)), Call(r(2, requires_grad=True), invoke=no_grad_call)]
    check(grad_mode_sensitive, calls)


def test_same_code_after_state_reverts():
    # guards must not be one-way: going back to an old value uses the old path
    check(uses_global_scalar, [Call(r(3), before=set_global("SCALE", s)) for s in (1.0, 2.0, 1.0, 2.0, 3.0)],
          globs={"SCALE": 1.0})


def test_many_distinct_values_past_recompile_limit():
    # more distinct specialisations than a compiler would keep: must stay correct
    calls = [Call(r(2), before=set_global("SCALE", float(i))) for i in range(12)]
    check(uses_global_scalar, calls, globs={"SCALE": 0.0})


def test_guard_on_input_values_not_just_metadata():
    # same shapes/dtypes every call; only data changes (no data guard allowed to freeze it)
    check(lambda x, y: torch.where(x > 0, x, y).cumsum(0), calls_of(lambda i: (r(6), r(6)), 4))
