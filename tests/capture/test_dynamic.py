"""Symbolic sizes in kiln's capture (issue 17): kiln.compile(dynamic=True),
automatic dynamic (kiln.config.automatic_dynamic_shapes), mark_dynamic /
mark_static; sizes as symbols in one recording, guards on their relations
evaluated in C, and every size that escapes into Python (a string, a dict
key, an identity test, a value returned) taken at its value, guarded."""
import contextlib
import io
import math

import pytest
import torch

import kiln
from kiln import _C, symbolic


@pytest.fixture(autouse=True)
def _fresh():
    kiln.reset()
    yield
    kiln.reset()


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-6)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _aliases(out, x):
    """Which outputs share x's memory, and which share each other's."""
    ts = [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)]
    ptr = lambda t: t.untyped_storage().data_ptr()   # noqa: E731
    return [ptr(t) == ptr(x) for t in ts], [[ptr(a) == ptr(b) for b in ts] for a in ts]


def _run(fn, sizes, cols=6, **kw):
    """fn compiled with kw, called at each size of dim 0; outputs and stdout
    compared with eager's at every call."""
    cf = kiln.compile(fn, **kw)
    for n in sizes:
        x = torch.randn(n, cols)
        got, want = _compare(fn, cf, (x,), n)
        if not isinstance(want, Exception):
            assert _aliases(got, x) == _aliases(want, x), n   # views stay views
    return kiln.stats()


def _compare(fn, cf, args, n):
    """fn and cf called on args: the same result (or exception type) and
    stdout; returns (cf's result, fn's)."""
    outs = []
    for f in (fn, cf):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                res = f(*args)
            except Exception as e:   # noqa: BLE001
                res = e
        outs.append((res, buf.getvalue()))
    (want, wout), (got, gout) = outs
    if isinstance(want, Exception):
        assert type(got) is type(want), (n, got, want)
    else:
        assert _same(got, want), (n, got, want)
    assert gout == wout, (n, gout, wout)
    return got, want


SIZES = (3, 5, 7, 4, 5)


# ---------------------------------------------------------------- symbolic, one recording
def _view_of_size(x):
    return x.view(x.shape[0] * 2, -1) * 1


def _reshape_halves(x):
    n = x.size(0)
    return x.reshape(n, 2, -1).sum(1) + n


def _zeros_like_rows(x):
    return torch.zeros(x.shape[0], 2) + x[:, :2]


def _slice_half(x):
    return x[:, : x.shape[1] // 2] + len(x)


def _numel(x):
    return x.reshape(x.numel()) * 2


def _view_returned(x):
    return x.view(x.shape[0] * 2, -1), x.t()


def _view_of_a_result(x):
    y = x * 2
    return y.view(-1, 2)[1:], y


def _len_of_shape(x):
    # len of a Size of symbols is its length: no size is made concrete
    # (transformers' GPT-2 and BERT take len(input_shape))
    return x.sum(len(x.shape) - 1) * len(x.size())


def _shape_compared(x):
    # a Size against the tuple a model expects compares item by item: a
    # relation between symbols, not their values (XGLM's attention checks)
    if x.size() != (x.shape[0], x.shape[1]) or x.shape[1:] != (x.size(1),):
        raise ValueError("not the shape expected")
    return x * 2


def _max_of_sizes(x):
    # max/min over sizes compare symbols (a relation that holds for every
    # size here: n >= 2), not their values (MPT slices its ALiBi bias so)
    return x[max(0, 1 - x.shape[0]):] * 2 + min(x.shape[0], x.shape[0] + 1) - max((x.shape[0], 1))


def _numpy_scalar(x):
    # a real call's plain number (numpy.float64, CTRL's sqrt of its width)
    # stays a Python number to torch; only a symbolic answer is a size
    import numpy as np
    return x * np.sqrt(16.0) + max(x.shape[0], 1)


def _truth_of_sizes(x):
    # all/any over a Size, and `0 in shape`: each size's truth is a relation
    # the ShapeEnv decides from its range (>= 2), not its value (LongT5
    # pads and splits its sequence into blocks so)
    if not all(x.shape) or 0 in x.shape or not any([x.shape[0], 0]):
        return x.new_zeros(())
    return x * 2 + (x.shape[0] in (x.size(0), 1))


def _sum_abs_of_sizes(x):
    # sum and abs of sizes are size arithmetic
    return x.reshape(sum((x.shape[0], x.shape[1])) - x.shape[1], -1) * abs(x.shape[0] - 1)


def _slice_builtin(x):
    # slice() of sizes, as BUILD_SLICE makes (LongT5 concatenates 3 blocks
    # through x[slice(i, i + n)])
    n = x.shape[0] - 1
    return torch.cat([x[(slice(i, i + n), slice(None))] for i in range(2)])


@pytest.mark.parametrize("fn", [_view_of_size, _reshape_halves, _zeros_like_rows, _slice_half, _numel,
                                _view_returned, _view_of_a_result, _len_of_shape, _shape_compared,
                                _max_of_sizes, _numpy_scalar, _truth_of_sizes, _sum_abs_of_sizes,
                                _slice_builtin])
def test_data_independent_size_computations_record_once(fn):
    st = _run(fn, SIZES, dynamic=True)
    assert st["captures"] == 1, st
    assert st["symbolic_graphs"] == 1 and st["fallbacks"] == 0, st
    assert st["specializations"] == 4          # 3, 5, 7, 4 (5 again: a hit)
    assert st["sizes_specialised"] == 0, kiln.counters.specialised


def test_a_transformer_layer_over_batch_and_length():
    torch.manual_seed(0)
    # train() with dropout 0 computes what eval() does; eval() under no_grad
    # takes torch's fused fast path (one native op in newer torch), not the layer's code
    m = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).train()
    cm = kiln.compile(m, dynamic=True)
    with torch.no_grad():
        for b, s in ((2, 5), (3, 7), (5, 4), (2, 9), (4, 4)):
            x = torch.randn(b, s, 32)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["captures"] == 1 and st["fallbacks"] == 0 and st["frames_run_as_python"] == 0, st


# ---------------------------------------------------------------- sizes that escape: their values
def _fstring(x):
    return x * 2, f"n={x.shape[0]}"


def _percent(x):
    return x + 1, "%d rows" % x.shape[0]


def _format_method(x):
    return x + 1, "{} rows".format(x.size(0))


def _str_repr_hash(x):
    return x + 1, str(x.shape[0]), repr(x.shape), hash(x.shape[0])


_TABLE = {3: 1.0, 4: 4.0, 5: 2.0, 7: 3.0}


def _dict_key(x):
    return x * _TABLE[x.shape[0]]


_THREE = 3


def _identity(x):
    return x + (1 if x.shape[0] is _THREE else 2)   # (eager: small ints are one object)


def _returned(x):
    return x + 1, x.shape[0] * 2, x.shape


def _stdlib(x):
    return x * math.sqrt(x.shape[0]) + math.prod(x.shape)


def _printed(x):
    print("size", x.shape[0], x.shape)
    return x + 1


def _range_loop(x):
    s = x[0]
    for i in range(1, x.shape[0]):
        s = s + x[i]
    return s


def _tuple_times(x):
    return x + len((1,) * x.shape[0]) + max(x.shape[0], 4) + min(x.shape)


def _branch(x):
    if x.shape[0] > 4:
        return x * 2
    return x - 1


@pytest.mark.parametrize("fn", [_fstring, _percent, _format_method, _str_repr_hash, _dict_key, _identity,
                                _returned, _stdlib, _printed, _range_loop, _tuple_times, _branch])
def test_sizes_that_escape_take_their_values(fn):
    st = _run(fn, SIZES, dynamic=True)
    assert st["fallbacks"] == 0, st


def test_a_specialised_size_is_named_with_the_line_that_took_it():
    # KILN_LOGS=dynamic and kiln.explain say which size the recorded code
    # took the value of, and where: what makes each new size record again
    cf = kiln.compile(_fstring, dynamic=True)
    cf(torch.randn(5, 6))
    assert kiln.stats()["sizes_specialised"] == 1
    [(size, value, where)] = kiln.counters.specialised
    line = _fstring.__code__.co_firstlineno + 1
    assert (size, value) == ("L['x'].size()[0]", 5), size
    assert where.startswith(f"{__file__}:{line} in _fstring"), where
    kiln.reset()
    assert kiln.counters.specialised == []
    # kiln.explain lists it (a dim maybe_mark_dynamic marked: symbolic from
    # the first recording, specialised silently)
    x = torch.randn(4, 6)
    torch._dynamo.maybe_mark_dynamic(x, 0)
    text = str(kiln.explain(_fstring)(x))
    assert f"size L['x'].size()[0] specialised to 4 at {__file__}:{line} in _fstring" in text, text


def test_a_branch_on_a_size_records_each_side_once():
    st = _run(_branch, (5, 6, 7, 3, 2, 8), dynamic=True)
    assert st["captures"] == 2, st          # n > 4 and n <= 4, each symbolic


# ---------------------------------------------------------------- guards on relations
def _add(x, y):
    return x + y


def test_equal_dims_stay_equal_and_a_mismatch_raises_as_eager():
    cf = kiln.compile(_add, dynamic=True)
    for n in (3, 5, 6):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(cf(x, y), x + y)
    assert kiln.stats()["captures"] == 1
    with pytest.raises(RuntimeError):
        _add(torch.randn(5, 4), torch.randn(6, 4))
    with pytest.raises(RuntimeError):
        cf(torch.randn(5, 4), torch.randn(6, 4))


def _thirds(x):
    return x.view(-1, 3) + 1


def test_divisibility_is_guarded():
    cf = kiln.compile(_thirds, dynamic=True)
    for n in (6, 9, 12):
        x = torch.randn(n)
        torch.testing.assert_close(cf(x), _thirds(x))
    assert kiln.stats()["captures"] == 1
    with pytest.raises(RuntimeError):
        cf(torch.randn(8))           # not a multiple of 3: eager's error


def test_sizes_zero_and_one_are_static():
    cf = kiln.compile(lambda x: x * 2 + x.shape[0], dynamic=True)
    for n in (1, 8, 16, 1, 0, 32):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x), x * 2 + n)
    assert kiln.stats()["captures"] == 3      # 1 static, symbolic >= 2, 0 static


def test_a_failing_relation_is_named():
    seen = []
    kiln.set_logs(recompiles=True)
    import logging

    class H(logging.Handler):
        def emit(self, rec):
            seen.append(rec.getMessage())
    h = H()
    logging.getLogger("kiln.recompiles").addHandler(h)
    try:
        cf = kiln.compile(_thirds, dynamic=True)
        cf(torch.randn(6))
        cf(torch.randn(3))
    finally:
        logging.getLogger("kiln.recompiles").removeHandler(h)
        kiln.set_logs()
    assert seen and "got" in seen[-1], seen


# ---------------------------------------------------------------- policy
def test_automatic_dynamic_records_at_most_three_times(monkeypatch):
    monkeypatch.setattr(kiln.config, "automatic_dynamic_shapes", True)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)).eval()
    cm = kiln.compile(m)
    with torch.no_grad():
        for b, s in ((2, 3), (4, 3), (2, 5), (6, 7), (3, 4), (5, 9), (2, 3)):
            x = torch.randn(b, s, 8)
            torch.testing.assert_close(cm(x), m(x), atol=1e-5, rtol=1e-5)
    st = kiln.stats()
    assert st["captures"] <= 3 and st["fallbacks"] == 0 and st["frames_run_as_python"] == 0, st


def test_automatic_dynamic_off_records_every_shape(monkeypatch):
    monkeypatch.setattr(kiln.config, "automatic_dynamic_shapes", False)
    cf = kiln.compile(_view_of_size)
    for n in (3, 5, 7):
        cf(torch.randn(n, 4))
    st = kiln.stats()
    assert st["captures"] == 3 and st["symbolic_graphs"] == 0


def test_dynamic_false_never_makes_symbols():
    cf = kiln.compile(_view_of_size, dynamic=False)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        torch._dynamo.mark_dynamic(x, 0)
        cf(x)
    assert kiln.stats()["symbolic_graphs"] == 0


def test_mark_dynamic_is_symbolic_from_the_first_call():
    cf = kiln.compile(_view_of_size)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        kiln.mark_dynamic(x, 0)
        torch.testing.assert_close(cf(x), _view_of_size(x))
    st = kiln.stats()
    assert st["captures"] == 1 and st["symbolic_graphs"] == 1, st


def _specialises(x):
    if x.shape[0] == 4:   # a branch on one exact size: the symbol becomes 4
        return x * 2
    return x - 1


def test_mark_dynamic_specialised_is_the_users_error():
    # as torch.compile: the mark promises one graph for every size; code
    # that pins it to one value is reported where the user called
    cf = kiln.compile(_specialises)
    x = torch.randn(4, 3)
    kiln.mark_dynamic(x, 0)
    with pytest.raises(kiln.errors.UserError, match=r"marked dynamic.*specialised it to 4"):
        cf(x)
    # maybe_mark_dynamic (a hint, not a promise) specialises silently
    kiln.reset()
    cf = kiln.compile(_specialises)
    y = torch.randn(4, 3)
    torch._dynamo.maybe_mark_dynamic(y, 0)
    torch.testing.assert_close(cf(y), _specialises(y))


def test_mark_static_wins_over_dynamic_true():
    cf = kiln.compile(_view_of_size, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n, 4)
        torch._dynamo.mark_static(x, 0)
        torch.testing.assert_close(cf(x), _view_of_size(x))
    assert kiln.stats()["captures"] == 2


def test_parameters_stay_static():
    lin = torch.nn.Linear(4, 3)
    cm = kiln.compile(lin, dynamic=True)
    with torch.no_grad():
        for n in (2, 5):
            x = torch.randn(n, 4)
            torch.testing.assert_close(cm(x), lin(x))
    assert kiln.stats()["captures"] == 1


# ---------------------------------------------------------------- the guard program
def test_guard_program_matches_torch_on_random_sizes():
    """The translation of a ShapeEnv's guards, run by the C evaluator,
    agrees with the relations evaluated by sympy at random sizes."""
    import random

    import sympy
    mode = symbolic.new_mode()
    t = torch.randn(12, 8)
    fake, syms = symbolic.symbolic_fake(mode, t, "x", (0, 1))
    a, b = (s for _, s in syms)
    with mode:
        fake.view(-1, 4)                  # divisibility
        bool(a > 4)                       # an order
        bool((a * b) % 3 == 0)            # modulo of a product
    env = mode.shape_env
    slots = {s.node.expr: k for k, (_, s) in enumerate(syms)}
    prog, rels, names = symbolic.guard_program(mode, slots)
    exprs = [g.expr for g in env.guards]
    rng = random.Random(0)
    for _ in range(300):
        va, vb = rng.randint(0, 40), rng.randint(0, 40)
        vals = {s.node.expr: v for (_, s), v in zip(syms, (va, vb))}
        want = va >= 2 and vb >= 2 and all(bool(e.xreplace({k: sympy.Integer(v) for k, v in vals.items()}))
                                           for e in exprs)
        got, failed = _C.sizes_eval(prog, [va, vb])
        assert got == want, (va, vb, rels, failed)


# ---------------------------------------------------------------- int arguments
def _run_int(fn, values, **kw):
    """fn(x, n) compiled with kw, called for each int n (x's shape fixed);
    outputs and stdout compared with eager's at every call."""
    cf = kiln.compile(fn, **kw)
    x = torch.randn(48)
    for n in values:
        _compare(fn, cf, (x, n), n)
    return kiln.stats()


INTS = (2, 3, 4, 6, 8, 12, 16, 24, 3, 12)   # (48 // n >= 2: the view keeps 2 rows or more)


def _scaled(x, n):
    return (x * n).sum() + n


def _int_view(x, n):
    return x.view(n, -1).sum(0) * 2


def _int_arange(x, n):
    return torch.arange(n) * x[0] + x[:n].sum()


def _int_escapes(x, n):
    print(f"n={n}", {n: 1}, n * 2)
    return x + 1, n * 2, n


def _int_branch(x, n):
    if n > 5:
        return x * n
    return x - n


def _int_loop(x, n):
    s = x[0]
    for i in range(n):
        s = s + x[i]
    return s


@pytest.mark.parametrize("fn", [_scaled, _int_view, _int_arange])
def test_an_int_argument_that_changes_becomes_a_symbol(fn):
    # as torch.compile treats int inputs: a second value records the int
    # as a symbol, which every later value reuses (not cache_size_limit
    # recordings and then Python)
    st = _run_int(fn, INTS)
    assert st["captures"] == 2, st
    assert st["frames_run_as_python"] == 0 and st["fallbacks"] == 0, st
    assert st["symbolic_graphs"] == 1, st


@pytest.mark.parametrize("fn", [_int_escapes, _int_branch, _int_loop])
def test_an_int_symbol_that_escapes_or_decides_takes_its_value(fn):
    st = _run_int(fn, INTS[:8])
    assert st["fallbacks"] == 0, st


def test_int_arguments_under_dynamic_true_and_false():
    st = _run_int(_scaled, INTS, dynamic=True)
    assert st["captures"] == 1 and st["symbolic_graphs"] == 1, st
    kiln.reset()
    st = _run_int(_scaled, INTS[:5], dynamic=False)
    assert st["captures"] == 5 and st["symbolic_graphs"] == 0, st
    kiln.reset()
    st = _run_int(_scaled, (0, 1, 0, 1), dynamic=True)   # 0 and 1: constants, as sizes
    assert st["captures"] == 2, st


def _plain(v):
    return v * 2 + 1


def _ints_in_a_list_across_a_break(x, n):
    # tree_map is torch's (not recorded): a break, and the recording after it
    # reads the ints from a list on the stack
    vals = torch.utils._pytree.tree_map(_plain, [n, n + 1])
    return x * vals[0] + vals[1]


def test_ints_in_a_list_at_a_resume_point_become_symbols():
    # automatic dynamic for an int in a container on the stack (a resume
    # point), as for an argument: not one recording per value
    st = _run_int(_ints_in_a_list_across_a_break, INTS)
    assert st["frames_run_as_python"] == 0 and st["fallbacks"] == 0, st
    assert st["captures"] <= 6, st
    # _plain (entered from torch's code, plain ints in, no tensor op): run
    # as Python after its first recording, not recorded per value
    assert st["frames_without_torch"] == 1, st


def test_code_with_nothing_of_torch_runs_as_python_after_one_recording():
    import dataclasses

    @dataclasses.dataclass
    class Stamp:        # a dataclass's __init__ (file "<string>") that torch's code calls
        t: float

    made = {}
    clock = iter([0.5 + i / 7 for i in range(12)])

    def fn(x):
        # the lambda, entered from torch's code, makes a Stamp of a new
        # float each call: recorded once, then run as Python
        made["last"] = torch.utils._pytree.tree_map(lambda _: Stamp(next(clock)), [0])[0]
        return x + 1

    cf = kiln.compile(fn)
    x = torch.randn(4)
    captures = []
    for i in range(12):
        assert torch.equal(cf(x), x + 1) and made["last"] == Stamp(0.5 + i / 7)
        captures.append(kiln.stats()["captures"])
    st = kiln.stats()
    assert st["frames_without_torch"] >= 1 and st["frames_run_as_python"] == 0, st
    assert captures[3:] == [captures[3]] * 9, captures     # nothing recorded after the first calls
    # a function kiln.compile was given is recorded, even with nothing of torch
    kiln.reset()
    cg = kiln.compile(_plain)
    assert [cg(v) for v in (1, 2, 3)] == [3, 5, 7]
    assert kiln.stats().get("frames_without_torch", 0) == 0


def _shape_across_a_break(x):
    s = x.shape
    y = x * 2
    torch._dynamo.graph_break()
    return y.reshape(s[0], -1) + s[1], s


def test_a_shape_held_across_a_break_is_computed_not_specialised():
    # the Size a local holds at a break is rebuilt from this call's sizes
    # (src/capture/segment.c emit_sizes), so the recording before the break
    # serves every size
    st = _run(_shape_across_a_break, SIZES, dynamic=True)
    assert st["fallbacks"] == 0, st
    assert st["captures"] <= 3, st      # before the break, after it; not one per size


def _train_step(model, x, y):
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y) + out.mean(0).pow(2).sum() * 0.1
    loss.backward()
    return loss


@pytest.mark.parametrize("capture", ["kiln", "dynamo"])
def test_a_training_step_over_batch_sizes_traces_once_and_plans_each_size(capture):
    # a symbolic graph that needs grad: AOT autograd traces it once on its
    # symbolic sizes; the forward and backward are each one parametric build,
    # every later batch size a size plan; losses and grads equal eager's
    import copy
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 5))
    ref = copy.deepcopy(model)
    step = kiln.compile(_train_step) if capture == "kiln" else torch.compile(_train_step, backend="kiln")
    sizes = (6, 9, 4, 12, 7, 10, 5)
    for b in sizes:
        x, y = torch.randn(b, 16), torch.randint(0, 5, (b,))
        got, want = step(model, x, y), _train_step(ref, x, y)
        assert torch.allclose(got, want, atol=1e-5), b
        for p, q in zip(model.parameters(), ref.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-5), b
            p.grad = q.grad = None
    st = kiln.stats()
    assert st["fallbacks"] == 0, st
    # forward and backward: static at the first size, one parametric build
    # each for the symbolic graph; the other sizes are plans (one more build
    # at batch 5, equal to the 5 classes: the C core fuses loops of equal
    # extents, and there the batch's loops and the classes' coincide)
    assert st["compiles"] <= 5, st
    assert st["size_plans"] >= len(sizes) * 2 - 5, st
    if capture == "kiln":
        # the step, its recompile, the resume after backward (and code with
        # nothing of torch in it, recorded once: frames_without_torch)
        assert st["captures"] - st.get("frames_without_torch", 0) <= 3, st
