"""Timing and accuracy helpers for the kiln benchmark.

* ``time_first_call`` / ``time_iterations``: wall-clock timing with
  ``time.perf_counter``; on CUDA the device is synchronized around every
  measured call, so each sample is one complete iteration.
* ``flatten_tensors``: every tensor in a (possibly nested) output: tuples,
  lists, dicts, HF ``ModelOutput`` objects and dataclasses.
* ``compare_outputs``: max abs error of a compiled output vs the eager
  reference, the error relative to the reference's scale, and whether it
  passes a dtype-appropriate tolerance.
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

    Returns ``max_abs`` (max |out - ref| over all tensors), ``rel`` (max_abs
    divided by max |ref|), ``ok`` (every element within atol + rtol*|ref|, NaNs
    must match) and ``atol``/``rtol`` used.  A structural mismatch (tensor
    count, shape) yields ``ok=False`` and an explanatory ``mismatch`` string.
    """
    atol, rtol = TOLERANCES.get(dtype, (1e-3, 1e-3))
    refs, outs = flatten_tensors(ref), flatten_tensors(out)
    result = {"max_abs": None, "rel": None, "ok": False, "atol": atol, "rtol": rtol}
    if len(refs) != len(outs):
        result["mismatch"] = f"{len(outs)} output tensors, eager has {len(refs)}"
        return result
    max_abs, scale, ok = 0.0, 0.0, True
    for r, o in zip(refs, outs):
        if r.shape != o.shape:
            result["mismatch"] = f"shape {tuple(o.shape)} vs eager {tuple(r.shape)}"
            return result
        if r.numel() == 0:
            continue
        r64, o64 = r.detach().double(), o.detach().double()
        diff = (o64 - r64).abs()
        finite = torch.isfinite(diff)
        if bool(finite.any()):
            max_abs = max(max_abs, diff[finite].max().item())
        if not bool(finite.all()):
            # inf/nan differences: fine only where both sides agree exactly.
            both_nan = torch.isnan(r64) & torch.isnan(o64)
            same_inf = torch.isinf(r64) & (r64 == o64)
            if not bool((finite | both_nan | same_inf).all()):
                max_abs = math.inf
        scale = max(scale, r64[torch.isfinite(r64)].abs().max().item() if bool(torch.isfinite(r64).any()) else 0.0)
        ok = ok and torch.allclose(o64, r64, atol=atol, rtol=rtol, equal_nan=True)
    result.update(max_abs=max_abs, rel=max_abs / scale if scale > 0 else max_abs, ok=bool(ok))
    return result
