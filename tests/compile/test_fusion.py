"""Golden fusion tests: how many kernels kiln generates for common patterns,
on the CPU and (where there is one) a CUDA GPU: both render the same fused
loop IR.

A reduction fuses with the pointwise work before and after it, so the
normalisations are one kernel each."""
import torch
import torch.nn.functional as F

import kiln


def kernels(fn, *args):
    e = kiln.explain(fn)(*args)
    assert e.fallbacks_per_graph == [0] * e.graph_count
    # and the fused kernels compute what eager does
    with torch.no_grad():
        want, got = fn(*args), kiln.compile(fn)(*args)
    for w, g in zip(torch.utils._pytree.tree_leaves(want), torch.utils._pytree.tree_leaves(got)):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    return e.kernels_per_graph


def test_pointwise_then_sum_is_one_kernel(dev):
    assert kernels(lambda x: (x * 2 + 1).relu().sum(-1), torch.randn(64, 1000, device=dev)) == [1]


def test_softmax_is_one_kernel(dev):
    assert kernels(lambda x: x.softmax(-1), torch.randn(64, 1000, device=dev)) == [1]


def test_log_softmax_is_one_kernel(dev):
    assert kernels(lambda x: F.log_softmax(x, -1), torch.randn(64, 1000, device=dev)) == [1]


def test_layer_norm_is_one_kernel(dev):
    w, b = torch.randn(256, device=dev), torch.randn(256, device=dev)
    assert kernels(lambda x: F.layer_norm(x, (256,), w, b), torch.randn(8, 32, 256, device=dev)) == [1]


def test_rms_norm_is_one_kernel(dev):
    w = torch.randn(256, device=dev)

    def rms(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    assert kernels(rms, torch.randn(8, 32, 256, device=dev)) == [1]


def test_residual_add_and_layer_norm_share_a_kernel(dev):
    w, b = torch.randn(256, device=dev), torch.randn(256, device=dev)

    def f(x, y):
        h = x + y
        return h, F.layer_norm(h, (256,), w, b)

    assert kernels(f, torch.randn(4, 16, 256, device=dev), torch.randn(4, 16, 256, device=dev)) == [1]


class GPT2Block(torch.nn.Module):
    """A GPT-2 block written out (transformers' own module changes its traced
    graph from release to release; this one does not)."""

    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.c_attn, self.c_proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.c_fc, self.c_out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.c_out(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


def test_empty_values_do_not_split_a_kernel(dev):
    """A value with no elements (an empty KV cache) computes nothing: it is
    allocated but runs no kernel, and the softmax-like rows around it stay
    one kernel."""
    def f(x, e):
        a = x.relu() * 3
        ee = e * 2
        return a / a.sum(-1, keepdim=True), ee

    out = kiln.compile(f)(torch.randn(64, 1000, device=dev), torch.randn(0, 1000, device=dev))
    assert out[1].shape == (0, 1000) and out[1].device.type == torch.device(dev).type
    assert kernels(f, torch.randn(64, 1000, device=dev), torch.randn(0, 1000, device=dev)) == [1]


def test_view_chain_of_a_computed_value_into_a_matmul_is_stored_once(dev):
    """Attention's output pattern: a computed value (here a masked matmul
    result, laid out [B, S, H, D] under a [B, H, S, D] view) is permuted and
    reshaped twice before the output projection.  It is stored once, and the
    matmul reads that storage as a view: one kernel, not a second copy."""
    B, S, H, D = 2, 16, 4, 8

    def f(x, w1, w2, m):
        y = (x @ w1).view(B, S, H, D).permute(0, 2, 1, 3)
        z = torch.where(m, y, 0.0)
        return z.permute(0, 2, 1, 3).reshape(B, S, H * D).view(B * S, H * D) @ w2

    args = (torch.randn(B * S, 32, device=dev), torch.randn(32, H * D, device=dev),
            torch.randn(H * D, 8, device=dev), torch.rand(B, 1, S, 1, device=dev) > 0.3)
    assert kernels(f, *args) == [1]


def test_gpt2_block_kernel_count(dev):
    """One GPT-2 block is 3 kernels: ln_1 (layer norm stored straight into the
    qkv matmul's input); residual add + ln_2 (one kernel: the residual stream
    is stored for the final add, the normalised rows for the fc matmul); and
    tanh-GELU after the fc matmul (its bias is inside addmm).  q, k and v reach
    attention as strided views of the qkv output, and attention's output
    reaches the projection as a view: no copies.  The final residual add is
    the projection matmul's epilogue and lands in a 4th kernel, since an extern
    call ends a kernel.  On a GPU the tanh-GELU is cuBLASLt's epilogue of the
    fc matmul (kiln/gemm_epilogues.py): 3 kernels."""
    m = GPT2Block().eval().to(dev)
    x = torch.randn(2, 32, 128, device=dev)
    with torch.no_grad():
        assert kernels(m, x) == ([3] if dev == "cuda" and kiln.config.lt_epilogues else [4])


def test_transformers_gpt2_fuses_to_a_few_kernels_per_layer(dev):
    import transformers

    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=64)
    m = transformers.GPT2Model(cfg).eval().to(dev)
    x = torch.randint(0, 1000, (2, 32), device=dev)
    with torch.no_grad():
        e = kiln.explain(m)(x)
    assert e.graph_count == 1 and e.fallbacks_per_graph == [0]
    # per layer: ln_1, k/v copies for the KV-cache concat, residual+ln_2,
    # GELU; plus the embeddings and ln_f (exact count varies by release)
    # (transformers 5.17 with torch 2.11 gives one kernel more than 5.24 here)
    assert e.kernels_per_graph[0] <= 2 * 5 + 3
