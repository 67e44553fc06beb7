"""gemm_epilogues — ReLU and tanh-GELU after a GPU matmul, done by cuBLASLt.

A matmul is an extern to kiln (cuBLAS through ATen), so an activation right
after it cannot join the matmul's kernel: kiln runs it as a pointwise kernel
of its own that reads the product back and writes it again, unless something
else fuses with it.  cuBLASLt can apply ReLU or tanh-GELU to the product
(with its bias) before storing it; torch reaches that through
`aten._addmm_activation`.  Measured on the H200 for the benchmark models'
up-projections in bfloat16 (benchmarks/cublaslt_epilogue.py), the fused
epilogue costs what the bare GEMM does, 1.25-1.6x faster than GEMM then a
separate activation.  Where torch's Lt path does not apply (odd layouts), the
op itself falls back to the GEMM and the activation: the result is the same.

`apply(gm)` rewrites, in an inference ATen graph on a CUDA device,
    addmm(bias, x, w) -> relu                   into _addmm_activation(..., use_gelu=False)
    addmm(bias, x, w) -> gelu(approximate=tanh) into _addmm_activation(..., use_gelu=True)
and the same after mm (with a zero bias), when the product has no other use
(also through the view back to 3-D that a Linear on 3-D input makes).
tanh-GELU is matched both as aten.gelu and as the formula GPT-2's
NewGELUActivation spells out, 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
Exact GELU (erf) is left alone: cuBLASLt's GELU epilogue is the tanh form.
"""
import math

import torch

aten = torch.ops.aten
_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _is(n, op):
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target is op


def _close(v, want):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v - want) <= 1e-6 * max(1.0, abs(want))


def _scaled(n, want):
    """n = x * want (either order): x, else None."""
    if not _is(n, aten.mul.Tensor):
        return None
    a, b = n.args
    if isinstance(a, torch.fx.Node) and _close(b, want):
        return a
    if isinstance(b, torch.fx.Node) and _close(a, want):
        return b
    return None


def _plus_one(n):
    """n = y + 1 (either order): y, else None."""
    if not _is(n, aten.add.Tensor) or n.kwargs.get("alpha", 1) != 1:
        return None
    a, b = n.args
    if isinstance(a, torch.fx.Node) and _close(b, 1.0):
        return a
    if isinstance(b, torch.fx.Node) and _close(a, 1.0):
        return b
    return None


def _tanh_gelu_formula(out):
    """If `out` computes 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))):
    (x, the nodes of the formula), else None."""
    if not _is(out, aten.mul.Tensor) or not all(isinstance(a, torch.fx.Node) for a in out.args):
        return None
    for half, rest in (out.args, out.args[::-1]):
        x = _scaled(half, 0.5)
        t = _plus_one(rest)
        if x is None or not _is(t, aten.tanh.default):
            continue
        inner = _scaled(t.args[0], _SQRT_2_OVER_PI)
        if not _is(inner, aten.add.Tensor) or inner.kwargs.get("alpha", 1) != 1:
            continue
        for xx, cubic in (inner.args, inner.args[::-1]):
            p = _scaled(cubic, 0.044715)
            if xx is x and _is(p, aten.pow.Tensor_Scalar) and p.args[0] is x and _close(p.args[1], 3.0):
                return x, {out, half, rest, t, t.args[0], inner, cubic, p}
    return None


def _matmul(x):
    """x = addmm(bias, m1, m2) with unit scales, or mm(m1, m2): (bias node or
    None, m1, m2), else None."""
    if _is(x, aten.addmm.default) and x.kwargs.get("beta", 1) == 1 and x.kwargs.get("alpha", 1) == 1:
        return x.args[0], x.args[1], x.args[2]
    if _is(x, aten.mm.default):
        return None, x.args[0], x.args[1]
    return None


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def apply(gm, device_type="cuda"):
    """Rewrite gm's GEMM + activation pairs on `device_type` tensors as
    cuBLASLt epilogues (see the module doc; the tests check the rewrite on
    the CPU, where _addmm_activation computes the same).  Returns the number
    rewritten."""
    graph = gm.graph
    done = 0
    for n in list(graph.nodes):
        if n.op != "call_function":
            continue
        if _is(n, aten.relu.default):
            x, use_gelu, inside = n.args[0], False, {n}
        elif _is(n, aten.gelu.default) and (n.kwargs.get("approximate") == "tanh" or
                                             (len(n.args) > 1 and n.args[1] == "tanh")):
            x, use_gelu, inside = n.args[0], True, {n}
        else:
            m = _tanh_gelu_formula(n)
            if m is None:
                continue
            x, inside = m
            use_gelu = True
        if any(u not in inside for u in x.users):
            continue
        view = None
        if (_is(x, aten.view.default) or _is(x, aten._unsafe_view.default)) and len(x.args[0].users) == 1:
            view, x = x, x.args[0]   # a Linear on 3-D input: the product is viewed back to 3-D
        mm = _matmul(x)
        if mm is None:
            continue
        bias, m1, m2 = mm
        out, a, b = _val(x), _val(m1), _val(m2)
        if not all(isinstance(t, torch.Tensor) for t in (out, a, b)) or out.device.type != device_type or \
                out.dtype not in _DTYPES or a.dim() != 2 or b.dim() != 2:
            continue
        if bias is not None:
            bv = _val(bias)
            if not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.shape[0] != out.shape[1] or \
                    bv.dtype != out.dtype:
                continue
        with graph.inserting_before(n):
            if bias is None:
                zeros = f"_kiln_zero_bias{done}"
                gm.register_buffer(zeros, torch.zeros(out.shape[1], dtype=out.dtype, device=out.device),
                                   persistent=False)
                bias = graph.get_attr(zeros)
            fused = graph.call_function(aten._addmm_activation.default, (bias, m1, m2), {"use_gelu": use_gelu})
            fused.meta["val"] = out
            if view is not None:
                fused = graph.call_function(view.target, (fused,) + tuple(view.args[1:]), dict(view.kwargs))
                fused.meta["val"] = _val(view)
        n.replace_all_uses_with(fused)
        done += 1
    if done:
        graph.eliminate_dead_code()
        gm.recompile()
    return done
