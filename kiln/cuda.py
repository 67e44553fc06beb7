"""CUDA through NVRTC and the driver API (issue 4's runtime; C in
src/runtime/cuda.c).

Python's part is finding libnvrtc: torch's CUDA build ships it (in torch/lib
or in an `nvidia/*/lib` wheel beside torch); the CUDA toolkit's copy is the
fallback.  Everything else — compiling CUDA C to a cubin for the device's
architecture, loading it, launching kernels on torch's current stream — is C.
"""
import concurrent.futures
import ctypes.util
import functools
import glob
import hashlib
import os
import re

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

_KERNEL_HEAD = re.compile(r'\nextern "C" __global__ void (__launch_bounds__\(\d+\) )?(\w+)\(')
_LOCAL_NAMES = re.compile(r"\b(sm|sa|vl|[btramp])(\d+)\b")


def _canonical(text):
    """A kernel's text with its buffer, temporary and register names numbered
    by first appearance: the kernels of identical layers become identical."""
    seen, counts = {}, {}

    def rename(m):
        tok = m.group(0)
        if tok not in seen:
            p = m.group(1)
            seen[tok] = f"{p}{counts.get(p, 0)}"
            counts[p] = counts.get(p, 0) + 1
        return seen[tok]

    return _LOCAL_NAMES.sub(rename, text)


def unique_kernels(programs):
    """(the distinct kernels of `programs` as {canonical CUDA text: function
    name}, per program the function name of each of its kernels).  A model's
    repeated layers generate the same kernels up to names; NVRTC compiles
    each once."""
    bodies, per_program = {}, []
    for p in programs:
        parts = _KERNEL_HEAD.split(p.source)
        names = []
        # parts: [head, bounds0, name0, rest0, bounds1, name1, rest1, ...]
        for j in range(1, len(parts), 3):
            body = _canonical('\nextern "C" __global__ void ' + (parts[j] or "") + 'KN_FN(' + parts[j + 2])
            fn = bodies.get(body)
            if fn is None:
                fn = bodies[body] = "kn_u" + hashlib.sha1(body.encode()).hexdigest()[:16]
            names.append(fn)
        if len(names) != p.num_kernels:
            raise RuntimeError(f"kiln: found {len(names)} kernels in a program of {p.num_kernels}")
        per_program.append(names)
    return bodies, per_program


# kernels that divide integers: division by zero is undefined in CUDA C++, and
# what a kernel returns for it follows the division routine the compiler
# emits; compiled with NVRTC's full optimisation (as ATen's kernels are with
# nvcc) they return what eager returns
_INT_DIVISION = re.compile(r"kn_(?:div|truncdiv|floordiv|rem|fmod)_[iu]\d+\(")
# (The other kernels keep --Ofast-compile: measured on the H200 with
# benchmarks/diag/row_and_pointwise.py, an erf-GELU, a copy and a register-row
# add + layer_norm in bfloat16 run as fast as with NVRTC's full optimisation,
# once bfloat16 rounding is the hardware conversion.)


def _options(exact):
    if exact or not config.nvrtc_fast_compile:
        return None
    return f"--Ofast-compile={config.nvrtc_fast_compile}"


def chunks(bodies, jobs):
    """Split the distinct kernels into at most `jobs` NVRTC programs of
    similar size (each compiles on its own thread), kernels that divide
    integers apart (compiled with NVRTC's full optimisation): [(source, names,
    options)]."""
    prelude = _C.prelude("cuda")
    out = []
    for exact in (False, True):
        items = sorted(((b, f) for b, f in bodies.items() if bool(_INT_DIVISION.search(b)) == exact),
                       key=lambda kv: -len(kv[0]))
        n = max(1, min(jobs, len(items)))
        groups = [[] for _ in range(n)]
        sizes = [0] * n
        for body, fn in items:   # largest first onto the lightest group
            g = sizes.index(min(sizes))
            groups[g].append((body, fn))
            sizes[g] += len(body)
        out += [(prelude + "".join(b.replace("KN_FN", fn, 1) for b, fn in grp), [fn for _, fn in grp],
                 _options(exact)) for grp in groups if grp]
    return out


def _cached_module(source, names, index, arch, version, options):
    """A CudaModule for `source` compiled with NVRTC `options` (one extra
    option or None), its cubin from the disk cache when there.  Returns
    (module, was_cached)."""
    h = hashlib.sha256(f"kiln cuda 3 | sm_{arch} | nvrtc {version} | {options}\n".encode())
    h.update(source.encode())
    key = h.hexdigest()
    path = os.path.join(config.cache_dir, "cuda", key[:2], key + ".cubin")
    try:
        with open(path, "rb") as f:
            cubin = f.read()
        if cubin:
            return _C.CudaModule(source, names, index, nvrtc_path(), cubin, options), True
    except OSError:
        pass
    except RuntimeError:
        pass   # a corrupt entry is rebuilt, never trusted
    mod = _C.CudaModule(source, names, index, nvrtc_path(), None, options)
    from .lowered_cache import _cache_write
    _cache_write(path, lambda: mod.cubin)   # atomic; a failed write leaves no file
    return mod, False


def compile_parts(parts, index, arch, version):
    """chunks()' NVRTC programs compiled (on parallel threads: NVRTC
    releases the GIL), each cached on disk: [(CudaModule, was cached)]."""
    def one(part):
        source, names, options = part
        return _cached_module(source, names, index, arch, version, options)

    if len(parts) == 1:
        return [one(parts[0])]
    torch.cuda.init()
    with concurrent.futures.ThreadPoolExecutor(len(parts)) as pool:
        return list(pool.map(one, parts))


def ensure_stream():
    """kiln's CUDA launches go on torch's current stream (set once)."""
    global _stream_set
    if not _stream_set:
        _C.set_cuda_stream(torch._C._cuda_getCurrentRawStream)
        _stream_set = True


def build(programs, device):
    """Compile the kernels of CUDA Programs to cubins for `device`'s
    architecture and bind them.  Identical kernels (repeated layers) are
    compiled once; the distinct ones are split into several NVRTC programs
    compiled on parallel threads (NVRTC releases the GIL), each cached on disk
    (<cache>/cuda/).  Returns (cache directory, all were cached)."""
    ensure_stream()
    index = device.index if device.index is not None else torch.cuda.current_device()
    arch, _ = _device_facts(index)
    _, _, version = available()
    bodies, per_program = unique_kernels(programs)
    parts = chunks(bodies, max(1, min(config.compile_jobs, len(bodies) // 2)))
    results = compile_parts(parts, index, arch, version)
    owner = {}
    for (source, names, _), (mod, _) in zip(parts, results):
        for n in names:
            owner[n] = mod
    dev = torch.device("cuda", index)
    for p, ns in zip(programs, per_program):
        p.load_cuda([owner[n] for n in ns], dev, index, ns)
    return os.path.join(config.cache_dir, "cuda"), all(c for _, c in results)


def _tune_path(index, name, blocks0, threads):
    arch, _ = _device_facts(index)
    return os.path.join(config.cache_dir, "cuda", "tune", f"sm_{arch}-{sms(index)}sm", f"{name}-{blocks0}x{threads}")


def prepare_tuning(program, device):
    """Before the first run of a graph compiled in a max-autotune mode: each
    kernel whose launch size was tuned before (on this kind of device: the
    disk cache, <cache>/cuda/tune/) gets it; the others are tuned during the
    next run.  Returns those, for save_tuning."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    todo = []
    for k, (name, _, blocks0, threads, tunable) in enumerate(program.cuda_launch_sizes()):
        if name is None or not tunable:
            continue
        try:
            with open(_tune_path(index, name, blocks0, threads)) as f:
                program.set_cuda_launch_size(k, int(f.read()))
            continue
        except (OSError, ValueError):
            pass   # not tuned yet (or a damaged entry: tuned again)
        todo.append(k)
    if todo:
        program.tune_next_run(config.autotune_reps, todo)
    return todo


def save_tuning(program, device, todo):
    """After the tuning run: the launch sizes it chose, to the disk cache."""
    from .lowered_cache import _cache_write
    index = device.index if device.index is not None else torch.cuda.current_device()
    sizes = program.cuda_launch_sizes()
    for k in todo:
        name, blocks, blocks0, threads, _ = sizes[k]
        path = _tune_path(index, name, blocks0, threads)
        _cache_write(path, lambda: str(blocks).encode())


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
