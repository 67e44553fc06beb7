"""tests/fuzz/found — the fuzzer's reproducers of failures it found, one file
each, kept as they were minimised (each names its issue class).  Each file is
a program in the form minimize.compact writes: the constants on one line,
make_inputs(g, D, bad) given the call's generator, size and out-of-range flag,
an optional before_call(call), and f.

    python -m tests.fuzz.found NAME ...   # those files (or paths), OK or MISMATCH each
    python -m tests.fuzz.found            # all of them (tests/fuzz/test_found.py)

This module is what the files share (`from tests.fuzz.found import *`):
torch, F and the input helpers every generated program holds (gen.HELPERS).
"""
import torch
import torch.nn.functional as F

from ..gen import HELPERS

__all__ = ["torch", "F", "_f", "_i", "_b", "_ix"]

exec(HELPERS)
