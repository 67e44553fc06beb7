"""Why a graph gets no symbolic lowering: where each size symbol the
lowering uses came from (the ShapeEnv's sources), against the symbols the
graph's inputs carry.  Runs the TransformerEncoderLayer of
tests/compile/test_template.py through torch.compile(backend="kiln") over
a few batch sizes and prints, for every Template refused, the graph's
placeholders, their example values' sizes, and the refused symbol's
sources and replacement.

    python benchmarks/diag/template_sources.py
"""
import sys

import torch

import kiln
from kiln import fx_bridge, template


def main():
    orig = template.Template.__init__

    def traced(self, g, fakes, lower):
        try:
            orig(self, g, fakes, lower)
        except fx_bridge.Unsupported as e:
            print("refused:", e)
            env = template._shape_env(fakes)
            for n in g.graph.nodes:
                if n.op == "placeholder":
                    print("  placeholder", n.name, n.meta.get("example_value", n.meta.get("val")))
            for i, f in enumerate(fakes):
                print("  fake", i, type(f).__name__, getattr(f, "shape", f))
            for s, srcs in getattr(env, "var_to_sources", {}).items():
                print("  source", s, [x.name() for x in srcs], "->", env.replacements.get(s))
            raise
    template.Template.__init__ = traced
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()
    cm = torch.compile(m, backend="kiln")
    with torch.no_grad():
        for b in (2, 3, 4, 5):
            x = torch.randn(b, 5, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    print({k: v for k, v in kiln.stats().items() if "template" in k or k == "fallbacks"})
    print("torch", torch.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
