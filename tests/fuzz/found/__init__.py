"""tests/fuzz/found — the fuzzer's reproducers of failures it found, one file
each, kept as they were minimised (each names its issue class).  Every file
prints OK or MISMATCH and exits 0 or 1:

    python tests/fuzz/found/<name>.py
    python -m tests.fuzz.found            # all of them (tests/fuzz/test_found.py)

This module is what the files share (`from tests.fuzz.found import *`):
torch, F, the input helpers every generated program holds (gen.HELPERS),
`start` (a call's generator, size D and out-of-range flag) and `run` (the
comparison with eager, run.check_file).
"""
import sys

import torch
import torch.nn.functional as F

from ..gen import HELPERS

__all__ = ["torch", "F", "_f", "_i", "_b", "_ix", "start", "run"]

exec(HELPERS)


def start(call, seed, shape_calls, bad_call):
    """make_inputs' first line: (generator, D, bad) for call number `call`."""
    return torch.Generator().manual_seed(seed * 1000 + call), 4 + (call in shape_calls), call == bad_call


def run(path):
    from ..run import check_file
    sys.exit(check_file(path))
