"""kiln.run_as_captured — the graphs that must run as captured (eager's
kernels), and why: the `_RUN_AS_CAPTURED` table of (predicate, reason) and
its predicates.  Each names a case where AOT autograd or functionalization
would compute something other than eager (or raise where eager does not).

Consumes: a captured graph module and its example inputs.  Produces:
`_eager_only(gm, example_inputs)`: the reason, or None.
"""
import torch

from .captured import (_inputs_share_storage, _root, _storage, _target_name, _views_arg, _writes_inputs,
                       _written, _written_by)


def _writes_through_unfold(gm):
    """Does the graph write in place through a view made by unfold?  AOT
    autograd's functionalization replays such a write onto the base with
    unfold_backward, which zeroes the elements no window covers and sums
    overlapping windows (PyTorch's FunctionalInverses::unfold_inverse): those
    graphs run as captured (eager kernels write through the view)."""
    return _writes_through(gm, lambda n: _target_name(n) == "unfold")


def _bool_expand(n):
    v = n.meta.get("example_value")
    return _target_name(n) in ("expand", "expand_as") and isinstance(v, torch.Tensor) and v.dtype == torch.bool


def _empty_dtype_view(n):
    """view(dtype) to another element size giving no elements: functionalization
    writes through it with view(dtype) of a fresh contiguous tensor, whose
    strides (a size-0 last dim counts as 1) ATen then refuses."""
    v = n.meta.get("example_value")
    dt = n.args[1] if len(n.args) == 2 else n.kwargs.get("dtype")
    src = n.args[0].meta.get("example_value") if n.args and isinstance(n.args[0], torch.fx.Node) else None
    return _target_name(n) == "view" and isinstance(dt, torch.dtype) and isinstance(v, torch.Tensor) and \
        isinstance(src, torch.Tensor) and v.numel() == 0 and v.element_size() != src.element_size()


def _bool_dtype_view(n):
    """view(dtype) of a bool tensor as another dtype: eager writes raw bytes
    through it into the bool storage (a byte 3 stays 3); AOT autograd's
    write-back copies through bool, which makes every nonzero byte 1
    (fuzzer tensor:1800769)."""
    dt = n.args[1] if len(n.args) == 2 else n.kwargs.get("dtype")
    src = n.args[0].meta.get("example_value") if n.args and isinstance(n.args[0], torch.fx.Node) else None
    return _target_name(n) == "view" and isinstance(dt, torch.dtype) and dt != torch.bool and \
        isinstance(src, torch.Tensor) and src.dtype == torch.bool


def _writes_through(gm, makes_view):
    """Does the graph write in place through a view (or a view of a view)
    of a node for which makes_view is true?"""
    tainted = set()
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function"):
            continue
        name = _target_name(n)
        first = n.args[0] if n.args else None
        from_view = isinstance(first, torch.fx.Node) and first in tainted
        if makes_view(n) or (from_view and _views_arg(n)):
            tainted.add(n)
        elif any(w in tainted for w in _written_by(n)):   # (`t[i] = v` too)
            return True
    return False


# in-place ops whose eager kernels raise when the written tensor shares memory
# with another argument (at::assert_no_overlap); functionalization removes
# the overlap, so such a graph runs as captured
_OVERLAP_CHECKED = {"scatter_", "scatter_add_", "scatter_reduce_", "index_put_", "index_add_", "index_copy_",
                    "index_fill_", "index_reduce_", "masked_scatter_", "masked_fill_", "put_", "index_select",
                    "gather", "take"}


def _writes_overlapping_args(gm):
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or _target_name(n) not in _OVERLAP_CHECKED:
            continue
        out = n.kwargs.get("out")
        written = out if out is not None else (n.args[0] if _target_name(n).endswith("_") and n.args else None)
        if not isinstance(written, torch.fx.Node):
            continue
        r = _root(written)
        others = list(n.args) if out is not None else list(n.args[1:])
        others += [v for k, v in n.kwargs.items() if k != "out"]
        flat = []
        for a in others:
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
        if any(isinstance(a, torch.fx.Node) and _root(a) is r for a in flat):
            return True
    return False


def _overlapping_inputs(gm, example_inputs):
    """The placeholders whose example tensors are internally overlapping
    (several elements at one address: expand, stride 0)."""
    out = set()
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, x in zip(phs, example_inputs):
        if isinstance(x, torch.Tensor) and x.layout == torch.strided and \
                torch._debug_has_internal_overlap(x) == 1:   # what copy_ checks (2, too hard to tell, passes)
            out.add(n)
    return out


def _writes_overlapping_input(gm, example_inputs):
    """Does the graph write in place into (a view of) an internally
    overlapping input?  AOT autograd's functionalization writes the updated
    value back with input.copy_(new), which raises on such an input even
    where eager's write (through a non-overlapping view) is fine; those
    graphs run as captured."""
    inputs = _overlapping_inputs(gm, example_inputs)
    return bool(inputs) and any(_root(w) in inputs for w in _written(gm))


def _writes_overlapping_view(gm):
    """Does the graph write in place into an internally overlapping tensor
    (an expanded view)?  Functionalization's meta kernels raise on it (copy_
    checks its destination) where eager may not (x.copy_(x) returns early)."""
    for w in _written(gm):
        v = w.meta.get("example_value")
        if isinstance(v, torch.Tensor) and v.layout == torch.strided and torch._debug_has_internal_overlap(v) == 1:
            return True
    return False


def _symbolic(gm, example_inputs):
    """Has the graph symbolic sizes (TorchDynamo's dynamic shapes: SymInt
    inputs, or placeholders whose example values have symbolic sizes)?"""
    vals = list(example_inputs) + [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return any(isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and any(
        isinstance(s, torch.SymInt) for s in (*v.shape, *v.stride(), v.storage_offset())) for v in vals)


def _replays_views_of_written_inputs(gm, example_inputs):
    """Does the graph write into an input and return a view of an input,
    where inputs share memory or have symbolic sizes?  AOT autograd makes
    such an output after the call by replaying its views onto the input (or
    the inputs' synthetic base), and that replay is wrong there (torch 2.13:
    a chunk of an offset input loses the offset under dynamic shapes; with
    a synthetic base it raises or returns other elements); those graphs run
    as captured."""
    if not _symbolic(gm, example_inputs):   # (inputs sharing storage: _views_input_of_mutated_shared_storage)
        return False
    if not _writes_inputs(gm):
        return False
    from torch.utils._pytree import tree_flatten
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return any(isinstance(o, torch.fx.Node) and o.op != "placeholder" and _root(o).op == "placeholder"
               for o in tree_flatten(out.args)[0])


def _views_input_as_other_dtype(gm, example_inputs):
    """Does the graph return a view of an input in another dtype
    (`a.view(torch.int32)`) under symbolic sizes?  AOT autograd rebuilds
    that output from the input with as_strided at the view's sizes in the
    input's dtype (torch 2.13: its view replay declines symbolic sizes), and
    raises (setStorage: out of bounds) or shows other elements; those
    graphs run as captured."""
    if not _symbolic(gm, example_inputs):
        return False
    from torch.utils._pytree import tree_flatten
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for o in tree_flatten(out.args)[0]:
        if not isinstance(o, torch.fx.Node) or o.op == "placeholder" or _root(o).op != "placeholder":
            continue
        v, b = o.meta.get("example_value"), _root(o).meta.get("example_value")
        if isinstance(v, torch.Tensor) and isinstance(b, torch.Tensor) and v.dtype != b.dtype:
            return True
    return False


# in-place ops that change a tensor's sizes, strides or offset, not its data
_METADATA_INPLACE = {"squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_",
                     "resize_", "resize_as_", "set_"}


def _writes_input_data_and_metadata(gm):
    """Does the graph change both the data and the sizes/strides (squeeze_,
    t_, ...) of one input?  AOT autograd's epilogue then re-strides the input
    with the functional result's strides and offset (a fresh tensor's, not
    the input's: a sliced input moves to offset 0) before it copies the data
    back, so the data lands in the wrong elements; those graphs run as
    captured."""
    def same_tensor(n):   # in-place ops return their first argument
        while isinstance(n, torch.fx.Node) and n.op in ("call_method", "call_function") and n.args and \
                _target_name(n).endswith("_") and not _target_name(n).startswith("_"):
            n = n.args[0]
        return n

    def base(n):          # through in-place results and views
        m = _root(same_tensor(n))
        return n if m is n else base(m)

    data, meta = set(), set()
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args:
            continue
        name = _target_name(n)
        if name in _METADATA_INPLACE:
            meta.add(same_tensor(n.args[0]))
        else:
            data.update(base(w) for w in _written_by(n))
    return any(isinstance(m, torch.fx.Node) and m.op == "placeholder" and m in data for m in meta)



def _metadata_change_of_a_viewed_grad_tensor(gm):
    """Does the graph change the sizes/strides (t_, transpose_, ...) of a
    tensor that requires grad while another view of its storage is live (or
    it is a view itself)?  AOT autograd's functionalization then traces the
    view's backward with the changed layout and raises "invalid gradient ...
    got [2, 4] but expected shape compatible with [4, 2]" (backend
    "aot_eager" alike): those graphs run as captured."""
    if not torch.is_grad_enabled():
        return False
    views = {}   # storage root -> number of views of it made so far
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function") or not n.args:
            continue
        name = _target_name(n)
        if _views_arg(n):
            r = _root(n.args[0])
            views[r] = views.get(r, 0) + 1
        elif name in _METADATA_INPLACE and isinstance(n.args[0], torch.fx.Node):
            x = n.args[0]
            v = x.meta.get("example_value", x.meta.get("val"))
            if isinstance(v, torch.Tensor) and v.requires_grad and views.get(_root(x), 0) > 0:
                return True
    return False

def _metadata_change_of_an_empty_input(gm):
    """Does the graph change the sizes/strides (unsqueeze_, t_, ...) of an
    input with no elements?  AOT autograd replays the change from its traced
    view, whose meta function gives an empty tensor contiguous strides where
    eager's kernel keeps the input's (an expanded input's zero strides;
    fuzzer tensor:1605909): those graphs run as captured."""
    for n in gm.graph.nodes:
        if n.op in ("call_method", "call_function") and n.args and _target_name(n) in _METADATA_INPLACE and \
                isinstance(n.args[0], torch.fx.Node) and _root(n.args[0]).op == "placeholder":
            v = n.args[0].meta.get("example_value", n.args[0].meta.get("val"))
            if not isinstance(v, torch.Tensor) or v.numel() == 0:
                return True
    return False


def _views_input_of_mutated_shared_storage(gm, example_inputs):
    """Does the graph write in place while its inputs share storage, and
    return a view of an input?  A write into one of the inputs that share
    storage makes AOT autograd stand one synthetic base for them all, and it
    then rebuilds an output that views an input from that base wrongly:
    replaying the view ops recorded on the input onto the base (an
    AssertionError about the ViewMeta sequence, or an op raising on the
    wrong shape), or, with view replay off, as_strided at the offset the
    view had in the traced graph's own base (another input's elements).
    Those graphs run as captured, and so do those returning a view of an
    intermediate (`a0.bfloat16().t()`: the same assertion, fuzzer
    tensor:1401512).  (Any in-place write counts: one into a view the names
    here do not follow still writes the input.)"""
    if not _inputs_share_storage(example_inputs):
        return False
    nodes = list(gm.graph.nodes)
    if not any(_written_by(n) for n in nodes):
        return False
    placeholders = {n for n in nodes if n.op == "placeholder"}
    # (a node's example value is a fake: it shares the storage of the
    # placeholders' fakes, not of example_inputs)
    inputs = {_storage(p.meta.get("example_value")) for p in placeholders} | \
        {_storage(t) for t in example_inputs}
    inputs.discard(None)
    out = next(n for n in reversed(nodes) if n.op == "output")
    for o in torch.utils._pytree.tree_flatten(out.args)[0]:
        if not isinstance(o, torch.fx.Node):
            continue
        val = o.meta.get("example_value")
        if o in placeholders or _root(o) is not o or not isinstance(val, torch.Tensor) or \
                _storage(val) in inputs:   # (no tensor value known: it may view an input)
            return True
    return False


def _may_overlap(t):
    """Whether a tensor's elements may share addresses in a way that
    torch._debug_has_internal_overlap does not report (it answers "too hard"
    for as_strided((2, 2), (1, 1)), say): no dim's stride clears the span of
    the smaller-strided dims before it."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t._has_symbolic_sizes_strides or \
            torch._debug_has_internal_overlap(t) != 2:
        return False
    span = 0
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s > 1):
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def _overlapping_grad_output(gm):
    """Does the graph return a tensor that requires grad and overlaps itself
    without a stride-0 dim (as_strided)?  AOT autograd copies the incoming
    gradient into that output's own layout (coerce_to_expected_memory_format),
    which keeps one of the gradients of each shared element: such graphs run
    as captured (eager autograd sums them)."""
    if not torch.is_grad_enabled():
        return False
    out = next(n for n in gm.graph.nodes if n.op == "output")
    vals = []
    torch.fx.node.map_arg(out.args, lambda n: vals.append(n.meta.get("example_value", n.meta.get("val"))))
    return any(isinstance(v, torch.Tensor) and v.requires_grad and _may_overlap(v) for v in vals)


# Graphs that run as captured (eager kernels, a counted fallback with the
# reason): where AOT autograd or kiln's lowering would be wrong or raise
# where eager does not.  One row per case: (test(gm, example_inputs), reason).
_PRODUCTS = {"matmul", "mm", "mv", "bmm", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmv", "addbmm",
             "baddbmm", "addr", "__matmul__", "__rmatmul__", "linear", "tensordot", "einsum", "chain_matmul",
             "multi_dot", "kron"}


def _mixed_dtype_product(gm):
    """Does a matrix product take tensors of different dtypes?  Eager raises
    on them, except on some empty inputs where its kernel (torch 2.11:
    `matmul` of a (0, 1) float64 by a float32 vector) returns a dtype that
    the meta function, which kiln's trace follows, does not (fuzzer
    tensor:970018, 974780, 993673): eager's own kernels decide."""
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method") or _target_name(n) not in _PRODUCTS:
            continue
        vals = []
        torch.fx.node.map_aggregate((n.args, n.kwargs), lambda a: vals.append(a.meta.get("example_value"))
                                    if isinstance(a, torch.fx.Node) else None)
        dts = {v.dtype for v in vals if isinstance(v, torch.Tensor)}
        if len(dts) > 1:
            return True
    return False


# in-place ops without a derivative: eager lets them write a leaf that requires grad
_NO_DERIVATIVE_INPLACE = {"logical_not_", "logical_and_", "logical_or_", "logical_xor_", "eq_", "ne_", "lt_", "le_",
                          "gt_", "ge_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_"}


def _writes_grad_input_without_grad(gm, example_inputs):
    """Does the graph, run with grad enabled, write into an input that
    requires grad under no_grad (`with torch.no_grad(): w.add_(1)`) or by
    an op without a derivative (`w.logical_not_()`)?  AOT autograd (without
    keeping input mutations in the graph) returns the written value as an
    output and passes its tangent back as the input's gradient: a zero
    gradient where eager leaves it None (fuzzer tensor:1007300)."""
    if not torch.is_grad_enabled():
        return False
    grad_inputs = {p for p, v in zip((n for n in gm.graph.nodes if n.op == "placeholder"), example_inputs)
                   if isinstance(v, torch.Tensor) and v.requires_grad}
    if not grad_inputs:
        return False
    enabled = True
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in (torch._C._set_grad_enabled, torch.set_grad_enabled) and n.args:
            enabled = bool(n.args[0])
            continue
        if enabled and _target_name(n) not in _NO_DERIVATIVE_INPLACE:
            continue
        if any(_root(w) in grad_inputs for w in _written_by(n)):
            return True
    return False


_RUN_AS_CAPTURED = (
    (_writes_grad_input_without_grad,
     "an input that requires grad written under no_grad or by an op without a derivative (AOT autograd would give "
     "it a zero gradient where eager gives none)"),
    (lambda gm, ex: _mixed_dtype_product(gm),
     "a matrix product of tensors of different dtypes (eager's kernel decides the result's dtype on empty inputs)"),
    (lambda gm, ex: _writes_input_data_and_metadata(gm),
     "an input whose data and sizes/strides are both changed in place (AOT autograd's write-back "
     "re-strides it with a fresh tensor's layout)"),
    (lambda gm, ex: _metadata_change_of_an_empty_input(gm),
     "an input with no elements changes its sizes/strides in place (AOT autograd replays it with the meta "
     "function's strides, not eager's)"),
    (_views_input_of_mutated_shared_storage,
     "an output viewing an input while inputs that share storage are written (AOT autograd rebuilds it wrongly)"),
    (_replays_views_of_written_inputs,
     "an output viewing an input the graph writes into, with symbolic sizes (AOT autograd's replay of the view "
     "is wrong there)"),
    (_views_input_as_other_dtype,
     "an output viewing an input as another dtype, with symbolic sizes (AOT autograd rebuilds it with the "
     "input's dtype)"),
    (lambda gm, ex: _overlapping_grad_output(gm),
     "an output that requires grad overlaps itself (AOT autograd would drop gradients)"),
    (_writes_overlapping_input,
     "an in-place write into an internally overlapping (expanded) input (AOT autograd's write-back raises)"),
    (lambda gm, ex: _writes_overlapping_view(gm),
     "an in-place write into an internally overlapping (expanded) view (functionalization raises)"),
    (lambda gm, ex: _metadata_change_of_a_viewed_grad_tensor(gm),
     "a tensor that requires grad changes its sizes/strides in place while a view of it is live (AOT autograd "
     "raises tracing the backward)"),
    (lambda gm, ex: _writes_through_unfold(gm),
     "an in-place write through an unfold view (AOT autograd would replay it wrongly)"),
    (lambda gm, ex: _writes_through(gm, _bool_expand),
     "an in-place write through an expand view of a bool tensor (AOT autograd's replay subtracts bools)"),
    (lambda gm, ex: _writes_through(gm, _bool_dtype_view),
     "an in-place write through a view of a bool tensor as another dtype (AOT autograd's write-back through "
     "bool would turn its bytes into 0 and 1)"),
    (lambda gm, ex: _writes_through(gm, _empty_dtype_view),
     "an in-place write through an empty view(dtype) to another element size (functionalization raises)"),
    (lambda gm, ex: _writes_overlapping_args(gm),
     "an in-place op whose output overlaps another argument (eager checks and raises)"),
)


def _eager_only(gm, example_inputs=()):
    """Why the captured graph must run as it is (eager kernels), or None."""
    for test, reason in _RUN_AS_CAPTURED:
        if test(gm, example_inputs):
            return reason
    return None


# ops whose eager kernels check their indices (or dtypes) and raise: one whose
