"""Every committed reproducer of tests/fuzz/found/ still matches eager (each
on a cold and a warm kiln cache): the failures the fuzzer found stay fixed."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_found_reproducer_matches_eager():
    out = subprocess.run([sys.executable, "-m", "tests.fuzz.found"], cwd=ROOT, capture_output=True, text=True,
                         timeout=1200)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " 0 mismatching" in out.stdout and "MISMATCH" not in out.stdout


def test_a_mismatching_reproducer_fails(tmp_path):
    # the runner reports what it should: a program whose eager and kiln runs
    # differ (f asks whether it is being compiled)
    src = open(os.path.join(ROOT, "tests", "fuzz", "found", "take_out_of_range_no_raise.py")).read()
    src = src.replace("    v0 = a0.take(i0)\n", "    v0 = a0.take(i0.clamp(0, 9)) + float(torch.compiler.is_compiling())\n")
    p = tmp_path / "bad.py"
    p.write_text(src)
    out = subprocess.run([sys.executable, "-m", "tests.fuzz.found", str(p)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and "MISMATCH" in out.stdout and "1 reproducers, 1 mismatching" in out.stdout, \
        out.stdout[-2000:] + out.stderr[-2000:]


def test_compact_form_runs_as_the_program_it_came_from():
    # minimize.compact writes the found/ form; run.load gives its
    # make_inputs(g, D, bad) the generator, size and flag the rendered
    # program makes itself: the eager records of both are the same
    from tests.fuzz import gen, run
    from tests.fuzz.minimize import compact

    for kind, seed in (("tensor", 701221), ("tensor", 12), ("capture", 200002)):
        src = gen.program(kind, seed).render()
        short = compact(src)
        assert "def make_inputs(g, D, bad):" in short and "start(" not in short
        assert not run.failures(run.compare(run.execute(src, None), run.execute(short, None))), (kind, seed)
