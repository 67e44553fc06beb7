"""Test configuration: one kiln cache directory for the whole run (so CI
compiles each graph once), and debug mode so internal errors fail tests
instead of silently running eagerly."""
import os
import tempfile

_cache = os.environ.get("KILN_TEST_CACHE_DIR") or os.environ.get("KILN_CACHE_DIR") or tempfile.mkdtemp(prefix="kiln-test-cache-")
os.environ["KILN_CACHE_DIR"] = _cache

import kiln  # noqa: E402

kiln.config.cache_dir = _cache
kiln.config.debug = True


import pytest  # noqa: E402
import kiln.cuda  # noqa: E402

_CUDA = None


@pytest.fixture(params=["cpu", "cuda"])
def dev(request):
    """Run a test on the CPU and, where kiln can use one, a CUDA GPU."""
    global _CUDA
    if request.param == "cuda":
        if _CUDA is None:
            _CUDA = kiln.cuda.available()[0]
        if not _CUDA:
            pytest.skip("no CUDA device usable by kiln here")
    return request.param


@pytest.fixture
def fresh_compilers():
    """kiln and TorchDynamo reset before and after the test (a module uses
    it for all its tests with `pytestmark = pytest.mark.usefixtures(...)`)."""
    import torch
    kiln.reset()
    torch._dynamo.reset()
    yield
    kiln.reset()
    torch._dynamo.reset()
