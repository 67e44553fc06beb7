"""Golden fusion tests: how many kernels kiln generates for common patterns.

A reduction fuses with the pointwise work before and after it, so the
normalisations are one kernel each."""
import torch
import torch.nn.functional as F

import kiln


def kernels(fn, *args):
    e = kiln.explain(fn)(*args)
    assert e.fallbacks_per_graph == [0] * e.graph_count
    return e.kernels_per_graph


def test_pointwise_then_sum_is_one_kernel():
    assert kernels(lambda x: (x * 2 + 1).relu().sum(-1), torch.randn(64, 1000)) == [1]


def test_softmax_is_one_kernel():
    assert kernels(lambda x: x.softmax(-1), torch.randn(64, 1000)) == [1]


def test_log_softmax_is_one_kernel():
    assert kernels(lambda x: F.log_softmax(x, -1), torch.randn(64, 1000)) == [1]


def test_layer_norm_is_one_kernel():
    w, b = torch.randn(256), torch.randn(256)
    assert kernels(lambda x: F.layer_norm(x, (256,), w, b), torch.randn(8, 32, 256)) == [1]


def test_rms_norm_is_one_kernel():
    w = torch.randn(256)

    def rms(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    assert kernels(rms, torch.randn(8, 32, 256)) == [1]


def test_residual_add_and_layer_norm_share_a_kernel():
    w, b = torch.randn(256), torch.randn(256)

    def f(x, y):
        h = x + y
        return h, F.layer_norm(h, (256,), w, b)

    assert kernels(f, torch.randn(4, 16, 256), torch.randn(4, 16, 256)) == [1]


def test_gpt2_block_kernel_count():
    """A GPT-2 block: embeddings + residual stream + ln_1 (1 kernel); the qkv
    projection is an extern; the key and value heads are concatenated with the
    (empty) KV cache, which makes fresh tensors in eager too, so kiln stores
    both in one kernel (1) — the query head reaches attention as a strided
    view, as does the attention output the next matmul reads; residual add +
    ln_2 (1 kernel); GELU after the fc matmul, bias inside addmm (1 kernel);
    residual add + ln_f (1 kernel).  Five kernels for the block with its
    embeddings and final norm."""
    import transformers

    cfg = transformers.GPT2Config(n_layer=1, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
    m = transformers.GPT2Model(cfg).eval()
    x = torch.randint(0, 1000, (2, 32))
    with torch.no_grad():
        e = kiln.explain(m)(x)
    assert e.graph_count == 1
    assert e.kernels_per_graph == [5]
