"""docs/CONFIG.md lists every knob: each kiln.config attribute, each KILN_*
environment variable the package, the build and the test harness read, and
kiln.compile's modes and option keys.  A knob added without its row fails
here."""
import pathlib
import re
import types

from kiln import backends, config

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "CONFIG.md").read_text()
# where KILN_* variables are read (tests/: the harnesses' own variables)
READERS = ["kiln/**/*.py", "src/**/*.[ch]", "setup.py", "Makefile", "tests/conftest.py",
           "tests/ops/test_opinfo.py", "tests/fuzz/*.py", "tests/models/*.py"]


def _documented(name):
    return f"`{name}`" in DOC or re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", DOC) is not None


def test_every_config_attribute_is_documented():
    names = [n for n, v in vars(config).items()
             if not n.startswith("_") and not isinstance(v, (types.ModuleType, types.FunctionType))]
    assert "cache_dir" in names and "cc_timeout" in names
    assert [n for n in names if not _documented(n)] == []


def test_every_environment_variable_is_documented():
    found = set()
    for pattern in READERS:
        for path in ROOT.glob(pattern):
            found |= set(re.findall(r"\bKILN_[A-Z0-9_]+\b", path.read_text(errors="replace")))
    # include guards of C headers and the benchmark's output marker are no variables
    found = {v for v in found if not v.endswith("_H") and v != "KILN_BENCH_WARM"}
    assert {"KILN_DEBUG", "KILN_ASAN", "KILN_OPINFO_OPS"} <= found
    assert sorted(v for v in found if not _documented(v)) == []


def test_every_mode_and_option_is_documented():
    for mode in backends.MODES:
        assert mode is None or f'`"{mode}"`' in DOC, mode
    for key in backends.OPTION_KNOBS:
        assert _documented(key), key
    for key in backends.OPTION_ALIASES:
        assert f'`"{key}"`' in DOC, key
