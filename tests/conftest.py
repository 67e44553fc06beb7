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
