"""kiln's differential fuzzer: python -m tests.fuzz --seed S --count N [options].

Program i has seed S + i; with --kind all every fourth program is a capture
program, the rest tensor programs.  Tensor programs run through the entry
points --entry picks (kiln.compile, torch.compile(backend="kiln") or both);
capture programs through kiln.compile.  Prints a summary (programs, outcomes,
mismatches by kind, failing seeds); --out DIR keeps each failure's source
and, with --minimize, its minimal reproducer.
"""
import argparse
import collections
import json
import os
import signal
import sys
import time

from . import gen
from .minimize import minimize, reproducer, size
from .run import NOT_FAILING, Pool


def seed_list(spec):
    """--seeds: "KIND:SEED ..." or "SEED,..." words, or a summary.json whose
    failures are rerun: [(kind or None, seed)]."""
    if os.path.exists(spec):
        with open(spec) as fh:
            return sorted({(f["kind"], f["seed"]) for f in json.load(fh)["failures"]})
    out = []
    for w in spec.replace(",", " ").split():
        kind, _, seed = w.rpartition(":")
        out.append((kind or None, int(seed)))
    return out


def jobs_for(args):
    n = args.count * (10 if args.long else 1)
    picked = seed_list(args.seeds) if args.seeds else [(None, args.seed + i) for i in range(n)]
    for i, (given, seed) in enumerate(picked):
        kind = given or (args.kind if args.kind != "all" else ("capture" if seed % 4 == 3 else "tensor"))
        if kind == "capture":
            if args.entry in ("torch", "torch-dynamic"):
                continue
            entries = ["kiln-dynamic"] if args.entry == "kiln-dynamic" else ["kiln"]
        else:
            entries = ["kiln", "torch"] if args.entry == "both" else [args.entry]
        yield {"kind": kind, "seed": seed, "entries": entries}


def failing(mm):
    return [m for m in mm if m["kind"] not in NOT_FAILING]


class Stopped(BaseException):   # not swallowed by an `except Exception` in the pool
    """SIGTERM (a time limit): the run stops and reports what it ran."""


def run_jobs(pool, jobs, progress=None, rows=None):
    """[(job, entry, outcome, [mismatch dict])] for every job and entry
    (appended to rows as they come, so a stopped run keeps them)."""
    rows = [] if rows is None else rows
    done = 0
    for job, ans in pool.run(jobs):
        done += 1
        if "error" in ans:   # the generator or harness itself failed: report it, it is a fuzzer bug
            rows.append((job, "*", "harness-error", [{"kind": "harness-error", "call": -1, "detail": ans["error"]}]))
            continue
        for entry, (oc, mm) in ans["results"].items():
            for e in (job["entries"] if entry == "*" else [entry]):
                rows.append((job, e, oc, mm))
                if progress and failing(mm):   # one line per failing run, so a killed run still names them
                    print("  FAIL %s:%d %s %s" % (job["kind"], job["seed"], e, failing(mm)[0]["kind"]), flush=True)
        if progress and done % progress == 0:
            bad = sum(1 for r in rows if failing(r[3]))
            print("  ... %d programs, %d failing runs" % (done, bad), flush=True)
    return rows


def summarize(rows, elapsed):
    programs = {(j["kind"], j["seed"]) for j, *_ in rows}
    outcomes = collections.Counter(oc for _, _, oc, _ in rows)
    kinds = collections.Counter()
    seeds = collections.defaultdict(list)
    for job, entry, oc, mm in rows:
        if mm:
            k = "%s/%s: %s" % (job["kind"], entry, failing(mm)[0]["kind"] if failing(mm) else
                                       "%s (not failing)" % ("upstream" if oc == "upstream" else "rounding"))
            kinds[k] += 1
            seeds[k].append(job["seed"])
    lines = ["programs run: %d (%s) in %.0fs; runs by entry: %d" % (
        len(programs), ", ".join("%s %d" % kv for kv in sorted(collections.Counter(k for k, _ in programs).items())),
        elapsed, len(rows)),
        "outcomes: " + ", ".join("%s %d" % kv for kv in sorted(outcomes.items()))]
    if kinds:
        lines.append("mismatches by kind (first mismatch of each run):")
        for k, n in kinds.most_common():
            lines.append("  %-40s %4d  seeds %s" % (k, n, " ".join(map(str, seeds[k][:12])) +
                                                   (" ..." if len(seeds[k]) > 12 else "")))
        lines.append("failing programs: " + " ".join(sorted({"%s:%d" % (j["kind"], j["seed"])
                                                             for j, _, _, mm in rows if failing(mm)})))
    else:
        lines.append("no mismatches")
    return "\n".join(lines), seeds


def minimize_failure(pool, job, entry, kind, budget):
    p = gen.program(job["kind"], job["seed"])

    def still_fails(q):
        for _, ans in pool.run([{"src": q.render(), "entries": [entry], "fresh_cache": True}]):
            if "error" in ans:
                return False
            return any(m["kind"] == kind for _, mm in ans["results"].values() for m in mm)
        return False

    small = minimize(p, still_fails, budget)
    return small, reproducer(small, entry)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seeds", help="rerun these programs: 'tensor:700120 capture:5 ...' or a summary.json")
    ap.add_argument("--long", action="store_true", help="ten times --count (thousands with the default)")
    ap.add_argument("--kind", choices=["tensor", "capture", "all"], default="all")
    ap.add_argument("--entry", choices=["kiln", "kiln-dynamic", "torch", "torch-dynamic", "both"], default="both")
    ap.add_argument("--minimize", action="store_true", help="shrink one failure of each kind to a reproducer")
    ap.add_argument("--budget", type=int, default=150, help="candidate runs per minimisation")
    ap.add_argument("--out", help="folder for failures' sources, reproducers and summary.json")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per program before the worker is killed")
    ap.add_argument("--cache", default=os.environ.get("KILN_CACHE_DIR") or "/tmp/kiln-fuzz-cache")
    ap.add_argument("--no-debug", action="store_true", help="kiln.config.debug off (internal errors run eagerly)")
    args = ap.parse_args(argv)
    if args.long and args.count == 100:
        args.count = 300
    os.makedirs(args.cache, exist_ok=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "workers.log"), "w") if args.out else open(os.devnull, "w")
    def stop(*_):
        raise Stopped()
    signal.signal(signal.SIGTERM, stop)   # report what ran, then `finally` stops the workers
    pool = Pool(args.workers, args.cache, args.timeout, log, debug=not args.no_debug)
    t0 = time.time()
    try:
        rows, stopped = [], False
        try:
            run_jobs(pool, list(jobs_for(args)), progress=50, rows=rows)
        except Stopped:
            stopped = True
            signal.signal(signal.SIGTERM, signal.SIG_IGN)   # `timeout` signals the child and then its group: a second TERM must not cut the summary
        text, seeds = summarize(rows, time.time() - t0)
        if stopped:
            text = "stopped by SIGTERM: the programs that finished\n" + text
        print(text, flush=True)
        failures = [(j, e, oc, failing(mm)) for j, e, oc, mm in rows if failing(mm)]
        if args.out:
            with open(os.path.join(args.out, "summary.json"), "w") as fh:
                json.dump({"args": vars(args), "summary": text,
                           "failures": [{"kind": j["kind"], "seed": j["seed"], "entry": e, "outcome": oc,
                                         "mismatches": mm} for j, e, oc, mm in failures]}, fh, indent=1)
            for j, e, oc, mm in failures:
                path = os.path.join(args.out, "%s-%d-%s.py" % (j["kind"], j["seed"], e))
                with open(path, "w") as fh:
                    fh.write(reproducer(gen.program(j["kind"], j["seed"]), e if e != "*" else "kiln"))
        if args.minimize and not stopped:
            done = set()
            for j, e, oc, mm in failures:
                key = (j["kind"], e, mm[0]["kind"])
                if key in done or e == "*":
                    continue
                done.add(key)
                small, src = minimize_failure(pool, j, e, mm[0]["kind"], args.budget)
                print("\n==== minimal reproducer: %s seed %d entry %s kind %s (%d -> %d chars)" % (
                    j["kind"], j["seed"], e, mm[0]["kind"], size(gen.program(j["kind"], j["seed"])), size(small)))
                print(small.render().split("\n\n\ndef make_inputs")[1] if "\n\n\ndef make_inputs" in small.render()
                      else src)
                if args.out:
                    name = "min-%s-%s-%s-%d.py" % (j["kind"], e, mm[0]["kind"], j["seed"])
                    with open(os.path.join(args.out, name), "w") as fh:
                        fh.write(src)
        return 1 if failures else (143 if stopped else 0)
    finally:
        pool.close()


if __name__ == "__main__":
    sys.exit(main())
