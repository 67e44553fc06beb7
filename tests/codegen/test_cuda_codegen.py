"""kiln's CUDA renderer checked on any machine: every graph here is lowered,
fused and rendered as CUDA C, and NVRTC must compile it to native code for
sm_90 (the H200).  Needs only libnvrtc (the nvidia-cuda-nvrtc wheel, or the
copy torch's CUDA build ships), no GPU; skipped where NVRTC is absent.
Running the kernels is tests/ops (the OpInfo sweep on cuda), tests/compile/test_fusion.py
and tests/runtime/test_cuda_backend.py, on machines with a GPU."""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln import _C, backends, cuda, fx_bridge


def _nvrtc():
    path = cuda.nvrtc_path()
    if not path:
        return None
    try:
        _C.nvrtc_compile("extern \"C\" __global__ void k() {}", 90, path)
    except Exception:  # noqa: BLE001
        return None
    return path


NVRTC = _nvrtc()
pytestmark = pytest.mark.skipif(NVRTC is None, reason="NVRTC not found (pip install nvidia-cuda-nvrtc)")


def render(fn, *args):
    gm = make_fx(fn, decomposition_table=backends.decompositions())(*args)
    desc, _, _ = fx_bridge.describe(gm)
    return _C.compile(desc, "kn_", False, False, True, 132)


def nvrtc(program):
    # with kiln's --Ofast-compile option, as kiln/cuda.py compiles
    opt = f"--Ofast-compile={kiln.config.nvrtc_fast_compile}" if kiln.config.nvrtc_fast_compile else None
    cubin, log = _C.nvrtc_compile(_C.prelude("cuda") + program.source, 90, NVRTC, opt)
    assert cubin[:4] == b"\x7fELF", "NVRTC must produce a cubin (native code), not PTX"
    assert "error" not in (log or "").lower()
    return cubin


from cuda_cases import CASES, w, x  # noqa: E402  (the shared graphs and their inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_c_compiles_to_sm90(name):
    fn, args = CASES[name]
    p = render(fn, *args)
    assert p.cuda == 1 and p.num_kernels >= 1
    nvrtc(p)


def test_softmax_is_one_kernel_with_warp_or_block_reductions():
    p = render(lambda a: torch.softmax(a, -1), x)      # rows of 384: a warp per row
    assert p.num_kernels == 1
    assert "kn_shfl" in p.source and "__shared__" not in p.source
    p = render(lambda a: torch.softmax(a, -1), torch.randn(4, 8192))   # long rows: a block per row
    assert p.num_kernels == 1
    assert "kn_shfl" in p.source and "__shared__" in p.source and "__syncthreads" in p.source
    nvrtc(p)


def test_index_math_is_32_bit_when_it_fits_and_64_bit_otherwise():
    small = render(lambda a: a * 2, x)
    assert "typedef int kn_ix;" in small.source
    # 2^31 elements: described from metadata only (nothing is allocated)
    meta = torch.empty((1 << 16, 1 << 15), device="meta")
    gm = make_fx(lambda a: a + 1, tracing_mode="fake")(meta)
    desc, _, _ = fx_bridge.describe(gm, "meta")
    p = _C.compile(desc, "kn_", False, False, True, 132)
    assert "typedef long long kn_ix;" in p.source
    nvrtc(p)


def test_flash_attention_tuple_with_non_tensor_results():
    """CUDA attention returns a 9-tuple holding ints and CPU tensors: buffers
    without a dtype must not trip the program builder (they did, on ViT)."""
    def f(q, w):
        o = torch.ops.aten._scaled_dot_product_flash_attention(q, q, q)
        return (o[0] * w).sum(-1), o[0] + 1

    q = torch.empty(2, 4, 64, 32, device="meta", dtype=torch.bfloat16)
    w = torch.empty(32, device="meta", dtype=torch.bfloat16)
    gm = make_fx(f, tracing_mode="fake")(q, w)
    desc, _, _ = fx_bridge.describe(gm, "meta")
    p = _C.compile(desc, "kn_", False, False, True, 132)
    assert p.num_kernels >= 1
    nvrtc(p)


def test_repeated_layers_compile_once_in_parallel_programs():
    """Identical layers render identical kernels up to names: the build
    compiles each distinct kernel once, split into NVRTC programs that compile
    on parallel threads; every kernel of every program maps to one of them."""
    import concurrent.futures

    ln = [torch.nn.LayerNorm(256) for _ in range(4)]
    lin = [torch.nn.Linear(256, 256) for _ in range(4)]

    def f(h):
        for m, w in zip(ln, lin):   # a matmul (an extern) between layers ends each kernel
            h = w(F.gelu(m(h) * 2 + 1))
        return h

    with torch.no_grad():
        p = render(f, torch.randn(8, 256))
    bodies, per_program = cuda.unique_kernels([p])
    assert p.num_kernels >= 4 and len(per_program[0]) == p.num_kernels
    assert len(bodies) < p.num_kernels          # the four layers share their kernels
    parts = cuda.chunks(bodies, 2)
    assert sorted(n for _, names, _ in parts for n in names) == sorted(bodies.values())
    assert set(per_program[0]) <= set(bodies.values())
    with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
        cubins = list(pool.map(lambda sno: _C.nvrtc_compile(sno[0], 90, NVRTC, sno[2])[0], parts))
    assert all(c[:4] == b"\x7fELF" for c in cubins)


def test_kernels_that_divide_integers_compile_with_full_optimisation():
    """Integer division by zero is undefined in CUDA C++: what a kernel
    returns follows the division routine the compiler emits, so kernels that
    divide integers are compiled as ATen's are (NVRTC's full optimisation,
    no --Ofast-compile), in a program of their own; the rest keep it."""
    a = torch.arange(12, dtype=torch.int64)
    bodies, _ = cuda.unique_kernels([render(lambda x, y: (torch.remainder(x, y) + 1, x.float() * 2), a, a + 1)])
    bodies.update(cuda.unique_kernels([render(lambda x: x.float().exp() + 1, torch.randn(64))])[0])
    parts = cuda.chunks(bodies, 4)
    exact = [p for p in parts if "kn_rem_i64(" in p[0]]
    assert exact and all(p[2] is None for p in exact)
    if kiln.config.nvrtc_fast_compile:
        assert any(p[2] == f"--Ofast-compile={kiln.config.nvrtc_fast_compile}" for p in parts)


def test_index_values_that_leave_int32_are_computed_in_64_bits():
    # arange(1000) * 3000000 passes 2^31 from 716 on, though every buffer is small
    p = render(lambda a: torch.arange(1000, dtype=torch.int64) * 3000000 + a.long(), torch.ones(1000))
    assert "typedef int kn_ix;" in p.source
    assert "(long long)" in p.source
    nvrtc(p)


def test_every_kernel_declares_its_block_size():
    p = render(lambda a: (a.softmax(-1), a * 2, a.sum()), torch.randn(16, 30000))
    heads = [ln for ln in p.source.splitlines() if "__global__" in ln]
    assert heads and all("__launch_bounds__(" in h for h in heads)


def test_pointwise_kernels_load_and_store_vectors():
    p = render(lambda a, b: F.gelu(a.to(torch.bfloat16) + b.to(torch.bfloat16)), x, w)
    assert "kn_vec<uint16_t, 4>" in p.source and "if (vec_ok)" in p.source
    nvrtc(p)


def test_an_option_this_nvrtc_refuses_is_dropped():
    """kiln's extra NVRTC option (--Ofast-compile) is dropped, not fatal, on
    an NVRTC that does not know it: the kernels still compile."""
    src = 'extern "C" __global__ void k(float *p) { p[threadIdx.x] *= 2.0f; }'
    cubin, _ = _C.nvrtc_compile(src, 90, NVRTC, "--no-such-nvrtc-option=1")
    assert cubin[:4] == b"\x7fELF"
    fast, _ = _C.nvrtc_compile(src, 90, NVRTC, "--Ofast-compile=min")
    assert fast[:4] == b"\x7fELF"


def test_identical_vectorised_layers_compile_once():
    """Vector loads are named after their expression (vl<id>), which differs
    from layer to layer; the kernels of identical layers must still be one
    NVRTC kernel."""
    lin = [torch.nn.Linear(64, 64).to(torch.bfloat16) for _ in range(3)]

    def f(h):
        for w in lin:   # the matmul (an extern) ends each layer's GELU kernel
            h = w(F.gelu(h * 2))
        return h

    with torch.no_grad():
        p = render(f, torch.randn(16, 64, dtype=torch.bfloat16))
    assert "kn_vec<uint16_t, 8>" in p.source
    bodies, per_program = cuda.unique_kernels([p])
    assert len(set(per_program[0])) < p.num_kernels and len(bodies) == len(set(per_program[0]))


def test_short_rows_are_held_in_registers():
    """A residual add + layer_norm over rows of 384 bfloat16: each of the
    four inputs (two activations, weight, bias) is read once, as vectors
    (4 lanes: a warp per row, 12 elements per thread), and the stored sum is
    kept in registers for the mean, variance and normalisation passes
    instead of being read back three times."""
    ln = torch.nn.LayerNorm(384).to(torch.bfloat16)
    a, b = torch.randn(2, 64, 384, dtype=torch.bfloat16)

    def f(a, b):
        h = a + b
        return h, ln(h)

    with torch.no_grad():
        p = render(f, a, b)
    assert p.num_kernels == 1
    assert p.source.count("*(const kn_vec<uint16_t, 4> *)") == 4
    assert "#pragma unroll" in p.source and "kn_vec<uint16_t, 4> &sv = p" in p.source
    assert "threadIdx.x % 32" in p.source and "j < 3;" in p.source
    # the sum is only written: no scalar read of any buffer is left
    assert "kn_bf2f(b" not in p.source
    nvrtc(p)
    old = kiln.config.cuda_row_registers
    try:
        kiln.config.cuda_row_registers = False
        gm = make_fx(f, decomposition_table=backends.decompositions())(a, b)
        desc, _, _ = fx_bridge.describe(gm)
        q = _C.compile(desc, "kn_", False, False, True, 132, False)
    finally:
        kiln.config.cuda_row_registers = old
    assert "#pragma unroll" not in q.source and "kn_bf2f(b" in q.source


def test_rows_too_long_for_registers_loop_over_memory():
    p = render(lambda a: torch.softmax(a, -1), torch.randn(4, 50257))
    assert "#pragma unroll" not in p.source
    p = render(lambda a: torch.softmax(a, -1), torch.randn(4, 4096).to(torch.bfloat16))
    assert "#pragma unroll" in p.source and "__syncthreads" in p.source   # 4 warps per row
    nvrtc(p)
