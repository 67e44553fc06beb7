"""The fuzzer's comparison (run.py): what counts as a difference between
eager and kiln and what is rounding."""
import torch

from .run import close, diff, text_diff


def val(x):
    return ("val", x)


def test_state_floats_use_float32_tolerance():
    # float(t.sum()) summed in another order: a last-bit difference is not a mismatch
    assert diff(val(-0.19967412948608398), val(-0.19967305660247803)) == []
    assert diff(val(-1.9073486328125e-06), val(9.5367431640625e-07)) == []   # a sum that cancels to ~0
    assert diff(val(0.0), val(-0.0)) == []
    assert diff(val(float("nan")), val(-float("nan"))) == []
    assert diff(val(-2.38e-07), val(-4.36e-05))[0][0] == "rounding"         # under ROUNDING times: not failing
    assert diff(val(1.0), val(1.01))[0][0] == "value"
    assert diff(val(1.0), val(float("inf")))[0][0] == "value"
    assert diff(val(1), val(1.0))[0][0] == "value"                          # int vs float: exact
    assert diff(val(2), val(3))[0][0] == "value"


def test_stdout_numbers_use_the_tolerance_and_the_rest_is_exact():
    assert text_diff("value torch.Size([4, 4]) 0.0\n", "value torch.Size([4, 4]) -0.0\n") is None
    assert text_diff("v 3103877.0\n", "v 3103878.5\n") is None
    assert text_diff("v 922005340160.0\n", "v 922005405696.0\n") is None
    assert text_diff("v 1e-07 nan\n", "v -2e-07 nan\n") is None
    assert text_diff("v 1.5\n", "v 1.6\n")[0] == "stdout"
    assert text_diff("value torch.Size([4, 4]) 1.0\n", "value torch.Size([4, 3]) 1.0\n")[0] == "stdout"  # ints exact
    assert text_diff("value 1.0\n", "valeu 1.0\n")[0] == "stdout"
    assert text_diff("a 1.0\n", "a 1.0\nb\n")[0] == "stdout"
    assert text_diff("v inf\n", "v 3.4e38\n")[0] == "stdout"


def test_tensor_zero_sign_and_nan_payload_ignored():
    a = torch.tensor([0.0, float("nan"), 1.0])
    b = torch.tensor([-0.0, -float("nan"), 1.0])
    assert close(a, b) is None
    # a sign of zero that matters is seen in what is computed from it
    assert close(1 / a[:1], 1 / b[:1]) is not None
    assert close(torch.copysign(torch.ones(1), a[:1]), torch.copysign(torch.ones(1), b[:1])) is not None
    assert close(a[:1].signbit(), b[:1].signbit()) is not None


def test_logged_and_printed_floats_are_well_conditioned(tmp_path, monkeypatch):
    """Capture seed 900855 logged float(t.sum()) of a centered t (t3 - t3.mean(),
    16 values near 264): the exact sum is 0 and each side's value is its own
    summation order's rounding (eager -1.2e-4, kiln's sequential float32 sum
    -1.1e-3, both within float32's bound n*eps*sum|t| = 1.6e-2), not a kiln
    error.  The floats programs log or print are sums of absolute values."""
    import re

    import kiln

    from . import gen
    from .run import check_source, failures
    for seed in range(900000, 900400):
        src = gen.program("capture", seed).render()
        for line in src.splitlines():
            if "LOG.append(float(" in line or "print('value'" in line:
                assert re.search(r"float\(\w+\.abs\(\)\.sum\(\)\)", line), (seed, line)
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
    oc, mm = check_source(gen.program("capture", 900855).render())["kiln"]
    assert not failures(mm), mm


def test_returned_sums_are_well_conditioned(tmp_path, monkeypatch):
    """Capture seed 946771 returned [t6, t6.sum()] of a centered t6: the exact
    sum of its 16 float32 terms is 1.1e-5, their absolute sum 1801, so the
    summation order's rounding may reach 16 * 2^-24 * 1801 = 1.7e-3 (eager
    1.5e-5, kiln -9.2e-5), not a kiln error.  The "list" return form sums
    absolute values."""
    import kiln

    from . import gen
    from .run import check_source, failures
    for seed in range(946700, 946800):
        src = gen.program("capture", seed).render()
        for line in src.splitlines():
            if line.strip().startswith("return [") and ".sum()" in line:
                assert ".abs().sum()]" in line, (seed, line)
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
    oc, mm = check_source(gen.program("capture", 946771).render())["kiln"]
    assert not failures(mm), mm


def test_tensor_ops_do_not_amplify_rounding(tmp_path, monkeypatch):
    """Seed 960299 standardized a constant column with / (std + 1e-5): eager's
    x - mean was one ulp (9.5e-7) against kiln's exact 0, turned into 0.095.
    Seed 947104 counted eq(logit(sigmoid(a)), a): last-bit roundings (both
    sigmoids within 1.6 ulp).  Both kinds of snippet are gone."""
    import kiln

    from . import gen
    from .run import check_source, failures
    for seed in (947104, 960299):
        src = gen.program("tensor", seed).render()
        assert "+ 1e-5)" not in src and "torch.eq(" not in src, seed
        monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
        oc, mm = check_source(src)["kiln"]
        assert not failures(mm), (seed, mm)


def test_ill_conditioned_values_are_rounding_and_well_conditioned_ones_are_not():
    """Seed 1402166 returned x ** x of a bfloat16 cumsum (x near 25): one
    bfloat16 rounding of x moves it by 23%; eager happened to land near the
    float64 value, kiln's other rounding did not.  Judged against what one
    rounding of the inputs moves the float64 program (conditioned), that is
    rounding; the same difference where nothing amplifies is a mismatch."""
    from .run import conditioned, failures, FLOOR, Mismatch
    src = '''import torch
SEED = 1
NCALLS = 1
STATE = ()
def make_inputs(call):
    return [torch.tensor([3.0, 25.7], dtype=torch.bfloat16)]
def before_call(call):
    pass
def f(a):
    return (a.float() ** a.float(), a.float() * 2)
'''
    from .run import execute
    FLOOR[0] = torch.bfloat16
    try:
        eager = execute(src, None)
        for k, bad in ((0, 2.0), (1, 2.0)):   # kiln twice eager in out[k][1]
            comp = execute(src, None)
            comp[0]["out"][-1][k][1]["v"][1] *= bad
            mm = [Mismatch("value", 0, "planted")]
            got = failures(conditioned(src, eager, comp, mm))
            assert bool(got) == (k == 1), (k, got)
    finally:
        FLOOR[0] = torch.float64


def test_rounding_to_an_integer_of_a_computed_value_is_not_generated():
    """Seed 1401440 took remainder(a, 0.25 * a): a quotient of exactly 4 in
    eager, 3.9999998 with kiln's rounding of the divisor, so a remainder of
    0 against one of the divisor.  Such statements are not generated."""
    from . import gen
    assert gen._near_integer(torch.tensor([1.5, 4.0]), 1) and not gen._near_integer(torch.tensor([1.5, 3.7]), 1)
    assert gen._near_integer(torch.tensor([2.5000001]), 0.5)
    assert gen._near_integer(torch.tensor([110.3], dtype=torch.bfloat16), 1, narrow=True)
    src = gen.program("tensor", 1401440).render()
    assert "torch.remainder(a1, v1)" not in src


def test_an_infinity_from_eagers_own_rounding_is_rounding():
    # log1p(erf(x)) in bfloat16: eager rounds erf(-2.2) to -1 and gives -inf;
    # kiln keeps the fused value unrounded, as the float64 program does
    # (fuzzer 2302078).  Without the float64 run, or with kiln far from it,
    # an infinity against a number is a mismatch.
    a = torch.tensor([-float("inf"), -1.5], dtype=torch.bfloat16)
    b = torch.tensor([-6.3125, -1.5], dtype=torch.bfloat16)
    exact = torch.tensor([-6.30, -1.5], dtype=torch.float64)
    moved = torch.tensor([-6.45, -1.5], dtype=torch.float64)
    assert close(a, b, ref=(exact, moved)).startswith("rounding")
    assert close(a, b).startswith("inf differs")
    far = torch.tensor([-9.0, -1.5], dtype=torch.bfloat16)
    assert close(a, far, ref=(exact, moved)).startswith("inf differs")
    # kiln infinite where eager is finite is never rounding
    assert not close(b, a, ref=(exact, moved)).startswith("rounding")
    # the finite elements are still compared
    bad = torch.tensor([-6.3125, -2.5], dtype=torch.bfloat16)
    assert not (close(a, bad, ref=(exact, moved)) or "").startswith("rounding: eager")


def test_an_integer_division_by_zero_is_no_miss_under_the_cuda_emulator(monkeypatch):
    # the emulated GPU's kernels do not raise on an integer division by
    # zero, as a GPU's do not (ATen's CUDA semantics): eager on the CPU
    # raising it is not a kiln miss there, and is one on the CPU
    from kiln import config

    from .run import compare
    eager = [{"exc": ("RuntimeError", "ZeroDivisionError", ()), "state": {}, "stdout": ""}]
    comp = [{"exc": None, "out": None, "alias": set(), "grad": None, "state": {}, "stdout": ""}]
    monkeypatch.setattr(config, "cuda_emulate", True)
    assert compare(eager, comp) == []
    monkeypatch.setattr(config, "cuda_emulate", False)
    assert [m.kind for m in compare(eager, comp)] == ["no-raise"]
    other = [{"exc": ("IndexError", "index 9 is out of bounds", ()), "state": {}, "stdout": ""}]
    monkeypatch.setattr(config, "cuda_emulate", True)
    assert [m.kind for m in compare(other, comp)] == ["no-raise"]


def test_precision_floor_counts_integer_inputs_promoted_to_float32():
    # sqrt of an int64 input computes in float32 (the default dtype) before a
    # .to(torch.float64): seed 5201254, a 1-ulp float32 difference judged
    # with float64's tolerance
    from tests.fuzz.run import precision_floor
    body = "def make_inputs(g, D, bad):\n    return [_i(g, (D, 4))]\n\ndef f(a0):\n    return (torch.sqrt(a0).to(torch.float64),)\n"
    assert precision_floor(body) == torch.float32
    assert precision_floor(body.replace("_i(g, (D, 4))", "_f(g, (D, 4), torch.float64)")) == torch.float64


def test_eager_nan_from_its_own_overflow_is_rounding():
    # layer_norm of a row whose squared deviations pass float32's range:
    # ATen's CPU kernel gives NaN, kiln (and torch.compile) 0, the program in
    # float64 a finite value (seed 5401706)
    from tests.fuzz.run import close
    eager = torch.tensor([float("nan"), 1.0])
    kiln_ = torch.tensor([0.0, 1.0])
    finite = torch.tensor([1.9, 1.0], dtype=torch.float64)
    assert close(eager, kiln_, ref=(finite, finite)).startswith("rounding")
    assert close(eager, kiln_) is not None and not close(eager, kiln_).startswith("rounding")   # no reference: fails
    nan64 = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    assert not close(eager, kiln_, ref=(nan64, nan64)).startswith("rounding")   # NaN in float64 too: kiln's
    assert not close(kiln_, eager, ref=(finite, finite)).startswith("rounding")  # kiln NaN where eager is not
    assert close(eager, torch.tensor([0.0, 2.0]), ref=(finite, finite)).startswith("values differ")   # the rest compared
