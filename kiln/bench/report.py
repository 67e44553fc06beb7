"""Result tables, summary statistics and JSON output for the kiln benchmark.

A result row is a plain dict per model (see ``runner.run_model``):
``eager_ms``, and per compiler (``inductor``, ``kiln``) a dict with
``median_ms``, ``cold_compile_s``, ``max_abs``, ``ok``...; kiln's also has
``warm_compile_s``.  Failures live in ``row["errors"]`` (phase -> message).
This module derives the ratios, renders the aligned plain-text table, the
geomean summary and the error list, and writes JSON.
"""
from __future__ import annotations

import json
import math
import sys
import traceback

SHORT_ERROR = 72


def shorten(message: str, limit: int = SHORT_ERROR) -> str:
    """First line of ``message``, cut to ``limit`` characters."""
    lines = [line.strip() for line in str(message).strip().splitlines() if line.strip()]
    first = lines[0] if lines else "?"
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _get(row: dict, phase: str, key: str):
    data = row.get(phase)
    return data.get(key) if isinstance(data, dict) else None


def _ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


def add_derived(row: dict) -> dict:
    """Add speedups (>1 = faster than the reference) to ``row`` in place."""
    eager = row.get("eager_ms")
    ind, kiln = _get(row, "inductor", "median_ms"), _get(row, "kiln", "median_ms")
    row["speedup_inductor"] = _ratio(eager, ind)
    row["speedup_kiln"] = _ratio(eager, kiln)
    row["kiln_vs_inductor"] = _ratio(ind, kiln)
    row["cold_compile_ratio"] = _ratio(_get(row, "kiln", "cold_compile_s"),
                                       _get(row, "inductor", "cold_compile_s"))
    row["cold_backend_ratio"] = _ratio(_get(row, "kiln", "cold_backend_s"),
                                       _get(row, "inductor", "cold_backend_s"))
    row["warm_backend_ratio"] = _ratio(_get(row, "kiln", "warm_backend_s"),
                                       _get(row, "inductor", "cold_backend_s"))
    return row


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _accurate(row: dict, *phases: str) -> bool:
    return all(_get(row, p, "ok") is not False for p in phases)


def summarize(rows: list[dict]) -> dict:
    """Geomeans over the models where the quantity exists.

    A compiler's speedups leave out models where its output failed the
    accuracy check (a fast wrong answer is no speedup); compile-time ratios
    keep them.
    """
    def stat(key, *phases):
        vals = [r[key] for r in rows if r.get(key) is not None and _accurate(r, *phases)]
        return {"geomean": geomean(vals), "n": len(vals)}

    return {
        "speedup_inductor": stat("speedup_inductor", "inductor"),
        "speedup_kiln": stat("speedup_kiln", "kiln"),
        "kiln_vs_inductor": stat("kiln_vs_inductor", "inductor", "kiln"),
        "cold_compile_ratio": stat("cold_compile_ratio"),
        "cold_backend_ratio": stat("cold_backend_ratio"),
        "warm_backend_ratio": stat("warm_backend_ratio"),
        "models": len(rows),
        "models_with_errors": sum(1 for r in rows if r.get("errors")),
        "kiln_accuracy_failures": sum(1 for r in rows if not _accurate(r, "kiln")),
        "inductor_accuracy_failures": sum(1 for r in rows if not _accurate(r, "inductor")),
    }


def root_cause(exc: BaseException) -> BaseException:
    """Innermost exception (dynamo wraps backend errors in BackendCompilerFailed)."""
    seen = {id(exc)}
    while True:
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def describe_exception(exc: BaseException) -> str:
    """'Type: message (at file:line in func)' of the root cause, then the outer type."""
    root = root_cause(exc)
    text = f"{type(root).__name__}: {str(root).strip()}"
    frames = traceback.extract_tb(root.__traceback__)
    if frames and getattr(root, "report_location", True):
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno} in {last.name})"
    if root is not exc:
        text += f" [raised as {type(exc).__name__}]"
    return text


# ---------------------------------------------------------------- formatting
def _fmt(value, spec: str, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf"
    return f"{value:{spec}}{suffix}"


def _fmt_err(phase: dict | None) -> str:
    if not isinstance(phase, dict) or "ok" not in phase:
        return "-"
    if phase.get("mismatch"):
        return "MISMATCH"
    return f"{_fmt(phase.get('max_abs'), '.1e')} {'ok' if phase['ok'] else 'FAIL'}"


def _notes(row: dict) -> str:
    notes = [f"{phase}: {shorten(msg)}" for phase, msg in row.get("errors", {}).items()]
    notes += [f"{w}" for w in row.get("warnings", [])]
    return "; ".join(notes)


TABLE_COLUMNS = [
    ("model", "<"), ("eager ms", ">"), ("inductor ms", ">"), ("kiln ms", ">"),
    ("ind x", ">"), ("kiln x", ">"), ("kiln/ind", ">"),
    ("ind cold s", ">"), ("kiln cold s", ">"), ("kiln warm s", ">"),
    ("ind be s", ">"), ("kiln be s", ">"), ("kiln warm be s", ">"),
    ("ind err", ">"), ("kiln err", ">"), ("notes", "<"),
]


def table_cells(row: dict) -> list[str]:
    return [
        row["model"],
        _fmt(row.get("eager_ms"), ".2f"),
        _fmt(_get(row, "inductor", "median_ms"), ".2f"),
        _fmt(_get(row, "kiln", "median_ms"), ".2f"),
        _fmt(row.get("speedup_inductor"), ".2f", "x"),
        _fmt(row.get("speedup_kiln"), ".2f", "x"),
        _fmt(row.get("kiln_vs_inductor"), ".2f", "x"),
        _fmt(_get(row, "inductor", "cold_compile_s"), ".2f"),
        _fmt(_get(row, "kiln", "cold_compile_s"), ".2f"),
        _fmt(_get(row, "kiln", "warm_compile_s"), ".2f"),
        _fmt(_get(row, "inductor", "cold_backend_s"), ".3f"),
        _fmt(_get(row, "kiln", "cold_backend_s"), ".3f"),
        _fmt(_get(row, "kiln", "warm_backend_s"), ".3f"),
        _fmt_err(row.get("inductor")),
        _fmt_err(row.get("kiln")),
        _notes(row),
    ]


def render_table(header: list[tuple[str, str]], body: list[list[str]]) -> str:
    """Aligned plain-text table; ``header`` is [(title, '<' or '>')]."""
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, (h, _) in enumerate(header)]

    def line(cells):
        parts = [f"{c:{align}{w}}" for c, (_, align), w in zip(cells, header, widths)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line([h for h, _ in header]), rule] + [line(r) for r in body])


def format_results(rows: list[dict]) -> str:
    return render_table(TABLE_COLUMNS, [table_cells(r) for r in rows])


def format_summary(summary: dict, kiln_backend: str) -> str:
    def g(key, suffix="x"):
        s = summary[key]
        return f"{_fmt(s['geomean'], '.2f', suffix)} (n={s['n']})"

    label = "kiln" if kiln_backend == "kiln" else f"kiln[backend={kiln_backend}]"
    text = (f"geomean speedup over eager: inductor {g('speedup_inductor')}, "
            f"{label} {g('speedup_kiln')}; kiln vs inductor {g('kiln_vs_inductor')}; "
            f"cold compile time kiln/inductor {g('cold_compile_ratio')}; "
            f"backend (compiler only) kiln/inductor cold {g('cold_backend_ratio')}, "
            f"kiln warm / inductor cold {g('warm_backend_ratio')}")
    failures = [f"{name} {summary[f'{name}_accuracy_failures']}" for name in ("inductor", "kiln")
                if summary[f"{name}_accuracy_failures"]]
    if failures:
        text += f"\naccuracy failures (left out of the speedup geomeans): {', '.join(failures)}"
    if summary["models_with_errors"]:
        text += f"\nmodels with errors: {summary['models_with_errors']} of {summary['models']}"
    return text


def format_legend() -> str:
    return "\n".join([
        "times: median ms per call, eager, inductor and kiln timed in interleaved rounds; "
        "x: speedup (>1 = faster): ind x = eager/inductor, kiln x = eager/kiln, kiln/ind = inductor/kiln",
        "cold: first call of a fresh compile (empty caches, compiler already started in this "
        "process) minus one eager call; warm: the same in a new process whose kiln disk cache "
        "was filled by the cold run (on a GPU, cuDNN's first use of channels-last convolutions "
        "is paid by an eager call before either)",
        "be: seconds inside the backend (the compiler half: AOT lowering + code generation + "
        "native compilation), without TorchDynamo's tracing; kiln warm be uses the disk cache",
        "err: max |compiled - eager| over all outputs; ok if <= atol + rtol * max|eager| per "
        "output tensor (atol = rtol = 1e-3 float32, 1e-2 float16, 5e-2 bfloat16)",
    ])


def format_errors(rows: list[dict]) -> str:
    """Full error messages, one block per failed phase; '' if none."""
    blocks = []
    for row in rows:
        for phase, msg in row.get("errors", {}).items():
            text = str(msg).strip()
            if len(text) > 2000:
                text = text[:2000] + " ..."
            blocks.append(f"[{row['model']} / {phase}] {text}")
    return "\n".join(blocks)


def write_json(path: str, payload: dict) -> None:
    """Write ``payload`` as strict JSON (non-finite floats become null)."""
    with open(path, "w") as fh:
        json.dump(_jsonable(payload), fh, indent=2, allow_nan=False)
        fh.write("\n")


def save_json(path: str | None, payload: dict) -> int:
    """Write ``payload`` to ``path`` if given; exit status 1 if that fails."""
    if not path:
        return 0
    try:
        write_json(path, payload)
    except OSError as exc:
        print(f"error: cannot write {path}: {exc}", file=sys.stderr)
        return 1
    print(f"\nwrote {path}")
    return 0


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)
