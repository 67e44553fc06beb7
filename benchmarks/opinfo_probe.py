"""One OpInfo at one dtype on a device, over many random draws of its
samples: how far kiln is from eager compared with eager's own distance from
the same computation in float32 (the sweep's low-precision criterion), and
the worst sample in detail.  For chasing a rare low-precision disagreement
the sweep reports.

    python benchmarks/opinfo_probe.py OPNAME [--dtype bfloat16] [--device cuda] [--draws 20]
"""
import argparse
import sys
import types
import unittest

import torch

try:
    import expecttest  # noqa: F401  (torch's test utilities import it)
except ImportError:
    _stub = types.ModuleType("expecttest")
    _stub.TestCase = unittest.TestCase
    _stub.ACCEPT = False
    sys.modules["expecttest"] = _stub
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import kiln


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("op")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--draws", type=int, default=20)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    info = next(o for o in op_db if o.name == a.op)
    worst, n, bad = None, 0, 0
    for draw in range(a.draws):
        torch.manual_seed(draw)
        for s in info.sample_inputs(a.device, dtype):
            def fn(x, *args, _s=s):
                return info.op(x, *args, **_s.kwargs)
            args = (s.input, *s.args)
            if not all(isinstance(t, torch.Tensor) for t in args):
                continue
            eager = fn(*args)
            kiln.reset()
            got = kiln.compile(fn)(*args)
            ref = fn(*[t.float() if t.is_floating_point() else t for t in args])
            e64, g64, r64 = (t.double() for t in (eager, got, ref))
            bound = 1.6e-2 + 1.6e-2 * e64.abs() + 2 * (e64 - r64).abs()
            excess = ((g64 - e64).abs() - bound).max().item()
            n += 1
            bad += excess > 0
            if worst is None or excess > worst[0]:
                worst = (excess, s, eager, got, ref)
    print(f"{a.op} {a.dtype}: {n} samples, {bad} beyond the bound")
    excess, s, eager, got, ref = worst
    print("worst excess", excess, s)
    print("eager", eager.flatten()[:12])
    print("kiln ", got.flatten()[:12])
    print("f32  ", ref.flatten()[:12])


if __name__ == "__main__":
    main()
