"""Issue 13, classes 3 and 9 and the native build's robustness: kiln's kernels
raise where eager raises (an index out of range, an integer division by
zero) instead of clamping or returning 0; scalar ops give eager's answers on
NaN and signed zeros; a hung or failing C compiler, or a full disk, costs the
user neither their process nor stray files in the cache."""
import glob
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
import torch
import torch.nn.functional as F

import kiln
from kiln import _C, backends

W = torch.randn(10, 3)
X3 = torch.randn(3, 4, 10)

# name -> (fn(index tensor), whether eager wraps legal negative indices)
INDEX_OPS = {
    "embedding": (lambda i: F.embedding(i, W) * 2, False),
    "index_select": (lambda i: torch.index_select(W, 0, i) + 1, False),
    "index_select_dim1": (lambda i: torch.index_select(W.t(), 1, i) + 1, False),
    "gather": (lambda i: torch.gather(W, 0, i.view(-1, 1).expand(-1, 3)) + 1, False),
    "index": (lambda i: W[i] + 1, True),
    "index_inner_dim": (lambda i: X3[:, :, i] * 3, True),
    "index_two_tensors": (lambda i: X3[i.clamp(0, 2), :, i] - 1, True),
}
ENTRIES = {
    "kiln.compile": kiln.compile,
    "torch.compile": lambda f: torch.compile(f, backend="kiln"),
}


pytestmark = pytest.mark.usefixtures("fresh_compilers")


def _eager(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _ran_kernels():
    return any(g.get("kernels") for g in backends.compiled_graphs)


def _check(cf, fn, *args, exact=True):
    want, err = _eager(fn, *args)
    if err is None:
        got = cf(*args)
        tol = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-4, "atol": 1e-4}
        torch.testing.assert_close(got, want, equal_nan=True, **tol)
    else:
        with pytest.raises(type(err)) as info:
            cf(*args)
        assert str(info.value) == str(err)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("op", sorted(INDEX_OPS))
def test_out_of_range_indices_raise_as_eager(op, entry):
    fn, wraps = INDEX_OPS[op]
    cf = ENTRIES[entry](fn)
    good = torch.tensor([1, 0, 9])
    _check(cf, fn, good)
    assert _ran_kernels(), "the index op did not run in a kiln kernel"
    for bad in (12, 10, 10**9, -11, -20, -10**9):
        _check(cf, fn, torch.tensor([1, bad, 2]))
        _check(cf, fn, good)   # the error is per call: the next call is fine
    # legal negatives wrap where eager wraps them, and raise where it does not
    for neg in (-1, -3, -10):
        _check(cf, fn, torch.tensor([neg, 2]))
    if op != "gather":
        # (eager's gather with an expanded int32 index reads it as int64 in
        # torch 2.13: [5, -3] gathers row 5 twice, where the same index
        # materialised raises; kiln raises, as eager's own check does)
        _check(cf, fn, torch.tensor([5, -3], dtype=torch.int32))


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_index_errors_raise_from_a_parallel_kernel(entry):
    # big enough for the OpenMP-parallel loop nest: the record is race-safe
    w = torch.randn(50, 4096)
    fn = lambda i: F.embedding(i, w).relu()  # noqa: E731
    cf = ENTRIES[entry](fn)
    ids = torch.randint(0, 50, (64,))
    _check(cf, fn, ids)
    bad = ids.clone()
    bad[::7] = 50
    _check(cf, fn, bad)
    _check(cf, fn, ids)


@pytest.mark.parametrize("reduce", [False, True])
def test_per_element_index_checks_in_vectorised_parallel_loops(reduce):
    # indices that vary along the inner loop: checked without a branch
    # (an OR-reduced flag and a max-reduced bad value per loop)
    x = torch.randn(256, 512)
    fn = (lambda i: torch.gather(x, 1, i).sum(-1)) if reduce else (lambda i: torch.gather(x, 1, i) * 2)  # noqa: E731
    cf = kiln.compile(fn)
    idx = torch.randint(0, 512, (256, 512))
    _check(cf, fn, idx, exact=not reduce)
    for bad in (512, -1, 10**12):
        b = idx.clone()
        b[200, 300] = bad
        _check(cf, fn, b)
    _check(cf, fn, idx, exact=not reduce)


INT_DIV_OPS = {
    "floordiv": lambda a, b: a // b,
    "remainder_op": lambda a, b: a % b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "floordiv_scalar": lambda a, b: a // 0 + b,
    "fmod_scalar": lambda a, b: torch.fmod(a, 0) + b,
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
@pytest.mark.parametrize("op", sorted(INT_DIV_OPS))
def test_integer_division_by_zero_raises_and_valid_division_matches(op, dtype, entry):
    fn = INT_DIV_OPS[op]
    cf = ENTRIES[entry](fn)
    lo = 0 if dtype == torch.uint8 else -9
    a = torch.arange(lo, lo + 19).to(dtype)
    b = torch.tensor([3, -4, 7, -1, 2, 5, -7, 1, 9, -2, 4, 6, -3, 8, -5, 2, 3, 1, -6]).to(dtype)
    if dtype == torch.uint8:
        b = b.abs().clamp(min=1)
    if "scalar" not in op:
        _check(cf, fn, a, b)     # negative operands: Python's rounding, as eager
    z = b.clone()
    z[4] = 0
    _check(cf, fn, a, z)
    if "scalar" not in op:
        _check(cf, fn, a, b)


def test_float_division_by_zero_still_gives_inf_and_nan():
    fn = lambda a, b: (a // b, a % b, torch.fmod(a, b), a / b)  # noqa: E731
    a = torch.tensor([1.0, -1.0, 0.0, 2.5])
    b = torch.zeros(4)
    got = kiln.compile(fn)(a, b)
    for g, w in zip(got, fn(a, b)):
        torch.testing.assert_close(g, w, equal_nan=True)


def test_sign_of_nan_and_signed_zero_fmax_fmin_match_eager():
    def fn(x, a, b):
        r = torch.rsqrt(x)      # NaN for negative integers
        return torch.sign(r), torch.sgn(r), torch.signbit(r), torch.sign(a), torch.fmax(a, b), torch.fmin(a, b)
    x = torch.tensor([-4, 4, 0, -1, 9])
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([0.0, -0.0, nan, 1.0, -inf, nan, -0.0])
    b = torch.tensor([-0.0, 0.0, 2.0, nan, 0.0, nan, -0.0])
    for dt in (torch.float32, torch.float64):
        args = (x, a.to(dt), b.to(dt))
        got = kiln.compile(fn)(*args)
        for g, w in zip(got, fn(*args)):
            assert torch.equal(g.isnan(), w.isnan()) if g.is_floating_point() else True
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
            if g.is_floating_point():
                assert torch.equal(torch.signbit(g), torch.signbit(w)), (g, w)


# ---------------------------------------------------------------- CUDA renderer
@pytest.fixture
def emulate(monkeypatch):
    monkeypatch.setattr(kiln.config, "cuda_emulate", True)
    # raise at the call that failed, as the CPU does (the async default is tested apart)
    monkeypatch.setattr(kiln.config, "cuda_index_errors", "sync")
    kiln.reset()
    yield
    kiln.reset()


@pytest.mark.parametrize("op", ["embedding", "gather", "index", "index_inner_dim", "index_select"])
def test_out_of_range_indices_raise_on_the_cuda_emulator(emulate, op):
    fn, _ = INDEX_OPS[op]
    cf = kiln.compile(fn)
    _check(cf, fn, torch.tensor([1, 0, 9]))
    assert any(g.get("kernels") for g in backends.compiled_graphs)
    for bad in (12, 10**9, -20, -3):
        _check(cf, fn, torch.tensor([1, bad, 2]))
    _check(cf, fn, torch.tensor([3, -1, 4]) if INDEX_OPS[op][1] else torch.tensor([3, 4]))


def test_row_kernel_with_an_embedding_checks_indices_on_the_cuda_emulator(emulate):
    w = torch.randn(20, 64)
    fn = lambda i: torch.softmax(F.embedding(i, w), -1)  # noqa: E731
    cf = kiln.compile(fn)
    ids = torch.tensor([[1, 2, 19], [0, 5, 7]])
    _check(cf, fn, ids, exact=False)
    ids[1, 2] = 20
    _check(cf, fn, ids)


def test_cuda_kernels_that_check_indices_take_the_error_record_and_compile():
    codegen = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "codegen")
    if codegen not in sys.path:   # (also when tests/codegen is not collected in this run)
        sys.path.insert(0, codegen)
    from test_cuda_codegen import NVRTC, nvrtc, render
    if NVRTC is None:
        pytest.skip("NVRTC not found (pip install nvidia-cuda-nvrtc)")
    ids = torch.tensor([[1, 2, 3]])
    prog = render(lambda i, w: (F.embedding(i, w) * 2, torch.gather(w, 0, i.t().expand(3, 8)), w[i[0] - 1]),
                  ids, torch.randn(10, 8))
    assert "int64_t *__restrict__ kn_err" in prog.source
    assert "kn_chk(" in prog.source
    nvrtc(prog)
    plain = render(lambda a: a * 2 + 1, torch.randn(64))
    assert "kn_err" not in plain.source.split("{")[0]   # no record for kernels that check nothing
    nvrtc(plain)


# ---------------------------------------------------------------- native build
def _fake_cc(tmp_path, body):
    p = tmp_path / "fakecc.sh"
    p.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    p.chmod(0o755)
    return str(p)


def _leftovers(cache):
    return [f for f in glob.glob(os.path.join(cache, "**", "*"), recursive=True)
            if f.endswith((".tmp", ".so", ".ok", ".o", ".err"))]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_hung_compiler_is_killed_with_its_children_after_the_timeout(tmp_path):
    pidfile = tmp_path / "child.pid"
    cc = _fake_cc(tmp_path, f"""\
        for a in "$@"; do [ "$prev" = -o ] && echo partial > "$a"; prev="$a"; done
        sleep 300 &
        echo $! > {pidfile}
        wait
        """)
    cache = str(tmp_path / "cache")
    t0 = time.monotonic()
    with pytest.raises(_C.CompilerError, match="ran longer than 1 s"):
        _C.build(["int kn_x;"], cache, cc, "-O1", "salt-timeout", 1, 1.0)
    assert time.monotonic() - t0 < 30
    assert _leftovers(cache) == []
    deadline = time.monotonic() + 5
    while _alive(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pidfile.read_text())), "the compiler's child outlived the timeout"


def test_a_hung_compiler_falls_back_to_eager_with_a_warning(tmp_path, monkeypatch):
    cc = _fake_cc(tmp_path, "sleep 300\n")
    monkeypatch.setattr(kiln.config, "cc", cc)
    monkeypatch.setattr(kiln.config, "cc_timeout", 0.5)
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(kiln.config, "debug", False)
    x = torch.randn(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = kiln.compile(lambda t: t.sin() * 3 + 1)(x)
    torch.testing.assert_close(got, x.sin() * 3 + 1)
    assert any("ran longer than" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert _leftovers(str(tmp_path / "cache")) == []


def test_cc_timeout_knob_reads_its_environment_variable():
    out = subprocess.run([sys.executable, "-c", "import kiln; print(kiln.config.cc_timeout)"],
                         env={**os.environ, "KILN_CC_TIMEOUT": "42"}, capture_output=True, text=True)
    assert out.stdout.strip() == "42.0", out.stderr


def test_a_failing_compiler_leaves_no_temporaries(tmp_path):
    cc = _fake_cc(tmp_path, """\
        for a in "$@"; do [ "$prev" = -o ] && echo partial > "$a"; prev="$a"; done
        echo "cc: internal compiler error" >&2
        exit 1
        """)
    cache = str(tmp_path / "cache")
    with pytest.raises(_C.CompilerError, match="internal compiler error"):
        _C.build(["int kn_x;"], cache, cc, "-O1", "salt-fail", 1, 10.0)
    assert _leftovers(cache) == []
    # several units compiled in parallel, then linked
    with pytest.raises(_C.CompilerError):
        _C.build(["int kn_a;", "int kn_b;", "int kn_c;"], cache, cc, "-O1", "salt-fail", 2, 10.0)
    assert _leftovers(cache) == []


def test_a_compiler_that_crashes_is_retried_optimising_less(tmp_path):
    # gcc 12 crashed in its SLP vectoriser on `a.expand(2, 4).amax()` over
    # int32 (fuzzer 1803404): a crash of the compiler is its bug, so the unit
    # is built again at -O1 instead of the graph running eagerly.  This
    # compiler crashes unless the last -O it is given is -O1.
    log = tmp_path / "calls"
    cc = _fake_cc(tmp_path, f"""\
        o=""; for a in "$@"; do case "$a" in -O*) o="$a";; esac; done
        echo "$o" >> {log}
        if [ "$o" != -O1 ]; then echo "x.c:1: internal compiler error: Segmentation fault" >&2; exit 1; fi
        exec cc "$@"
        """)
    cache = str(tmp_path / "cache")
    so, cached = _C.build(["int kn_x = 7;"], cache, cc, "-O3 -fPIC", "salt-ice", 1, 60.0)
    assert os.path.exists(so) and not cached
    assert log.read_text().split() == ["-O3", "-O1"]
    # the same through several units (compiled apart, then linked)
    log.write_text("")
    so, _ = _C.build(["int kn_a;", "int kn_b;", "int kn_c;"], cache, cc, "-O2 -fPIC", "salt-ice", 2, 60.0)
    assert os.path.exists(so)
    assert "-O1" in log.read_text().split()
    assert [f for f in _leftovers(cache) if not f.endswith((".so", ".ok"))] == []


def test_a_full_disk_leaves_no_partial_files(tmp_path):
    # RLIMIT_FSIZE makes writes past 4 KiB fail as a full disk does (EFBIG)
    cache = str(tmp_path / "cache")
    script = textwrap.dedent(f"""\
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from kiln import _C
        src = "int kn_x;\\n" + "/* padding */\\n" * 2000
        try:
            _C.build(["int kn_y;", src], {cache!r}, "cc", "-O1", "salt-disk", 1, 60.0)
        except OSError as e:
            print("OSError", e)
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "OSError" in out.stdout, out.stdout + out.stderr
    left = [f for f in glob.glob(os.path.join(cache, "**", "*"), recursive=True) if os.path.isfile(f)]
    assert left == [], left


# ------------------------------------------------- GPU error record: the modes
# config.cuda_index_errors: "async" (default: a GPU call queues a copy of its
# error record and the violation is raised at the next call, without a wait),
# "sync" (a wait per call, raised at that call), "off" (clamp, nothing read).
# The emulator keeps its record as the GPU's async path does.
def _emulated(monkeypatch, mode, fn, good=None):
    monkeypatch.setattr(kiln.config, "cuda_emulate", True)
    monkeypatch.setattr(kiln.config, "cuda_index_errors", mode)
    kiln.reset()
    from torch.fx.experimental.proxy_tensor import make_fx
    good = torch.tensor([1, 0, 9]) if good is None else good
    cg = backends.compile_graph(make_fx(fn)(good), [good])
    assert cg.kiln_stats.get("kernels"), "the index op did not run in a kiln kernel"
    return cg, good


EMB = lambda i: F.embedding(i, W) * 2  # noqa: E731


def test_async_index_errors_raise_at_the_next_call_saying_so(monkeypatch):
    cg, good = _emulated(monkeypatch, "async", EMB)
    torch.testing.assert_close(cg.run(good), EMB(good))
    cg.run(torch.tensor([1, 12, 2]))          # queued: returns (clamped), no raise
    with pytest.raises(IndexError) as info:
        cg.run(good)                          # the next call raises it
    msg = str(info.value)
    assert msg.startswith("index out of range in self (kiln: "), msg
    assert "earlier call" in msg and "embedding" in msg and "KILN_CUDA_INDEX_ERRORS=sync" in msg, msg
    torch.testing.assert_close(cg.run(good), EMB(good))   # raised once, then clear
    torch.testing.assert_close(cg.run(good), EMB(good))


def test_async_index_errors_raise_before_the_next_call_runs_and_from_check_errors(monkeypatch):
    fn = lambda i: torch.gather(W, 0, i.view(-1, 1).expand(-1, 3)) + 1  # noqa: E731
    cg, good = _emulated(monkeypatch, "async", fn)
    cg.program.check_errors()                 # nothing recorded: no raise
    cg.run(torch.tensor([1, 10, 2]))
    with pytest.raises(RuntimeError, match=r"^index 10 is out of bounds for dimension 0 with size 10 \(kiln: .*gather"):
        cg.run(torch.tensor([1, -20, 2]))     # raises the earlier call's, before running
    cg.run(torch.tensor([1, -20, 2]))
    with pytest.raises(RuntimeError, match=r"^index -20 is out of bounds"):
        cg.program.check_errors(True)         # the synchronize-point check
    cg.program.check_errors()
    torch.testing.assert_close(cg.run(good), fn(good))


def test_sync_index_errors_raise_at_the_failing_call(monkeypatch):
    cg, good = _emulated(monkeypatch, "sync", EMB)
    with pytest.raises(IndexError, match=r"^index out of range in self$"):
        cg.run(torch.tensor([1, 12, 2]))
    torch.testing.assert_close(cg.run(good), EMB(good))
    cg.program.check_errors()


def test_index_errors_off_clamps_and_never_raises(monkeypatch):
    cg, good = _emulated(monkeypatch, "off", EMB)
    for bad in (12, 10**9, -20):
        out = cg.run(torch.tensor([1, bad, 2]))
        assert out.shape == (3, 3) and torch.isfinite(out).all()   # clamped: no read out of bounds
    torch.testing.assert_close(cg.run(good), EMB(good))
    cg.program.check_errors(True)


@pytest.mark.parametrize("env,mode", [(None, "async"), ("async", "async"), ("sync", "sync"), ("0", "off"),
                                      ("off", "off"), ("1", "async")])
def test_cuda_index_errors_knob_reads_its_environment_variable(env, mode):
    e = dict(os.environ)
    e.pop("KILN_CUDA_INDEX_ERRORS", None)
    if env is not None:
        e["KILN_CUDA_INDEX_ERRORS"] = env
    out = subprocess.run([sys.executable, "-c", "import kiln.config as c; print(c.cuda_index_errors)"],
                         env=e, capture_output=True, text=True, check=True).stdout.strip()
    assert out == mode


def test_an_unknown_index_errors_mode_is_a_user_error(monkeypatch):
    with pytest.raises(ValueError, match="cuda_index_errors"):
        _emulated(monkeypatch, "sometimes", EMB)


# an index into a dim whose address term vanishes (size 1, or stride 0 of an
# expanded dim): the load drops that dim's index, and its CHECK went with it
VANISHING_DIM_OPS = {
    "size1_bool": (lambda a, i: a[:, i], lambda: torch.rand(3, 1, 1) < 0.5),
    "size1_float": (lambda a, i: a[:, i] * 2, lambda: torch.randn(3, 1, 2)),
    "expanded": (lambda a, i: a.expand(3, 5)[:, i] + 1, lambda: torch.randn(3, 1)),
    "expanded_index_select": (lambda a, i: torch.index_select(a.expand(3, 5), 1, i) + 1, lambda: torch.randn(3, 1)),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("op", sorted(VANISHING_DIM_OPS))
def test_index_checks_survive_a_dim_the_load_address_drops(op, entry):
    fn, make = VANISHING_DIM_OPS[op]
    cf = ENTRIES[entry](fn)
    a = make()
    n = 1 if op.startswith("size1") else 5
    good = torch.tensor([0, n - 1, 0])
    _check(cf, fn, a, good)
    for bad in (n + 3, -n - 5):
        _check(cf, fn, a, torch.tensor([0, 0, bad]))
        _check(cf, fn, a, good)
