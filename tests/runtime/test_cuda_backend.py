"""kiln on a CUDA GPU, end to end: CUDA C kernels through NVRTC, launched on
torch's current stream; reduce-overhead mode (CUDA graphs); the cubin disk
cache; and the ATen fallback where NVRTC or the driver is missing.  Skipped
where there is no GPU kiln can use (CI); run on the H200 by
benchmarks/device.sh (STAGES=tests)."""
import os
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import kiln
import kiln.cuda
from kiln import backends

from cuda_cases import CASES, close as _close

pytestmark = pytest.mark.skipif(not kiln.cuda.available()[0], reason="no CUDA device usable by kiln here")


@pytest.mark.parametrize("name", sorted(CASES))
def test_cases_match_eager_on_cuda(name):
    fn, args = CASES[name]
    args = tuple(a.cuda() for a in args)
    kiln.reset()
    e = kiln.explain(fn)(*args)
    assert e.fallbacks_per_graph == [0] * e.graph_count
    assert sum(e.kernels_per_graph) >= 1
    _close(kiln.compile(fn)(*args), fn(*args), torch.bfloat16 if name in ("bf16", "f16") else torch.float32)


@pytest.mark.parametrize("shape", [(3, 5), (1000, 1), (7, 50000), (1, 3 << 20), (4096, 768), (2, 3, 33, 65),
                                   (5, 384), (9, 200), (300, 40)])
def test_reductions_every_row_shape(shape):
    x = torch.randn(*shape, device="cuda")

    def f(a):
        return a.sum(-1), a.amax(-1), a.softmax(-1), a.argmax(-1), a.mean(0)

    kiln.reset()
    _close(kiln.compile(f)(x), f(x))


def test_bf16_transformer_block():
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).cuda().to(torch.bfloat16).eval()
    x = torch.randn(4, 64, 256, device="cuda", dtype=torch.bfloat16)
    kiln.reset()
    with torch.no_grad():
        want = layer(x)
        e = kiln.explain(layer)(x)
        got = kiln.compile(layer)(x)
    assert e.fallbacks_per_graph == [0] * e.graph_count
    torch.testing.assert_close(got, want, atol=6e-2, rtol=6e-2)


def test_kernels_run_on_the_current_stream():
    f = kiln.compile(lambda a, b: F.gelu(a @ b + 1).sum(-1))
    a, b = torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    want = F.gelu(a @ b + 1).sum(-1)
    f(a, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = f(a, b)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)


def test_sizes_of_a_symbolic_graph_share_their_arenas():
    """Each size of a symbolic graph is a program of its own: their arenas
    are shared (run.c arena_take over gpu_pool), so memory does not grow with the
    sizes seen, and results on two streams stay right."""
    def f(x):
        # (the row sums: a reduction's result another kernel reads, in the
        # arena; a GPU program's arena holds its kernels' intermediates only,
        # never a tensor such as a matmul's operand: src/compile/plan.c)
        return torch.softmax(x.sum(-1), 0)
    kiln.reset()
    before = len(backends.compiled_graphs)
    g = kiln.compile(f, dynamic=True)
    x = torch.randn(64, 1024, 8, device="cuda")
    torch.testing.assert_close(g(x), f(x), atol=1e-5, rtol=1e-4)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    for n in range(65, 129):
        x = torch.randn(n, 1024, 8, device="cuda")
        torch.testing.assert_close(g(x), f(x), atol=1e-5, rtol=1e-4)
        del x
    torch.cuda.synchronize()
    grown = torch.cuda.memory_allocated() - base
    assert any(e.get("arena_bytes", 0) >= 64 * 1024 * 4 for e in backends.compiled_graphs[before:])   # (it has one)
    # 64 sizes with an arena each would hold 64 x 260-520 KiB (25 MiB); four shared ones at most 2 MiB
    assert grown < 8 * 2 ** 20, grown
    s = torch.cuda.Stream()
    x = torch.randn(100, 1024, 8, device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = g(x)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(got, f(x), atol=1e-5, rtol=1e-4)


def test_reduce_overhead_replays_a_cuda_graph():
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128)).cuda().eval()
    kiln.reset()
    f = kiln.compile(m, mode="reduce-overhead")
    outs, wants = [], []
    with torch.no_grad():
        for i in range(5):
            x = torch.randn(8, 64, device="cuda")
            outs.append(f(x))
            wants.append(m(x))
    for o, w in zip(outs, wants):   # earlier results were not overwritten by later replays
        torch.testing.assert_close(o, w, atol=1e-4, rtol=1e-4)
    graphed = [g for g in gc_objects(backends.CudaGraphed) if g.graph is not None]
    assert graphed, "no CUDA graph was captured"


def gc_objects(kind):
    import gc
    out = []
    for o in gc.get_objects():
        try:
            if isinstance(o, kind):
                out.append(o)
        except ReferenceError:   # a dead weakref.proxy among the objects
            pass
    return out


def test_reduce_overhead_in_place_weight_update_is_seen():
    m = torch.nn.Linear(32, 32).cuda().eval()
    kiln.reset()
    f = kiln.compile(m, mode="reduce-overhead")
    x = torch.randn(4, 32, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            f(x)
        m.weight.mul_(2)
        torch.testing.assert_close(f(x), m(x), atol=1e-4, rtol=1e-4)


def test_without_nvrtc_graphs_run_through_aten_with_one_warning(monkeypatch):
    import kiln.cuda

    monkeypatch.setattr(kiln.cuda, "available", lambda: (False, "no NVRTC (simulated)", (0, 0)))
    monkeypatch.setattr(kiln.config, "debug", False)
    kiln.reset()
    x = torch.randn(16, 16, device="cuda")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = kiln.compile(lambda a: (a * 2).softmax(-1))
        g = kiln.compile(lambda a: a.exp().sum())
        r1, r2 = f(x), g(x)
    msgs = [str(m.message) for m in w if "kiln" in str(m.message)]
    assert len(msgs) == 1 and "ATen" in msgs[0] and "NVRTC" in msgs[0], msgs
    torch.testing.assert_close(r1, (x * 2).softmax(-1))
    torch.testing.assert_close(r2, x.exp().sum())


def test_cubins_come_from_the_disk_cache_in_a_new_process(tmp_path):
    code = (
        "import torch, kiln, kiln.backends as b\n"
        "f = kiln.compile(lambda a: torch.nn.functional.silu(a).sum(-1) * 3)\n"
        "x = torch.randn(64, 512, device='cuda')\n"
        "torch.testing.assert_close(f(x), torch.nn.functional.silu(x).sum(-1) * 3)\n"
        "print(b.build_counts)\n"
    )
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "'compiled': 1" in first.stdout
    assert "'cached': 1" in second.stdout and "'compiled': 0" in second.stdout
    assert any(p.suffix == ".cubin" for p in (tmp_path / "cuda").rglob("*"))


def test_reduce_overhead_leaves_mutating_graphs_ungraphed_and_keeps_strides():
    buf = torch.zeros(4, device="cuda")

    def mutate(x):
        buf.add_(1)
        return x * 2

    kiln.reset()
    f = kiln.compile(mutate, mode="reduce-overhead")
    x = torch.randn(4, device="cuda")
    for _ in range(4):
        torch.testing.assert_close(f(x), x * 2)
    assert buf.tolist() == [4.0] * 4      # once per call, never doubled by a capture

    g = kiln.compile(lambda a: a * 3 + 1, mode="reduce-overhead")
    base = torch.randn(8, 16, device="cuda")
    for k in range(4):                      # a strided (non-dense) input that moves every call
        v = (base + k)[:, ::2]
        torch.testing.assert_close(g(v), v * 3 + 1)


def test_attention_with_a_materialised_unaligned_mask():
    # a [B, H, 3, 6] float mask made inside the graph has strides that are not
    # multiples of 16 bytes; the memory-efficient kernel rejects those, so
    # kiln pads the mask (eager's broadcast (3, 6) mask never hits this)
    q = torch.randn(4, 4, 3, 8, device="cuda")
    k = torch.randn(4, 4, 6, 8, device="cuda")
    v = torch.randn(4, 4, 6, 8, device="cuda")
    m = torch.randn(3, 6, device="cuda")

    def f(q, k, v, m):
        full = (m * 1.0).expand(4, 4, 3, 6).contiguous()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=full)

    def g(q, k, v, m):
        full = (m > 0).expand(4, 4, 3, 6).contiguous()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=full)

    with torch.no_grad():
        for fn in (f, g):
            kiln.reset()
            _close(kiln.compile(fn)(q, k, v, m), fn(q, k, v, m))


def test_integer_division_by_zero_matches_eager_cuda():
    # no trap on a GPU: eager returns what the hardware division gives, and so must kiln
    a = torch.arange(-8, 8, device="cuda", dtype=torch.int64).reshape(4, 4)
    b = torch.tensor([0, 3, -2, 0], device="cuda", dtype=torch.int64)
    for fn in (lambda a, b: torch.remainder(a, b) + 1, lambda a, b: torch.fmod(a, b) * 2,
               lambda a, b: torch.div(a, b, rounding_mode="floor") - 1,
               lambda a, b: torch.div(a, b, rounding_mode="trunc") + 0):
        kiln.reset()
        assert torch.equal(kiln.compile(fn)(a, b), fn(a, b))


def test_jiterator_call_breaks_the_graph_and_stays_right():
    # the jiterator launches outside the dispatcher: capture must not trace it
    from torch.cuda import jiterator
    code = "template <typename T> T fma3(T x, T y) { return x * y + x; }"
    fn = jiterator._create_jit_fn(code)
    x = torch.randn(100, device="cuda")

    def f(x):
        y = torch.sin(x)
        return fn(y, x) + 1

    kiln.reset()
    _close(kiln.compile(f)(x), f(x))


def test_boolean_attention_mask_takes_a_fused_kernel_and_keeps_empty_rows_zero():
    # a boolean mask would send scaled_dot_product_attention to its math path
    # (float32 bmm + softmax); kiln hands it an additive mask instead, and
    # zeroes query rows that attend to nothing, as the math path does
    q, k, v = (torch.randn(2, 4, 64, 32, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    m = torch.rand(2, 64, device="cuda") > 0.3
    m[1] = False

    def f(q, k, v, m):
        mm = m[:, None, None, :].expand(2, 1, 64, 64)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mm).transpose(1, 2).reshape(2, 64, 128)

    kiln.reset()
    with torch.no_grad():
        e = kiln.explain(f)(q, k, v, m)
        got = kiln.compile(f)(q, k, v, m)
    ops = [str(o) for s in backends.compiled_graphs for o in s.get("extern_ops", [])]
    assert "kiln.attention.default" in ops and not any("bmm" in o for o in ops), ops
    assert e.graph_count == 1
    # eager's own answer for a batch that attends to nothing depends on the
    # kernel it picks (zeros from the math path, else whatever the fused
    # kernel makes of an all -inf row): kiln gives the math path's zeros
    assert torch.equal(got[1], torch.zeros_like(got[1]))
    want = f(q, k, v, m)
    _close(got[0], want[0], torch.bfloat16)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        _close(got, f(q, k, v, m), torch.bfloat16)


@pytest.mark.parametrize("mask", [None, "2d", "batch", "full"])
def test_attention_where_sdpa_picks_cudnn_calls_a_kernel_that_plans_nothing(mask, monkeypatch):
    """kiln::attention calls flash or memory-efficient attention where
    scaled_dot_product_attention would plan cuDNN's kernel per shape: the
    same result as SDPA's math path at every mask shape, and the same as
    with KILN_CUDA_ATTENTION=cudnn."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kiln import config, ops
    torch.manual_seed(0)
    b, h, s, d = 3, 4, 70, 64
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    m = None
    if mask is not None:
        shape = {"2d": (s, s), "batch": (b, 1, 1, s), "full": (b, h, s, s)}[mask]
        m = torch.zeros(shape, device="cuda", dtype=torch.bfloat16)
        m[..., -7:] = float("-inf")
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=m is None)
    seen = []
    monkeypatch.setattr(ops, "_without_cudnn", lambda *a, f=ops._without_cudnn: seen.append(1) or f(*a))
    got = ops.call_attention(q, k, v, m, 0.0, m is None, None, False)
    _close(got, want, torch.bfloat16)
    if torch._fused_sdp_choice(q, k, v, m, 0.0, m is None) == SDPBackend.CUDNN_ATTENTION.value:
        assert seen   # (this machine's SDPA would have planned cuDNN)
    monkeypatch.setattr(config, "cuda_attention", "cudnn")
    _close(ops.call_attention(q, k, v, m, 0.0, m is None, None, False), want, torch.bfloat16)


def test_matmul_activations_become_cublaslt_epilogues():
    """GPT-2's MLP (tanh-GELU spelt out) and a ReLU MLP without bias: the
    activations run inside the GEMMs (aten._addmm_activation), and the
    results match eager; KILN_LT_EPILOGUES=0 keeps them as kiln kernels."""
    import math

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.proj = torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256)
            self.wi, self.wo = torch.nn.Linear(256, 512, bias=False), torch.nn.Linear(512, 256, bias=False)

        def forward(self, x):
            h = self.fc(x)
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
            y = x + self.proj(h)
            return y + self.wo(torch.relu(self.wi(y)))

    m = MLP().cuda().to(torch.bfloat16).eval()
    x = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = m(x)
        for on in (True, False):
            kiln.reset()
            old, kiln.config.lt_epilogues = kiln.config.lt_epilogues, on
            try:
                got = kiln.compile(m)(x)
            finally:
                kiln.config.lt_epilogues = old
            ops = [o for g in backends.compiled_graphs for o in g.get("extern_ops", [])]
            assert sum("_addmm_activation" in o for o in ops) == (2 if on else 0), ops
            torch.testing.assert_close(got, want, atol=6e-2, rtol=6e-2)


def test_max_autotune_tunes_launch_sizes_once_and_caches_them(tmp_path, monkeypatch):
    """mode="max-autotune-no-cudagraphs": the first run times a few launch
    sizes per kernel and keeps the fastest (same results); a later compile
    of the same kernels reads them from the disk cache and times nothing."""
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)

    def f(x, w):
        return torch.softmax(x * w, -1) + F.gelu(x).sum(0)

    want = f(x, w)
    for run in range(2):
        kiln.reset()
        with torch.no_grad():
            got = kiln.compile(f, mode="max-autotune-no-cudagraphs")(x, w)
            got2 = kiln.compile(f, mode="max-autotune-no-cudagraphs")(x, w)
        _close(got, want, torch.bfloat16)
        _close(got2, want, torch.bfloat16)
        tuned = [g.get("tuned_kernels", 0) for g in backends.compiled_graphs]
        assert (sum(tuned) > 0) == (run == 0), tuned
    entries = list((tmp_path / "cuda" / "tune").rglob("*"))
    assert any(p.is_file() and int(p.read_text()) >= 1 for p in entries)


def test_recorded_attention_takes_the_lowered_ops_fake_at_every_size():
    """The recording fakes an inference graph's attention as kiln::attention
    (the fused kernels' [B, S, H, D] layout, src/capture/record_value.c and
    kiln/ops.py recorded_attention), not through torch's math-path fake; a
    symbolic graph over many sizes, with a padding mask as BERT's, matches
    eager at each (grad needed keeps torch's fake: tests/compile/test_backend.py)."""
    strides = []

    def spy(gm, example_inputs):
        for n in gm.graph.nodes:
            if n.target is F.scaled_dot_product_attention:
                strides.append(n.meta["example_value"].stride())
        return gm.forward

    def f(x, m, w):
        b, s, _ = x.shape
        q = (x @ w).view(b, s, 4, 16).transpose(1, 2)
        mask = (1.0 - m[:, None, None, :].to(x.dtype)) * -10000.0
        a = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        return a.transpose(1, 2).reshape(b, s, 64) + x

    w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16) / 8
    kiln.reset()
    fast = kiln.compile(f, dynamic=True)
    with torch.no_grad():
        x = torch.randn(2, 8, 64, device="cuda", dtype=torch.bfloat16)
        kiln.compile(f, backend=spy, dynamic=True)(x, torch.ones(2, 8, device="cuda"), w)
        # [B, H, S, D] laid out as [B, S, H, D]: heads inside positions
        assert len(strides) == 1 and strides[0][1] == 16 and strides[0][2] == 64 and strides[0][3] == 1, strides
        for b, s in ((2, 8), (3, 24), (5, 40), (2, 17)):
            x = torch.randn(b, s, 64, device="cuda", dtype=torch.bfloat16)
            m = (torch.rand(b, s, device="cuda") > 0.2).long()
            m[:, 0] = 1
            _close(fast(x, m, w), f(x, m, w), torch.bfloat16)
    assert kiln.stats()["fallbacks"] == 0
