"""kiln.fold — constant folding of a lowered inference graph.

Consumes: an ATen graph module (after the plain trace or AOT export).
Produces: the same module with the values that depend on no input computed
once and registered as its buffers (`_fold_constants`).
"""
import torch

from .trace import _is_view, _storage_bases


# ops whose arguments kiln must hand over as tensors (externs): a constant
# argument of theirs is worth computing once at compile time even when it is
# cheap, since it would otherwise be stored on every call
_EXTERN_USERS = {"mm", "addmm", "bmm", "baddbmm", "convolution", "_convolution", "scaled_dot_product_attention",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu"}
# factories whose contents are unspecified: never a constant
_NEVER_FOLD = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_FOLD_BYTES = 1 << 24


def _bytes_of(val):
    """Bytes of storage behind a node's value (fake or real; 0 if unknown)."""
    vals = val if isinstance(val, (tuple, list)) else (val,)
    total = 0
    for v in vals:
        if isinstance(v, torch.Tensor):
            try:
                total += v.untyped_storage().nbytes()
            except Exception:
                total += v.numel() * v.element_size()
    return total


def _extern_user(n):
    tgt = n.target
    if not isinstance(tgt, torch._ops.OpOverload):
        return False
    return tgt.namespace != "aten" or tgt._schema.name.split("::")[-1] in _EXTERN_USERS


def _fold_constants(aten):
    """Compute once, at compile time, the values of an inference graph that
    depend on no input (attention masks built from constants, the rows such
    a mask lets attend), and make them constants of the graph.  Folded: a
    value that an extern takes as an argument, or whose computation has a
    reduction or another op that is not pointwise, a view or a factory; left
    to the kernels: index arithmetic such as positions from arange, which
    kiln computes inline for free.  Random ops, ops with unspecified
    contents (empty) and mutating ops are never folded, nor is a graph
    output (it would alias the constant), nor a value over 16 MiB."""
    import operator

    from torch.utils._pytree import tree_flatten, tree_map

    Node = torch.fx.Node
    value, heavy = {}, {}
    # what an output views is not folded either (the output would be a view
    # of the constant, shared by every call)
    out_node = next(n for n in aten.graph.nodes if n.op == "output")
    viewed = set()
    for o in tree_flatten(out_node.args)[0]:
        viewed |= _storage_bases(o)
    for n in aten.graph.nodes:
        if n.op == "get_attr":
            t = aten
            for part in str(n.target).split("."):
                t = getattr(t, part, None)
            if isinstance(t, torch.Tensor):
                value[n], heavy[n] = t, False
            continue
        if n.op != "call_function":
            continue
        ins = [a for a in tree_flatten((n.args, n.kwargs))[0] if isinstance(a, Node)]
        if any(a not in value for a in ins):
            continue
        tgt = n.target
        if tgt is operator.getitem:
            v = value[n.args[0]]
            if isinstance(v, (tuple, list)) and isinstance(v[n.args[1]], torch.Tensor):
                value[n], heavy[n] = v[n.args[1]], heavy[n.args[0]]
            continue
        if not isinstance(tgt, torch._ops.OpOverload) or tgt._schema.is_mutable or \
                torch.Tag.nondeterministic_seeded in tgt.tags or tgt._schema.name.split("::")[-1] in _NEVER_FOLD:
            continue
        if _bytes_of(n.meta.get("val")) > _FOLD_BYTES:
            continue   # not computed at all: a big temporary is not worth the memory
        try:
            args, kwargs = tree_map(lambda a: value[a] if isinstance(a, Node) else a, (n.args, n.kwargs))
            v = tgt(*args, **kwargs)
        except Exception:
            continue
        if not (isinstance(v, torch.Tensor) or
                (isinstance(v, (tuple, list)) and all(isinstance(x, torch.Tensor) for x in v))):
            continue
        value[n] = v
        cheap = not ins or torch.Tag.pointwise in tgt.tags or _is_view(tgt) or \
            tgt._schema.name.split("::")[-1] in ("lift_fresh_copy", "clone", "_to_copy", "scalar_tensor")
        heavy[n] = not cheap or any(heavy[a] for a in ins)
    folded = 0
    for n, v in list(value.items()):
        if n.op != "call_function" or not isinstance(v, torch.Tensor):
            continue
        outside = [u for u in n.users if u not in value]
        if not outside or any(u.op == "output" for u in n.users) or n in viewed:
            continue
        if not (heavy[n] or any(_extern_user(u) for u in outside)):
            continue
        if v.untyped_storage().nbytes() > _FOLD_BYTES:
            continue
        name = f"_kiln_folded{folded}"
        folded += 1
        aten.register_buffer(name, v, persistent=False)
        with aten.graph.inserting_before(n):
            g = aten.graph.get_attr(name)
        n.replace_all_uses_with(g)
    if folded:
        aten.graph.eliminate_dead_code()
        aten.recompile()
    return aten
