"""Issue 15: graph breaks as TorchDynamo has them — counted once, and none
where Dynamo records the construct (each test failed on the code before)."""
import collections
import copy
import enum
import functools
import math

import numpy as np
import pytest
import torch

import kiln


def _wrapped(fn):
    @functools.wraps(fn)
    def w(*a, **k):
        return fn(*a, **k)
    return w


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    @_wrapped
    def forward(self, x):
        y = self.l(x).relu()
        print("between")
        return y * 2 + 1


def test_a_break_inside_an_inlined_call_counts_once(capsys):
    # noted where it stops the wrapper's inlining and again when forward,
    # run by CPython, is recorded itself: Dynamo counts one
    m, x = _Net(), torch.randn(2, 4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex
    assert "print" in ex.breaks[0].reason and ex.breaks[0].lineno == _Net.forward.__wrapped__.__code__.co_firstlineno + 3


def _scale(x, s):
    return x * s


SCALE = functools.partial(_scale, s=3.0)


def _uses_global_partial(x):
    return SCALE(x) + 1


def test_a_partial_read_from_a_global_is_recorded_and_guarded():
    global SCALE
    x = torch.randn(4)
    ex = kiln.explain(_uses_global_partial, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    cf = kiln.compile(_uses_global_partial)
    torch.testing.assert_close(cf(x), x * 3 + 1)
    old = SCALE
    try:
        SCALE.keywords["s"] = 5.0          # the one mutable part of a partial
        torch.testing.assert_close(cf(x), x * 5 + 1)
        SCALE = functools.partial(_scale, s=7.0)
        torch.testing.assert_close(cf(x), x * 7 + 1)
    finally:
        SCALE = old
        old.keywords["s"] = 3.0


class _Act(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def forward(self, x):
        return self.act(x) * 2


def test_a_partial_held_by_a_module_is_recorded():
    m, x = _Act(), torch.randn(4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    torch.testing.assert_close(kiln.compile(m)(x), m(x))


_SEEN = []


def _inner(x):
    _SEEN.append(torch.compiler.is_compiling())
    return x.cos()


@torch.compiler.disable
def _disabled(x):
    return _inner(x) * 3


def _calls_disabled(x):
    return _disabled(x.sin()) + 1


def test_torch_compiler_disable_breaks_and_runs_everything_below_eagerly():
    x = torch.randn(4)
    ex = kiln.explain(_calls_disabled, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (2, 1), ex
    assert "torch.compiler.disable" in ex.breaks[0].reason
    _SEEN.clear()
    cf = kiln.compile(_calls_disabled)
    for _ in range(2):
        torch.testing.assert_close(cf(x), _calls_disabled(x))
    assert _SEEN and not any(_SEEN)   # _inner never recorded, never compiled


@torch.jit.script
def _scripted(x):
    return x * 2 + 1


@torch.jit.script
def _scripted_other(x):
    return x * 5


def _calls_script(x):
    return _scripted(x).sin()


def test_a_torchscript_function_is_inlined_from_its_python_source():
    global _scripted
    x = torch.randn(4)
    ex = kiln.explain(_calls_script, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0) and ex.ops_per_graph == [3], ex
    cf = kiln.compile(_calls_script)
    torch.testing.assert_close(cf(x), (x * 2 + 1).sin())
    old = _scripted
    try:
        _scripted = _scripted_other   # guarded by identity
        torch.testing.assert_close(cf(x), (x * 5).sin())
    finally:
        _scripted = old


class _Names(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)
        self.names = {"a", "b"}

    def forward(self, x):
        if any(p.requires_grad is False for p in self.parameters()):
            x = x + 1
        if "a" in self.names:
            x = x * 2
        n = sum(1 for _ in self.named_modules()) + len(list(self.named_parameters()))
        return self.l(x) + n


def test_module_enumerations_and_a_set_attribute_are_recorded_and_guarded():
    m, x = _Names(), torch.randn(2, 4)
    ex = kiln.explain(m, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    cf = kiln.compile(m)
    torch.testing.assert_close(cf(x), m(x))
    m.l.bias.requires_grad_(False)          # parameters' flags: the tensors' guards
    torch.testing.assert_close(cf(x), m(x))
    m.names.discard("a")                    # the set: guarded equal to a copy
    torch.testing.assert_close(cf(x), m(x))
    m.extra = torch.nn.Linear(4, 4)         # the tree: keys of every _modules dict
    torch.testing.assert_close(cf(x), m(x))
    m.register_buffer("b", torch.ones(1))   # parameters unchanged, no buffers walked
    torch.testing.assert_close(cf(x), m(x))


def test_stock_transformer_encoder_is_one_graph():
    # its fast-path checks walk self.modules() and len() its hook dicts
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        ex = kiln.explain(enc, backend="eager")(x)
        assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
        torch.testing.assert_close(kiln.compile(enc)(x), enc(x))
        enc.layers[0].register_forward_hook(lambda mod, a, out: out * 2)   # the hook dicts' lengths are guarded
        torch.testing.assert_close(kiln.compile(enc)(x), enc(x))


def test_named_enumerations_match_torch_on_a_tree_with_shared_and_missing_members():
    shared = torch.nn.Linear(2, 2)
    root = torch.nn.Module()
    root.a = torch.nn.Sequential(shared, torch.nn.ReLU())
    root.b = shared
    root.register_module("none", None)
    root.register_parameter("p", torch.nn.Parameter(torch.ones(2)))
    root.register_parameter("q", None)
    root.register_buffer("buf", torch.zeros(2))
    root.a.register_buffer("buf2", torch.ones(2))
    seen = {}

    def f(x):
        seen["mods"] = [n for n, _ in root.named_modules()]
        seen["kids"] = [n for n, _ in root.named_children()]
        seen["params"] = [n for n, _ in root.named_parameters()]
        seen["bufs"] = [n for n, _ in root.named_buffers()]
        return x + sum(p.sum() for p in root.parameters()) + len(list(root.modules())) + len(list(root.children()))

    x = torch.randn(2)
    want = f(x)
    want_seen = dict(seen)
    ex = kiln.explain(f, backend="eager")(x)
    assert ex.graph_break_count == 0, ex
    torch.testing.assert_close(kiln.compile(f)(x), want)
    assert seen == want_seen


class _Out(collections.OrderedDict):
    """A dict subclass that adds only methods (as ModelOutput's readers)."""

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def _reads_out(x):
    o = _Out(a=x + 1, b=x * 2)
    t = o.to_tuple()
    return t[0] + t[1] + len(o) + sum(1 for _ in o.items()) + ("a" in o) + len(list(iter(o)))


def _returns_out(x):
    o = _Out(a=x + 1, b=x * 2)
    return o, o["a"] * 3


def test_a_dict_subclass_built_in_the_frame_is_read_without_a_break():
    x = torch.randn(4)
    ex = kiln.explain(_reads_out, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    torch.testing.assert_close(kiln.compile(_reads_out)(x), _reads_out(x))
    o, y = kiln.compile(_returns_out)(x)
    assert type(o) is _Out and list(o) == ["a", "b"] and not isinstance(o["a"], torch._subclasses.FakeTensor)
    torch.testing.assert_close(o["b"], x * 2)
    torch.testing.assert_close(y, (x + 1) * 3)


_LOG = []


class _Scale:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        _LOG.append("in")
        return self.k

    def __exit__(self, *exc):
        _LOG.append("out")
        return False


def _with_user_cm(x):
    with _Scale(2) as k:
        y = x * k
    return y + 1


def test_a_user_context_manager_class_is_inlined_with_its_effects():
    x = torch.randn(3)
    ex = kiln.explain(_with_user_cm, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    _LOG.clear()
    cf = kiln.compile(_with_user_cm)
    for _ in range(2):
        torch.testing.assert_close(cf(x), x * 2 + 1)
    assert _LOG == ["in", "out", "in", "out"]


def _with_user_cm_break(x):
    with _Scale(3) as k:
        y = x * k
        print("inside")
        y = y + 1
    return y


def test_a_break_inside_a_user_context_manager_runs_it_as_python():
    x = torch.randn(3)
    _LOG.clear()
    cf = kiln.compile(_with_user_cm_break)
    for _ in range(2):
        torch.testing.assert_close(cf(x), x * 3 + 1)
    assert _LOG == ["in", "out", "in", "out"]


class _Rec(collections.OrderedDict):
    def __setattr__(self, name, value):
        if name in ("a", "b") and value is not None:
            super().__setitem__(name, value)   # a C method of a base, bound through super()
        super().__setattr__(name, value)


def test_super_c_method_binds_each_calls_object():
    # soundness (found by the zoo: ModelOutput.__setattr__ recorded as a
    # root): super().__setitem__ was bound once, to the recording's object, so
    # later calls wrote into that object and left their own empty
    x = torch.randn(3)
    sa = kiln.compile(_Rec.__setattr__, backend="eager")
    for _ in range(3):
        o = _Rec()
        sa(o, "a", x)
        assert list(o.keys()) == ["a"] and list(o.__dict__) == ["a"]


def _dict_of_pairs(x):
    o = _Out(a=x + 1, b=x * 2)
    d = dict(o.items())                                  # ModelOutput.__getitem__'s pattern
    e = dict([("p", x), ("q", x * 3), ("p", x - 1)])     # a repeated key: the last value wins
    return d["a"] + d["b"] + e["p"] + e["q"], list(e)


def test_dict_of_pairs_known_at_record_time_is_recorded():
    x = torch.randn(3)
    ex = kiln.explain(_dict_of_pairs, backend="eager")(x)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    got, want = kiln.compile(_dict_of_pairs)(x), _dict_of_pairs(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == ["p", "q"]


# ---------------------------------------------------------------- the zoo's break classes (2026-12-04)


def _one_graph(fn, *args):
    ex = kiln.explain(fn, backend="eager")(*args)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex


class _Cfg:
    pass


_CFG = _Cfg()


def _over_set_of_names(x):
    s = set(_CFG.names)
    out = x
    for t in s:
        out = out + (1 if t == "a" else 10)
    return out, "b" in s, len(s), s


def test_set_of_a_config_list_is_built_and_guarded():
    # ModernBERT / Gemma3: `for layer_type in set(self.config.layer_types)`
    _CFG.names = ["a", "b", "a"]
    x = torch.zeros(2)
    _one_graph(_over_set_of_names, x)
    cf = kiln.compile(_over_set_of_names, backend="eager")
    for names in (["a", "b", "a"], ["a", "b", "a"], ["a", "c", "d"]):
        _CFG.names = names
        want, got = _over_set_of_names(x), cf(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
        assert got[3] is not cf(x)[3]           # a fresh set per call


def _module_made_in_forward(x):
    return torch.nn.Softmax(dim=-1)(x) * np.sqrt(8)


def test_a_torch_module_made_in_forward_and_a_numpy_ufunc_of_constants():
    # CodeGen: nn.Softmax(dim=-1)(w); CTRL: x *= np.sqrt(d_model)
    x = torch.randn(3, 4)
    _one_graph(_module_made_in_forward, x)
    torch.testing.assert_close(kiln.compile(_module_made_in_forward)(x), _module_made_in_forward(x))


@functools.lru_cache
def _probe():
    return True


def _calls_lru(x):
    return x + 1 if _probe() else x - 1


def test_an_lru_cache_wrapper_of_constants_runs_at_record_time():
    # data2vec-audio: is_torch_distributed_available() (lru_cache over assume_constant_result)
    x = torch.randn(3)
    _one_graph(_calls_lru, x)
    torch.testing.assert_close(kiln.compile(_calls_lru)(x), x + 1)


class _Sq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g * ctx.k, None


class _Exp(torch.autograd.Function):   # the setup_context form
    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y


def _applies(x):
    return _Sq.apply(x, 3) + _Exp.apply(x)


def test_autograd_function_forward_is_inlined_without_grad_and_one_node_with_it():
    # BLOOM's GELU is an autograd.Function: without grad its forward is
    # inlined; with grad Fn.apply is one graph node, forward and backward run
    # by autograd (traced by AOT autograd under kiln's compiler)
    x = torch.randn(5)
    with torch.no_grad():
        _one_graph(_applies, x)
        torch.testing.assert_close(kiln.compile(_applies)(x), _applies(x))
    xg = x.clone().requires_grad_()
    _one_graph(_applies, xg)
    for backend in ("eager", "kiln"):
        cf = kiln.compile(_applies, backend=backend)
        for _ in range(2):
            out = cf(xg)
            out.sum().backward()
            g = xg.grad.clone()
            xg.grad = None
            ref = _applies(xg)
            ref.sum().backward()
            torch.testing.assert_close(out, ref)
            torch.testing.assert_close(g, xg.grad)
            xg.grad = None


_FN_LOG = []


class _Logged(torch.autograd.Function):   # changes a global: run once more on fakes, it would show
    @staticmethod
    def forward(ctx, x):
        _FN_LOG.append(1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _DataBackward(torch.autograd.Function):   # a backward that branches on data: AOT cannot trace it
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        if g.sum() > 0:
            return g * x.cos()
        return g * 3


class _Dirty(torch.autograd.Function):   # in place, marked dirty
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k, x + 1

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * ctx.k + gb, None


def _fn_logged(x):
    return _Logged.apply(x * 1) + 1


def _fn_data(x):
    return _DataBackward.apply(x * 1) * 2


def _fn_dirty(x):
    return _Dirty.apply(x * 1) + 1


def _fn_two(x):
    a, b = _TwoOut.apply(x, 3.0)
    return a * b


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn, breaks", [(_fn_logged, 1), (_fn_data, 0), (_fn_dirty, 0), (_fn_two, 0)])
def test_autograd_functions_with_grad_give_eagers_values_grads_and_effects(fn, breaks, backend):
    x = torch.randn(5, requires_grad=True)
    ex = kiln.explain(fn, backend=backend)(x)
    assert ex.graph_break_count == breaks, ex
    cf = kiln.compile(fn, backend=backend)
    del _FN_LOG[:]
    for sign in (1.0, -1.0, 1.0):   # _DataBackward's both branches
        xs = (x.detach() * sign).requires_grad_()
        out = cf(xs)
        out.sum().backward()
        g, xs.grad = xs.grad.clone(), None
        ref = fn(xs)
        ref.sum().backward()
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(g, xs.grad)
    assert len(_FN_LOG) == (6 if fn is _fn_logged else 0)


try:
    from transformers.modeling_outputs import BaseModelOutputWithPooling
except ImportError:   # transformers is in the suite's setup; checked by the test
    BaseModelOutputWithPooling = None


def _stores_on_output(x):
    o = BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=x.sum(0))
    o.pooler_output = o.pooler_output * 2
    return o


def _changes_a_copy(x):
    c = copy.deepcopy(_CFG)
    c.n = 5
    return x * c.n, c


def test_stores_on_objects_built_at_record_time():
    # CLIP: vision_outputs.pooler_output = proj(pooled); Whisper: a deep-copied config changed
    assert BaseModelOutputWithPooling is not None, "the suite's setup installs transformers"
    x = torch.randn(3, 2)
    _one_graph(_stores_on_output, x)
    got, want = kiln.compile(_stores_on_output)(x), _stores_on_output(x)
    assert type(got) is type(want) and list(got.keys()) == list(want.keys())
    torch.testing.assert_close(got.pooler_output, want.pooler_output)
    torch.testing.assert_close(got[1], want[1])
    _CFG.n = 2
    _one_graph(_changes_a_copy, x)
    cf = kiln.compile(_changes_a_copy)
    for _ in range(2):
        y, c = cf(x)
        torch.testing.assert_close(y, x * 5)
        assert c.n == 5 and c is not _CFG and _CFG.n == 2


class _Instantier(collections.OrderedDict):
    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


_ACT = _Instantier({"relu": torch.nn.ReLU, "lrelu": (torch.nn.LeakyReLU, {"negative_slope": 0.5})})


def _act(x, name):
    return _ACT[name](x)


def test_an_ordered_dict_subclass_item_read_from_a_global_is_guarded():
    # transformers' ACT2FN
    x = torch.randn(5)
    _one_graph(_act, x, "lrelu")
    cf = kiln.compile(_act, backend="eager")
    for name in ("relu", "lrelu", "relu"):
        torch.testing.assert_close(cf(x, name), _act(x, name))
    old = dict.__getitem__(_ACT, "relu")
    try:
        _ACT["relu"] = torch.nn.Tanh
        torch.testing.assert_close(cf(x, "relu"), torch.tanh(x))
    finally:
        _ACT["relu"] = old


def _compares_dict(x, d):
    return x + (1 if d == "longrope" else 2) + (3 if d != 0 else 4)


def test_a_dict_compared_with_a_string_is_never_equal():
    # ESM: rope_type (a dict) == "longrope"
    x = torch.zeros(2)
    _one_graph(_compares_dict, x, {})
    torch.testing.assert_close(kiln.compile(_compares_dict)(x, {"a": 1}), x + 5)


def test_a_generator_kept_in_a_local_then_star_called_is_recorded():
    # wav2vec2 / HuBERT / WavLM / SEW: torch's parametrize forward,
    # originals = (getattr(self, f"original{i}") for i ...); x = self[0](*originals)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 4, 3, padding=1), dim=2)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        _one_graph(conv, x)
        torch.testing.assert_close(kiln.compile(conv)(x), conv(x))


class _GenThenWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1.0

    def forward(self, x):
        g = (x * self.k for _ in range(2))
        self.k = 3.0                       # the generator, run when consumed, sees this
        return torch.stack(tuple(g))


def test_a_write_between_a_generator_and_its_use_still_breaks():
    m, x = _GenThenWrite(), torch.ones(2)
    ex = kiln.explain(m, backend="eager")(x)
    assert ex.graph_break_count >= 1, ex
    m.k = 1.0
    torch.testing.assert_close(kiln.compile(m, backend="eager")(x), torch.full((2, 2), 3.0))


try:
    from transformers.cache_utils import DynamicSlidingWindowLayer
except ImportError:   # transformers is in the suite's setup; checked by the test
    DynamicSlidingWindowLayer = None


def _sliding_cache(k, v):
    layer = DynamicSlidingWindowLayer(sliding_window=3)   # its __init__: torch.tensor(3)
    keys, values = layer.update(k, v)
    return keys + values, layer


def test_tensors_a_record_time_constructor_makes_are_graph_nodes():
    # Mistral / Gemma2 / Gemma3: the sliding-window cache's torch.tensor(window)
    assert DynamicSlidingWindowLayer is not None, "the suite's setup installs transformers"
    k, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    with torch.no_grad():
        _one_graph(_sliding_cache, k, v)
        cf = kiln.compile(_sliding_cache)
        for _ in range(2):
            (got, layer), (want, wlayer) = cf(k, v), _sliding_cache(k, v)
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(layer.keys, wlayer.keys)
            assert int(layer._sliding_window_tensor) == 3


class _Fmt(str, enum.Enum):
    NCHW = "NCHW"
    NHWC = "NHWC"


class _EnumAndListAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fmt = _Fmt.NHWC
        self.size = [2, 3]

    def forward(self, x):
        if self.fmt != _Fmt.NCHW:
            x = x * 2
        return x.reshape(-1, math.prod(self.size))


def test_an_enum_member_and_a_pure_function_of_a_list_attribute():
    # timm's patch_embed (`output_fmt != Format.NCHW`, a str Enum) and hiera (`math.prod(self.size)`)
    m, x = _EnumAndListAttr(), torch.randn(4, 6)
    _one_graph(m, x)
    cf = kiln.compile(m)
    torch.testing.assert_close(cf(x), m(x))
    m.fmt = _Fmt.NCHW
    torch.testing.assert_close(cf(x), m(x))
    m.size = [3, 2]
    torch.testing.assert_close(cf(x), m(x))


_HANDLERS = {int: "int", collections.namedtuple("_Node", "fn")(fn=len): "node"}
_NODE = collections.namedtuple("_Node2", "scale flip")
_NODES = {torch.Tensor: _NODE(scale=2.0, flip=False)}


def _keyed_by_type(x):
    if type(x) not in _HANDLERS and type(x) in _NODES:
        return x * _NODES[type(x)].scale
    return x


def test_in_on_a_global_dict_keyed_by_types_is_guarded_both_ways():
    # torch.utils._pytree: `node_type not in SUPPORTED_NODES`, SUPPORTED_NODES[t].flatten_fn
    x = torch.randn(3)
    _one_graph(_keyed_by_type, x)
    cf = kiln.compile(_keyed_by_type, backend="eager")
    torch.testing.assert_close(cf(x), x * 2)
    _NODES[torch.Tensor] = _NODE(scale=5.0, flip=False)
    torch.testing.assert_close(cf(x), x * 5)
    _HANDLERS[torch.Tensor] = "tensor"      # now present: the guard on absence fails
    try:
        torch.testing.assert_close(cf(x), x)
    finally:
        del _HANDLERS[torch.Tensor]


def _zip_strict(x, ys):
    out = x
    for a, b in zip(ys, [1.0, 2.0], strict=True):
        out = out + a * b
    return out


def test_zip_strict_is_recorded_and_unequal_lengths_still_raise():
    # torch.nn.RNNBase (timm's sequencer): zip(..., strict=True)
    x, ys = torch.randn(2), [torch.randn(2), torch.randn(2)]
    _one_graph(_zip_strict, x, ys)
    torch.testing.assert_close(kiln.compile(_zip_strict)(x, ys), _zip_strict(x, ys))
    with pytest.raises(ValueError):
        kiln.compile(_zip_strict, backend="eager")(x, ys + [x])


_OPTIMIZERS = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1),
               "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
               "adam": lambda p: torch.optim.Adam(p, lr=0.01),
               "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.01),
               "nadam": lambda p: torch.optim.NAdam(p, lr=0.01),
               "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True)}


def _training_step(seed_state=None, kind="sgd"):
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    if seed_state is not None:
        m.load_state_dict(seed_state)
    opt = _OPTIMIZERS[kind](m.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    return m, step


def test_a_training_step_breaks_at_the_users_lines():
    # the forward is one graph; zero_grad (torch._disable_dynamo), backward() and the
    # optimizer's step break where the user calls them, never at a line inside torch
    torch.manual_seed(0)
    m, step = _training_step()
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    ex = kiln.explain(step, backend="eager")(x, y)
    first = step.__code__.co_firstlineno
    assert ex.graph_count >= 1 and ex.graphs[0]["ops"] >= 4, ex
    assert [(b.filename, b.lineno) for b in ex.breaks] == [(__file__, first + 1), (__file__, first + 3),
                                                          (__file__, first + 4)], ex
    assert "marked torch.compiler.disable" in ex.breaks[0].reason
    assert "backward" in ex.breaks[1].reason
    # and the compiled step trains as eager does
    m2, step2 = _training_step(m.state_dict())
    cf = kiln.compile(step)
    for _ in range(3):
        torch.testing.assert_close(cf(x, y), step2(x, y))
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p, q)


def _flatten_add(a, b):
    leaves, spec = torch.utils._pytree.tree_flatten((a, [b, a]))
    return leaves[0] + leaves[1] * leaves[2], spec


def test_pytree_flatten_builds_its_spec_at_record_time():
    # TreeSpec(type, context, [LeafSpec, ...]): a record-time object inside a
    # list passed to a record-time constructor
    a, b = torch.randn(3), torch.randn(3)
    ex = kiln.explain(_flatten_add, backend="eager")(a, b)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    cf = kiln.compile(_flatten_add)
    for _ in range(2):
        out, spec = cf(a, b)
        torch.testing.assert_close(out, a + b * a)
        assert spec == torch.utils._pytree.tree_flatten((a, [b, a]))[1]


_SCAN_SCALE = torch.tensor(2.0)


def _scan(a, b, how):
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    def combine_global(left, right):
        return left[0] * right[0] * _SCAN_SCALE, right[0] * left[1] + right[1]

    def combine_closure(left, right):
        return left[0] * right[0] * a.mean(), right[0] * left[1] + right[1]

    def combine_nested_global(left, right):   # the global read inside a comprehension's code
        return tuple([u * _SCAN_SCALE for u in (left[0] * right[0],)])[0], right[0] * left[1] + right[1]

    fn = {"pure": combine, "global": combine_global, "closure": combine_closure,
          "nested_global": combine_nested_global}[how]
    _, s = associative_scan(fn, (a, b), dim=1, combine_mode="generic")
    return s.sin() + 1


@pytest.mark.parametrize("how", ["pure", "global", "closure", "nested_global"])
def test_associative_scan_is_one_node_over_a_pure_function(how):
    # Mamba's selective scan under compile: Dynamo records the HOP; kiln calls
    # it whole where its function reads nothing but its arguments and modules
    a, b = torch.rand(2, 7, 3), torch.rand(2, 7, 3)
    ex = kiln.explain(_scan)(a, b, how)
    assert ex.graph_count > 0 and (ex.graph_break_count == 0) == (how == "pure"), ex
    if how != "pure":   # then the scan runs as Python, its function under vmap
        assert "higher-order function" in ex.breaks[0].reason, ex
    cf = kiln.compile(_scan)
    for _ in range(2):
        torch.testing.assert_close(cf(a, b, how), _scan(a, b, how))


@pytest.mark.parametrize("kind", ["sgd_momentum", "adam", "adagrad", "nadam", "adamw_foreach"])
def test_an_optimizers_step_is_its_own_graph(kind):
    # as under Dynamo: the optimizer's step (under its wrappers, which run as
    # Python) is recorded as its own graph once its state exists: the params'
    # .grad read as inputs, its state (a dict keyed by the params) read by
    # identity, torch.is_complex(p) answered on the fake, addcdiv_ with a tensor
    # step size (foreach: _foreach_addcdiv_ with a tensor of step sizes, per
    # tensor); the first step, which fills the state, breaks and records again
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    torch.manual_seed(0)
    m, step = _training_step(kind=kind)
    step(x, y)
    ex = kiln.explain(step, backend="eager")(x, y)
    assert ex.graph_count == 2 and ex.graphs[1]["ops"] >= 10, ex
    assert all(b.filename == __file__ for b in ex.breaks), ex
    torch.manual_seed(0)
    m1, step1 = _training_step(kind=kind)
    m2, step2 = _training_step(m1.state_dict(), kind=kind)
    cf = kiln.compile(step1)
    for _ in range(4):
        torch.testing.assert_close(cf(x, y), step2(x, y))
    for p, q in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(p, q)


def _addcdiv_tensor_value(p, a, b, v):
    p = p.clone()
    p.addcdiv_(a, b, value=-v)
    return p.addcmul(a, b, value=v)


def test_addcdiv_with_a_tensor_value_is_recorded():
    p, a, b, v = torch.randn(5), torch.randn(5), torch.rand(5) + 1, torch.tensor(0.3)
    ex = kiln.explain(_addcdiv_tensor_value, backend="eager")(p, a, b, v)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex
    torch.testing.assert_close(kiln.compile(_addcdiv_tensor_value)(p, a, b, v), _addcdiv_tensor_value(p, a, b, v))


def _by_tensor(t, d):
    return d[t] * 2 + t


def test_a_dict_keyed_by_tensors_is_read_by_identity():
    t1, t2 = torch.randn(3), torch.randn(3)
    d1, d2 = {t1: torch.randn(3)}, {t2: torch.randn(3), t1: torch.randn(3)}
    _one_graph(_by_tensor, t1, d1)
    cf = kiln.compile(_by_tensor)
    for t, d in ((t1, d1), (t2, d2), (t1, d2), (t1, d1)):
        torch.testing.assert_close(cf(t, d), _by_tensor(t, d))
    with pytest.raises(KeyError):
        cf(t2, d1)


class _LibraryLayer(torch.nn.Module):
    __module__ = "transformers.models.fake.modeling_fake"   # a library's class, as kiln sees it
    scale = 2.0
    use_bias = True

    def forward(self, x):
        y = x * self.scale
        return y + 1 if self.use_bias else y


def test_class_attributes_of_library_classes_are_guarded():
    # a flag patched on a library's class between calls (a model's option set
    # on its class) records again instead of replaying the old constant
    m, x = _LibraryLayer(), torch.randn(3)
    cf = kiln.compile(m)
    torch.testing.assert_close(cf(x), x * 2 + 1)
    try:
        _LibraryLayer.scale, _LibraryLayer.use_bias = 3.0, False
        torch.testing.assert_close(cf(x), x * 3)
    finally:
        _LibraryLayer.scale, _LibraryLayer.use_bias = 2.0, True
    torch.testing.assert_close(cf(x), x * 2 + 1)


_LOOP_LAYERS = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])


def _break_in_loop(x):
    x = x * 2
    for layer in _LOOP_LAYERS:
        x = layer(x).relu()
        print("layer")
    return x + 1


def _break_in_try(x):
    x = x * 2
    try:
        x = x.sin()
        print("inside")
        x = x.cos()
    except RuntimeError:
        x = x - 1
    return x + 1


@pytest.mark.parametrize("fn", [_break_in_loop, _break_in_try])
def test_a_break_in_a_loop_or_try_keeps_the_graph_before_it(fn, capsys):
    # TorchDynamo (torch 2.13) skips the whole frame on a break inside a loop
    # ("graph break in loop") or a try block (no partial graph there): kiln
    # keeps the graph up to the break, and CPython runs the rest
    x = torch.randn(2, 4)
    ex = kiln.explain(fn, backend="eager")(x)
    assert ex.graph_count == 1 and ex.graphs[0]["ops"] >= 2, ex
    torch._dynamo.reset()
    dx = torch._dynamo.explain(fn)(x)
    assert dx.graph_count <= ex.graph_count
    cf = kiln.compile(fn)
    for _ in range(2):
        torch.testing.assert_close(cf(x), fn(x))


def _generic_alias(x, pair):
    import typing

    a, b = typing.cast(tuple[float, float], pair)
    return x * a + b


def test_a_type_subscripted_by_a_tuple_of_constants():
    # typing.cast(tuple[float, float], group["betas"]) in torch's NAdam
    x = torch.randn(3)
    _one_graph(_generic_alias, x, (0.5, 2.0))
    torch.testing.assert_close(kiln.compile(_generic_alias)(x, (0.5, 2.0)), x * 0.5 + 2.0)


def test_mark_dynamic_is_kept_and_listed_by_explain():
    # recorded for dynamic shapes (issue 17): sizes are still specialised
    def f(x):
        return x.sin() * x.shape[0]

    x = torch.randn(4, 3)
    kiln.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, 1)
    ex = kiln.explain(f, backend="eager")(x)
    assert ex.marked_dynamic == [(0, [0, 1])] and "marked dynamic" in str(ex), ex
    # the graph's size inputs are symbols, and the guards hold their relations
    assert "symbolic sizes size1=" in str(ex) and ">= 2" in str(ex), ex
    cf = kiln.compile(f)
    for n in (4, 5):
        y = torch.randn(n, 3)
        kiln.mark_dynamic(y, 0)
        torch.testing.assert_close(cf(y), f(y))
