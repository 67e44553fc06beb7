"""python -m tests.fuzz.found [NAME_OR_PATH ...]: every reproducer (or those
named, or files elsewhere in the same form), each on a cold and then a warm
kiln cache; prints one line per file and exits 1 if any mismatches."""
import glob
import io
import os
import sys
import contextlib

from ..run import check_file


def main(names):
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, "*.py")))
    paths = [p for p in paths if not os.path.basename(p).startswith("_")]
    if names:
        paths = [p for p in paths if os.path.basename(p)[:-3] in names] + [n for n in names if os.path.isfile(n)]
    bad = []
    for p in paths:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = check_file(p)
        lines = [l for l in out.getvalue().splitlines() if l.startswith(("OK", "MISMATCH", "    "))]
        print("%-8s %s" % ("OK" if rc == 0 else "MISMATCH", os.path.basename(p)))
        if rc:
            bad.append(p)
            print("\n".join("    " + l for l in lines))
    print("%d reproducers, %d mismatching" % (len(paths), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
