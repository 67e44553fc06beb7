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
                    v = n.meta.get("example_value", n.meta.get("val"))
                    print("  placeholder", n.name, type(v).__name__, getattr(v, "shape", v))
            for i, f in enumerate(fakes):
                if isinstance(f, torch.SymInt):
                    print("  fake", i, "SymInt expr", repr(f.node.expr), type(f.node.expr).__name__,
                          "same env", f.node.shape_env is env, "hint", f.node.hint)
                elif isinstance(f, torch.Tensor):
                    print("  fake", i, "tensor", [(type(s).__name__, repr(s.node.expr) if isinstance(s, torch.SymInt)
                                                   else s) for s in f.shape])
            print("  replacements", dict(env.replacements))
            print("  ranges", {str(s): (r.lower, r.upper) for s, r in env.var_to_range.items()})
            for x in env.guards[-3:]:
                print("  guard", x.expr)
                st = getattr(x, "stack", None)
                if st is not None:
                    frames = st.summary() if hasattr(st, "summary") else st
                    for fr in list(frames)[-14:]:
                        print("    ", getattr(fr, "filename", "?")[-60:], getattr(fr, "lineno", "?"),
                              getattr(fr, "name", "?"), (getattr(fr, "line", "") or "")[:100])
                print("    sloc", getattr(x, "sloc", None))
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
