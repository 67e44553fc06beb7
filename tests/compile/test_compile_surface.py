"""Issue 16, torch.compile's surface: every mode and options through both
entry points (kiln.compile and torch.compile(backend="kiln")), disable=True,
and an unknown option key as a user error naming the valid ones."""
import pytest
import torch

import kiln
from kiln import backends, config

MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def _f(x):
    return torch.nn.functional.gelu(x @ x.t()) + 1


_OPTIONS = [None, {"packed_linear": False}, {"triton.cudagraphs": False, "max_autotune": True}]
# torch.compile takes a mode or options, not both: its cases are each alone
_CASES = [("kiln", m, o) for m in MODES + [None] for o in _OPTIONS] + \
    [("torch", m, None) for m in MODES + [None]] + [("torch", None, o) for o in _OPTIONS[1:]]


@pytest.mark.parametrize("entry, mode, options", _CASES)
def test_every_mode_and_options_through_both_entries(entry, mode, options):
    kiln.reset()
    x = torch.randn(8, 8)
    if entry == "kiln":
        f = kiln.compile(_f, mode=mode, options=options)
    else:
        kw = {"mode": mode} if mode is not None else {"options": options} if options is not None else {}
        f = torch.compile(_f, backend="kiln", **kw)
    for _ in range(2):
        torch.testing.assert_close(f(x), _f(x))
    torch._dynamo.reset()


def test_options_set_kiln_config_only_while_a_graph_compiles():
    seen = []
    before = config.packed_linear

    def spy(gm, example_inputs):
        seen.append(config.packed_linear)
        return gm.forward

    backends_plain = backends._plain
    try:
        backends._plain = spy
        backends.configured(None, {"packed_linear": not before})(torch.fx.symbolic_trace(_f), [torch.randn(2, 2)])
    finally:
        backends._plain = backends_plain
    assert seen == [not before] and config.packed_linear == before


def test_an_unknown_option_names_the_valid_ones():
    with pytest.raises(ValueError, match="packed_linear"):
        kiln.compile(_f, options={"no_such_knob": 1})
    with pytest.raises(TypeError):
        kiln.compile(_f, options=[("packed_linear", True)])
    with pytest.raises(ValueError, match="mode"):
        kiln.compile(_f, mode="fastest")


def test_disable_returns_the_function_itself():
    assert kiln.compile(_f, disable=True) is _f
    m = torch.nn.Linear(2, 2)
    assert kiln.compile(m, disable=True) is m
