"""`python -m kiln.bench --plot FILE.png` (kiln/bench/plot.py): the figure
of speedups and compile times, drawn from a synthetic result set and from a
saved --json file; matplotlib's absence is a clear error before any run."""
import pathlib
import sys

import pytest

from kiln.bench import plot, report, runner

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(model, eager, ind, kiln, ind_cold, kiln_cold, kiln_warm, ind_ok=True):
    row = {"model": model, "eager_ms": eager, "errors": {}, "warnings": []}
    if ind is not None:
        row["inductor"] = {"median_ms": ind, "cold_compile_s": ind_cold, "ok": ind_ok}
    if kiln is not None:
        row["kiln"] = {"median_ms": kiln, "cold_compile_s": kiln_cold, "ok": True}
        if kiln_warm is not None:
            row["kiln"]["warm_compile_s"] = kiln_warm
    return report.add_derived(row)


def payload():
    """Three models: a complete one, one whose torch.compile output was wrong
    (its bar is left out, as from the geomean), one whose kiln run failed
    and has no warm time."""
    rows = [_row("mlp", 4.4, 4.6, 4.0, 0.99, 0.14, 0.03),
            _row("efficientnet_b0", 7.1, 7.1, 3.8, 20.9, 2.9, 0.76, ind_ok=False),
            _row("bert", 11.7, 10.2, None, 3.3, None, None)]
    rows[2]["errors"]["kiln"] = "RuntimeError: synthetic"
    meta = {"date": "2026-12-04T12:00:00", "python": "3.11.7", "torch": "2.13.0+cpu", "device": "cpu",
            "device_name": "Some CPU", "dtype": "float32", "threads": 2}
    return {"meta": meta, "results": rows, "summary": report.summarize(rows)}


def _is_png(path):
    with open(path, "rb") as fh:
        return fh.read(8) == PNG_MAGIC


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "bench.png"
    assert plot.plot_results(payload(), str(out)) == str(out)
    assert out.stat().st_size > 10_000 and _is_png(out)
    # a run without torch.compile (--no-inductor) draws kiln alone
    p = payload()
    for row in p["results"]:
        row.pop("inductor", None)
        report.add_derived(row)
    plot.plot_results(p, str(tmp_path / "kiln-only.png"))
    assert _is_png(tmp_path / "kiln-only.png")


def test_title_names_machine_versions_and_geomeans():
    p = payload()
    title = plot.title_lines(p["meta"], p["summary"])
    assert "Some CPU, 2 threads" in title and "torch 2.13.0+cpu" in title and "2026-12-04 12:00:00" in title
    # geomeans of the models each ran correctly: torch.compile mlp and bert, kiln mlp and efficientnet_b0
    assert "torch.compile 1.05x, kiln 1.43x" in title


def test_plot_from_saved_json(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    saved, out = tmp_path / "results.json", tmp_path / "from-json.png"
    p = payload()
    del p["summary"]   # a run cut short saves no summary: the plot computes it
    report.write_json(str(saved), p)
    assert runner.main(["--plot", str(out), "--from-json", str(saved)]) == 0
    assert _is_png(out) and f"wrote {out}" in capsys.readouterr().out


def test_from_json_needs_plot_and_a_results_file(tmp_path, capsys):
    assert runner.main(["--from-json", str(tmp_path / "x.json")]) == 2
    assert "--from-json only goes with --plot" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    assert runner.main(["--plot", str(tmp_path / "p.png"), "--from-json", str(bad)]) == 2
    assert "not a kiln.bench --json file" in capsys.readouterr().err


def test_missing_matplotlib_is_a_clear_error_before_running(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib raises ImportError
    with pytest.raises(plot.PlotUnavailable, match="pip install matplotlib"):
        plot.require_matplotlib()
    assert runner.main(["--plot", "never.png", "--models", "mlp"]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err


def test_matplotlib_is_imported_only_for_a_plot():
    import subprocess

    code = ("import sys, kiln.bench.runner, kiln.bench.plot\n"
            "kiln.bench.runner.parse_args(['--models', 'mlp'])\n"
            "assert 'matplotlib' not in sys.modules, 'imported without --plot'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=pathlib.Path(plot.__file__).parents[2])
