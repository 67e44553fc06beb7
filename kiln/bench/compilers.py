"""Compiler plumbing shared by the benchmark modes.

* ``KilnHandle`` / ``import_kiln``: import the kiln package defensively (the
  benchmark must still run, and report, when kiln is broken or unbuilt).
* ``check_backend``: fail early, with a readable message, when a backend name
  is not registered with torch.compile.
* ``reset_compilers``: ``torch._dynamo.reset()`` plus ``kiln.reset()``.
* ``env_var`` / ``inductor_cache_dir``: point a compiler's on-disk cache at a
  given (normally fresh, empty) directory for a cold-compile measurement.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
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


def count_files(path: str) -> int:
    """Number of regular files below ``path`` (0 if it does not exist)."""
    return sum(len(files) for _, _, files in os.walk(path))


def _tiny(x):
    return torch.relu(x) * 2 + 1


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
        cache = env_var("KILN_CACHE_DIR", scratch_dir)
    try:
        check_backend(backend, kiln)
        with cache, torch.no_grad():
            torch.compile(_tiny, backend=backend)(torch.ones(8, device=device, dtype=dtype))
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        reset_compilers(kiln)
