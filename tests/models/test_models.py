"""Real models through torch.compile(backend="kiln"): same outputs as eager."""
import pytest
import torch

from kiln import backends


def small_models():
    import transformers

    yield "mlp", torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32),
                                     torch.nn.LayerNorm(32)), (torch.randn(8, 64),)
    yield "cnn", torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                     torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10)), \
        (torch.randn(2, 3, 16, 16),)
    yield "bert", transformers.BertModel(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=500)), \
        (torch.randint(0, 500, (2, 16)),)
    yield "gpt2", transformers.GPT2Model(transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64)), (torch.randint(0, 500, (2, 16)),)
    yield "llama", transformers.LlamaModel(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=500)), (torch.randint(0, 500, (2, 16)),)
    yield "t5", transformers.T5EncoderModel(transformers.T5Config(
        num_layers=2, d_model=64, d_ff=128, num_heads=4, d_kv=16, vocab_size=500)), (torch.randint(0, 500, (2, 16)),)


def first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


@pytest.mark.parametrize("name", ["mlp", "cnn", "bert", "gpt2", "llama", "t5"])
def test_model_matches_eager(name):
    torch.manual_seed(0)
    m, args = dict((n, (mm, a)) for n, mm, a in small_models())[name]
    m.eval()
    torch._dynamo.reset()
    backends.reset()
    with torch.no_grad():
        ref = first_tensor(m(*args))
        fast = torch.compile(m, backend="kiln")
        for _ in range(2):
            out = first_tensor(fast(*args))
            torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    st = backends.compiled_graphs
    assert st and all(g["fallbacks"] == 0 for g in st)
    assert sum(g["kernels"] for g in st) >= 1


def test_bfloat16_model_close_to_eager():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 64),
                            torch.nn.LayerNorm(64)).to(torch.bfloat16).eval()
    x = torch.randn(16, 64, dtype=torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        ref = m(x)
        out = torch.compile(m, backend="kiln")(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref.float(), rtol=3e-2, atol=3e-2)
