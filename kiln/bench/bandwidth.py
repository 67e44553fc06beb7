"""Memory-bandwidth benchmark: ``python -m kiln.bench --bandwidth``.

Measures
  * the machine's copy bandwidth: ``y.copy_(x)`` on a large tensor,
    bytes = 1 read + 1 write of it;
  * the memory-bound kernel ``f(x, b, r) = gelu(x + b) + r`` (x, r large,
    b a small bias broadcast over the last dimension) in eager, inductor and
    kiln, bytes = 2 reads (x, r) + 1 write (result) of the large tensors plus
    the bias: the minimum traffic of a fully fused kernel.  Unfused eager
    moves more than that, so its figure is an "effective" bandwidth.
and reports GB/s (1e9 bytes/s) of each and its fraction of copy bandwidth.

On Linux/glibc CPUs, large allocations normally come from fresh mmap()s and
pay page faults on every call, which would measure the kernel rather than the
generated code; ``keep_big_buffers`` tells malloc to reuse freed memory
instead (reported in the output).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

import torch
from tqdm import tqdm

from .compilers import (captured_kiln_warnings, check_backend, inductor_cache_dir,
                        kiln_cache_dir, kiln_graph_stats, reset_compilers)
from .machine import format_header, machine_info
from .measure import compare_outputs, median, time_first_call, time_iterations
from .report import describe_exception, render_table, save_json, shorten

LAST_DIM = 4096
DEFAULT_NUMEL = {"cpu": 64 * 2**20, "cuda": 256 * 2**20}


def gelu_bias_residual(x, b, r):
    return torch.nn.functional.gelu(x + b) + r


def keep_big_buffers(device: str) -> bool:
    """Ask glibc not to mmap/unmap large blocks (CPU only); True if applied."""
    if device != "cpu" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_max = -1, -4
        return bool(libc.mallopt(m_mmap_max, 0)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))
    except Exception:
        return False


def make_tensors(numel: int, device: str, dtype: torch.dtype):
    rows = max(1, numel // LAST_DIM)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(rows, LAST_DIM, device=device, dtype=dtype, generator=gen)
    r = torch.randn(rows, LAST_DIM, device=device, dtype=dtype, generator=gen)
    b = torch.randn(LAST_DIM, device=device, dtype=dtype, generator=gen)
    return x, b, r


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def measure_copy(x, session) -> dict:
    y = torch.empty_like(x)
    args = session.args
    samples = time_iterations(lambda a: y.copy_(a), (x,), args.warmup, args.repeat, session.sync)
    nbytes = 2 * x.numel() * x.element_size()
    return {"name": "copy", "median_ms": median(samples), "bytes": nbytes,
            "gbps": gbps(nbytes, median(samples))}


def measure_kernel(name: str, fn, inputs, ref, session) -> dict:
    x, b, r = inputs
    args = session.args
    first_ms, out = time_first_call(fn, inputs, session.sync)
    result = {"name": name, "first_call_ms": first_ms}
    if ref is not None:
        result.update(compare_outputs(ref, out, session.dtype))
    del out
    samples = time_iterations(fn, inputs, args.warmup, args.repeat, session.sync)
    nbytes = 3 * x.numel() * x.element_size() + b.numel() * b.element_size()
    result.update(median_ms=median(samples), bytes=nbytes, gbps=gbps(nbytes, median(samples)))
    return result


def compile_kernel(backend: str, session):
    check_backend(backend, session.kiln)
    reset_compilers(session.kiln)
    return torch.compile(gelu_bias_residual, backend=backend)


def variants(session) -> list[tuple]:
    """(name, context factory, backend or None) for each kernel variant."""
    out = [("eager", None, None)]
    if not session.args.no_inductor:
        out.append(("inductor", lambda: inductor_cache_dir(session.fresh_dir("inductor")), "inductor"))
    kiln_dir = session.fresh_dir("kiln-bandwidth")
    out.append(("kiln", lambda: kiln_cache_dir(kiln_dir, session.kiln), session.args.kiln_backend))
    return out


def run_variant(name, context, backend, inputs, ref, session) -> dict:
    if backend is None:
        return measure_kernel(name, gelu_bias_residual, inputs, ref, session)
    kiln_warnings: list[str] = []
    with context(), captured_kiln_warnings(kiln_warnings):
        result = measure_kernel(name, compile_kernel(backend, session), inputs, ref, session)
    if backend == "kiln":
        result["graph_stats"] = kiln_graph_stats(session.kiln)
    result["warnings"] = sorted(set(kiln_warnings))
    return result


def bandwidth_note(res: dict) -> str:
    stats = res.get("graph_stats") or {}
    if stats.get("fallbacks"):
        return f"ran {stats['fallbacks']} of {stats['graphs']} graph(s) eagerly"
    if res.get("warnings"):
        return f"warned: {shorten(res['warnings'][0], 60)}"
    return ""


def format_rows(results: list[dict], copy_gbps: float | None) -> str:
    header = [("kernel", "<"), ("median ms", ">"), ("GB/s", ">"), ("of copy", ">"),
              ("first call ms", ">"), ("max abs err", ">"), ("notes", "<")]
    body = []
    for res in results:
        if "error" in res:
            body.append([res["name"], "-", "-", "-", "-", "-", f"error: {shorten(res['error'], 60)}"])
            continue
        frac = f"{res['gbps'] / copy_gbps:.0%}" if copy_gbps else "-"
        err = "-" if "max_abs" not in res else f"{res['max_abs']:.1e} {'ok' if res['ok'] else 'FAIL'}"
        first = f"{res['first_call_ms']:.1f}" if "first_call_ms" in res else "-"
        body.append([res["name"], f"{res['median_ms']:.2f}", f"{res['gbps']:.1f}", frac,
                     first, err, bandwidth_note(res)])
    return render_table(header, body)


def measure_all(session, inputs) -> list[dict]:
    """Copy, then each kernel variant; a failing variant becomes an error row."""
    todo = variants(session)
    results: list[dict] = []
    with torch.no_grad(), tqdm(total=2 + len(todo), file=sys.stderr, unit="step") as bar:
        bar.set_description("starting compilers")
        session.prime([backend for _, _, backend in todo if backend])
        bar.update(1)
        bar.set_description("copy")
        results.append(measure_copy(inputs[0], session))
        bar.update(1)
        ref = None
        for name, context, backend in todo:
            bar.set_description(name)
            try:
                results.append(run_variant(name, context, backend, inputs, ref, session))
                if backend is None:
                    ref = gelu_bias_residual(*inputs)
            except Exception as exc:
                results.append({"name": name, "error": describe_exception(exc)})
                tqdm.write(f"[bandwidth] {name} FAILED: {shorten(results[-1]['error'], 200)}",
                           file=sys.stderr)
            bar.update(1)
    copy_gbps = results[0]["gbps"]
    for res in results:
        if "gbps" in res:
            res["fraction_of_copy"] = res["gbps"] / copy_gbps
    return results


def print_bandwidth(info: dict, x: torch.Tensor, results: list[dict]) -> None:
    copy_gbps = results[0]["gbps"]
    print()
    print(format_header(info))
    print(f"big tensors: {tuple(x.shape)} {info['dtype']} = "
          f"{x.numel() * x.element_size() / 2**20:.0f} MiB each; f(x, b, r) = gelu(x + b) + r "
          f"counted as 2 reads + 1 write; copy as 1 read + 1 write; "
          f"malloc keeps big buffers: {info['malloc_keeps_big_buffers']}")
    print()
    print(format_rows(results, copy_gbps))
    kiln = next((r for r in results if r["name"] == "kiln" and "gbps" in r), None)
    if kiln:
        print(f"\nkiln fused kernel: {kiln['gbps']:.1f} GB/s = "
              f"{kiln['fraction_of_copy']:.0%} of copy bandwidth ({copy_gbps:.1f} GB/s)")
    sys.stdout.flush()


def run_bandwidth(session) -> int:
    """Entry point of ``--bandwidth``; returns the exit status."""
    args = session.args
    info = machine_info(args, session.kiln)
    info["malloc_keeps_big_buffers"] = keep_big_buffers(args.device)
    numel = args.bw_numel or DEFAULT_NUMEL[args.device]
    try:
        inputs = make_tensors(numel, args.device, session.dtype)
    except Exception as exc:  # e.g. out of memory
        print(f"error: cannot allocate the {numel}-element tensors: {describe_exception(exc)}",
              file=sys.stderr)
        return 1
    results = measure_all(session, inputs)
    print_bandwidth(info, inputs[0], results)
    return save_json(args.json, {"meta": info, "numel": inputs[0].numel(), "results": results})
