"""Real models are captured whole by kiln's C recorder: one graph, no graph
break, the same outputs as eager, with backend="eager" and backend="kiln".

transformers models (BERT, GPT-2, T5 encoder, a Llama-style decoder) are built
from small configs with random weights, as the benchmark builds them.
"""
import warnings

import pytest
import torch

import kiln
from kiln.bench import models

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

NAMES = ["mlp", "cnn", "encoder", "bert", "gpt2", "t5", "llama"]


def _build(name):
    torch.manual_seed(0)
    m, args = models.MODELS[name].builder(2, 16 if models.MODELS[name].seq else None)
    return m.eval(), args


@pytest.mark.parametrize("name", NAMES)
def test_model_captures_whole_with_eager_backend(name):
    m, args = _build(name)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # a capture failure warns: make it fail
        ex = kiln.explain(m, backend="eager")(*args)
        assert ex.graph_break_count == 0, ex.breaks
        assert ex.graph_count == 1
        assert ex.ops_per_graph[0] > 5
        cm = kiln.compile(m, backend="eager")
        for _ in range(2):
            torch.testing.assert_close(cm(*args), m(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "bert", "gpt2"])
def test_model_runs_through_kiln_backend(name):
    m, args = _build(name)
    with torch.no_grad():
        cm = kiln.compile(m)
        torch.testing.assert_close(cm(*args), m(*args), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(cm(*args), m(*args), rtol=1e-4, atol=1e-4)


def test_decoder_with_kv_cache_output():
    """GPT-2 with its default use_cache=True returns a DynamicCache built
    inside the graph's frame: the replay builds it again around the outputs."""
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=32)
    torch.manual_seed(0)
    m = transformers.GPT2Model(cfg).eval()
    cm = kiln.compile(m, backend="eager")
    for seq in (8, 8, 5):
        x = torch.randint(0, 100, (2, seq))
        with torch.no_grad():
            got, want = cm(x), m(x)
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state)
        assert got.past_key_values.get_seq_length() == seq
        torch.testing.assert_close(got.past_key_values.layers[1].values, want.past_key_values.layers[1].values)
