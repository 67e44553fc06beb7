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

from . import config, fakes


def aligned_mask(m, q):
    """`m` as the fused CUDA attention kernels accept it.  The memory-efficient
    kernel wants every stride of the mask but the last to be a multiple of 16
    bytes; eager's masks usually are (a broadcast mask has stride 0, torch pads
    a short last dimension), but a mask that a compiled graph materialised, say
    [B, H, 3, 6] float32, is not, and that kernel then raises.  Such a mask is
    copied into a buffer whose rows are padded to 16 bytes and viewed back at
    its shape; a boolean one becomes q's dtype (0 or -inf) on the way, as
    scaled_dot_product_attention itself would convert it."""
    if m is None or m.dim() < 2 or m.device.type != "cuda":
        return m
    shape, st = m.shape, m.stride()
    if m.dtype == torch.bool:
        dt = q.dtype
        a = 16 // q.element_size()
        bad = shape[-1] % a != 0 and any(n > 1 and s != 0 for n, s in zip(shape[:-1], st[:-1]))
    else:
        dt = m.dtype
        a = 16 // m.element_size()
        bad = (st[-1] != 1 and shape[-1] > 1) or any(n > 1 and s % a != 0 for n, s in zip(shape[:-1], st[:-1]))
    if not bad:
        return m
    last = shape[-1]
    buf = torch.empty(tuple(shape[:-1]) + (-(-last // a) * a,), dtype=dt, device=m.device)[..., :last]
    if m.dtype == torch.bool:
        buf.fill_(float("-inf")).masked_fill_(m, 0)
    else:
        buf.copy_(m)
    return buf


@torch.library.custom_op("kiln::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor], dropout_p: float, is_causal: bool,
              scale: Optional[float], enable_gqa: bool) -> Tensor:
    return call_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)


@attention.register_fake
def _attention_fake(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    shape = tuple(q.shape[:-1]) + (v.shape[-1],)
    if q.dim() == 4 and q.device.type == "cuda":
        # the fused CUDA kernels return [B, H, S, D] laid out as [B, S, H, D]
        b, h, s, d = shape
        return q.new_empty((b, s, h, d)).transpose(1, 2)
    return q.new_empty(shape)


def recorded_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention's result as a recording fakes it (the
    capture's fake call, src/capture/record_value.c `kn_torch_op`), or
    NotImplemented: torch's own fake then runs.  On a GPU an inference graph's
    attention becomes kiln::attention (kiln/trace.py), so the recording takes
    that op's fake, the fused kernels' layout: torch's fake of
    scaled_dot_product_attention takes the math path there (a mask, symbolic
    sizes), two matmuls' and a softmax's decompositions per call, a third of
    a symbolic recording, and another layout than the graph is lowered to.
    Only where the shapes are ones the fused kernels take as they are (4-d,
    one batch and head count, matching head sizes, no GQA, a mask of at most
    4 dims of q's dtype or bool); everything else, training (grad
    required) and autocast (it changes the dtype) take torch's fake."""
    ts = (q, k, v)
    if not all(isinstance(t, Tensor) and t.dim() == 4 and t.device.type == "cuda" for t in ts):
        return NotImplemented
    if enable_gqa or q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or \
            k.dtype != q.dtype or v.dtype != q.dtype:
        return NotImplemented
    if torch.is_grad_enabled() and any(t.requires_grad for t in ts):
        return NotImplemented
    if fakes.autocast_on("cuda"):
        return NotImplemented   # (autocast casts the inputs first: torch's fake gives the dtype it computes in)
    if is_causal and attn_mask is not None:
        return NotImplemented   # (torch raises: its fake says so)
    if attn_mask is not None and (not isinstance(attn_mask, Tensor) or attn_mask.dim() > 4 or
                                  attn_mask.dtype not in (torch.bool, q.dtype) or attn_mask.requires_grad):
        return NotImplemented
    # (symbolic sizes: each comparison guards as torch's own checks would;
    # one it cannot decide, a data-dependent size, leaves it to torch's fake)
    try:
        if not (q.size(0) == k.size(0) == v.size(0) and q.size(1) == k.size(1) == v.size(1) and
                k.size(2) == v.size(2) and q.size(3) == k.size(3)):
            return NotImplemented
        if attn_mask is not None:
            want = (q.size(0), q.size(1), q.size(2), k.size(2))[4 - attn_mask.dim():]
            if not all(m == 1 or m == w for m, w in zip(attn_mask.shape, want)):
                return NotImplemented
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
        return NotImplemented
    return _attention_fake(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _backend_value(name):
    b = getattr(getattr(getattr(torch.nn, "attention", None), "SDPBackend", None), name, None)
    return getattr(b, "value", None)


_CUDNN = _backend_value("CUDNN_ATTENTION")
_choice = getattr(torch, "_fused_sdp_choice", None)


def call_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """What a compiled graph calls for kiln::attention (no dispatcher hop)."""
    if attn_mask is not None:
        attn_mask = aligned_mask(attn_mask, q)
    if q.is_cuda and _CUDNN is not None and _choice is not None and config.cuda_attention != "cudnn" and \
            not enable_gqa and dropout_p == 0.0:
        if _choice(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa) == _CUDNN:
            out = _without_cudnn(q, k, v, attn_mask, is_causal, scale)
            if out is not None:
                return out
    return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale=scale,
                                                     enable_gqa=enable_gqa)


def _without_cudnn(q, k, v, m, is_causal, scale):
    """Flash attention (no mask) or the memory-efficient kernel (a mask,
    broadcast over batch and heads as scaled_dot_product_attention
    broadcasts it), or None where the kernel refuses these inputs (its
    checks run before it launches anything)."""
    aten = torch.ops.aten
    try:
        if m is None and q.dtype in (torch.float16, torch.bfloat16):
            return aten._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, False, scale=scale)[0]
        if m is not None and q.dim() == 4:
            m = m.expand(q.size(0), q.size(1), q.size(2), k.size(2))   # (right-aligned, as SDPA's)
        return aten._scaled_dot_product_efficient_attention(q, k, v, m, False, 0.0, is_causal, scale=scale)[0]
    except RuntimeError:
        return None


def bias_aligned(op):
    """`op` (a fused attention kernel taking attn_bias as its fourth
    argument) called with that bias as the kernel accepts it: a traced graph
    that pads and expands the mask itself leaves kiln to materialise it, with
    strides the kernel rejects."""
    def call(q, k, v, bias, *rest, **kw):
        if bias is not None:
            bias = aligned_mask(bias, q)
        return op(q, k, v, bias, *rest, **kw)
    return call


def whole_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return torch.ops.kiln.attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def additive_mask(mask, dtype):
    """A boolean attention mask as the additive one the fused kernels take:
    0 where attending, -inf elsewhere, in the query's dtype.  Given a boolean
    mask, scaled_dot_product_attention picks its math path (float32 matmuls,
    a separate softmax); given this one it picks cuDNN or memory-efficient
    attention.  Traced, this is one pointwise op kiln fuses into the kernel
    that computes the mask."""
    return torch.full_like(mask, float("-inf"), dtype=dtype).masked_fill(mask, 0.0)


def rows_attending(mask):
    """Which query rows of a boolean mask attend to at least one key: the math
    path returns zeros for the others, where the fused kernels may not."""
    return mask.any(-1, keepdim=True)


def _sdpa_args(n):
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    out = dict(zip(names, n.args))
    out.update(n.kwargs)
    return out


def _val(a):
    return a.meta.get("example_value", a.meta.get("val")) if isinstance(a, torch.fx.Node) else None


def keep_attention_whole(gm):
    """A copy of captured graph `gm` whose scaled_dot_product_attention calls
    are kiln::attention (so tracing to ATen keeps them whole), or gm itself
    when it has none.  A boolean mask is turned into an additive one (once
    per mask), and rows that attend to nothing are zeroed after the call, as
    the math path would leave them.  The caller's graph is never modified."""
    sdpa = torch._C._nn.scaled_dot_product_attention
    if not any(n.op == "call_function" and n.target is sdpa for n in gm.graph.nodes):
        return gm
    import copy

    graph = copy.deepcopy(gm.graph)
    converted = {}
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not sdpa:
            continue
        a = _sdpa_args(n)
        mask, q = a.get("attn_mask"), a.get("query")
        mval, qval = _val(mask), _val(q)
        if isinstance(mval, torch.Tensor) and mval.dtype == torch.bool and isinstance(qval, torch.Tensor) \
                and qval.dtype.is_floating_point:
            if mask not in converted:
                with graph.inserting_after(mask):
                    add = graph.call_function(additive_mask, (mask, qval.dtype))
                with graph.inserting_after(add):
                    keep = graph.call_function(rows_attending, (mask,))
                converted[mask] = (add, keep)
            add, keep = converted[mask]
            a["attn_mask"] = add
            pos = tuple(a.pop(k) for k in ("query", "key", "value"))
            with graph.inserting_before(n):
                new = graph.call_function(whole_sdpa, pos, a)
            with graph.inserting_after(new):
                fixed = graph.call_function(torch.where, (keep, new, 0.0))
            n.replace_all_uses_with(fixed)
            graph.erase_node(n)
        else:
            n.target = whole_sdpa
    graph.lint()
    return torch.fx.GraphModule(gm, graph)
