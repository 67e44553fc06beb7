"""Machine and software description printed with (and stored in) every result.

``machine_info`` collects date, versions, device name, thread count, load
average and the benchmark settings; ``format_header`` renders them as the report's first lines.
"""
from __future__ import annotations

import datetime
import os
import platform

import torch


def machine_info(args, kiln) -> dict:
    """Settings and environment of this run; ``kiln`` is a compilers.KilnHandle."""
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": args.device,
        "device_name": device_name(args.device),
        "cpu_count": os.cpu_count(),
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "repeat": args.repeat,
        "warmup": args.warmup,
        "kiln_backend": args.kiln_backend,
        "inductor_mode": getattr(args, "inductor_mode", None),
        "kiln_mode": getattr(args, "kiln_mode", None),
        "kiln": kiln.describe(),
        "load_average": load_average(),
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except Exception:
        pass
    return info


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float | None:
    """1-minute load average at start-up (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def format_header(info: dict) -> str:
    text = (f"kiln.bench  {info['date']}  torch {info['torch']}  {info['device']} "
            f"({info['device_name']}, {info['threads']} threads)  {info['dtype']}  "
            f"repeat {info['repeat']} warmup {info['warmup']}\n"
            f"kiln backend {info['kiln_backend']!r}: kiln {info['kiln']}")
    load, cpus = info.get("load_average"), info.get("cpu_count") or 1
    if load is not None and load > 0.5 * cpus:
        text += (f"\nWARNING: load average {load:.1f} on {cpus} CPUs at start: other processes "
                 f"are busy, CPU timings will be noisy")
    return text
