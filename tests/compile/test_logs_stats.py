"""What kiln tells a user (issue 16, item 4): log topics through Python's
logging (kiln/logs.py), kiln.stats() (kiln/counters.py), the cache-limit
warning naming the guard and the knob, and the progress line (kiln/progress.py)."""
import inspect
import io
import logging
import os
import subprocess
import sys
import time
import warnings

import pytest
import torch

import kiln
from kiln import _capture, config, logs, pipeline, progress


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def text(self, topic):
        return [r.getMessage() for r in self.records if r.name == "kiln." + topic]


@pytest.fixture
def records():
    """The records of the `kiln` logger; every topic off again afterwards."""
    h = _Records()
    logging.getLogger("kiln").addHandler(h)
    kiln.reset()
    yield h
    logging.getLogger("kiln").removeHandler(h)
    kiln.set_logs()
    kiln.reset()


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if text in l)


def test_recompile_log_names_the_frame_and_the_failed_guard(records):
    def scaled(x):
        return x * 2 + 1

    kiln.set_logs("recompiles")
    c = kiln.compile(scaled)
    c(torch.ones(3))
    assert not records.text("recompiles")
    c(torch.ones(4))
    (msg,) = records.text("recompiles")
    assert f"scaled ({__file__}:{scaled.__code__.co_firstlineno})" in msg
    assert "x: Tensor torch.float32 cpu size=(3,)" in msg           # the guard: what it expects
    assert "(got Tensor torch.float32 cpu size=(4,)" in msg          # and what it saw


def test_graph_break_log_names_the_reason_and_the_line(records):
    def noisy(x):
        y = x.sin()
        print("between the graphs")
        return y.cos()

    kiln.set_logs(graph_breaks=True)
    kiln.compile(noisy)(torch.ones(2))
    (msg,) = records.text("graph_breaks")
    assert f"graph break in {noisy.__qualname__} ({__file__}:{_line_of(noisy, 'print(')})" in msg
    assert "print()" in msg and 'print("between the graphs")' in msg


def test_topics_off_cost_nothing_and_log_nothing(records):
    kiln.set_logs()
    assert _capture.recompiled is None and _capture.dump_guards is None   # the C core calls nothing
    assert not any(isinstance(h, logs._Stderr) for h in logging.getLogger("kiln").handlers)
    c = kiln.compile(lambda x: x + 1)
    c(torch.ones(2))
    c(torch.ones(3))
    assert records.records == []
    kiln.set_logs("guards,recompiles")
    assert _capture.recompiled is not None and _capture.dump_guards is not None
    assert any(isinstance(h, logs._Stderr) for h in logging.getLogger("kiln").handlers)


def test_kiln_logs_parsing():
    assert logs.parse("graph_breaks,+recompiles") == {"graph_breaks", "recompiles"}
    assert logs.parse("all,-kernels,-graph") == set(logs.TOPICS) - {"kernels", "graph"}
    assert logs.parse(" perf  fallbacks") == {"perf", "fallbacks"}
    assert logs.parse("code,capture") == {"kernels", "graph"}   # KILN_DUMP's stages
    with pytest.warns(RuntimeWarning, match="unknown topic.*nope.*graph_breaks"):
        assert logs.parse("nope,guards") == {"guards"}
    with pytest.raises(ValueError, match="unknown topic"):
        kiln.set_logs(nope=True)


def test_torch_logs_names_switch_kiln_topics_on():
    assert logs.parse("", "graph_breaks,+recompiles,output_code,graph_code,perf_hints,+dynamo,aot") == \
        {"graph_breaks", "recompiles", "kernels", "graph", "perf"}
    assert logs.parse("-recompiles", "recompiles,guards") == {"guards"}
    code = ("import torch, kiln\n"
            "def f(x):\n    return x * 2\n"
            "c = kiln.compile(f, backend='eager')\nc(torch.ones(2))\nc(torch.ones(3))\n")
    env = dict(os.environ, TORCH_LOGS="recompiles", KILN_LOGS="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr
    assert "kiln.recompiles: recompiling f (<string>:2)" in out.stderr and "size=(2,)" in out.stderr


def test_stats_count_breaks_recompiles_fallbacks_and_reset(records):
    def two_graphs(x):
        y = x.exp()
        print("break")
        return y - 1

    def many(*xs):   # an ATen call past the extern's 16 results: kiln's compiler declines the graph
        return torch._foreach_add(list(xs), 1)

    kiln.set_logs("fallbacks")
    s0 = kiln.stats()
    assert s0["graph_breaks"] == s0["recompiles"] == s0["fallbacks"] == s0["compiles"] == 0
    c = kiln.compile(two_graphs)
    c(torch.ones(3))
    c(torch.ones(5))                      # a new size: both segments record again
    kiln.compile(many)(*[torch.ones(2) for _ in range(20)])
    s = kiln.stats()
    assert s["graph_breaks"] == 2 and s["recompiles"] == 2 and s["captures"] == 5
    assert s["fallbacks"] == 1 and s["compiles"] == 4 and s["compile_seconds"] > 0
    assert s["cache_hits"] + s["lowering_cache_hits"] >= 0
    (msg,) = records.text("fallbacks")
    assert "runs through ATen" in msg and "an extern call's limit" in msg
    kiln.reset()
    assert all(v == 0 for v in kiln.stats().values())


def test_stats_count_disk_cache_hits(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    kiln.reset()
    f = kiln.compile(lambda x: x.tanh() * 3)
    f(torch.ones(7))
    assert kiln.stats()["cache_hits"] == 0 and kiln.stats()["compiles"] == 1
    kiln.reset()
    kiln.compile(lambda x: x.tanh() * 3)(torch.ones(7))
    assert kiln.stats()["cache_hits"] == 1 and kiln.stats()["lowering_cache_hits"] == 1


def test_cache_limit_warning_names_the_guard_and_the_knob(monkeypatch):
    monkeypatch.setattr(config, "cache_size_limit", 2)
    kiln.reset()

    def grows(x):
        return x + 1

    c = kiln.compile(grows, dynamic=False)   # (every shape its own recording)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (1, 2, 3, 4):
            torch.testing.assert_close(c(torch.ones(n)), torch.ones(n) + 1)
    (msg,) = [str(m.message) for m in w if "cache_size_limit" in str(m.message)]
    assert "kiln.config.cache_size_limit" in msg and "2 recordings" in msg
    assert "x: Tensor torch.float32 cpu size=(2,)" in msg and "(got Tensor torch.float32 cpu size=(3,)" in msg
    assert f"grows ({__file__}:" in msg
    assert kiln.stats()["frames_run_as_python"] == 2
    kiln.reset()


def test_kiln_dump_goes_to_stderr_not_stdout(capsys, monkeypatch):
    monkeypatch.setattr(config, "dump", {"code"})
    kiln.reset()
    kiln.compile(lambda x: x.sigmoid() + 2)(torch.ones(5))
    out, err = capsys.readouterr()
    assert "void kn_k0" not in out and "void kn_k0" in err and "generated code:" in err


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_quiet_off_a_terminal_and_shows_the_phase_on_one(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    assert progress.start("a graph") is None          # pytest's stderr is no terminal: no thread, no line
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    watch = progress.start("a graph")
    assert watch is not None
    with pipeline.phase("c_core"):
        deadline = time.time() + 10
        while "generating code" not in tty.getvalue() and time.time() < deadline:
            time.sleep(0.05)
    progress.stop(watch)
    assert "kiln: " in tty.getvalue() and "compiling a graph: generating code" in tty.getvalue()
    assert "compiled a graph in" in tty.getvalue()
    assert watch not in pipeline.phase_hooks
    monkeypatch.setattr(config, "progress", False)
    assert progress.start("a graph") is None          # KILN_PROGRESS=0
