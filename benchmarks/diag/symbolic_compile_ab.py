"""A model's symbolic compile under two checkouts of kiln, in alternating
processes (issue 17's serving sweep: its second shape's call, where
automatic dynamic records and lowers the graph with symbolic sizes).  Each
process imports kiln from its checkout (built in place), then ROUNDS times:
kiln.reset(), an empty disk cache, kiln.compile(model) called at 5x40 (the
static compile) and then at 4x64 (the symbolic one, timed; the first
round's is dropped: the process's first compile pays imports and tables).

    mkdir -p /tmp/old && git worktree add /tmp/old HEAD~1 && \\
        (cd /tmp/old && python setup.py -q build_ext --inplace)
    python benchmarks/diag/symbolic_compile_ab.py /tmp/old . cnn [PAIRS] [ROUNDS]

Prints each process's median and the medians over processes per checkout.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def worker(root, name, rounds):
    sys.path.insert(0, root)
    import torch

    import kiln
    from kiln.bench import dynamic, models
    assert os.path.realpath(kiln.__file__).startswith(os.path.realpath(root)), kiln.__file__
    torch.set_num_threads(2)
    cfg = models.BuildConfig(device="cpu", dtype=torch.float32)
    spec = models.MODELS[name]
    model, example, _ = models.build_model(spec, cfg)
    model.eval()
    ts = []
    with torch.no_grad():
        for _ in range(rounds):
            kiln.reset()
            with tempfile.TemporaryDirectory() as tmp:
                kiln.config.cache_dir = tmp
                fn = kiln.compile(model)
                fn(*dynamic.make_inputs(spec, model, example, (5, 40), cfg, 0))
                x = dynamic.make_inputs(spec, model, example, (4, 64), cfg, 0)
                t0 = time.perf_counter()
                fn(*x)
                ts.append(time.perf_counter() - t0)
    print(statistics.median(ts[1:]) * 1e3, " ".join(f"{t * 1e3:.0f}" for t in ts))


def main():
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    old, new, name = sys.argv[1:4]
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    got = {old: [], new: []}
    for _ in range(pairs):
        for root in (old, new):
            out = subprocess.run([sys.executable, __file__, "--worker", os.path.abspath(root), name, str(rounds)],
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            med, rest = out.split(" ", 1)
            got[root].append(float(med))
            print(f"{root:>12}  {name}  symbolic compile median {float(med):.0f} ms  (rounds: {rest})", flush=True)
    for root in (old, new):
        print(f"{root:>12}  median over processes {statistics.median(got[root]):.0f} ms")
    print(f"new / old: {statistics.median(got[new]) / statistics.median(got[old]):.2f}")


if __name__ == "__main__":
    main()
