"""What one symbolic propagation instead of two could save (issue 17; the
design in docs/plans/dynamic-shapes.md, "Next (stop 43)").  A symbolic
compile propagates fake tensors twice: the recording runs the user's code
on fresh symbolic fakes (every fake-cache lookup a miss), then the lowering
(make_fx with kiln's decompositions, kiln/trace.py _trace_plain) runs the
captured graph on the same fakes again.  Recording under make_fx's proxy
tracer would leave one propagation, the lowering's, but run cold.

For one model's symbolic graph (kiln.compile(model, dynamic=True) with a
backend that keeps the captured graph and its example inputs), each round
makes fresh symbolic fakes of its inputs in a fresh fake mode (a new
ShapeEnv: its fake cache is empty, as at a recording) and times

  two   the captured graph run on them (the recording's propagation, without
        the recorder) and then the lowering: what a symbolic compile does
  one   the lowering alone on cold fakes: what one propagation would cost

so two - one is the most one propagation could save (the recorder's own
work, input fakes and guards, stays in both).  Rounds alternate; medians.

    python benchmarks/diag/one_propagation_estimate.py bert [ROUNDS]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
from torch._dispatch.python import enable_python_dispatcher  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import kiln  # noqa: E402
from kiln import symbolic  # noqa: E402
from kiln.bench import models  # noqa: E402
from kiln.decomp import decompositions  # noqa: E402


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "bert"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.manual_seed(0)
    model, example, _ = models.build_model(models.MODELS[name], models.BuildConfig())
    model.eval()
    got = []

    def keep(gm, example_inputs):
        got.append((gm, list(example_inputs)))
        return gm.forward

    fn = kiln.compile(model, backend=keep, dynamic=True)
    with torch.no_grad():
        fn(*example)
    gm, examples = got[0]
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]

    def fresh():
        """fresh symbolic fakes of gm's inputs (the recording's dims
        symbolic), in a fresh fake mode"""
        mode = symbolic.new_mode()
        fakes, syms = [], {}
        for n, real in zip(places, examples):
            was = n.meta["example_value"]
            if isinstance(real, torch.Tensor):
                dims = tuple(d for d in range(was.dim()) if isinstance(was.shape[d], torch.SymInt))
                if dims:
                    fake, pairs = symbolic.symbolic_fake(mode, real, n.name, dims)
                    syms.update((str(was.shape[d]), s) for d, s in pairs)
                else:
                    fake = mode.from_tensor(real, static_shapes=True)
                fakes.append(fake)
            else:   # a size input: the SymInt its tensor's dim became
                fakes.append(syms[str(was)])
        return mode, fakes

    def lower(mode, fakes):
        with mode, enable_python_dispatcher():
            return make_fx(gm, decomposition_table=decompositions(), tracing_mode="real")(*fakes)

    prop, low, one = [], [], []
    with torch.no_grad():
        for _ in range(rounds):
            mode, fakes = fresh()
            t0 = time.perf_counter()
            with mode:
                gm(*fakes)
            t1 = time.perf_counter()
            aten = lower(mode, fakes)
            t2 = time.perf_counter()
            prop.append(t1 - t0)
            low.append(t2 - t1)
            mode, fakes = fresh()
            t0 = time.perf_counter()
            lower(mode, fakes)
            one.append(time.perf_counter() - t0)

    def ms(v):
        return statistics.median(v) * 1e3

    ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    aten_ops = sum(1 for n in aten.graph.nodes if n.op == "call_function")
    print(f"{name}: {ops} captured ops, {aten_ops} ATen ops; medians of {rounds} rounds, ms")
    print(f"  two propagations: cold propagation {ms(prop):.0f} + lowering {ms(low):.0f} = "
          f"{ms([a + b for a, b in zip(prop, low)]):.0f}")
    print(f"  one propagation (the lowering on cold fakes): {ms(one):.0f}; saves "
          f"{ms([a + b - c for a, b, c in zip(prop, low, one)]):.0f}")


if __name__ == "__main__":
    main()
