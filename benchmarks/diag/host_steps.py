"""Diagnostic: where a kiln call's host (CPU) time goes on a GPU, for models
whose calls are enqueue-bound: the whole call, the same call with kiln's
programs replaced by their saved outputs (what capture, guards and the
Python around the graph cost), and each program step's CPU time
(Program.host_profile: allocation, kernel launch, ATen extern).

    python benchmarks/diag/host_steps.py llama vit_small [--top 8]
"""
import argparse
import collections

import torch

import kiln
from kiln.bench import models as zoo
from kiln.bench.measure import wall_and_enqueue_ms


def enqueue_ms(fn, args):
    """(wall, enqueue) medians in ms: enqueue is the host time of a call
    begun on an idle GPU."""
    return wall_and_enqueue_ms(fn, args, idle=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    for name in a.models:
        model, inputs, _ = zoo.build_model(zoo.MODELS[name], zoo.BuildConfig(device="cuda", dtype=getattr(torch, a.dtype)))
        cgs = []

        def spy(gm, ex):
            f = kiln.backends.kiln(gm, ex)
            cgs.append(getattr(f, "cg", None))
            return f

        kiln.reset()
        with torch.no_grad():
            f = kiln.compile(model, backend=spy)
            wall, enq = enqueue_ms(f, inputs)
            progs = [cg.program for cg in cgs if cg is not None and hasattr(cg, "program")]
            print(f"{name}: {len(cgs)} graphs; call wall {wall:.3f} ms, enqueue {enq:.3f} ms")
            # the programs alone, and the call around them
            real = {}
            for cg in cgs:
                if cg is None or not hasattr(cg, "program"):
                    continue
                p = cg.program
                saved = {}

                def stub(*args, p=p, saved=saved):
                    if "out" not in saved:
                        saved["out"] = p(*args)
                    return list(saved["out"])

                real[id(cg)] = p
                cg.program = stub
            _, around = enqueue_ms(f, inputs)
            for cg in cgs:
                if cg is not None and id(cg) in real:
                    cg.program = real[id(cg)]
            print(f"  outside kiln's programs (capture, guards, Python around the graph): {around:.3f} ms")
            for p in progs:
                p.host_profile(True)
            n = 20
            for _ in range(n):   # each call on an idle GPU: no launch waits for a full queue
                torch.cuda.synchronize()
                f(*inputs)
            torch.cuda.synchronize()
            for gi, p in enumerate(progs):
                calls, rows = p.host_profile(False)
                if not calls:
                    continue
                by = collections.Counter()
                cnt = collections.Counter()
                for kind, what, alloc, step in rows:
                    key = kind if kind == "kernel" else f"{kind} {what}"
                    by["allocation"] += alloc
                    by[key] += step
                    cnt[key] += 1
                tot = sum(by.values()) / calls / 1e3
                print(f"  program {gi}: {len(rows)} steps, {tot:.1f} us of host time per call")
                for key, ns in by.most_common():
                    print(f"    {ns / calls / 1e3:8.1f} us  {cnt[key] or '':>4}  {key[:80]}")
                top = sorted(rows, key=lambda r: -(r[2] + r[3]))[:a.top]
                for kind, what, alloc, step in top:
                    print(f"      step {(alloc + step) / calls / 1e3:6.1f} us (alloc {alloc / calls / 1e3:5.1f})  {kind} {str(what)[:70]}")


if __name__ == "__main__":
    main()
