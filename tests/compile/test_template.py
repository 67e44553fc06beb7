"""A graph with symbolic sizes is lowered to ATen once and that lowering is
filled in per size (kiln/template.py, issue 17 stage 2): the same results as
a trace per size, relations the lowering relied on checked per size."""
import collections
import random

import pytest
import sympy
import torch

import kiln
from kiln import config, template, trace


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _layer():
    torch.manual_seed(0)
    # train() with dropout 0: the layer's own code (eval() under no_grad is one fused op)
    return torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()


SHAPES = ((2, 5), (3, 7), (5, 4), (2, 9), (4, 4), (3, 7))


def test_one_lowering_serves_every_size():
    m = _layer()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in SHAPES:
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["templates"] == 1, st
    assert st["template_instances"] == st["specializations"] == 5, st   # (3, 7) again: a hit
    assert st["template_mismatches"] == 0, st
    # the first size took the static path; the others went straight to the C core
    assert st["direct_sizes"] == 4, st


def _three_sizes(**kw):
    """The layer under kiln.compile(**kw) at three shapes, checked; kiln.stats()."""
    m = _layer()
    cm = kiln.compile(m, **kw)
    with torch.no_grad():
        for b, s in SHAPES[:3]:
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    return kiln.stats()



def test_a_size_plan_leaves_few_objects_for_the_collector():
    # a serving sweep plans a hundred sizes: each one's filled-in description
    # (a tuple per node) must die with its call, not live on in the Program,
    # or the process's full collections walk them all (and come sooner)
    import gc
    m = _layer()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in SHAPES[:3]:
            cm(torch.randn(b, s, 32))
        x = torch.randn(6, 11, 32)
        gc.collect()
        before = {id(o) for o in gc.get_objects()}
        cm(x)
        del x
        gc.collect()
        new = [o for o in gc.get_objects() if id(o) not in before]
    assert kiln.stats()["direct_sizes"] == 3
    # (the size's entry: its callables, closures, shapes; the graph has ~40 nodes)
    assert len(new) < 40, sorted(collections.Counter(type(o).__name__ for o in new).items())

def test_direct_sizes_off_take_the_static_path(monkeypatch):
    monkeypatch.setattr(config, "direct_sizes", False)
    st = _three_sizes(dynamic=True)
    assert st["direct_sizes"] == 0 and st["template_instances"] == 3, st


def test_a_direct_size_raises_eagers_index_error():
    # the kept index checks (kiln/index_checks.py) hold at sizes compiled
    # directly from the lowering: eager's exception, nothing written
    def f(x, i):
        return x[i] * 2 + 1
    cf = kiln.compile(f, dynamic=True)
    for n in (5, 7, 9):
        x, i = torch.randn(n, 3), torch.randint(0, n, (n + 1,))
        torch.testing.assert_close(cf(x, i), f(x, i))
    assert kiln.stats()["direct_sizes"] >= 1, kiln.stats()
    x, i = torch.randn(6, 3), torch.tensor([0, 2, 9, 1, 1, 1, 1])   # 9 is past the end
    with pytest.raises(IndexError):
        f(x, i)
    with pytest.raises(IndexError):
        cf(x, i)
    st = kiln.stats()
    assert st["direct_sizes"] >= 2 and st["fallbacks"] == 0, st


def test_torch_compile_automatic_dynamic_uses_one_lowering():
    m = _layer()
    cm = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for b in (2, 3, 4, 5, 6, 3):
            x = torch.randn(b, 5, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["templates"] == 1, st
    assert st["template_instances"] == st["specializations"] == 4, st   # 3, 4, 5, 6; then a hit
    assert st["template_mismatches"] == 0, st


def test_tensorified_floats_take_a_lowering_per_value():
    # dynamic=True passes the layer's float attributes (eps, dropout p) as
    # 0-d tensors: the symbolic lowering takes their values as constants,
    # one lowering per tuple of values (torch 2.11 does this under automatic
    # dynamic too, where each size used to be traced on its own)
    m = _layer()
    cm = torch.compile(m, backend="kiln", dynamic=True)
    with torch.no_grad():
        for b, s in SHAPES:
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0 and st["template_mismatches"] == 0, st
    assert st["templates"] == 1 and st["template_instances"] == 5 and st["direct_sizes"] == 4, st
    # a new value of a tensorified float is a lowering of its own
    for mod in m.modules():
        if isinstance(mod, torch.nn.LayerNorm):
            mod.eps = 1e-3
    with torch.no_grad():
        for b, s in SHAPES[:3]:
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    assert kiln.stats()["fallbacks"] == 0


def test_off_traces_each_size(monkeypatch):
    monkeypatch.setattr(config, "symbolic_lowering", False)
    st = _three_sizes(dynamic=True)
    assert st["templates"] == 0 and st["template_instances"] == 0 and st["specializations"] == 3, st


def test_size_arithmetic_and_views_filled_in():
    def f(x, y):
        n = x.shape[0]
        z = x.view(n * 2, -1) * 2
        return z.sum(0) + y.repeat(2, 1).sum(0), torch.arange(n) * 3
    cf = kiln.compile(f, dynamic=True)
    for n in (4, 6, 10, 6):
        x, y = torch.randn(n, 8), torch.randn(n, 4)
        got, want = cf(x, y), f(x, y)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
    st = kiln.stats()
    assert st["templates"] == 1 and st["template_instances"] == 3 and st["fallbacks"] == 0, st


def test_training_graphs_are_traced_once_forward_and_backward_filled_in_per_size():
    # AOT autograd traces the symbolic graph once (backends._symbolic_training);
    # its forward and backward ATen graphs each get a symbolic lowering of
    # their own, filled in per size; grads equal eager's
    import copy
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    ref = copy.deepcopy(m)
    cm = kiln.compile(m, dynamic=True)
    for b in (3, 5, 7):
        x = torch.randn(b, 8)
        cm(x).sum().backward()
        ref(x).sum().backward()
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None
    st = kiln.stats()
    assert st["templates"] == 2 and st["specializations"] == 6 and st["fallbacks"] == 0, st
    assert st["template_instances"] == 6 and st["direct_sizes"] == 6, st
    kiln.reset()
    kiln.config.symbolic_training = False     # off: each size traced on its own, as before
    try:
        cm = kiln.compile(m, dynamic=True)
        for b in (3, 5, 7):
            cm(torch.randn(b, 8)).sum().backward()
        st = kiln.stats()
        assert st["templates"] == 0 and st["specializations"] == 3, st
    finally:
        kiln.config.symbolic_training = True


def _graph_and_fakes():
    """A symbolic graph as PerSize holds it, from torch.compile(dynamic=True)."""
    got = []

    def grab(gm, example_inputs):
        got.append(gm)
        return gm.forward
    torch.compile(lambda x: (x * 2).sum(-1), backend=grab, dynamic=True)(torch.randn(6, 3))
    gm = got[0]
    fakes = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return gm, fakes


def _args(fakes, x):
    """The graph's arguments for input x: its sizes (s0, s1), then x."""
    assert [type(f) for f in fakes] == [torch.SymInt, torch.SymInt, torch._subclasses.FakeTensor]
    return [x.shape[0], x.shape[1], x]


def test_a_relation_the_lowering_added_is_checked_per_size():
    gm, fakes = _graph_and_fakes()
    sym = next(f for f in fakes if isinstance(f, torch.SymInt))

    def lower(g, example_inputs):
        out = trace._lower(g, example_inputs)
        bool(sym > 4)   # a decision on a size: the ShapeEnv guards it
        return out
    g, _ = trace._tupled(gm)
    t = template.Template(g, fakes, lower)
    assert any(">" in c or "<" in c for c in t.checks), t.checks
    assert t.instantiate(_args(fakes, torch.randn(5, 3))) is not None
    assert t.instantiate(_args(fakes, torch.randn(3, 3))) is None   # 3 > 4 fails: traced on its own


def test_instantiate_refuses_inputs_of_another_layout():
    gm, fakes = _graph_and_fakes()
    g, _ = trace._tupled(gm)
    t = template.Template(g, fakes, trace._lower)
    assert t.instantiate(_args(fakes, torch.randn(5, 3))) is not None
    assert t.instantiate(_args(fakes, torch.randn(3, 5).t())) is None   # strides (1, 3)


@pytest.mark.parametrize("seed", range(3))
def test_printed_size_expressions_match_sympy(seed):
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod
    rng = random.Random(seed)
    s = sympy.symbols("s0 s1 s2", integer=True, positive=True)
    leaves = list(s) + [sympy.Integer(k) for k in (2, 3, 7)]

    def expr(depth):
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(leaves)
        a, b = expr(depth - 1), expr(depth - 1)
        kind = rng.choice(["add", "mul", "floordiv", "mod", "pymod", "max", "min", "pow"])
        if kind == "add":
            return a + b
        if kind == "mul":
            return a * b
        if kind == "floordiv":
            return FloorDiv(a, rng.choice(leaves))
        if kind == "mod":
            return Mod(a, rng.choice(leaves))
        if kind == "pymod":
            return PythonMod(a, rng.choice(leaves))
        if kind == "max":
            return sympy.Max(a, b)
        if kind == "min":
            return sympy.Min(a, b)
        return a ** 2
    exprs = [expr(3) for _ in range(30)]
    exprs = [e for e in exprs if not e.is_number]
    rels = [sympy.Ge(e, 20, evaluate=False) for e in exprs[:5]] + [sympy.Eq(exprs[0], exprs[1], evaluate=False)]
    fill, _ = template._function(exprs, [], list(s))
    for _ in range(20):
        v = tuple(rng.randint(2, 40) for _ in s)
        vals, ok = fill(v)
        assert ok
        for e, got in zip(exprs, vals):
            assert got == int(e.subs(dict(zip(s, v)))), (e, v)
        for r in rels:
            _, ok = template._function([], [r], list(s))[0](v)
            assert ok == bool(r.subs(dict(zip(s, v)))), (r, v)


def test_an_expression_kiln_does_not_compute_is_refused():
    s = sympy.Symbol("s0", integer=True, positive=True)
    with pytest.raises(template._Unprintable):
        template._function([sympy.sqrt(s)], [], [s])
    with pytest.raises(template._Unprintable):
        template._function([s + sympy.Symbol("u0")], [], [s])


def test_stats_name_the_counters():
    st = kiln.stats()
    for k in ("templates", "template_instances", "template_mismatches", "direct_sizes"):
        assert k in st


def test_sizes_of_a_graph_without_kernels_are_plans():
    # every op an extern call (two matmuls): a new size builds nothing, so
    # after the lowering's first size each one is a plan, not a compile
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    cf = kiln.compile(lambda x: torch.mm(torch.mm(x, w1), w2), dynamic=True)
    for n in (3, 5, 7, 9):
        x = torch.randn(n, 8)
        torch.testing.assert_close(cf(x), x @ w1 @ w2)
    st = kiln.stats()
    assert st["templates"] == 1 and st["fallbacks"] == 0, st
    assert st["compiles"] == 1 and st["size_plans"] == 3, st


def test_an_input_returned_as_it_is_keeps_the_symbolic_lowering():
    # `m.to(m.dtype)` is m itself (CTRL returns its mask so): the lowered
    # graph returns that input, as eager does, and needs no AOT wrappers,
    # so its sizes still come from one symbolic lowering
    def f(x, m):
        m = m.to(torch.float32)
        return m, x * m
    cf = kiln.compile(f, dynamic=True)
    for n in (3, 5, 7, 9):
        x, m = torch.randn(n, 4), torch.randn(n, 4)
        got = cf(x, m)
        assert got[0] is m
        torch.testing.assert_close(got[1], x * m)
    st = kiln.stats()
    assert st["templates"] == 1 and st["template_failures"] == 0, st
    assert st["compiles"] == 1 and st["size_plans"] == 3, st


def test_a_size_threshold_in_the_c_core_takes_one_side_for_every_size():
    # t = x * y is read by three kernels: the C core stores it where it
    # reads two large tensors, and a tensor of symbolic size counts as
    # large at every size (kn_buf.sym), so sizes on both sides of the
    # threshold (numel 4096) share one parametric build
    def f(x, y):
        t = x * y
        return t.sum(0), t.amax(1), t.transpose(0, 1).contiguous()
    cf = kiln.compile(f, dynamic=True)
    for n in (3, 20, 100, 200, 7):
        x, y = torch.randn(n, 64), torch.randn(n, 64)
        for got, want in zip(cf(x, y), f(x, y)):
            torch.testing.assert_close(got, want)
    st = kiln.stats()
    assert st["parametric_builds"] == 1 and st["compiles"] == 1 and st["size_plans"] == 4, st


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_sizes_from_one_lowering():
    m = _layer().cuda()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in SHAPES:
            x = torch.randn(b, s, 32, device="cuda")
            torch.testing.assert_close(cm(x), m(x), atol=1e-4, rtol=1e-4)
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    assert st["templates"] == 1 and st["template_instances"] == 5, st
    assert st["parametric_builds"] >= 1 and st["size_plans"] >= 1, st   # (one cubin for several sizes)


_WARM = r"""
import json, sys, torch, kiln
def f(x, w):
    n = x.shape[0]
    return (x.view(n * 2, -1) @ w).relu().sum(0) + n
cf = kiln.compile(f, dynamic=True)
out = []
for n in map(int, sys.argv[1].split(",")):
    x, w = torch.randn(n, 8), torch.randn(4, 5)
    out.append(bool(torch.allclose(cf(x, w), f(x, w), atol=1e-5, rtol=1e-5)))
st = kiln.stats()
print(json.dumps({"equal": out, **{k: st[k] for k in ("templates", "template_cache_hits", "template_failures",
                                                     "fallbacks", "direct_sizes")}}))
"""


def test_a_new_shape_in_a_new_process_starts_warm(tmp_path):
    # the symbolic lowering is cached on disk by the symbolic graph: a new
    # process meeting a new shape fills it in without tracing it again
    import json
    import subprocess
    import sys
    env = {**__import__("os").environ, "KILN_CACHE_DIR": str(tmp_path), "KILN_DEBUG": "1"}

    def run(sizes):
        p = subprocess.run([sys.executable, "-c", _WARM, sizes], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])
    cold = run("4,6,10")
    assert all(cold["equal"]) and cold["templates"] == 1 and cold["template_cache_hits"] == 0, cold
    # (dynamic=True: every size symbolic from the first call) 6 takes the
    # static path with the cached lowering; 14 and 22, which the first
    # process never saw, go straight to the C core
    warm = run("6,14,22")
    assert all(warm["equal"]) and warm["template_cache_hits"] == 1, warm
    assert warm["fallbacks"] == 0 and warm["template_failures"] == 0 and warm["direct_sizes"] == 2, warm


def test_a_symbolic_lowering_is_one_plain_trace(monkeypatch):
    """The symbolic lowering takes the plain trace (no functionalization)
    where the graph writes nothing: its size arithmetic (operator.mul on
    SymInts) and outputs that share memory with each other (a value twice,
    a view of another output) do not send it to AOT export, which took
    2-3x as long (half of a first symbolic compile of GPT-2)."""
    import torch._functorch.aot_autograd as aa
    monkeypatch.setattr(aa, "aot_export_joint_simple", lambda *a, **k: pytest.fail("AOT export was called"))

    def f(x, y):
        a = torch.relu(x) + y
        b = a.view(x.shape[0] * x.shape[1])
        return a, b, a, a[1:].t(), (a * 2).sum(0)

    cf = kiln.compile(f, dynamic=True)
    for shape in ((4, 8), (5, 9), (6, 11)):
        x, y = torch.randn(shape), torch.randn(shape)
        got, want = cf(x, y), f(x, y)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
        assert got[0] is got[2]
        assert got[1].untyped_storage().data_ptr() == got[0].untyped_storage().data_ptr()
        got[0].add_(1)                      # the views see it, as eager's do
        torch.testing.assert_close(got[1], got[0].view(-1))
        torch.testing.assert_close(got[3], got[0][1:].t())
    st = kiln.stats()
    assert st["templates"] == 1 and st["fallbacks"] == 0, st



def test_a_lowering_without_symbols_has_no_probes():
    # (a recording whose capture specialised every size still reaches the
    # symbolic path: its parametric build has nothing to probe, not an error)
    from kiln import template
    t = object.__new__(template.Template)
    assert list(t.probes(())) == []


class _PoolBlock(torch.nn.Module):
    """PoolFormer's block in small: group norm, a padded average pool that
    leaves the padding out of its count, a 1x1-conv MLP."""

    def __init__(self, c=8):
        super().__init__()
        self.n1, self.n2 = torch.nn.GroupNorm(1, c), torch.nn.GroupNorm(1, c)
        self.pool = torch.nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.f1, self.f2 = torch.nn.Conv2d(c, 2 * c, 1), torch.nn.Conv2d(2 * c, c, 1)

    def forward(self, x):
        y = self.n1(x)
        x = x + (self.pool(y) - y)
        return x + self.f2(torch.nn.functional.gelu(self.f1(self.n2(x))))


def test_the_first_build_runs_under_its_own_fusion_as_a_reference():
    # a join the C core tries and refuses still interns expressions, which
    # numbers (and orders) the kernel's terms and statements; a reference
    # that says no skips the try.  The lowering's first size ran without a
    # reference and its probes with one, so their sources differed beyond
    # literals: no parametric build there, and another later (4 compiles)
    torch.manual_seed(0)
    m = torch.nn.Sequential(_PoolBlock(), _PoolBlock()).eval()
    cm = kiln.compile(m)
    with torch.no_grad():
        for b in (2, 3, 5, 2, 4, 6, 7, 8):
            x = torch.randn(b, 8, 7, 7)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["fallbacks"] == 0 and st["template_mismatches"] == 0, st
    assert st["compiles"] == 2 and st["parametric_builds"] == 1 and st["size_plans"] == 6, st
