"""kiln.stats — what this process compiled (kiln.explain and the tests read it).

Consumes: the stats dict of each graph the backends compile or run as
captured.  Produces: `compiled_graphs` (one dict per graph since the last
reset), `build_counts` (shared objects built by the C compiler / found in the
disk cache) and `fallback`, the entry of a graph that runs through ATen.
"""
import torch

# Stats of every graph compiled since the last reset (kiln.explain reads them).
compiled_graphs = []
# Shared objects built by running the C compiler / found in the disk cache,
# in this process.
build_counts = {"compiled": 0, "cached": 0}


def count_ops(gm):
    """The ATen ops of an ATen graph module."""
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))


def fallback(aten_ops, reason):
    """Count a graph that runs through ATen (as captured), with the reason."""
    compiled_graphs.append({"aten_ops": aten_ops, "kernels": 0, "externs": 0, "fallbacks": 1, "extern_ops": [],
                            "reason": reason})
