"""Training steps over changing batch sizes and sequence lengths (issue 17,
training graphs): eager, torch.compile (inductor, automatic dynamic) and
kiln.compile, each on its own copy of a bench model (kiln/bench/models.py),
one step per shape in one seeded random order: forward, a loss, backward.

    python benchmarks/dynamic_training.py [--models bert,gpt2] [--batches 2,3,4]
        [--seqs 16,24,40,56] [--repeat 3] [--threads 2] [--no-inductor]

Per model and compiler, each with a fresh disk cache: the sweep (the sum of
the first step at each shape, compiles included), the compile counts (torch.compile: graphs TorchDynamo
handed to inductor; kiln: stats()['compiles'] and size plans), the worst
relative difference of loss and gradients from eager's over the sweep
(max |a - b| / max(max |a|, max |b|, 1e-4) per tensor), and the steady-state step (median of
--repeat steps per shape, the compilers interleaved in rounds; geomean over
shapes, and its ratio to eager's and torch.compile's).  Dropout is off
(model.eval()), so every compiler computes the same function.
"""
import argparse
import copy
import math
import os
import random
import statistics
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import kiln  # noqa: E402
from kiln.bench import models as zoo  # noqa: E402


def step(model, ids):
    out = model(ids)
    loss = out.float().pow(2).mean()
    loss.backward()
    return loss


def rel(a, b):
    """max |a - b| over the larger of max |a|, max |b| and 1e-4 (a gradient
    eager leaves at zero, the pooler's, is no scale to divide by)."""
    if not a.numel():
        return 0.0
    scale = max(a.abs().max().item(), b.abs().max().item(), 1e-4)
    return (a - b).abs().max().item() / scale


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def run_model(name, args):
    import contextlib
    import tempfile
    from kiln.bench.compilers import KilnHandle, inductor_cache_dir, kiln_cache_dir
    # fresh disk caches for both compilers: the sweep pays every compile
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.enter_context(inductor_cache_dir(os.path.join(tmp, "inductor")))
        stack.enter_context(kiln_cache_dir(os.path.join(tmp, "kiln"), KilnHandle(kiln, None)))
        _run_model(name, args)


def _run_model(name, args):
    model, _, _ = zoo.build_model(zoo.MODELS[name], zoo.BuildConfig(device="cpu", dtype=torch.float32))
    model.eval()
    vocab = model.model.config.vocab_size
    shapes = [(b, s) for b in args.batches for s in args.seqs]
    random.Random(args.seed).shuffle(shapes)
    kiln.reset()
    torch._dynamo.reset()
    copies = {"eager": model}
    fns = {"eager": step}
    if not args.no_inductor:
        copies["torch.compile"] = copy.deepcopy(model)
        fns["torch.compile"] = torch.compile(step)
    copies["kiln"] = copy.deepcopy(model)
    fns["kiln"] = kiln.compile(step)
    sweep = {k: 0.0 for k in fns}
    worst = {k: 0.0 for k in fns}
    gen = torch.Generator().manual_seed(args.seed)
    inputs = {sh: torch.randint(0, vocab, sh, generator=gen) for sh in shapes}
    for sh in shapes:
        grads = {}
        for k, fn in fns.items():
            m = copies[k]
            t = time.perf_counter()
            loss = fn(m, inputs[sh])
            sweep[k] += time.perf_counter() - t
            # (by parameter, a None grad as zeros: a compiler may give zeros
            # where eager gives None, the pooler's unused weights)
            grads[k] = [loss.detach()] + [p.grad if p.grad is not None else torch.zeros_like(p)
                                          for p in m.parameters()]
            for p in m.parameters():
                p.grad = None
        for k in fns:
            if k != "eager":
                worst[k] = max([worst[k]] + [rel(a, b) for a, b in zip(grads[k], grads["eager"])])
    counts = {"kiln": {key: kiln.stats().get(key, 0) for key in ("compiles", "size_plans", "captures", "fallbacks")}}
    if "torch.compile" in fns:
        from torch._dynamo.utils import counters
        counts["torch.compile"] = {"compiles": counters["stats"]["unique_graphs"]}
    steady = {k: [] for k in fns}
    for sh in shapes:
        times = {k: [] for k in fns}
        for _ in range(args.repeat):
            for k, fn in fns.items():
                m = copies[k]
                t = time.perf_counter()
                fn(m, inputs[sh])
                times[k].append(time.perf_counter() - t)
                for p in m.parameters():
                    p.grad = None
        for k in fns:
            steady[k].append(statistics.median(times[k]))
    print(f"\n== {name} training step: batches {args.batches} x seq {args.seqs} = {len(shapes)} shapes")
    print(f"{'compiler':<14} {'sweep s':>8} {'compiles':>9} {'plans':>6} {'worst rel':>10} {'steady ms':>10} "
          f"{'/eager':>7} {'/t.compile':>10}")
    for k in fns:
        c = counts.get(k, {})
        g = geomean(steady[k]) * 1e3
        ve = geomean([a / b for a, b in zip(steady[k], steady["eager"])]) if k != "eager" else None
        vt = geomean([a / b for a, b in zip(steady[k], steady["torch.compile"])]) \
            if "torch.compile" in fns and k != "torch.compile" else None
        print(f"{k:<14} {sweep[k]:>8.2f} {c.get('compiles', '-'):>9} {c.get('size_plans', '-'):>6} "
              f"{(f'{worst[k]:.1e}' if k != 'eager' else '-'):>10} {g:>10.2f} "
              f"{(f'{ve:.2f}' if ve else '-'):>7} {(f'{vt:.2f}' if vt else '-'):>10}")
    if "torch.compile" in fns and sweep["torch.compile"] > 0:
        print(f"  kiln sweep / torch.compile sweep: {sweep['kiln'] / sweep['torch.compile']:.2f}; "
              f"kiln: {counts['kiln']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--batches", default="2,3,4")
    ap.add_argument("--seqs", default="16,24,40,56")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-inductor", action="store_true")
    args = ap.parse_args()
    args.batches = [int(v) for v in args.batches.split(",")]
    args.seqs = [int(v) for v in args.seqs.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    print(f"benchmarks/dynamic_training.py  {time.strftime('%Y-%m-%d %H:%M')}  torch {torch.__version__}  "
          f"{torch.get_num_threads()} threads")
    print("command: python " + " ".join(sys.argv))
    for name in args.models.split(","):
        run_model(name, args)


if __name__ == "__main__":
    main()
