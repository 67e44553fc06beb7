"""Why a size of a symbolic graph got a parametric build of its own (issue 17):
runs a bench text model (kiln/bench/models.py) over random shapes under
kiln.compile, records each size's program source and whether it matched an
existing build, and for each new build after a graph's first prints the
lines where its source differs from the first build's source (numbers and
local names blanked, so only the C core's other decisions remain).

    python benchmarks/diag/parametric_misses.py [MODEL] [--device cuda] [--dtype bfloat16] [--shapes 40] [--list 6x384,8x32]
"""
import argparse
import contextlib
import difflib
import os
import random
import re

import torch

import kiln
from kiln import kernel_params
from kiln.bench import models as zoo


def _blank(source):
    source = re.sub(r"\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fFuUlL]*\b", "N", source)
    return re.sub(r"\b[a-z]{1,2}\d+(?:_\d+)?\b", "X", source)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="gpt2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--shapes", type=int, default=40)
    ap.add_argument("--lines", type=int, default=60)
    ap.add_argument("--list", default="", help="the shapes in this order instead, e.g. 6x384,8x32,4x256")
    ap.add_argument("--save", default="", help="a folder: each size's program source written there as BxS-hit.txt")
    a = ap.parse_args()
    spec = zoo.MODELS[a.model]
    model, _, _ = zoo.build_model(spec, zoo.BuildConfig(device=a.device, dtype=getattr(torch, a.dtype)))
    vocab = model.model.config.vocab_size
    shapes = [(b, s) for b in range(2, 17, 2) for s in range(32, 513, 32)]
    random.Random(0).shuffle(shapes)
    shapes = shapes[:a.shapes]
    if a.list:
        shapes = [tuple(int(v) for v in item.split("x")) for item in a.list.split(",")]

    current = [None]
    with watching(current) as seen:
        f = kiln.compile(model)
        with torch.no_grad():
            for shape in shapes:
                current[0] = shape
                f(torch.randint(0, vocab, shape, device=a.device))
    print({k: v for k, v in kiln.stats().items() if v and isinstance(v, int)})
    report(seen, a.lines)
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        for shape, _, source, hit in seen:
            with open(os.path.join(a.save, f"{shape[0]}x{shape[1]}-{hit}.txt"), "w") as f:
                f.write(source)


@contextlib.contextmanager
def watching(current):
    """Records each parametric build kiln makes or matches while entered:
    yields a list of (current[0] at the time, template id, source, hit)."""
    seen = []
    real = kernel_params.build

    def build(template, program, symvals, device=None):
        got = real(template, program, symvals, device)
        seen.append((current[0], id(template), program.source, None if got is None else got[1]))
        return got

    kernel_params.build = build
    try:
        yield seen
    finally:
        kernel_params.build = real


def report(seen, lines=60):
    """For each build after a graph's first: the lines where its source
    differs from the first build's (numbers and local names blanked)."""
    first = {}
    for shape, tid, source, hit in seen:
        if hit:
            continue
        if tid not in first:
            first[tid] = (shape, source)
            print(f"graph {len(first)}: first build at {shape}" if hit is not None else
                  f"graph {len(first)}: {shape} built on its own")
            continue
        shape0, source0 = first[tid]
        diff = list(difflib.unified_diff(_blank(source0).splitlines(), _blank(source).splitlines(),
                                         f"{shape0}", f"{shape}", lineterm="", n=1))
        print(f"-- a build of its own at {shape} ({'new build' if hit is False else 'no build'}): "
              f"{len(diff)} diff lines against {shape0}")
        print("\n".join(diff[:lines]))


if __name__ == "__main__":
    main()
