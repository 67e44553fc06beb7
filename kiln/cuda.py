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
import hashlib
import os

import torch

from . import _C, config


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


@functools.lru_cache(maxsize=None)
def _device_facts(index):
    props = torch.cuda.get_device_properties(index)
    return props.major * 10 + props.minor, props.multi_processor_count


def sms(index):
    """Multiprocessors of CUDA device `index` (kiln sizes launches with it)."""
    return _device_facts(index)[1]


_stream_set = False


def build(programs, device):
    """Compile the kernels of CUDA Programs (one NVRTC program for them all:
    their symbol prefixes differ) to a cubin for `device`'s architecture,
    through the disk cache (<cache>/cuda/), and bind them.  Returns (cubin
    path, was_cached)."""
    global _stream_set
    if not _stream_set:
        _C.set_cuda_stream(torch._C._cuda_getCurrentRawStream)
        _stream_set = True
    index = device.index if device.index is not None else torch.cuda.current_device()
    arch, _ = _device_facts(index)
    source = _C.prelude_cuda() + "".join(p.source for p in programs)
    _, _, version = available()
    h = hashlib.sha256(f"kiln cuda 1 | sm_{arch} | nvrtc {version}\n".encode())
    h.update(source.encode())
    key = h.hexdigest()
    path = os.path.join(config.cache_dir, "cuda", key[:2], key + ".cubin")
    names = [f"{p.prefix}k{k}" for p in programs for k in range(p.num_kernels)]
    cubin, cached = None, False
    try:
        with open(path, "rb") as f:
            cubin = f.read()
    except OSError:
        pass
    mod = None
    if cubin:
        try:
            mod = _C.CudaModule(source, names, index, nvrtc_path(), cubin)
            cached = True
        except RuntimeError:
            mod = None   # a corrupt entry is rebuilt, never trusted
    if mod is None:
        mod = _C.CudaModule(source, names, index, nvrtc_path())
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(mod.cubin)
            os.replace(tmp, path)
        except OSError:
            pass   # caching is an optimisation
    for p in programs:
        p.load_cuda(mod, torch.device("cuda", index), index)
    return path, cached


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
