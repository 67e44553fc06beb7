"""The backend contract: correct results through fallbacks, the disk cache,
the C compiler missing, corrupt cache entries and the dumps."""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import kiln
from kiln import _C, autotune, backends, config, errors, fold


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="kiln")


def test_backend_is_registered():
    assert "kiln" in torch._dynamo.list_backends()


def test_unknown_op_runs_through_aten_fallback():
    def f(x):
        v, i = torch.sort(x * 2, dim=-1)          # sort: extern
        return torch.special.i0(v) + i.float()    # i0: not lowered by kiln -> extern

    x = torch.randn(16, 33)
    backends.reset()
    out = compiled(f)(x)
    torch.testing.assert_close(out, f(x))
    stats = backends.compiled_graphs[-1]
    assert stats["fallbacks"] == 0 and stats["externs"] >= 2
    assert "aten.sort.default" in stats["extern_ops"]


def test_graph_with_mixed_dtypes_and_views():
    def f(a, b, idx):
        y = a.t().contiguous() * b[:, :1].to(torch.float64)
        return y[idx].sum(0), torch.cat([a, a * 2], 1).argmax(-1)

    a, b = torch.randn(8, 8), torch.randn(8, 5)
    idx = torch.tensor([0, 3, 7, 3])
    ka, kb = compiled(f)(a, b, idx)
    ea, eb = f(a, b, idx)
    torch.testing.assert_close(ka, ea)
    assert torch.equal(kb, eb)


def test_missing_compiler_warns_once_and_runs_eagerly(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cc", "/nonexistent/bin/cc")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "debug", False)
    backends.reset()

    def f(x):
        return torch.tanh(x) * 3 + 1

    x = torch.randn(10, 10)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = compiled(f)(x)
        out2 = compiled(lambda x: torch.sigmoid(x) - 1)(x)
    torch.testing.assert_close(out, f(x))
    torch.testing.assert_close(out2, torch.sigmoid(x) - 1)
    msgs = [str(m.message) for m in w if "C compiler" in str(m.message) or "C compilation" in str(m.message)]
    assert len(msgs) == 1, msgs
    assert "/nonexistent/bin/cc" in msgs[0]
    assert backends.compiled_graphs[-1]["fallbacks"] == 1


def test_missing_compiler_is_a_toolchain_error_naming_the_fix(tmp_path, monkeypatch):
    """No C compiler is the user's setup, not a kiln bug: a ToolchainError
    (a UserError) that says how to fix it; raised under debug."""
    monkeypatch.setattr(config, "cc", "/nonexistent/bin/cc")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    gm = torch.fx.symbolic_trace(lambda x: (torch.tanh(x) * 3,))
    with pytest.raises(errors.ToolchainError, match="install one .* CC environment variable or kiln.config.cc"):
        backends.kiln(gm, [torch.randn(4)])
    assert issubclass(errors.ToolchainError, errors.UserError)


def test_compiler_failures_are_typed_not_told_apart_by_message(tmp_path):
    """The C runtime raises a missing compiler as kiln._C.ToolchainMissing and a
    compiler that fails on the code as its base kiln._C.CompilerError."""
    from kiln import _C
    assert issubclass(_C.ToolchainMissing, _C.CompilerError) and issubclass(_C.CompilerError, RuntimeError)
    with pytest.raises(_C.ToolchainMissing):
        _C.build(["int kn_probe(void) { return 1; }"], str(tmp_path), "/nonexistent/bin/cc", "", "salt", 1)
    with pytest.raises(_C.CompilerError) as e:
        _C.build(["int kn_probe(void) { return 1 }"], str(tmp_path), "cc", "", "salt", 1)
    assert not isinstance(e.value, _C.ToolchainMissing)


def test_kiln_bug_in_the_inference_lowering_is_reported_not_hidden(monkeypatch):
    """A failure of kiln's inference lowering that is not torch's refusal of
    data-dependent shapes is a kiln bug: raised under debug, warned once
    otherwise (it used to be dropped silently for AOT autograd's path)."""
    def broken(*a, **k):
        raise RuntimeError("kiln bug in lowering")

    monkeypatch.setattr(kiln.trace, "_lower", broken)
    gm = torch.fx.symbolic_trace(lambda x: (x * 2 + 1,))
    x = torch.randn(3)
    with torch.no_grad():
        with pytest.raises(errors.InternalError, match="kiln bug in lowering"):
            backends.kiln(gm, [x])
        monkeypatch.setattr(config, "debug", False)
        errors.forget_warnings()
        with pytest.warns(RuntimeWarning, match="kiln internal error .*kiln bug in lowering"):
            fn = backends.kiln(gm, [x])
        torch.testing.assert_close(fn(x)[0], x * 2 + 1)   # AOT autograd's path still compiles it


def test_one_classifier_for_every_compile_path(monkeypatch):
    """errors.classify sorts what a compile path raised into the kinds of
    failure, and kiln(), compile_many and compile_graph all act on it through
    errors.fall_back: the same bug is an internal error on every path."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    kinds = [(errors.Unsupported("op"), errors.UNSUPPORTED), (kiln.fx_bridge.Unsupported("op"), errors.UNSUPPORTED),
             (_C.Unsupported("op"), errors.UNSUPPORTED),
             (DynamicOutputShapeException(torch.ops.aten.nonzero.default), errors.UNSUPPORTED),
             (errors.ToolchainError("no cc"), errors.ENVIRONMENT), (_C.CompilerTimeout("slow"), errors.ENVIRONMENT),
             (_C.ToolchainMissing("none"), errors.ENVIRONMENT), (_C.CompilerError("bad C"), errors.REJECTED_C),
             (RuntimeError("bug"), errors.INTERNAL), (AssertionError("bug"), errors.INTERNAL)]
    for e, kind in kinds:
        assert errors.classify(e) == kind, (e, kind)

    def broken(*a, **k):
        raise RuntimeError("kiln bug in describe")

    monkeypatch.setattr(kiln.pipeline, "_prepare", broken)
    monkeypatch.setattr(kiln.pipeline, "_describe", broken)
    monkeypatch.setattr(config, "debug", True)
    gm = torch.fx.symbolic_trace(lambda x: (x.sin() * 3,))
    x = torch.randn(5)
    with torch.no_grad():
        with pytest.raises(errors.InternalError, match="compile_many.*kiln bug in describe"):
            backends.compile_many([(gm, [x])])
        with pytest.raises(errors.InternalError, match="kiln.pipeline.*kiln bug in describe"):
            kiln.pipeline.compile_graph(gm, [x])
        monkeypatch.setattr(config, "debug", False)
        errors.forget_warnings()
        with pytest.warns(RuntimeWarning, match="kiln internal error .*compile_many.*kiln bug in describe"):
            [fn] = backends.compile_many([(gm, [x])])
        torch.testing.assert_close(fn(x)[0], x.sin() * 3)
        assert "kiln bug in describe" in fn.kiln_stats["reason"]


def test_data_dependent_errors_are_classified_in_one_place():
    """The capture (by type, from C) and the backend (kiln.trace.data_dependent)
    share one classification."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    assert kiln._capture.DataDependent is kiln.trace.DATA_DEPENDENT
    assert kiln.trace.data_dependent(DynamicOutputShapeException(torch.ops.aten.nonzero.default))
    assert not kiln.trace.data_dependent(RuntimeError("kiln bug"))


def test_pipeline_phase_hooks_see_each_phase_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    seen = []

    class Hook:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            seen.append(self.name)

        def __exit__(self, *exc):
            seen.append("/" + self.name)

    kiln.pipeline.add_phase_hook(Hook)
    try:
        gm = torch.fx.symbolic_trace(lambda x: (torch.tanh(x) * 3,))
        x = torch.randn(4)
        with torch.no_grad():
            fn = backends.kiln(gm, [x])
            fn(x)
            fn(x)
    finally:
        kiln.pipeline.remove_phase_hook(Hook)
    names = [n for n in seen if not n.startswith("/")]
    assert names[0] == "backend" and "lower" in names
    order = [n for n in names if n in ("describe", "c_core", "cc", "load", "first_run")]
    assert order == ["describe", "c_core", "cc", "load", "first_run"], seen   # one first run, not two
    assert seen[-1] == "/first_run" and seen.index("/backend") < seen.index("first_run")


def test_build_hooks_see_the_programs_before_their_kernels_are_compiled(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    progs = []
    hook = kiln.pipeline.add_build_hook(progs.extend)
    try:
        gm = torch.fx.symbolic_trace(lambda x: (torch.tanh(x) * 3 + 1,))
        with torch.no_grad():
            backends.kiln(gm, [torch.randn(6)])
    finally:
        kiln.pipeline.build_hooks.remove(hook)
    assert len(progs) == 1 and progs[0].num_kernels >= 1 and "kn_" in progs[0].source


def test_compile_many_takes_the_inference_front_end_of_kiln(monkeypatch):
    """compile_many (the OpInfo sweep's path) lowers an inference graph as
    kiln() does (kiln.trace._lower: plain trace, constant folding)."""
    lowered = []
    real = kiln.trace._lower
    monkeypatch.setattr(kiln.trace, "_lower", lambda *a, **k: lowered.append(1) or real(*a, **k))
    from torch.fx.experimental.proxy_tensor import make_fx
    x = torch.randn(4, 5)
    gm = make_fx(lambda x: (torch.softmax(x, -1) * 2,))(x)
    with torch.no_grad():
        fn, = backends.compile_many([(gm, [x])])
        torch.testing.assert_close(fn(x)[0], torch.softmax(x, -1) * 2)
    assert lowered == [1] and fn.kiln_stats["fallbacks"] == 0


def _source_unit():
    return _C.prelude() + "\nvoid probe_k0(void *const *B) { float *b = (float *)B[0]; b[0] = 42.0f; }\n"


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    args = ([_source_unit()], str(tmp_path), config.cc, config.cflags, "test-salt", 1)
    so, cached = _C.build(*args)
    assert not cached
    so2, cached2 = _C.build(*args)
    assert so2 == so and cached2
    # truncate the library: the entry must be detected and rebuilt
    with open(so, "r+b") as f:
        f.truncate(100)
    so3, cached3 = _C.build(*args)
    assert so3 == so and not cached3
    _C.Library(so3)  # loads
    # garbage in place of the library, same size as before
    size = os.path.getsize(so)
    with open(so, "wb") as f:
        f.write(b"\0" * size)
    assert _C.build(*args)[1] is False
    # a missing stamp is also a miss
    os.remove(so[:-3] + ".ok")
    assert _C.build(*args)[1] is False


def test_lowered_graph_cache_is_used_and_survives_corruption(tmp_path, monkeypatch):
    """An inference graph's ATen lowering is cached on disk; a damaged entry is
    lowered again, never trusted."""
    import glob

    monkeypatch.setattr(config, "cache_dir", str(tmp_path))

    def f(x, w):
        return torch.softmax(x @ w, dim=-1) * 2

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    want = f(x, w)
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(f)(x, w), want)
    entries = glob.glob(os.path.join(str(tmp_path), "aten", "*", "*.pkl"))
    assert len(entries) == 1
    traced = []
    real_lower = kiln.trace._lower
    monkeypatch.setattr(kiln.trace, "_lower", lambda *a, **k: traced.append(1) or real_lower(*a, **k))
    kiln.reset()
    with torch.no_grad():
        torch.testing.assert_close(kiln.compile(f)(x, w), want)
    assert traced == []   # the second compile read the cached lowering instead of tracing
    for damage in (b"", b"not a pickle", b"\x80\x04garbage"):
        with open(entries[0], "wb") as fh:
            fh.write(damage)
        kiln.reset()
        with torch.no_grad():
            torch.testing.assert_close(kiln.compile(f)(x, w), want)
        assert os.path.getsize(entries[0]) > 100   # rewritten
    assert len(traced) == 3   # each damaged entry was traced again


def test_random_ops_stay_random_cold_and_warm(tmp_path, monkeypatch):
    """A random op in an inference graph draws new values on every call, on
    a cold compile and on a warm one from the lowered-graph cache: lowering
    never freezes it into a constant."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))

    def f(x):
        return x + torch.rand(64, device=x.device) * torch.randn_like(x)

    x = torch.zeros(64)
    for _ in range(2):   # cold, then warm from the disk cache
        kiln.reset()
        g = kiln.compile(f)
        with torch.no_grad():
            a, b = g(x), g(x)
        assert not torch.equal(a, b)
        assert a.abs().max() < 10 and a.std() > 0.05


def test_input_independent_values_are_folded_at_compile_time():
    """Values that depend on no input are computed once when compiling when
    that saves work per call (a reduction or scan in them, or an extern
    taking them); index arithmetic stays in the kernels, random ops stay
    random, and the compiled function computes what eager does."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        m = torch.ones(8, 8).tril().cumsum(0)       # scan: folded
        p = torch.arange(8) * 2                      # index arithmetic: kept
        return x @ m + p, x + torch.rand(8)

    x = torch.randn(4, 8)
    gm = fold._fold_constants(make_fx(f)(x))
    ops = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert not any("cumsum" in o or "tril" in o or "ones" in o for o in ops), ops
    assert any("arange" in o for o in ops) and any("rand" in o for o in ops), ops
    with torch.no_grad():
        got = kiln.compile(f)(x)
    torch.testing.assert_close(got[0], f(x)[0])

    def big(x):   # 64 MiB of input-independent values: left to run per call
        return x @ torch.ones(4096, 4096).cumsum(0)[:8, :8]

    gm = fold._fold_constants(make_fx(big)(torch.randn(4, 8)))
    assert any("cumsum" in str(n.target) for n in gm.graph.nodes if n.op == "call_function")


def test_cudnn_batch_norm_decomposes_to_inference_batch_norm():
    """Traced on a GPU without the Python dispatcher, batch_norm arrives as
    cudnn_batch_norm or native_batch_norm: kiln's table turns it into the same pointwise work as
    eager's inference batch norm (training keeps cuDNN's kernel)."""
    x = torch.randn(4, 3, 5, 5)
    w, b, rm, rv = torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5
    table = backends.decompositions()
    out = table[torch.ops.aten.cudnn_batch_norm.default](x, w, b, rm, rv, False, 0.1, 1e-5)
    assert len(out) == 4 and out[3].dtype == torch.uint8
    torch.testing.assert_close(out[0], torch.nn.functional.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5))
    assert table[torch.ops.aten.cudnn_batch_norm.default](x, w, b, rm, rv, True, 0.1, 1e-5) is NotImplemented
    out = table[torch.ops.aten.native_batch_norm.default](x, w, b, rm, rv, False, 0.1, 1e-5)
    torch.testing.assert_close(out[0], torch.nn.functional.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5))
    assert table[torch.ops.aten.native_batch_norm.default](x, w, b, rm, rv, True, 0.1, 1e-5) is NotImplemented


def test_a_failed_tuning_run_falls_back_to_codegen_launch_sizes(monkeypatch):
    """max-autotune: if timing launch sizes fails on the first run, the call
    still returns its result (codegen's launch sizes, one warning), and later
    calls take the plain path."""
    import kiln.cuda

    calls = []

    class Program:
        def tune_next_run(self, reps, kernels):
            calls.append(("tune", reps, kernels))

        def cuda_launch_sizes(self):
            return [("kn_u0", 5, 10, 128, 1)]

        def set_cuda_launch_size(self, k, blocks):
            calls.append(("set", k, blocks))

    def boom(program, device):
        raise RuntimeError("no events")

    cg = backends.CompiledGraph(Program(), (), True, {}, None)
    monkeypatch.setattr(backends.CompiledGraph, "run", lambda self, *a: 42)
    monkeypatch.setattr(kiln.cuda, "prepare_tuning", boom)
    cg.run = autotune._tuning_first_run(cg, torch.device("cuda", 0))
    errors.forget_warnings()
    with pytest.warns(RuntimeWarning, match="tuning failed"):
        assert cg.run() == 42
    assert ("tune", 0, []) in calls and ("set", 0, 10) in calls
    assert "run" not in cg.__dict__ and cg.run() == 42


def test_second_process_does_no_c_compilation(tmp_path):
    script = textwrap.dedent("""
        import torch, kiln
        from kiln import backends
        def f(x, w):
            return torch.softmax(x @ w, -1).sum(0)
        torch.manual_seed(0)
        x, w = torch.randn(32, 16), torch.randn(16, 64)
        out = torch.compile(f, backend="kiln")(x, w)
        torch.testing.assert_close(out, f(x, w))
        print("COUNTS", backends.build_counts["compiled"], backends.build_counts["cached"])
    """)
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path))
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("COUNTS")][0]
        outs.append(tuple(int(v) for v in line.split()[1:]))
    assert outs[0][0] >= 1 and outs[0][1] == 0
    assert outs[1] == (0, outs[0][0])


def test_dump_loops_and_code(capsys, monkeypatch):
    monkeypatch.setattr(config, "dump", {"loops", "code"})
    compiled(lambda x: x.softmax(-1))(torch.randn(4, 7))
    out = capsys.readouterr().err   # (dumps go to stderr, through kiln/logs.py)
    assert "kernel 0: outer [4] inner [7]" in out
    assert "void kn_k0(void *const *B)" in out and "#pragma omp simd" in out
    assert "generated code:" in out


def test_compile_api_and_errors():
    m = torch.nn.Linear(4, 3)
    fast = kiln.compile(m)
    x = torch.randn(2, 4)
    torch.testing.assert_close(fast(x), m(x))
    with pytest.raises(ValueError, match="unknown backend"):
        kiln.compile(m, backend="nope")
    with pytest.raises(TypeError, match="function or torch.nn.Module"):
        kiln.compile(42)


def test_lowered_ops_table():
    ops = kiln.lowered_ops()
    for name in ("aten.add.Tensor", "aten.sum.dim_IntList", "aten.var_mean.correction", "aten.cat.default",
                 "aten.embedding.default", "aten.cumsum.default", "aten.where.self"):
        assert name in ops


def test_large_reductions_split_across_threads():
    # few outer points, a big reduction space: the reduction loop itself runs
    # in parallel (generated as `omp parallel for simd ... reduction(...)`)
    x = torch.randn(3, 200_000, generator=torch.Generator().manual_seed(0))
    x[1, 777] = float("nan")

    def f(x):
        return x.sum(-1), x.amax(-1), (x > 4).any(-1), x.abs().mean()

    backends.reset()
    out = compiled(f)(x)
    ref = f(x)
    # a float32 sum of 200k terms in another order differs by up to
    # ~eps * sum|x| (not relative to the sum, which may be near zero)
    scale = x.abs().nan_to_num().sum(-1)
    for a, b, s in zip(out, ref, (scale, None, None, None)):
        atol = 1e-3 if s is None else float(2e-6 * s.max())
        torch.testing.assert_close(a, b, rtol=1e-4, atol=atol, equal_nan=True)


def test_large_graph_compiles_in_parallel_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "chunk_kernels", 1)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))

    def f(x, w):
        a = x.softmax(-1)
        b = a @ w
        return torch.tanh(b).sum(-1), b.cumsum(0)

    x, w = torch.randn(8, 16), torch.randn(16, 4)
    backends.reset()
    out = compiled(f)(x, w)
    ref = f(x, w)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    assert backends.compiled_graphs[-1]["kernels"] >= 3
    sources = [p.name for p in tmp_path.rglob("*.c")]
    assert any(n.count(".") == 2 for n in sources), sources  # <key>.<i>.c: a second unit


@pytest.mark.skipif(not kiln.runtime._packed_linear_ops()[0], reason="this torch has no oneDNN linear")
def test_packed_linear_follows_weight_updates():
    """Linear layers run on oneDNN with a packed copy of the weight; changing
    the weight in place — through .data too, which bumps no version counter —
    must be seen by the next call."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU(), torch.nn.Linear(32, 8, bias=False)).eval()
    x = torch.randn(16, 64)
    backends.reset()
    _C.set_linear_mode(1)  # the packed path, whatever this CPU's timings say
    try:
        check_weight_updates(m, x)
    finally:
        _C.set_linear_mode(-1)


@pytest.mark.skipif(not kiln.runtime._packed_linear_ops()[0], reason="this torch has no oneDNN linear")
def test_packed_weights_are_shared_by_the_sizes_of_a_graph():
    """Each size of a symbolic graph is its own program; they share one
    packed copy of a weight (per bucket of row counts) instead of packing
    it again at every size, and a weight changed in place is still seen at
    every size (the sweep of issue 17 packed every weight at every size)."""
    from kiln import fx_bridge
    reorder, linear = kiln.runtime._packed_linear_ops()
    packs = []

    def counting(w, rows):
        packs.append(rows)
        return reorder(w, rows)

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.GELU()).eval()
    _C.set_runtime(torch.empty_strided, torch.empty, torch.as_strided, fx_bridge.DTYPES, torch.uint8, fx_bridge.Ref,
                   counting, linear)
    _C.set_linear_mode(1)
    try:
        cm = kiln.compile(m, dynamic=True)
        with torch.no_grad():
            for n in (20, 24, 30, 17, 31):            # one bucket of rows (17..32)
                x = torch.randn(n, 64)
                torch.testing.assert_close(cm(x), m(x))
            assert len(packs) == 1, packs
            m[0].weight.data.mul_(-1.5)               # no version bump
            for n in (24, 20, 19):                    # two sizes built, one new
                x = torch.randn(n, 64)
                torch.testing.assert_close(cm(x), m(x))
        assert kiln.stats()["size_plans"] >= 3, kiln.stats()
    finally:
        _C.set_linear_mode(-1)
        kiln.runtime.wire()


def test_linear_choice_by_timing_matches_eager():
    m = torch.nn.Linear(48, 24).eval()
    x = torch.randn(32, 48)
    backends.reset()
    with torch.no_grad():
        fast = compiled(m)
        for _ in range(2):
            torch.testing.assert_close(fast(x), m(x))


def check_weight_updates(m, x):
    with torch.no_grad():
        fast = compiled(m)
        torch.testing.assert_close(fast(x), m(x))
        assert any("packed" in op for op in backends.compiled_graphs[-1]["extern_ops"])
        m[0].weight.data.copy_(torch.randn(32, 64))      # no version bump
        torch.testing.assert_close(fast(x), m(x))
        m[2].weight.mul_(-2.0)                            # in-place under no_grad
        torch.testing.assert_close(fast(x), m(x))
        m[0].weight.data[3, 5] += 1.0                     # one element
        torch.testing.assert_close(fast(x), m(x))


def test_packed_linear_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(config, "packed_linear", False)
    m = torch.nn.Linear(16, 4).eval()
    x = torch.randn(3, 16)
    backends.reset()
    with torch.no_grad():
        torch.testing.assert_close(compiled(m)(x), m(x))
    assert not any("packed" in op for op in backends.compiled_graphs[-1]["extern_ops"])


def test_packed_linear_with_weight_stored_in_by_out():
    """GPT-2's Conv1D computes x @ W + b with W stored [in, out]."""
    _C.set_linear_mode(1)
    try:
        _in_by_out()
    finally:
        _C.set_linear_mode(-1)


def _in_by_out():
    torch.manual_seed(0)
    w, b = torch.randn(24, 40), torch.randn(40)

    def f(x, w, b):
        return torch.addmm(b, x, w).relu(), x @ w

    x = torch.randn(10, 24)
    backends.reset()
    fast = compiled(f)
    for a, e in zip(fast(x, w, b), f(x, w, b)):
        torch.testing.assert_close(a, e)
    if kiln.runtime._packed_linear_ops()[0]:
        assert sum("packed" in op for op in backends.compiled_graphs[-1]["extern_ops"]) == 2
    w.data[0, 0] += 3.0
    for a, e in zip(fast(x, w, b), f(x, w, b)):
        torch.testing.assert_close(a, e)


def test_training_gradients_match_eager():
    """Forward and backward graphs take the same path through kiln."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)
    m(x).square().mean().backward()
    ref = [p.grad.clone() for p in m.parameters()]
    for p in m.parameters():
        p.grad = None
    backends.reset()
    compiled(m)(x).square().mean().backward()
    for p, g in zip(m.parameters(), ref):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
    graphs = backends.compiled_graphs
    assert len(graphs) == 2 and all(g["fallbacks"] == 0 and g["kernels"] >= 1 for g in graphs)


def test_slice_and_select_scatter_are_lowered():
    def f(x, y, z):
        return torch.slice_scatter(x, y, 1, 1, 5, 2) + torch.select_scatter(x, z, 0, -2)

    x, y, z = torch.randn(5, 6), torch.randn(5, 2), torch.randn(6)
    backends.reset()
    torch.testing.assert_close(compiled(f)(x, y, z), f(x, y, z))
    assert backends.compiled_graphs[-1]["externs"] == 0


def test_linear_operand_that_changes_every_call_stays_correct():
    """mm(x, w.t()) where w is a different tensor each call (an activation,
    not a weight): results follow every call's data."""
    def f(x, w):
        return torch.mm(x, w.t()) + 1

    backends.reset()
    fast = compiled(f)
    for i in range(5):
        x, w = torch.randn(16, 32), torch.randn(24, 32)
        torch.testing.assert_close(fast(x, w), f(x, w))


def test_attention_kept_whole_runs_torchs_own_sdpa():
    """Inference graphs on a GPU keep scaled_dot_product_attention whole
    (kiln::attention, an extern calling torch's SDPA) instead of the kernel
    tracing picks on fake tensors; the rewrite works on a copy and matches
    eager (checked here on the CPU, where the rewrite is not applied by default)."""
    import torch.nn.functional as F
    from torch._functorch.aot_autograd import aot_export_joint_simple
    from kiln import backends, ops

    def f(q, k, v, m):
        return ((F.scaled_dot_product_attention(q, k, v, attn_mask=m) * 2).transpose(1, 2).reshape(2, 16, 64),)

    q, m = torch.randn(2, 4, 16, 16), torch.randn(2, 1, 1, 16)
    gm = torch.fx.symbolic_trace(f)
    before = gm.code
    g2 = ops.keep_attention_whole(gm)
    assert gm.code == before and g2 is not gm
    aten = aot_export_joint_simple(g2, [q, q, q, m], trace_joint=False, decompositions=backends.decompositions())
    cg = backends.compile_graph(aten, [q, q, q, m])
    assert cg.kiln_stats["extern_ops"] == ["kiln.attention.default"]
    out = cg.run(q, q, q, m)
    torch.testing.assert_close(out if isinstance(out, torch.Tensor) else out[0], f(q, q, q, m)[0])


def test_recorded_attention_fakes_the_fused_layout_only_where_the_lowering_takes_it():
    """On a GPU the recording fakes an inference graph's attention as the
    op the graph is lowered to (kiln::attention: the fused kernels' layout)
    instead of torch's fake, which takes the math path there; a call the
    fused kernels would not take as it is, or one needing grad, keeps
    torch's own fake (checked with fake CUDA tensors, no GPU needed)."""
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from kiln import _capture, ops

    assert _capture.fake_overrides[F.scaled_dot_product_attention] is ops.recorded_attention
    with FakeTensorMode():
        q = torch.empty(2, 4, 8, 16, device="cuda", dtype=torch.bfloat16)
        k = torch.empty(2, 4, 10, 16, device="cuda", dtype=torch.bfloat16)
        v = torch.empty(2, 4, 10, 32, device="cuda", dtype=torch.bfloat16)
        for m in (None, torch.empty(2, 1, 1, 10, dtype=torch.bool, device="cuda"),
                  torch.empty(8, 10, dtype=torch.bfloat16, device="cuda")):
            got = ops.recorded_attention(q, k, v, m)
            want = F.scaled_dot_product_attention(q, k, v, m)
            assert got.shape == want.shape == (2, 4, 8, 32) and got.dtype == want.dtype
            assert got.stride() == (1024, 32, 128, 1)   # [B, S, H, D] seen as [B, H, S, D]
        def e(*shape):   # (views of CUDA fakes need a CUDA build of torch)
            return torch.empty(*shape, device="cuda", dtype=torch.bfloat16)

        refused = [
            (torch.empty(2, 4, 8, 16), torch.empty(2, 4, 10, 16), torch.empty(2, 4, 10, 32), None, {}),   # CPU
            (e(4, 8, 16), e(4, 10, 16), e(4, 10, 32), None, {}),              # 3-d
            (q, k, v, torch.empty(2, 1, 1, 10, device="cuda"), {}),           # a float32 mask, bf16 q
            (q, k, v, torch.empty(2, 1, 1, 10, dtype=torch.bool, device="cuda"), {"is_causal": True}),
            (q, e(2, 2, 10, 16), e(2, 2, 10, 32), None, {"enable_gqa": True}),   # GQA
            (q, e(2, 2, 10, 16), e(2, 2, 10, 32), None, {}),                  # heads differ: torch raises
            (q, k, v, torch.empty(3, 1, 1, 10, dtype=torch.bool, device="cuda"), {}),   # mask does not broadcast
        ]
        for a, b, c, m, kw in refused:
            assert ops.recorded_attention(a, b, c, m, **kw) is NotImplemented
        qg = e(2, 4, 8, 16).requires_grad_()
        assert ops.recorded_attention(qg, k, v) is NotImplemented
        with torch.no_grad():
            assert ops.recorded_attention(qg, k, v) is not NotImplemented
        # under autocast the inputs are cast first: torch's fake says to what
        torch.set_autocast_enabled("cuda", True)
        try:
            assert ops.recorded_attention(q, k, v) is NotImplemented
        finally:
            torch.set_autocast_enabled("cuda", False)


@pytest.mark.parametrize("fast", [True, False])
def test_lowering_paths_agree_and_mutation_takes_functionalization(monkeypatch, tmp_path, fast):
    """Inference graphs lower by one plain trace when they are functional
    enough (in-place ops on temporaries become functional ones), else by AOT
    export with functionalization; both give eager's results, and a graph
    that mutates its input or returns an alias of it still behaves as eager."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "fast_lowering", fast)
    import torch._functorch.aot_autograd as aa

    exported = []
    real = aa.aot_export_joint_simple
    monkeypatch.setattr(aa, "aot_export_joint_simple", lambda *a, **k: exported.append(1) or real(*a, **k))

    def temp_inplace(x):
        h = x * 2
        h.relu_()
        h += 1
        return h.sum(-1), torch.nn.functional.relu(x + 3, inplace=True)

    def view_read_after(x):
        h = x * 2
        v = h.view(-1)
        h.add_(1)          # v sees this
        return v + 0

    def mutates_input(x):
        x.mul_(2)
        return x + 1

    def returns_alias(x):
        return x.t(), x * 2

    x = torch.randn(6, 5)
    for f, plain in ((temp_inplace, True), (view_read_after, False), (mutates_input, False), (returns_alias, False)):
        kiln.reset()
        exported.clear()
        a, b = x.clone(), x.clone()
        with torch.no_grad():
            want = f(a)
            got = kiln.compile(f)(b)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(b, a)   # the input ends as eager leaves it
        if fast and plain:
            assert exported == [], f.__name__
        elif f is not returns_alias:
            assert exported, f.__name__


# ------------------------------------------------- a deliberately broken lowering
@pytest.fixture
def broken_codegen():
    _C.test_fault("bad_expr")   # every addition kiln renders becomes invalid C
    kiln.reset()
    yield
    _C.test_fault(None)
    kiln.reset()


def test_broken_lowering_is_an_internal_error_naming_graph_and_stage_under_debug(broken_codegen, monkeypatch):
    """Generated C the compiler rejects is kiln's bug, not the user's: under
    KILN_DEBUG it raises kiln's InternalError saying which graph and which
    stage."""
    monkeypatch.setattr(config, "debug", True)
    x = torch.randn(8, 5)
    with pytest.raises(errors.InternalError) as e:
        kiln.compile(lambda a: a * 2 + 1)(x)
    msg = str(e.value)
    assert "an ATen graph of" in msg and "stage cc/load" in msg and "rejected kiln's code" in msg, msg
    assert "kn_broken_on_purpose" in msg   # the compiler's own message comes with it


def test_broken_lowering_warns_once_and_runs_eagerly_without_debug(broken_codegen, monkeypatch):
    monkeypatch.setattr(config, "debug", False)
    errors.forget_warnings()
    f = lambda a, b: (a + b).sin() * 3 + 1  # noqa: E731
    cf = kiln.compile(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            a, b = torch.randn(6, 7), torch.randn(6, 7)
            torch.testing.assert_close(cf(a, b), f(a, b))
    internal = [w for w in caught if "kiln internal error" in str(w.message)]
    assert len(internal) == 1, [str(w.message)[:200] for w in caught]
    assert "rejected kiln's code" in str(internal[0].message)


def test_a_compiler_past_its_time_limit_is_no_internal_error():
    assert issubclass(_C.CompilerTimeout, _C.CompilerError)
    assert not issubclass(_C.CompilerTimeout, errors.InternalError)
