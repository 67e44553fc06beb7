"""The fuzzer's fixed-seed CI slice: 200 programs (150 tensor programs through
kiln.compile and torch.compile(backend="kiln"), 50 capture programs), each
compared with eager call by call; 201 s measured with a cold cache on a
2-core machine shared with other work (load ~8), so under 4 minutes idle.
Throughput there, 2 workers: ~40 tensor programs/min with both entries,
70-100 capture programs/min.  Fails listing every failing seed, with the
first mismatch and the source of the first few (rerun one with
`python -m tests.fuzz --kind KIND --seed SEED --count 1 --minimize`)."""
import contextlib
import glob
import io
import os

import pytest

from .__main__ import main

SEED = 0
COUNT = 200


def test_fuzz_slice(tmp_path):
    out = tmp_path / "fuzz"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["--seed", str(SEED), "--count", str(COUNT), "--kind", "all", "--entry", "both",
                   "--out", str(out), "--timeout", "120"])
    if rc:
        sources = sorted(glob.glob(os.path.join(str(out), "*.py")))[:3]
        shown = "\n\n".join("---- %s\ndef make_inputs%s" % (os.path.basename(p),
                                                             open(p).read().split("\ndef make_inputs")[1])
                            for p in sources)
        pytest.fail("fuzz slice (seeds %d..%d) found failures:\n%s\n\nfirst reproducers:\n%s" % (
            SEED, SEED + COUNT - 1, buf.getvalue(), shown), pytrace=False)
