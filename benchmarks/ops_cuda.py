"""Which ATen operations and GPU kernels one call of a model runs, for eager
and kiln (and torch.compile's kernels): a dispatch-mode log of the ATen ops
with their dtypes, and from torch.profiler each CPU op's GPU kernels.  For
finding where a compiled model's GPU time goes.

    python benchmarks/ops_cuda.py --models bert,t5 [--dtype bfloat16]
"""
import argparse
import collections

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import kiln
from kiln.bench import models as zoo


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        dts = tuple(str(a.dtype).replace("torch.", "") for a in torch.utils._pytree.tree_leaves((args, kwargs))
                    if isinstance(a, torch.Tensor))
        self.ops[(str(func), dts)] += 1
        return func(*args, **(kwargs or {}))


def kernels_by_op(fn, x):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        fn(*x)
        torch.cuda.synchronize()
    rows = collections.defaultdict(lambda: [0, 0.0, set()])
    for e in prof.events():
        ks = getattr(e, "kernels", None) or []
        if not ks or not e.name.startswith("aten::"):
            continue
        r = rows[(e.name, str(e.input_shapes)[:70])]
        r[0] += 1
        for k in ks:
            r[1] += k.duration
            r[2].add(k.name[:50])
    return sorted(rows.items(), key=lambda kv: -kv[1][1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,t5")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    cfg = zoo.BuildConfig(device="cuda", dtype=getattr(torch, a.dtype))
    for spec in zoo.select_models(a.models):
        model, inputs, _ = zoo.build_model(spec, cfg)
        with torch.no_grad():
            variants = {"eager": model, "kiln": kiln.compile(model), "inductor": torch.compile(model)}
            for name, fn in variants.items():
                for _ in range(3):
                    fn(*inputs)
                if name != "inductor":
                    log = OpLog()
                    with log:
                        fn(*inputs)
                    print(f"== {spec.name} {name}: {sum(log.ops.values())} ATen ops through the dispatcher")
                    for (op, dts), n in log.ops.most_common(25):
                        print(f"   {n:4d}  {op}  {dts}")
                print(f"== {spec.name} {name}: GPU time by CPU op (us, one call)")
                for (op, shapes), (n, us, ks) in kernels_by_op(fn, inputs)[:14]:
                    print(f"   {us:8.1f}  x{n:<3d} {op} {shapes}  {sorted(ks)[:2]}")


if __name__ == "__main__":
    main()
