"""The zoo's timm and torchvision models (tests/models/zoo_vision.py) held to
test_zoo.py's two checks, in the same run: kiln.compile(model) (two calls)
gives eager's outputs, and kiln.explain breaks the graph no more often than
torch._dynamo.explain on the same model.

torchvision does not import beside the main venv's torch (2.13.0), so the
file is skipped there; `make test` runs it in .venv-vision (torch 2.14.1,
torchvision 0.29.1, timm) with this checkout's kiln on PYTHONPATH:

    make setup-vision
    PYTHONPATH=. .venv-vision/bin/python -m pytest -q tests/models/test_zoo_vision.py

The models where kiln breaks more often than TorchDynamo are listed with
kiln's first break in MORE_BREAKS_THAN_DYNAMO, marked xfail(strict=True) as
in test_zoo.py (benchmarks/capture_zoo.py --vision prints the table, with
zoo_vision's benchmark-only models too).  43 models; about 4 minutes on two
busy CPU cores with kiln's disk cache cold, shared about evenly between
TorchDynamo's explain and kiln's C compiles.
"""
import pytest

pytest.importorskip("torchvision", reason="torchvision imports beside torch 2.14.1: run in .venv-vision")
pytest.importorskip("timm", reason="run in .venv-vision")

from tests.models import test_zoo, zoo, zoo_vision  # noqa: E402,F401 (zoo_vision registers the "vision" group)

pytestmark = pytest.mark.filterwarnings("ignore")

# kiln's first break where TorchDynamo has none, by model (measured 2026-12-04: timm's swin and
# visformer at a str Enum comparison, hiera at math.prod of a list attribute; all three fixed since)
MORE_BREAKS_THAN_DYNAMO = {}   # (timm's swin, visformer and hiera: fixed 2026-12-04)


@pytest.mark.parametrize("name", [test_zoo.same_worker(n) for n in zoo.names("vision")])
def test_zoo_output_matches_eager(name):
    test_zoo.check_output(name, test_zoo._result(name))


@pytest.mark.parametrize("name", [test_zoo.same_worker(n, pytest.mark.xfail(
    strict=True, reason=f"kiln breaks more often than TorchDynamo: {MORE_BREAKS_THAN_DYNAMO[n]}"))
    if n in MORE_BREAKS_THAN_DYNAMO else test_zoo.same_worker(n) for n in zoo.names("vision")])
def test_zoo_breaks_no_more_than_dynamo(name):
    test_zoo.check_breaks(name, test_zoo._result(name))
