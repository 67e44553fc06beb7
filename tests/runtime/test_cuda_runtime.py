"""kiln's CUDA runtime (src/runtime/cuda.c): NVRTC compiles CUDA C to native
code for the device's architecture, the driver loads it, kernels run on
torch's current stream.  Skipped where CUDA is absent (CI has no GPU)."""
import pytest
import torch

import kiln
from kiln import cuda

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

SAXPY = r"""
extern "C" __global__ void saxpy(float *out, const float *x, const float *y, float a, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = a * x[i] + y[i];
}
"""


def test_nvrtc_and_driver_load():
    ok, why, version = cuda.available()
    assert ok, why
    assert version[0] >= 11


def test_cubin_is_native_code_for_this_device():
    m = cuda.module(SAXPY, ["saxpy"])
    major, minor = torch.cuda.get_device_capability()
    assert m.arch == major * 10 + minor
    assert m.cubin[:4] == b"\x7fELF"   # a cubin (SASS), not PTX text for the driver's JIT


def test_kernel_runs_on_torchs_current_stream():
    m = cuda.module(SAXPY, ["saxpy"])
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y2 = y * 1.0                      # queued work on s before the kernel
        cuda.launch(m, "saxpy", (256, 1, 1), (256, 1, 1), "pppfl",
                    [out.data_ptr(), x.data_ptr(), y2.data_ptr(), 2.0, n])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2.0 * x + y)


def test_compile_error_is_reported_with_the_log():
    with pytest.raises(RuntimeError, match="NVRTC could not compile"):
        cuda.module('extern "C" __global__ void k() { this is not cuda; }', ["k"])
