"""Capture check over every model the benchmark zoo can build here (the GPU
machine adds torchvision and timm): kiln.explain with backend "eager" — graphs,
graph breaks and their reasons — and the compiled output against eager.

    python benchmarks/capture_models.py [model ...]
"""
import sys
import time
import warnings

import torch

import kiln
from kiln.bench import models


def main(names):
    warnings.simplefilter("ignore")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except Exception:
        pass
    specs = [s for s in models.MODELS.values() if s.available() and (not names or s.name in names)]
    print(f"kiln capture check  torch {torch.__version__}  Python {sys.version.split()[0]}")
    print(f"{'model':10} {'graphs':>6} {'breaks':>6} {'ops':>6} {'record s':>8}  same  first break")
    for spec in specs:
        torch.manual_seed(0)
        batch, seq = spec.resolve_shape(models.BuildConfig())
        m, args = spec.builder(min(batch, 2), seq)
        m = m.eval()
        with torch.no_grad():
            t = time.perf_counter()
            ex = kiln.explain(m, backend="eager")(*args)
            rec = time.perf_counter() - t
            cm = kiln.compile(m, backend="eager")
            same = torch.allclose(cm(*args), m(*args), rtol=1e-4, atol=1e-4)
        first = str(ex.breaks[0]) if ex.breaks else ""
        print(f"{spec.name:10} {ex.graph_count:6} {ex.graph_break_count:6} {sum(ex.ops_per_graph):6} {rec:8.2f}  "
              f"{'yes' if same else 'NO':4}  {first[:150]}")


if __name__ == "__main__":
    main(sys.argv[1:])
