"""Issue 16, packaging: the sdist carries everything setup.py compiles and
installs (outside this checkout) into something that compiles a function;
native code built for another CPU is never loaded from the disk cache."""
import glob
import os
import subprocess
import sys

import pytest
import torch

import kiln
from kiln import config, pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _f(x):
    return (x * 2 + 1).tanh()


def _built(cache):
    return len(glob.glob(os.path.join(cache, "*", "*.so")))


def test_a_cache_entry_from_another_cpu_is_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    x = torch.randn(64)
    for sig, built in (("cpu A isa 1", 1), ("cpu A isa 1", 1), ("cpu B isa 2", 2)):
        monkeypatch.setattr(pipeline, "_CPU", [sig])
        kiln.reset()
        torch.testing.assert_close(kiln.compile(_f)(x), _f(x))
        assert _built(str(tmp_path)) == built, sig
    kiln.reset()


def test_the_sdist_installs_and_compiles_a_function(tmp_path):
    from setuptools import build_meta  # noqa: F401  (the build backend pyproject names)

    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; "
                        f"print(build_meta.build_sdist({str(dist)!r}))"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    sdist = dist / r.stdout.strip().splitlines()[-1]
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(sdist)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert glob.glob(str(target / "kiln-*.dist-info" / "licenses" / "LICENSE")) or \
        glob.glob(str(target / "kiln-*.dist-info" / "LICENSE*")), os.listdir(target)
    meta = open(glob.glob(str(target / "kiln-*.dist-info" / "METADATA"))[0]).read()
    for line in ("Name: kiln", "License-Expression: MIT", "Requires-Python: <3.14,>=3.11", "Requires-Dist: torch",
                 "Classifier: Programming Language :: Python :: 3.13"):
        assert line in meta, (line, meta[:1500])
    code = ("import torch, kiln; assert kiln.__file__.startswith(%r), kiln.__file__; "
            "f = kiln.compile(lambda x: (x * 2).sin()); x = torch.randn(8); "
            "torch.testing.assert_close(f(x), (x * 2).sin()); print('ok')" % str(target))
    env = dict(os.environ, PYTHONPATH=str(target), KILN_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def _supported(version):
    from packaging.specifiers import SpecifierSet
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        spec = SpecifierSet(tomllib.load(f)["project"]["requires-python"])
    return version in spec


def test_requires_python_names_the_versions_the_capture_supports():
    # the recorder reads each minor version's frames and bytecode: pip must not
    # try a version kiln cannot build on
    assert [v for v in ("3.10", "3.11.7", "3.12.1", "3.13.0", "3.14.0") if _supported(v)] == \
        ["3.11.7", "3.12.1", "3.13.0"]


def test_setup_py_refuses_other_pythons_with_a_message():
    py310 = os.path.expanduser("~/.pyenv/versions/3.10.13/bin/python")
    if not os.path.exists(py310):
        pytest.skip("no CPython 3.10 on this machine to try setup.py with")
    r = subprocess.run([py310, "setup.py", "--name"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "kiln supports CPython 3.11, 3.12 and 3.13" in r.stderr, r.stderr
