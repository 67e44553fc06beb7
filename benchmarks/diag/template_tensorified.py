"""Does a TransformerEncoderLayer (train(), dropout 0) through
torch.compile(backend="kiln") get a symbolic lowering (issue 17)?  Prints
kiln's counters; run with KILN_LOGS=dynamic to see why not.

    KILN_LOGS=dynamic python benchmarks/diag/template_tensorified.py [--dynamic]
"""
import sys

import torch

import kiln

torch.manual_seed(0)
m = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()
cm = torch.compile(m, backend="kiln", dynamic=True if "--dynamic" in sys.argv else None)
with torch.no_grad():
    for b, s in ((2, 5), (3, 5), (4, 5), (5, 5), (6, 5)):
        x = torch.randn(b, s, 32)
        torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
print(torch.__version__, {k: v for k, v in kiln.stats().items() if v})
