"""GPU error-record modes (issue 13): per-call time of a GPT-2-sized model
(embedding + 12 pre-norm encoder layers + tied LM head, bf16) under
KILN_CUDA_INDEX_ERRORS off / sync / async, and the call at which an
out-of-range token id raises in each mode.

    python benchmarks/diag/cuda_index_errors.py [MODE ...]   # needs a CUDA GPU; modes in that order
"""
import time

import torch
import torch.nn as nn

import kiln

V, D, T = 50257, 768, 64


class G(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(V, D)
        self.b = nn.Sequential(*[nn.TransformerEncoderLayer(D, 12, 4 * D, batch_first=True, norm_first=True,
                                                            activation="gelu") for _ in range(12)])

    def forward(self, i):
        return self.b(self.e(i))[:, -1] @ self.e.weight.t()


def main():
    m = G().cuda().eval().to(torch.bfloat16)
    ids = torch.randint(0, V, (1, T), device="cuda")
    bad = ids.clone()
    bad[0, 3] = V + 5
    expect = {"off": (None,), "sync": (0,), "async": (1, 2)}
    times = {}
    import sys
    modes = sys.argv[1:] or ["off", "sync", "async"]
    for mode in modes:
        kiln.config.cuda_index_errors = mode
        kiln.reset()
        cf = kiln.compile(m)
        with torch.no_grad():
            for _ in range(20):
                cf(ids)
            torch.cuda.synchronize()
            best = []
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(100):
                    cf(ids)
                torch.cuda.synchronize()
                best.append((time.perf_counter() - t) / 100 * 1e6)
            times[mode] = sorted(best)[2]
            at, msg = None, ""
            for k, x in enumerate((bad, ids, ids, ids)):
                try:
                    cf(x)
                except IndexError as e:
                    at, msg = k, str(e)
                    break
            torch.cuda.synchronize()
            for _ in range(3):
                cf(ids)     # raised once: later calls run clean
            torch.cuda.synchronize()
        ok = at in expect[mode]
        print(f"{mode:6s} {times[mode]:8.0f} us/call (median of 5x100)  bad id raised at call {at} "
              f"{'OK' if ok else 'UNEXPECTED'}  {msg[:90]}")
    if {"off", "sync", "async"} <= set(times):
        print(f"async / off {times['async'] / times['off']:.3f}   sync / off {times['sync'] / times['off']:.3f}")


if __name__ == "__main__":
    main()
