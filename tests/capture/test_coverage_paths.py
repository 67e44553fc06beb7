"""Issue 15: kiln records library code the way it records the user's (with
kiln.config.capture_libraries, KILN_CAPTURE_LIBRARIES=1: off by default until
the wrong results it exposed in the zoo are fixed).  A
frame under site-packages (transformers' model code, a decorator wrapper's
`forward`) is recorded when the hook meets it (after a graph break, say), even
where site-packages sits inside the standard library's folder; only torch,
kiln, the standard library and a few tools are skipped — a module of one file
(typing_extensions) skips that file, not its folder."""
import os
import sys
import sysconfig
import types

import torch

import kiln
from kiln import _capture


def _skipped(path, rules):
    best, skip = -1, False
    for prefix, s in rules:
        if path.startswith(prefix) and len(prefix) > best:
            best, skip = len(prefix), s
    return skip


def test_site_packages_is_recorded_even_inside_the_stdlib_folder(monkeypatch):
    monkeypatch.setattr(kiln.config, "capture_libraries", True)
    std = sysconfig.get_paths()["stdlib"]
    inside = os.path.join(std, "site-packages")
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"stdlib": std, "platstdlib": std,
                                                                  "purelib": inside, "platlib": inside})
    rules = _capture._path_rules()
    assert not _skipped(os.path.join(inside, "transformers", "models", "bert.py"), rules)
    assert _skipped(os.path.join(std, "json", "decoder.py"), rules)
    assert _skipped(os.path.join(os.path.dirname(torch.__file__), "nn", "functional.py"), rules)
    monkeypatch.setattr(kiln.config, "capture_libraries", False)   # the default for now
    assert _skipped(os.path.join(inside, "transformers", "models", "bert.py"), _capture._path_rules())


def test_a_one_file_module_skips_the_file_not_its_folder(tmp_path, monkeypatch):
    fake = types.ModuleType("typing_extensions")
    fake.__file__ = str(tmp_path / "typing_extensions.py")
    monkeypatch.setitem(sys.modules, "typing_extensions", fake)
    rules = _capture._path_rules()
    assert _skipped(str(tmp_path / "typing_extensions.py"), rules)
    assert not _skipped(str(tmp_path / "modeling_x.py"), rules)


def test_a_library_frame_after_a_break_is_recorded(tmp_path, monkeypatch):
    # a package in a site-packages folder whose root is a decorator wrapper
    # (as transformers' can_return_tuple) and whose forward breaks: the
    # forward runs as Python from the break on and is recorded as a frame of
    # its own (with the old rule, as plain Python: one graph at most)
    site_dir = tmp_path / "site-packages"
    (site_dir / "zoolib").mkdir(parents=True)
    (site_dir / "zoolib" / "__init__.py").write_text(
        "import functools\n"
        "import torch\n"
        "def wrapper(fn):\n"
        "    @functools.wraps(fn)\n"
        "    def w(*a, **k):\n"
        "        return fn(*a, **k)\n"
        "    return w\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.l = torch.nn.Linear(4, 4)\n"
        "    @wrapper\n"
        "    def forward(self, x):\n"
        "        y = self.l(x).relu()\n"
        "        print('between')\n"
        "        return y * 2 + 1\n")
    monkeypatch.setattr(kiln.config, "capture_libraries", True)
    monkeypatch.syspath_prepend(str(site_dir))
    import site
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(site_dir)])
    # typing_extensions is one file in site-packages: its folder (all of
    # site-packages) was skipped
    fake = types.ModuleType("typing_extensions")
    fake.__file__ = str(site_dir / "typing_extensions.py")
    monkeypatch.setitem(sys.modules, "typing_extensions", fake)
    _capture.setup()
    try:
        import zoolib
        m = zoolib.Net()
        x = torch.randn(2, 4)
        ex = kiln.explain(m, backend="eager")(x)
        assert ex.graph_count == 2 and ex.graph_break_count == 1 and sum(ex.ops_per_graph) >= 4, ex
        torch.testing.assert_close(kiln.compile(m)(x), m(x))
    finally:
        monkeypatch.undo()
        sys.modules.pop("zoolib", None)
        _capture.setup()
