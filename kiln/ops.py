"""kiln.ops — operators kiln puts into the graphs it lowers.

kiln::attention is scaled_dot_product_attention kept whole.  Tracing to ATen
otherwise replaces it with one backend's kernel, chosen on fake tensors: with
an attention mask on a GPU that choice is often the math path (two float32
matmuls and a softmax), many times slower than the fused kernel eager picks at
run time.  Kept as this operator, the graph calls torch's own
scaled_dot_product_attention when it runs (an extern to the C core), so it gets
what eager gets: flash, cuDNN or memory-efficient attention.  Only inference
graphs use it (it has no autograd formula)."""
from typing import Optional

import torch
from torch import Tensor


@torch.library.custom_op("kiln::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], dropout_p: float, is_causal: bool,
              scale: Optional[float], enable_gqa: bool) -> Tensor:
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale=scale,
                                                     enable_gqa=enable_gqa)


@attention.register_fake
def _attention_fake(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    shape = tuple(q.shape[:-1]) + (v.shape[-1],)
    if q.dim() == 4 and q.device.type == "cuda":
        # the fused CUDA kernels return [B, H, S, D] laid out as [B, S, H, D]
        b, h, s, d = shape
        return q.new_empty((b, s, h, d)).transpose(1, 2)
    return q.new_empty(shape)


def call_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """What a compiled graph calls for kiln::attention (no dispatcher hop)."""
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale=scale,
                                                     enable_gqa=enable_gqa)


def whole_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return torch.ops.kiln.attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def keep_attention_whole(gm):
    """A copy of captured graph `gm` whose scaled_dot_product_attention calls
    are kiln::attention (so tracing to ATen keeps them whole), or gm itself
    when it has none.  The caller's graph is never modified."""
    sdpa = torch._C._nn.scaled_dot_product_attention
    if not any(n.op == "call_function" and n.target is sdpa for n in gm.graph.nodes):
        return gm
    import copy

    graph = copy.deepcopy(gm.graph)
    for n in graph.nodes:
        if n.op == "call_function" and n.target is sdpa:
            n.target = whole_sdpa
    return torch.fx.GraphModule(gm, graph)
