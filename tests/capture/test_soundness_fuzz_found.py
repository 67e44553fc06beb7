"""Capture soundness cases found by the differential fuzzer and the issue 13
leftovers: odd functools.partial objects, graphs that raise at run time after
mutating inputs, and values segment.c cannot rebuild.  Every case is compared
with eager."""
import functools

import pytest
import torch

import kiln


# ---------------------------------------------------------------- functools.partial look-alikes
class PartialNoneKeywords(functools.partial):
    keywords = None            # shadows the slot: not a dict


class PartialOwnCall(functools.partial):
    def __call__(self, *args, **kw):          # not a partial application any more
        return super().__call__(*args, **kw) * 10


NONE_KW = PartialNoneKeywords(torch.mul, 3)
OWN_CALL = PartialOwnCall(torch.mul, 3)


def p_none_keywords(x):
    return NONE_KW(x) + 1


def p_own_call(x):
    return OWN_CALL(x) + 1


def test_partial_subclass_with_own_call_is_not_a_partial_application():
    """kiln records a partial by calling its func with its args: only right
    when __call__ is partial's own."""
    from kiln import _capture
    assert _capture._classify(functools.partial(torch.mul, 3)) == 4
    assert _capture._classify(NONE_KW) == 4
    assert _capture._classify(OWN_CALL) == 0


@pytest.mark.parametrize("backend", ["eager", "kiln"])
@pytest.mark.parametrize("fn", [p_none_keywords, p_own_call], ids=lambda f: f.__name__)
def test_partial_subclasses(fn, backend):
    """A partial subclass whose keywords is not a dict, or which redefines
    __call__, is called for real (graph break), never as a plain partial."""
    cf = kiln.compile(fn, backend=backend)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x), fn(x))


# ---------------------------------------------------------------- a compiled graph that raises at run time
RAISE = [False]


def raising_backend(gm, example_inputs):
    """A backend whose compiled graph runs, then raises (as a kernel failing
    late would): the graph's writes to its inputs have happened."""
    def run(*args):
        out = gm(*args)
        if RAISE[0]:
            raise ValueError("the compiled graph failed")
        return out
    return run


def r_writes_input(x):
    x.add_(1)
    return x * 2


def r_reads_only(x):
    return x * 2 + 1


def test_graph_that_wrote_its_inputs_raises_instead_of_rerunning():
    """Re-running the segment as Python would apply x.add_(1) a second time
    (and hide the error): the graph's exception is raised, the write done once."""
    cf = kiln.compile(r_writes_input, backend=raising_backend)
    RAISE[0] = False
    x = torch.zeros(3)
    cf(x)
    RAISE[0] = True
    try:
        x = torch.zeros(3)
        with pytest.raises(ValueError, match="compiled graph failed"):
            cf(x)
        assert x.tolist() == [1.0, 1.0, 1.0]
    finally:
        RAISE[0] = False


def test_graph_that_wrote_nothing_reruns_as_python():
    cf = kiln.compile(r_reads_only, backend=raising_backend)
    x = torch.randn(3)
    cf(x)
    RAISE[0] = True
    try:
        torch.testing.assert_close(cf(x), r_reads_only(x))
    finally:
        RAISE[0] = False



def r_in_try(x):
    try:
        x.add_(1)
        y = x * 2
    except ValueError:
        return x - 100
    return y


def test_graph_error_in_a_try_block():
    """Where kiln captures a try block, the error is raised once, the write done once."""
    cf = kiln.compile(r_in_try, backend=raising_backend)
    cf(torch.zeros(3))
    RAISE[0] = True
    try:
        x = torch.zeros(3)
        try:
            got = cf(x)
        except ValueError:
            got = None
        assert got is None or got.tolist() == [-99.0, -99.0, -99.0]
        assert x.tolist() == [1.0, 1.0, 1.0]
    finally:
        RAISE[0] = False


# ---------------------------------------------------------------- values kept across a break
def u_ctx_across_break(x):
    cm = torch.no_grad()          # a grad-mode context manager kept in a local across a break
    y = x * 2
    print("b")
    with cm:
        return y * 2


def u_ctx_returned(x):
    cm = torch.enable_grad()
    return x * 2, cm, cm


def u_set_grad_object(x):
    cm = torch.set_grad_enabled(False)   # changes the mode now; its __exit__ restores it
    y = x * 2
    print("b")
    with cm:
        z = y * 3
    return z, x * 4


def _compare(cf, fn, x):
    got, want = cf(x), fn(x)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w)
            assert g.requires_grad == w.requires_grad
    if len(got) == 3:
        assert got[1] is got[2]   # one object, as in eager


@pytest.mark.parametrize("fn", [u_ctx_across_break, u_ctx_returned], ids=lambda f: f.__name__)
def test_grad_mode_object_rebuilt_after_the_graph(fn, capsys):
    """torch.no_grad() / enable_grad() objects made while recording and kept
    (a local across a break, a result) are rebuilt fresh: captured, as eager."""
    ex = kiln.explain(fn)(torch.ones(2, requires_grad=True))
    assert not any("cannot rebuild" in b.reason for b in ex.breaks), ex
    assert ex.graphs
    cf = kiln.compile(fn)
    for _ in range(3):
        _compare(cf, fn, torch.randn(2, requires_grad=True))


def test_value_kiln_cannot_rebuild_is_a_counted_fallback(capsys):
    """Unsupported, not an internal error: the code runs as Python (as eager),
    the reason is a graph break, and the fallback is cached (no re-recording)."""
    fn = u_set_grad_object
    ex = kiln.explain(fn)(torch.ones(2, requires_grad=True))
    assert any("cannot rebuild" in b.reason for b in ex.breaks), ex
    assert torch.is_grad_enabled()
    cf = kiln.compile(fn)
    cf(torch.randn(2, requires_grad=True))
    rec0 = kiln._C.capture_stats().get("segments_recorded", 0)
    for _ in range(3):
        _compare(cf, fn, torch.randn(2, requires_grad=True))
        assert torch.is_grad_enabled()
    assert kiln._C.capture_stats().get("segments_recorded", 0) == rec0


# ---------------------------------------------------------------- views autograd refuses to write
def _nograd_view(x):
    y = x * 2
    with torch.no_grad():
        v = y[0]
    return v


def _write_nograd_view(x):
    v = _nograd_view(x)
    print("", end="")          # a graph break between the view and its write
    v.mul_(2)
    return v


def _split_pair(x):
    a, b = (x * 2).split(2)
    return a, b


def _write_split_view(x):
    a, b = _split_pair(x)
    a.add_(1)
    return a


def _write_unbind_view(x):
    v = (x - x.mean(-1, keepdim=True)).select(-2, 1).unbind(0)[1]
    v.t().sub_(1)
    return v


@pytest.mark.parametrize("fn", [_write_nograd_view, _write_split_view, _write_unbind_view])
@pytest.mark.parametrize("dynamic", [False, True])
def test_rebuilt_view_keeps_how_autograd_made_it(fn, dynamic):
    """A graph's output view is rebuilt from its anchor (regen_view): where
    eager refuses to write it in place (a view of split's or unbind's, one
    made with grad off), the rebuilt view refuses it too."""
    kiln.reset()
    x = torch.randn(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="view") as eager:
        fn(x)
    with pytest.raises(RuntimeError, match="view") as compiled:
        kiln.compile(fn, dynamic=dynamic)(x)
    assert str(eager.value).split(".")[1] == str(compiled.value).split(".")[1]
    with torch.no_grad():   # with grad off the writes are allowed in both
        assert torch.equal(fn(x.detach().clone()), kiln.compile(fn, dynamic=dynamic)(x.detach().clone()))
