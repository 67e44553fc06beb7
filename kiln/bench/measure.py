"""Timing and accuracy helpers for the kiln benchmark.

* ``time_first_call`` / ``time_iterations``: wall-clock timing with
  ``time.perf_counter``; on CUDA the device is synchronized around every
  measured call, so each sample is one complete iteration.
* ``flatten_tensors``: every tensor in a (possibly nested) output: tuples,
  lists, dicts, HF ``ModelOutput`` objects and dataclasses.
* ``compare_outputs``: max abs error of a compiled output vs the eager
  reference, the error relative to the reference's scale, and whether it
  passes a dtype-appropriate tolerance (atol + rtol * scale, per tensor).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable

import torch

# (atol, rtol) per dtype: float32 allows for reduction reordering and
# different GEMM/conv algorithms; half types for their short mantissas.
TOLERANCES = {
    torch.float32: (1e-3, 1e-3),
    torch.bfloat16: (5e-2, 5e-2),
    torch.float16: (1e-2, 1e-2),
}


def synchronizer(device: str) -> Callable[[], None]:
    """A function that waits for all queued work on ``device``."""
    if str(device).startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def time_first_call(fn: Callable, inputs: tuple, sync: Callable[[], None]) -> tuple[float, Any]:
    """Time one call of ``fn(*inputs)`` in ms; returns (ms, output)."""
    sync()
    start = time.perf_counter()
    out = fn(*inputs)
    sync()
    return (time.perf_counter() - start) * 1e3, out


def time_iterations(fn: Callable, inputs: tuple, warmup: int, repeat: int,
                    sync: Callable[[], None]) -> list[float]:
    """Run ``warmup`` untimed calls, then return ``repeat`` per-call times in ms."""
    for _ in range(warmup):
        fn(*inputs)
    samples = []
    for _ in range(max(1, repeat)):
        ms, _ = time_first_call(fn, inputs, sync)
        samples.append(ms)
    return samples


def wall_and_enqueue_ms(fn: Callable, inputs: tuple, n: int = 30, idle: bool = False) -> tuple[float, float]:
    """(wall, enqueue) medians in ms of n calls on a CUDA device: wall until
    the GPU finished, enqueue the host time until the call returned.  With
    idle, each call begins on an idle GPU (the host cost alone); otherwise
    only the first does (calls queue behind each other's work)."""
    for _ in range(5):
        fn(*inputs)
    torch.cuda.synchronize()
    wall, enq = [], []
    for _ in range(n):
        if idle:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*inputs)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t0)
        enq.append(t1 - t0)
    return statistics.median(wall) * 1e3, statistics.median(enq) * 1e3


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def flatten_tensors(obj: Any) -> list[torch.Tensor]:
    """All tensors in ``obj``, depth first, in a stable order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):  # includes transformers' ModelOutput (an OrderedDict)
        return [t for v in obj.values() for t in flatten_tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in flatten_tensors(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in flatten_tensors(getattr(obj, f.name))]
    return []


def compare_outputs(ref: Any, out: Any, dtype: torch.dtype) -> dict:
    """Compare ``out`` against the eager ``ref``.

    Returns ``max_abs`` (max |out - ref| over all tensors), ``rel`` (the
    largest per-tensor max |out - ref| / max |ref|) and ``ok``: for every
    tensor, max |out - ref| <= atol + rtol * max |ref|, i.e. the error is
    judged against the tensor's scale rather than element by element (a
    near-zero element from a long reduction legitimately loses all its
    relative precision); NaN/inf must match exactly.  A structural mismatch
    (tensor count, shape) gives ``ok=False`` and a ``mismatch`` string.
    """
    atol, rtol = TOLERANCES.get(dtype, (1e-3, 1e-3))
    refs, outs = flatten_tensors(ref), flatten_tensors(out)
    result = {"max_abs": None, "rel": None, "ok": False, "atol": atol, "rtol": rtol}
    if len(refs) != len(outs):
        result["mismatch"] = f"{len(outs)} output tensors, eager has {len(refs)}"
        return result
    for r, o in zip(refs, outs):
        if r.shape != o.shape:
            result["mismatch"] = f"shape {tuple(o.shape)} vs eager {tuple(r.shape)}"
            return result
    max_abs, rel, ok = 0.0, 0.0, True
    for r, o in zip(refs, outs):
        err, scale = _tensor_error(r, o)
        max_abs = max(max_abs, err)
        rel = max(rel, err / scale if scale > 0 else err)
        ok = ok and err <= atol + rtol * scale
    result.update(max_abs=max_abs, rel=rel, ok=bool(ok))
    return result


def _tensor_error(ref: torch.Tensor, out: torch.Tensor) -> tuple[float, float]:
    """(max |out - ref| over finite values, max |ref|); inf if NaN/inf differ."""
    if ref.numel() == 0:
        return 0.0, 0.0
    r, o = ref.detach().double(), out.detach().double()
    finite = torch.isfinite(r) & torch.isfinite(o)
    same_special = (torch.isnan(r) & torch.isnan(o)) | (torch.isinf(r) & (r == o))
    if not bool((finite | same_special).all()):
        return math.inf, 0.0
    if not bool(finite.any()):
        return 0.0, 0.0
    err = (o - r).abs()[finite].max().item()
    scale = r[finite].abs().max().item()
    return err, scale
