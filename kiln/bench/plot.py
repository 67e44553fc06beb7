"""The benchmark's results as a figure: ``python -m kiln.bench --plot FILE.png``.

Two panels over the models of one run: the speedup over eager of
torch.compile (inductor) and kiln (grouped bars, eager = 1.0 as a line, the
geomeans as a last group), and the compile time of each (torch.compile cold,
kiln cold, kiln warm: grouped bars on a log scale).  The title names the
machine, device, dtype, torch and Python versions and the date of the run.

``plot_results(payload, path)`` takes what the benchmark writes with
``--json`` (``{"meta": ..., "results": [...], "summary": ...}``), so
``--plot FILE.png --from-json results.json`` draws a run made elsewhere (a
GPU machine) here.  matplotlib is imported only here, on the Agg canvas
(no display, pyplot's global state untouched); ``require_matplotlib``
reports its absence before a run starts.
"""
from __future__ import annotations

import json
import math

from .report import add_derived, summarize

INSTALL_HINT = "python -m pip install matplotlib"

# (key in a row, label, colour): eager is the 1.0 line of the speedup panel
SPEEDUPS = [("speedup_inductor", "torch.compile", "#e8893b"),
            ("speedup_kiln", "kiln", "#b3261e")]
COMPILE_TIMES = [("inductor", "cold_compile_s", "torch.compile (cold)", "#e8893b", None),
                 ("kiln", "cold_compile_s", "kiln (cold)", "#b3261e", None),
                 ("kiln", "warm_compile_s", "kiln (warm disk cache)", "#f2a69f", "//")]


class PlotUnavailable(RuntimeError):
    """matplotlib cannot be imported; the message says how to install it."""


def require_matplotlib():
    """The matplotlib module, or PlotUnavailable with an install hint."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    except ImportError as exc:
        raise PlotUnavailable(f"--plot needs matplotlib, which cannot be imported here ({exc}); "
                              f"install it with `{INSTALL_HINT}` (`make setup` does)") from None
    return matplotlib


def load_json(path: str) -> dict:
    """A payload written by ``--json`` (a partial one too); ValueError if it is none."""
    with open(path) as fh:
        payload = json.load(fh)
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise ValueError(f"{path} is not a kiln.bench --json file (no 'results' list)")
    return payload


def _phase(row: dict, phase: str, key: str):
    data = row.get(phase)
    value = data.get(key) if isinstance(data, dict) else None
    return value if _number(value) else None


def _failed(row: dict, key: str) -> bool:
    phase = "inductor" if key == "speedup_inductor" else "kiln"
    data = row.get(phase)
    return isinstance(data, dict) and data.get("ok") is False


def title_lines(meta: dict, summary: dict) -> str:
    """The figure's title: the machine and software, then the geomeans."""
    threads = f", {meta['threads']} threads" if meta.get("threads") else ""
    first = (f"kiln.bench: {meta.get('device_name') or meta.get('device', '?')}{threads}, "
             f"{meta.get('device', '?')} {meta.get('dtype', '?')}")
    date = str(meta.get("date", "?")).replace("T", " ")
    second = f"torch {meta.get('torch', '?')}, Python {meta.get('python', '?')}, {date}"
    modes = [f"{name} mode={meta[key]}" for name, key in (("torch.compile", "inductor_mode"),
                                                          ("kiln", "kiln_mode")) if meta.get(key)]
    if modes:
        second += "; " + ", ".join(modes)
    load, cpus = meta.get("load_average"), meta.get("cpu_count") or 1
    if _number(load) and load > 0.5 * cpus:   # as the text report's warning (machine.format_header)
        second += f"; load {load:.1f} on {cpus} CPUs at start: noisy"
    geo = []
    for key, label, _ in SPEEDUPS:
        g = (summary.get(key) or {}).get("geomean")
        if g:
            geo.append(f"{label} {g:.2f}x")
    third = ("geomean speedup over eager: " + ", ".join(geo)) if geo else ""
    return "\n".join(line for line in (first, second, third) if line)


def _grouped(ax, names, series, width):
    """Bars of several series per group; returns the bar containers by series."""
    n = len(series)
    bars = []
    for i, (values, label, colour, hatch) in enumerate(series):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(names))]
        heights = [v if v is not None else math.nan for v in values]
        bars.append(ax.bar(xs, heights, width, label=label, color=colour, hatch=hatch,
                           edgecolor="white" if hatch is None else "#7a1a14", linewidth=0.5))
    ax.set_xticks(range(len(names)))
    ax.set_xlim(-0.6, len(names) - 0.4)   # missing (NaN) bars take no part in autoscaling
    return bars


def _annotate(ax, container, values, fmt, missing=None):
    """Each bar's value above it; where there is none, ``missing[i]`` (or
    "n/a") at the foot of the axis (which works on a log scale too)."""
    vertical = len(container) > 8
    for i, (rect, v) in enumerate(zip(container, values)):
        x = rect.get_x() + rect.get_width() / 2
        if v is None:
            ax.annotate((missing[i] if missing else "") or "n/a", (x, 0), xycoords=ax.get_xaxis_transform(),
                        xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        color="#666666", rotation=90)
            continue
        ax.annotate(fmt(v), (x, rect.get_height()), xytext=(0, 2), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7, rotation=90 if vertical else 0)


def plot_results(payload: dict, path: str) -> str:
    """Draw ``payload`` (a ``--json`` payload) into ``path`` (PNG, or any
    format matplotlib infers from the suffix); returns ``path``."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    meta = payload.get("meta") or {}
    rows = [add_derived(dict(r)) for r in payload.get("results", []) if isinstance(r, dict) and "model" in r]
    if not rows:
        raise ValueError("no model results to plot")
    summary = payload.get("summary") or summarize(rows)
    names = [r["model"] for r in rows]
    long_names = len(rows) > 6 or max(len(n) for n in names) > 10

    fig = Figure(figsize=(max(7.0, 1.1 * len(rows) + 3.0), 8.5), layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title_lines(meta, summary), fontsize=10)
    ax_speed, ax_time = fig.subplots(2, 1)

    # speedup over eager, with the geomeans (accurate models only, as the table's) last
    groups = names + ["geomean"]
    speed_series, notes = [], []
    for key, label, colour in SPEEDUPS:
        if not any(r.get(key) is not None for r in rows):
            continue   # not run (--no-inductor) or failed everywhere: no bars, no legend entry
        values = [None if _failed(r, key) else r.get(key) for r in rows]
        values.append((summary.get(key) or {}).get("geomean"))
        speed_series.append((values, label, colour, None))
        notes.append(["wrong output" if _failed(r, key) else "" for r in rows] + [""])
    width = 0.8 / max(1, len(speed_series))
    for bars, (values, *_), note in zip(_grouped(ax_speed, groups, speed_series, width),
                                        speed_series, notes):
        _annotate(ax_speed, bars, values, lambda v: f"{v:.2f}x", note)
    ax_speed.axhline(1.0, color="#444444", linestyle="--", linewidth=1, label="eager = 1.0")
    ax_speed.axvline(len(names) - 0.5, color="#bbbbbb", linewidth=0.8)
    ax_speed.set_ylabel("speedup over eager (higher is faster)")
    ax_speed.set_title("steady-state speedup over eager (median per call, interleaved rounds)", fontsize=9)
    top = max([v for s in speed_series for v in s[0] if v is not None] + [1.0])
    ax_speed.set_ylim(0, top * 1.18)
    ticks = [f"{n}\neager {r['eager_ms']:.3g} ms" if _number(r.get("eager_ms")) else n
             for n, r in zip(names, rows)] + ["geomean"]
    ax_speed.set_xticks(range(len(groups)), ticks, rotation=30 if long_names else 0,
                        ha="right" if long_names else "center")
    ax_speed.legend(loc="upper left", fontsize=8, ncols=3, frameon=False)
    ax_speed.grid(axis="y", alpha=0.3)

    # compile times (first call minus one eager call), log scale
    time_series = []
    for phase, key, label, colour, hatch in COMPILE_TIMES:
        values = [_phase(r, phase, key) for r in rows]
        if any(v is not None for v in values):
            time_series.append(([v if v is None or v > 0 else None for v in values], label, colour, hatch))
    if time_series:
        width = 0.8 / len(time_series)
        for bars, (values, *_) in zip(_grouped(ax_time, names, time_series, width), time_series):
            _annotate(ax_time, bars, values, _seconds)
        ax_time.set_yscale("log")
        present = [v for s in time_series for v in s[0] if v is not None]
        ax_time.set_ylim(min(present) / 2.5, max(present) * 4)
        ax_time.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} s"))
        ax_time.legend(loc="upper left", fontsize=8, ncols=3, frameon=False)
    else:
        ax_time.text(0.5, 0.5, "no compile times in these results", ha="center", va="center",
                     transform=ax_time.transAxes)
    ax_time.set_xticks(range(len(names)), names, rotation=30 if long_names else 0,
                       ha="right" if long_names else "center")
    ax_time.set_ylabel("compile time, s (log scale; lower is better)")
    ax_time.set_title("compile time: first call minus one eager call, capture included", fontsize=9)
    ax_time.grid(axis="y", alpha=0.3, which="major")
    fig.savefig(path, dpi=130)
    return path


def _number(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _seconds(v: float) -> str:
    if v >= 10:
        return f"{v:.0f}s"
    if v >= 1:
        return f"{v:.1f}s"
    if v >= 0.1:
        return f"{v:.2f}s"
    return f"{v * 1e3:.2g}ms"
