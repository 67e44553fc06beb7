"""kiln.captured — facts about a graph as TorchDynamo or kiln captured it
(call_method / call_function nodes, before lowering): what a node writes in
place, what views what, which storage a value shares.

Consumes: a captured torch.fx graph module.  Produces: the helpers the
run-as-captured predicates (kiln/run_as_captured.py), the index-check
rewrites (kiln/index_checks.py) and the backend read.
"""
import operator as _operator

import torch

_INPLACE_OPERATORS = {getattr(_operator, k) for k in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
                                                      "iand", "ior", "ixor", "ilshift", "irshift", "imatmul")}
_VIEW_METHODS = {"unfold", "view", "reshape", "transpose", "t", "permute", "select", "narrow", "expand",
                 "expand_as", "view_as", "squeeze", "unsqueeze", "flatten", "unflatten", "diagonal", "as_strided",
                 "movedim", "swapaxes", "swapdims", "unbind", "split", "chunk", "tensor_split", "real", "imag",
                 "__getitem__", "getitem", "contiguous", "detach", "alias", "broadcast_to", "view_as_real",
                 "view_as_complex", "adjoint", "ravel", "moveaxis"}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "real", "imag", "data"}   # views of their tensor, captured as getattr


# methods that return their tensor itself when there is nothing to change
# (x.to(x.dtype), x.type_as(x), x.float() of a float tensor, x.cpu() on the CPU)
_MAY_RETURN_SELF = {"to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "char",
                    "byte", "bool", "cfloat", "cdouble", "cpu", "cuda", "to_dense", "coalesce", "rename",
                    "refine_names", "align_as", "align_to"}


def _views_arg(n):
    """Does captured node n return a view of its first argument (a view
    method, a view attribute such as x.mT, or a method that returned its
    tensor itself: the example values share storage; without them, yes)?"""
    name = _target_name(n)
    if name in _VIEW_METHODS or (n.target is getattr and len(n.args) == 2 and n.args[1] in _VIEW_ATTRS):
        return True
    if name in _MAY_RETURN_SELF and n.args and isinstance(n.args[0], torch.fx.Node):
        v, a = n.meta.get("example_value"), n.args[0].meta.get("example_value")
        if not (isinstance(v, torch.Tensor) and isinstance(a, torch.Tensor)):
            return True
        return _storage(v) == _storage(a)
    return False


def _target_name(n):
    t = n.target
    if isinstance(t, str):
        return t
    if isinstance(t, torch._ops.OpOverload):
        return t._schema.name.split("::")[-1]
    return getattr(t, "__name__", "")


def _written_by(n):
    """The nodes captured node n writes into in place (in-place methods and
    operators, setitem, `out=`)."""
    if n.op not in ("call_method", "call_function"):
        return []
    name = _target_name(n)
    out = n.kwargs.get("out")
    if out is not None:
        written = out if isinstance(out, (list, tuple)) else [out]
    elif (name.endswith("_") and not name.startswith("_")) or n.target in _INPLACE_OPERATORS or \
            name in ("setitem", "__setitem__"):
        written = n.args[:1]
    else:
        return []
    return [w for w in written if isinstance(w, torch.fx.Node)]


def _root(n):
    while isinstance(n, torch.fx.Node) and n.op in ("call_method", "call_function") and n.args and _views_arg(n):
        n = n.args[0]
    return n


def _written(gm):
    """The nodes the captured graph writes into in place."""
    for n in gm.graph.nodes:
        yield from _written_by(n)


def _writes_inputs(gm):
    """Does the captured graph write in place into (a view of) an input?"""
    return any(_root(w).op == "placeholder" for w in _written(gm))


def _storage(v):
    from torch.multiprocessing.reductions import StorageWeakRef
    return StorageWeakRef(v.untyped_storage()) if isinstance(v, torch.Tensor) else None


def _inputs_share_storage(example_inputs):
    seen = set()
    for t in example_inputs:
        st = _storage(t)
        if st is None:
            continue
        if st in seen:
            return True
        seen.add(st)
    return False
