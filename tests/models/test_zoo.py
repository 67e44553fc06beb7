"""kiln's capture against TorchDynamo's over the model zoo (tests/models/zoo.py):
for every model, under torch.no_grad(),

- kiln.compile(model) (the default kiln backend: kiln's capture and its C
  compiler), called twice, gives eager's outputs (every tensor of the
  ModelOutput / tuple / dict / cache, rtol = atol = 1e-4);
- kiln.explain(model, backend="eager") breaks the graph no more often than
  torch._dynamo.explain(model) does.

The two are separate tests so that one model's results say which half fails
(one zoo.compare run serves both, on one xdist worker: same_worker).
TorchDynamo's side comes from tests/models/dynamo_reference.json where it has
this torch / transformers / Python's entry, except for a third of the models,
which run it live and must agree with the entry (zoo.dynamo_live).
An output that differs from eager is excused only where the model itself
computes otherwise under torch.compiler.is_compiling() (COMPILE_BRANCH,
checked by running it eagerly with that flag set).  The models where kiln
still breaks more often than TorchDynamo (none of 121 since 2026-12-04;
TorchDynamo's count is the larger of its explain's and its counters', see
zoo.compare) would be listed in
MORE_BREAKS_THAN_DYNAMO and marked xfail(strict=True): each still runs, and
a model that stops breaking more fails the run until it leaves the list
(benchmarks/capture_zoo.py prints the same comparison as a table).  Both tests of a model share one run (zoo.compare).  The whole
file: 121 models, about 4 minutes on two busy CPU cores with kiln's disk
cache cold (TorchDynamo's explain, live for a third of the models, about 1.5 s
a model); KILN_ZOO_DYNAMO=live runs TorchDynamo on every model; KILN_ZOO_BACKEND=eager compares outputs through
kiln.compile(model, backend="eager") instead (capture only, no C compiler).
"""
import os
import warnings

import pytest

from tests.models import zoo

BACKEND = os.environ.get("KILN_ZOO_BACKEND", "kiln")

pytestmark = pytest.mark.filterwarnings("ignore")

_results = {}

# models where kiln breaks more often than TorchDynamo, xfail(strict) while listed
MORE_BREAKS_THAN_DYNAMO = set()

COMPILE_BRANCH = {"umt5"}


def _result(name):
    """zoo.compare(name), computed once for both tests of a model."""
    if name not in _results:
        try:
            import transformers

            transformers.logging.set_verbosity_error()
        except ImportError:
            pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _results[name] = zoo.compare(name, backend=BACKEND, catch=True)
    return _results[name]


def same_worker(n, *marks):
    """Model n's parameter: both tests of a model share one zoo.compare run
    (_results), so under pytest-xdist they go to one worker (`--dist
    loadgroup`, as the Makefile runs the suite; else the other worker ran the
    model again)."""
    return pytest.param(n, marks=(pytest.mark.xdist_group(f"zoo-{n}"),) + marks)


@pytest.mark.parametrize("name", [same_worker(n, pytest.mark.xfail(
    strict=True, reason="the model takes another path under torch.compiler.is_compiling(): kiln equals eager run "
    "with it True, TorchDynamo differs alike")) if n in COMPILE_BRANCH else same_worker(n) for n in zoo.names()])
def test_zoo_output_matches_eager(name):
    check_output(name, _result(name))


def check_output(name, r):
    """The output half of a zoo test (tests/models/test_zoo_vision.py's too)."""
    assert not r.error, f"{name}: {r.error}" + ("; TorchDynamo (backend eager) gives eager's output" if r.dynamo_equal
                                                  else "; TorchDynamo (backend eager) fails or differs too")
    dynamo = {True: "TorchDynamo (backend eager) gives eager's output",
              False: "TorchDynamo (backend eager) differs too"}
    assert r.equal, (f"{name}: kiln.compile(backend={BACKEND!r}) differs from eager: {r.mismatch}; "
                     f"{dynamo.get(r.dynamo_equal, '')}")


@pytest.mark.parametrize("name", [same_worker(n, pytest.mark.xfail(
    strict=True, reason="issue 15, open: kiln breaks more often than TorchDynamo")) if n in MORE_BREAKS_THAN_DYNAMO
    else same_worker(n) for n in zoo.names()])
def test_zoo_breaks_no_more_than_dynamo(name):
    check_breaks(name, _result(name))


def check_breaks(name, r):
    """The break-count half of a zoo test (tests/models/test_zoo_vision.py's too)."""
    assert r.kiln_breaks is not None and r.dynamo_breaks is not None, f"{name}: {r.error}"
    assert not r.dynamo_stale, f"{name}: TorchDynamo's reference is stale: {r.dynamo_stale}"
    assert r.kiln_breaks <= r.dynamo_breaks, (
        f"{name}: kiln breaks the graph {r.kiln_breaks} time(s) ({r.kiln_graphs} graphs), TorchDynamo "
        f"{r.dynamo_breaks} ({r.dynamo_graphs} graphs); kiln's first breaks: {r.first_reasons(3)}")


def test_dynamo_reference_is_checked_where_live(monkeypatch):
    """A model whose TorchDynamo side runs live is held to the reference's
    entry (a wrong entry fails the zoo test), and one that reads the entry
    takes its counts."""
    name = "nn_multihead_attention"
    key = zoo.reference_key()
    monkeypatch.setitem(zoo._reference_cache, key, {name: [3, 2, ["made up"]]})
    monkeypatch.setenv("KILN_ZOO_DYNAMO", "live")
    r = zoo.compare(name, catch=True)
    assert r.dynamo_from == "live" and (r.dynamo_graphs, r.dynamo_breaks) == (1, 0)
    assert "3 graphs, 2 breaks" in r.dynamo_stale
    with pytest.raises(AssertionError, match="reference is stale"):
        check_breaks(name, r)
    monkeypatch.delenv("KILN_ZOO_DYNAMO")
    monkeypatch.setattr(zoo, "dynamo_live", lambda n: False)
    r = zoo.compare(name, catch=True)
    assert r.dynamo_from == "reference" and (r.dynamo_graphs, r.dynamo_breaks, r.dynamo_reasons) == (3, 2, ["made up"])
    assert not r.dynamo_stale


def test_dynamo_reference_thirds_cover_the_zoo():
    """Python 3.11, 3.12 and 3.13 each run TorchDynamo live on a third of the
    models, together all of them."""
    import sys

    names = zoo.names(None)
    ref = {n: [1, 0, []] for n in names}
    saved = dict(zoo._reference_cache)
    try:
        zoo._reference_cache[zoo.reference_key()] = ref
        live = {n for n in names if zoo.dynamo_live(n)}
        assert 0 < len(live) < len(names)
        minor = sys.version_info[1]
        others = set()
        for m in (minor + 1, minor + 2):
            others |= {n for i, n in enumerate(n for n, _ in zoo.ZOO) if i % 3 == m % 3}
        assert live | others == set(names) and not live & others
    finally:
        zoo._reference_cache.clear()
        zoo._reference_cache.update(saved)
