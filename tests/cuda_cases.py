"""The graphs kiln's CUDA tests share, and how their results are compared:
rendered and compiled by NVRTC (codegen/test_cuda_codegen.py), run on a GPU
(runtime/test_cuda_backend.py) and on the CPU emulator
(codegen/test_cuda_emulated.py).  Importable from every test folder:
tests/ is on sys.path (its conftest.py)."""
import torch
import torch.nn.functional as F

x = torch.randn(8, 384)
w = torch.randn(384)

CASES = {
    "gelu_bias_residual": (lambda a, b, r: F.gelu(a + b) + r, (x, w, x)),
    "softmax": (lambda a: torch.softmax(a, -1), (x,)),
    "log_softmax": (lambda a: torch.log_softmax(a, -1), (x,)),
    "layer_norm": (lambda a, g: F.layer_norm(a, (384,), g, None), (x, w)),
    "rms_norm": (lambda a, g: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * g, (x, w)),
    "sum_all": (lambda a: a.sum(), (x,)),
    "argmax_argmin": (lambda a: (a.argmax(-1), a.argmin(0)), (x,)),
    "max_min_prod": (lambda a: (a.amax(1), a.amin(0), a.prod(1)), (x,)),
    "any_all": (lambda a: ((a > 0).any(1), (a > -5).all(0)), (x,)),
    "cumsum_cumprod": (lambda a: (a.cumsum(1), a.cumprod(0)), (x,)),
    "bf16": (lambda a, b: F.silu(a.to(torch.bfloat16) * b.to(torch.bfloat16)).sum(-1), (x, w)),
    "f16": (lambda a: (a.half() * 2).exp().float(), (x,)),
    "int64_ops": (lambda a: (a.long() // 3 + a.long() % 5, (a.long() << 2) ^ 7), (x * 10,)),
    "int8_uint8": (lambda a: (a.to(torch.int8) * 3, a.abs().to(torch.uint8) + 1), (x * 10,)),
    "float64": (lambda a: torch.tanh(a.double()).sum(0), (x,)),
    "transpose_view": (lambda a: a.t().contiguous() * 2 + a.view(384, 8).sum(1, keepdim=True), (x,)),
    "broadcast_where": (lambda a, b: torch.where(a > 0, a, b).clamp(-1, 1), (x, w)),
    "var_mean": (lambda a: torch.var_mean(a, 1), (x,)),
    "math": (lambda a: (a.sin() + a.erf() + a.sigmoid() + a.floor() + torch.atan2(a, a + 1) + a.remainder(0.7)), (x,)),
    "isnan_signbit": (lambda a: (torch.isnan(a) | torch.signbit(a), torch.isinf(a)), (x,)),
}


def close(got, want, dtype=torch.float32):
    tol = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(dtype, 1e-4)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        if w.dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            torch.testing.assert_close(g, w, atol=tol, rtol=tol, equal_nan=True)
        else:
            assert torch.equal(g, w)
