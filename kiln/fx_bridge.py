"""fx_bridge — turn a torch.fx ATen graph into the plain description that
kiln's C core parses (src/graph/graph.c).

Python stays here because reading torch.fx objects (schemas, FakeTensor
metadata) is only possible through Python; everything after this point is C.
"""
import operator

import torch

from . import _C, errors

# The dtype codes of the C core: kiln._C.DTYPES names them in the order of
# src/kiln.h's KN_DTYPES table (the one place the order is written).
DTYPES = tuple(getattr(torch, name) for name in _C.DTYPES)
DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}


def _fast_calls():
    """Extern ops called through torch's Python-argument-parser bindings
    rather than the OpOverload: same positional schema, same kernels, several
    microseconds less per call (they are the hot externs of every model)."""
    aten = torch.ops.aten
    table = {
        aten.mm.default: torch.mm, aten.addmm.default: torch.addmm, aten.bmm.default: torch.bmm,
        aten.baddbmm.default: torch.baddbmm, aten.convolution.default: torch.convolution,
        aten.embedding.default: torch.embedding, aten._addmm_activation.default: torch._addmm_activation,
        aten.scaled_dot_product_attention.default: torch._C._nn.scaled_dot_product_attention,
    }
    from . import ops
    table[torch.ops.kiln.attention.default] = ops.call_attention
    for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"):
        op = getattr(aten, name, None)
        if op is not None:
            table[op.default] = ops.bias_aligned(op.default)
    return table


FAST_CALLS = _fast_calls()


class Ref(int):
    """A reference to a graph node (by index) inside argument lists."""
    __slots__ = ()


# the graph cannot be compiled by kiln (it runs eagerly instead)
Unsupported = errors.Unsupported


def _meta_of(val, device="cpu", holes=None):
    if isinstance(val, torch.Tensor):
        if val.layout != torch.strided or val.dtype not in DTYPE_CODE or val.device.type != device:
            return None
        if holes is not None:   # symbolic sizes become holes (kiln/template.py)
            h = holes.hole
            shape = tuple(h(s) for s in val.shape)
            # (and a flag for the C core: a size is a symbol, so it takes the
            # same decisions for this tensor at every size: kn_meta.sym)
            sym = int(any(not isinstance(s, int) for s in shape))
            return (shape, tuple(h(s) for s in val.stride()), DTYPE_CODE[val.dtype], h(val.storage_offset()), sym)
        try:
            return (tuple(int(s) for s in val.shape), tuple(int(s) for s in val.stride()), DTYPE_CODE[val.dtype],
                    int(val.storage_offset()))
        except TypeError:  # symbolic sizes
            raise Unsupported("symbolic shapes")
    return None


def _aliased_arg(tgt):
    """Position of the argument whose storage the results of op `tgt` share
    (a view, an in-place op, `out=`), or None when they have their own.
    `_unsafe_view` counts as a view: its schema says fresh, its result is not."""
    schema = tgt._schema
    if schema.name == "aten::_unsafe_view":
        return 0
    sets = set()
    aliasing = False
    for r in schema.returns:
        if r.alias_info is not None:
            aliasing = True
            sets |= set(r.alias_info.before_set)
    if not aliasing:
        return None
    first = None
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None:
            continue
        if sets & set(a.alias_info.before_set):
            return i
        if first is None:
            first = i
    return first   # (a list result, `Tensor(a)[]`, names its set on the elements)


def _non_overlapping(size, stride):
    """No two elements of a tensor of these sizes and strides share memory."""
    dims = sorted((st, sz) for sz, st in zip(size, stride) if sz > 1)
    span = 1
    for st, sz in dims:
        if st < span:
            return False
        span = st * (sz - 1) + span
    return True


def _check_output_views(outputs, nodes, root):
    """Outputs that share storage (with an input, with each other, or with a
    value they view) are returned by the C core as views of one stored base
    with the sizes, strides and offsets torch traced.  That needs the base
    and the views in one dtype, and a base that can be stored (its own
    elements never overlap)."""
    for o in outputs:
        if not isinstance(o, Ref):
            continue
        r = root[o]
        if r < 0:
            continue
        base, view = nodes[r], nodes[o]
        bm = base[2][0] if base[2] and len(base[2]) == 1 else None
        vm = view[2][0] if view[2] and len(view[2]) == 1 else None
        if bm is None or vm is None:
            raise Unsupported(f"output {view[0]} shares storage with {base[0]}, whose layout is not known")
        if bm[2] != vm[2]:
            raise Unsupported(f"output {view[0]} views {base[0]} as another dtype")
        if base[0] != "input" and not _non_overlapping(bm[0], bm[1]):
            raise Unsupported(f"output {view[0]} views {base[0]}, whose elements overlap")


def _sym_node(v):
    """The SymInt a size node computes (sym_size, a size argument, size
    arithmetic), or None."""
    val = v.meta.get("val")
    return val if isinstance(val, torch.SymInt) else None


def _convert(v, index, holes=None):
    if isinstance(v, torch.fx.Node):
        if holes is not None and v not in index and _sym_node(v) is not None:
            return holes.hole(_sym_node(v))
        return Ref(index[v])
    if holes is not None and isinstance(v, torch.SymInt):
        return holes.hole(v)
    if isinstance(v, (list, tuple)):
        return tuple(_convert(x, index, holes) for x in v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, (torch.device, torch.memory_format, torch.layout)):
        return str(v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unsupported("symbolic scalar argument")
    return v  # kept as an object; the C side treats it as opaque


def _call_value(v, index, holes=None):
    """Argument as passed to the real op at run time (refs kept, objects kept)."""
    if isinstance(v, torch.fx.Node):
        if holes is not None and v not in index and _sym_node(v) is not None:
            return holes.hole(_sym_node(v))
        return Ref(index[v])
    if holes is not None and isinstance(v, torch.SymInt):
        return holes.hole(v)
    if isinstance(v, tuple):
        return tuple(_call_value(x, index, holes) for x in v)
    if isinstance(v, list):
        return [_call_value(x, index, holes) for x in v]
    if isinstance(v, dict):
        return {k: _call_value(x, index, holes) for k, x in v.items()}
    return v


def _schema_args(target, args, kwargs):
    out = []
    for i, a in enumerate(target._schema.arguments):
        if i < len(args):
            out.append(args[i])
        elif a.name in kwargs:
            out.append(kwargs[a.name])
        elif a.has_default_value():
            out.append(a.default_value)
        else:
            out.append(None)
    return out


def graph_device(gm):
    """The device of a graph's tensor inputs (cpu when it has none)."""
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type != "cpu":
                return val.device
    return torch.device("cpu")


def describe(gm, device="cpu", holes=None):
    """Returns (desc, constants): desc is the tuple src/graph/graph.c parses;
    constants are tensors of get_attr nodes, passed after the real inputs.
    `device` is the device type kernels are generated for: tensors elsewhere
    have no metadata for the C core (their ops run in ATen).  With `holes`
    (a kiln.template.Holes), gm has symbolic sizes: size inputs and size
    arithmetic are no nodes, and every size, stride or argument they give
    is a hole of the description (kiln/template.py fills them per size)."""
    _meta = lambda v: _meta_of(v, device, holes)
    nodes, inputs, outputs, constants = [], [], [], []
    index = {}
    root = []   # per node: the node whose storage it shares, or -1
    graph = gm.graph
    for n in graph.nodes:
        if n.op == "output":
            continue
        val = n.meta.get("val")
        if holes is not None and (isinstance(val, torch.SymInt) or
                                  (n.op == "placeholder" and isinstance(val, (int, bool)))):
            if n.op == "placeholder" or n.target in _SIZE_FNS:
                continue   # a size input, or arithmetic on sizes: filled in per size
        if holes is not None and isinstance(val, (torch.SymBool, torch.SymFloat)):
            raise Unsupported(f"symbolic {type(val).__name__} {n.name}")
        index[n] = len(nodes)
        uses = len(n.users)
        if n.op == "placeholder":
            if val is not None and not isinstance(val, torch.Tensor):
                raise Unsupported(f"non-tensor input {n.name}")
            if isinstance(val, torch.Tensor) and val.device.type != device:
                raise Unsupported(f"input {n.name} is on {val.device}, not {device}")
            inputs.append(len(nodes))
            root.append(-1)
            nodes.append(("input", (), (_meta(val),) if val is not None else None, False, uses, None, (), {}, -1))
        elif n.op == "get_attr":
            t = gm
            for part in str(n.target).split("."):
                t = getattr(t, part, None)
            if not isinstance(t, torch.Tensor):
                raise Unsupported(f"get_attr {n.target} is not a tensor")
            if t.device.type != device:
                raise Unsupported(f"constant {n.target} is on {t.device}, not {device}")
            constants.append(t)
            inputs.append(len(nodes))
            root.append(-1)
            nodes.append(("input", (), (_meta(t),), False, uses, None, (), {}, -1))
        elif n.op == "call_function":
            tgt = n.target
            if tgt is operator.getitem:
                src, i = n.args
                # an element of a view op's list (split, unbind) shares its storage
                r = root[index[src]]
                root.append(r)
                nodes.append(("getitem", (Ref(index[src]), int(i)), (_meta(val),), False, uses, None, (), {}, r))
                continue
            if not isinstance(tgt, torch._ops.OpOverload):
                raise Unsupported(f"call of {tgt}")
            name = str(tgt)  # ops outside kiln's table (any namespace) become externs
            full = _schema_args(tgt, n.args, n.kwargs)
            conv = [_convert(a, index, holes) for a in full]
            if name == "aten._to_copy.default":
                dev = n.kwargs.get("device")
                if dev is not None and torch.device(dev).type != device:
                    conv.append("device-change")
            if isinstance(val, (tuple, list)):
                metas, is_tuple = tuple(_meta(v) for v in val), True
            else:
                metas, is_tuple = (_meta(val),), False
            cargs = tuple(_call_value(a, index, holes) for a in n.args)
            ckw = {k: _call_value(v, index, holes) for k, v in n.kwargs.items()}
            # the extern call goes straight to the C++ operator (OpOverload's
            # __call__ only forwards to it)
            call = _call_of(tgt)
            k = _aliased_arg(tgt)
            src = full[k] if k is not None and k < len(full) else None
            r = -1
            if isinstance(src, torch.fx.Node):
                r = root[index[src]] if root[index[src]] >= 0 else index[src]
            root.append(r)
            nodes.append((name, tuple(conv), metas, is_tuple, uses, call, cargs, ckw, r))
        else:
            raise Unsupported(f"node kind {n.op}")
    out_node = next(n for n in graph.nodes if n.op == "output")
    res = out_node.args[0]
    single = not isinstance(res, (tuple, list))
    for v in ([res] if single else res):
        if isinstance(v, torch.fx.Node) and v not in index and holes is not None and _sym_node(v) is not None:
            outputs.append(holes.hole(_sym_node(v)))
        elif isinstance(v, torch.fx.Node):
            outputs.append(Ref(index[v]))
        elif v is None or isinstance(v, (int, float, bool)):
            outputs.append(v)
        else:
            raise Unsupported(f"graph output of type {type(v).__name__}")
    if holes is None:   # (with holes: checked when they are filled in, kiln/template.py)
        _check_output_views(outputs, nodes, root)
    return (nodes, inputs, outputs, Ref), constants, single


def _size_fns():
    """What computes a size in a graph traced with symbolic sizes: the size,
    stride and numel queries and Python's int arithmetic."""
    aten = torch.ops.aten
    out = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg,
           operator.pow, max, min, torch.sym_max, torch.sym_min, torch.sym_int}
    for name in ("sym_size", "sym_stride", "sym_numel", "sym_storage_offset"):
        pk = getattr(aten, name, None)
        if pk is not None:
            out.update(getattr(pk, o) for o in pk.overloads())
    return frozenset(out)


_SIZE_FNS = _size_fns()


def _call_of(tgt):
    return FAST_CALLS.get(tgt) or getattr(tgt, "_op", tgt)


def _op_named(name):
    """The OpOverload called `name` ("aten.add.Tensor", "kiln.attention.default")."""
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def portable(desc):
    """desc with its callables replaced by op names, for pickling (the disk
    cache of lowered graphs); `relink` undoes it."""
    nodes, inputs, outputs, ref = desc
    out = [n if n[5] is None else n[:5] + (None,) + n[6:] for n in nodes]
    return out, inputs, outputs


def relink(pdesc):
    nodes, inputs, outputs = pdesc
    out = [n if n[0] in ("input", "getitem") else n[:5] + (_call_of(_op_named(n[0])),) + n[6:] for n in nodes]
    return out, inputs, outputs, Ref
