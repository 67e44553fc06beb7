"""Compiler plumbing shared by the benchmark modes.

* ``KilnHandle`` / ``import_kiln``: import the kiln package defensively (the
  benchmark must still run, and report, when kiln is broken or unbuilt).
* ``check_backend``: fail early, with a readable message, when a backend name
  is not registered with torch.compile.
* ``reset_compilers``: ``torch._dynamo.reset()`` plus ``kiln.reset()``.
* ``inductor_cache_dir`` / ``kiln_cache_dir``: point a compiler's on-disk
  cache at a given (normally fresh, empty) directory for a cold-compile
  measurement.
* ``kiln_graph_stats`` / ``captured_kiln_warnings``: what kiln compiled, and
  whether it fell back to eager anywhere (kiln warns instead of failing).
* ``prime_backend``: pay a compiler's one-time start-up before measuring.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from types import ModuleType

import torch


@dataclasses.dataclass
class KilnHandle:
    """The imported kiln module (or None) and why importing it failed."""

    module: ModuleType | None
    error: str | None

    def describe(self) -> str:
        if self.module is None:
            return f"import failed: {self.error}"
        where = getattr(self.module, "__file__", None) or "namespace package, no __init__"
        version = getattr(self.module, "__version__", None)
        return f"{version or 'unversioned'} ({where})"

    def reset(self) -> None:
        reset = getattr(self.module, "reset", None)
        if callable(reset):
            reset()


def import_kiln() -> KilnHandle:
    try:
        import kiln
    except Exception as exc:  # broken builds may raise anything
        return KilnHandle(None, f"{type(exc).__name__}: {exc}")
    return KilnHandle(kiln, None)


def registered_backends() -> list[str]:
    return torch._dynamo.list_backends(exclude_tags=())


def check_backend(name: str, kiln: KilnHandle) -> None:
    """Raise RuntimeError if torch.compile does not know backend ``name``."""
    if name in registered_backends():
        return
    hint = f"; import kiln: {kiln.error}" if kiln.error else ""
    raise RuntimeError(f"torch.compile backend {name!r} is not registered{hint}")


def reset_compilers(kiln: KilnHandle) -> None:
    """Forget all compiled code held in memory by dynamo and kiln."""
    torch._dynamo.reset()
    kiln.reset()


@contextlib.contextmanager
def env_var(name: str, value: str):
    """Temporarily set environment variable ``name`` to ``value``."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def inductor_cache_dir(path: str):
    """Run inductor with its on-disk caches in ``path`` and in-memory caches cleared."""
    try:
        from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
    except Exception:
        temporary_cache_dir = None
    if temporary_cache_dir is None:
        with env_var("TORCHINDUCTOR_CACHE_DIR", path):
            yield
    else:
        with temporary_cache_dir(path):
            yield


@contextlib.contextmanager
def kiln_cache_dir(path: str, kiln: KilnHandle):
    """Point kiln's disk cache at ``path``.

    Sets ``KILN_CACHE_DIR`` (read by kiln at import, so by any child process)
    and, since this process has imported kiln already, ``kiln.config.cache_dir``.
    """
    config = getattr(kiln.module, "config", None)
    patch = config is not None and hasattr(config, "cache_dir")
    old = config.cache_dir if patch else None
    with env_var("KILN_CACHE_DIR", path):
        if patch:
            config.cache_dir = path
        try:
            yield
        finally:
            if patch:
                config.cache_dir = old


def kiln_graph_stats(kiln: KilnHandle) -> dict | None:
    """Totals over the graphs kiln compiled since its last reset, if it says.

    Reads ``kiln.backends.compiled_graphs`` (a list of per-graph stats dicts);
    None when kiln is absent or does not expose it.
    """
    graphs = getattr(getattr(kiln.module, "backends", None), "compiled_graphs", None)
    if not isinstance(graphs, list):
        return None
    stats = [g for g in graphs if isinstance(g, dict)]
    totals = {"graphs": len(stats)}
    for key in ("aten_ops", "kernels", "externs", "fallbacks"):
        totals[key] = sum(int(g.get(key) or 0) for g in stats)
    return totals


@contextlib.contextmanager
def captured_kiln_warnings(sink: list):
    """Collect warnings that mention kiln (e.g. 'running this graph eagerly')."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            sink.extend(str(w.message) for w in caught if "kiln" in str(w.message).lower())


def count_files(path: str) -> int:
    """Number of regular files below ``path`` (0 if it does not exist)."""
    return sum(len(files) for _, _, files in os.walk(path))


def _tiny(x, w):
    # a few common op kinds, so lazily built per-op tables get built here
    y = torch.nn.functional.layer_norm(torch.nn.functional.linear(x, w), (x.shape[-1],))
    return torch.softmax(torch.relu(y) * 2 + 1, dim=-1)


def prime_backend(backend: str, kiln: KilnHandle, device: str, dtype: torch.dtype,
                  scratch_dir: str) -> str | None:
    """Compile a tiny function once, then forget it.

    This pays a compiler's one-time, per-process start-up (lazy imports, worker
    pools, loading native code) outside the per-model measurements, so cold
    and warm compile times count per-model work only.  Caches point at
    ``scratch_dir`` meanwhile.  Returns an error message or None; errors are
    not fatal here, they reappear (and are recorded) per model.
    """
    if backend == "inductor":
        cache = inductor_cache_dir(scratch_dir)
    else:
        cache = kiln_cache_dir(scratch_dir, kiln)
    try:
        check_backend(backend, kiln)
        with cache, torch.no_grad():
            x = torch.ones(4, 8, device=device, dtype=dtype)
            torch.compile(_tiny, backend=backend)(x, torch.eye(8, device=device, dtype=dtype))
            if backend != "inductor" and kiln.module is not None:   # kiln's own capture too
                kiln.module.compile(_tiny, backend=backend)(x, torch.eye(8, device=device, dtype=dtype))
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        reset_compilers(kiln)


class TimedBackend:
    """A torch.compile backend that forwards to backend ``name`` and adds up
    the seconds spent inside it: the compiler's own share of compile time,
    without TorchDynamo's tracing."""

    def __init__(self, name: str, mode: str | None = None):
        self.name = name
        self.mode = mode
        self.seconds = 0.0
        self.graphs = 0

    def _backend(self):
        from torch._dynamo import lookup_backend

        if self.name == "inductor" and self.mode not in (None, "default"):
            # torch.compile(mode=...) is inductor with these config patches
            from torch._inductor import list_mode_options
            from torch._inductor.compile_fx import compile_fx

            patches = list_mode_options(self.mode)
            return lambda gm, ex: compile_fx(gm, ex, config_patches=patches)
        if self.name == "kiln" and self.mode in ("reduce-overhead", "max-autotune"):
            import kiln.backends

            return kiln.backends.kiln_cudagraphs
        return lookup_backend(self.name)

    def __call__(self, gm, example_inputs):
        import time

        fn = self._backend()
        t0 = time.perf_counter()
        try:
            return fn(gm, example_inputs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.graphs += 1
