"""CUDA through NVRTC and the driver API (issue 4's runtime; C in
src/runtime/cuda.c).

Python's part is finding libnvrtc: torch's CUDA build ships it (in torch/lib
or in an `nvidia/*/lib` wheel beside torch); the CUDA toolkit's copy is the
fallback.  Everything else — compiling CUDA C to a cubin for the device's
architecture, loading it, launching kernels on torch's current stream — is C.
"""
import ctypes.util
import functools
import glob
import os

import torch

from . import _C


@functools.lru_cache(maxsize=None)
def nvrtc_path():
    """The libnvrtc torch's CUDA build uses, else the system's; None if none."""
    roots = [os.path.join(os.path.dirname(torch.__file__), "lib")]
    site = os.path.dirname(os.path.dirname(torch.__file__))
    roots += glob.glob(os.path.join(site, "nvidia", "*", "lib")) + glob.glob(os.path.join(site, "nvidia", "lib"))
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "libnvrtc.so*")) + glob.glob(os.path.join(root, "libnvrtc-*.so*")))
        hits = [h for h in hits if "builtins" not in os.path.basename(h)]
        if hits:
            return hits[0]
    for cand in ("/usr/local/cuda/lib64/libnvrtc.so",):
        if os.path.exists(cand):
            return cand
    name = ctypes.util.find_library("nvrtc")
    return name


@functools.lru_cache(maxsize=None)
def available():
    """(usable, reason, nvrtc version): whether kiln can compile CUDA here."""
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device", (0, 0)
    ok, why, version = _C.cuda_available(nvrtc_path())
    return bool(ok), why, tuple(version)


def module(source, names, device=None):
    """Compile CUDA C `source` (extern "C" __global__ kernels `names`) for the
    current device: a kiln._C.CudaModule."""
    ok, why, _ = available()
    if not ok:
        raise RuntimeError(f"kiln: CUDA is not usable here: {why}")
    if device is None:
        device = torch.cuda.current_device()
    torch.cuda.init()
    return _C.CudaModule(source, list(names), device, nvrtc_path())


def launch(mod, name, grid, block, fmt, values, shared=0, stream=None):
    """Launch `name` on torch's current stream (or `stream`)."""
    s = stream if stream is not None else torch.cuda.current_stream()
    mod.launch(name, tuple(grid), tuple(block), fmt, list(values), int(s.cuda_stream), shared)
