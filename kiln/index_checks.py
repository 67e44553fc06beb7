"""kiln.index_checks — the soundness rewrites of a captured graph before it is
lowered: value checks (index bounds, integer division by zero, dtype checks)
that lowering would drop as dead code are returned as extra outputs
(`_keep_index_checks`, from `_dead_index_checks` and `_overwritten_checks`),
and expands to an input's own shape become views (`_exact_expands`).

Consumes: a captured graph module.  Produces: a rewritten copy (the user's
graph module is never modified).
"""
import copy

import torch

from .captured import _VIEW_METHODS, _root, _storage, _target_name, _written_by


_INDEX_CHECKED = {"index_put", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
                  "scatter_reduce_", "gather", "index_select", "take", "take_along_dim", "index_add", "index_add_",
                  "index_copy", "index_copy_", "index_fill", "index_fill_", "put", "put_", "embedding",
                  "index_reduce", "index_reduce_", "getitem", "__getitem__",
                  # and ops that raise on a dtype (bitwise ops on floats)
                  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                  "bitwise_right_shift", "__and__", "__or__", "__xor__", "__invert__", "__lshift__", "__rshift__",
                  "__rand__", "__ror__", "__rxor__", "and_", "or_", "xor", "invert", "lshift", "rshift"}


# integer division raises on a zero divisor: checked like an index
_DIVISION_CHECKED = {"floor_divide", "floor_divide_", "remainder", "remainder_", "fmod", "fmod_", "floordiv",
                     "mod", "ifloordiv", "imod", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
                     "__ifloordiv__", "__imod__", "div", "div_", "true_divide"}
# consumers that read an argument's sizes or dtype, never its values (the
# argument positions that are read so)
_METADATA_ONLY = {"new_zeros": (0,), "new_ones": (0,), "new_empty": (0,), "new_full": (0,), "new_empty_strided": (0,),
                  "new_tensor": (0,), "zeros_like": (0,), "ones_like": (0,), "empty_like": (0,), "full_like": (0,),
                  "rand_like": (0,), "randn_like": (0,), "randint_like": (0,), "size": (0,), "dim": (0,),
                  "numel": (0,), "nelement": (0,), "ndimension": (0,), "stride": (0,), "storage_offset": (0,),
                  "is_contiguous": (0,), "element_size": (0,), "expand_as": (1,), "view_as": (1,),
                  "reshape_as": (1,), "type_as": (1,)}
_METADATA_ATTRS = {"shape", "dtype", "device", "ndim", "layout", "is_cuda", "requires_grad", "is_leaf"}
# views that show part of their argument: a check read only through them sees only that part
_PARTIAL_VIEWS = {"select", "narrow", "__getitem__", "getitem", "diagonal", "as_strided", "unfold", "split", "chunk",
                  "tensor_split", "unbind", "split_with_sizes"}


def _checks_values(n):
    """Does node n check the values it reads (an index, a divisor) and raise?"""
    import operator

    name = _target_name(n)
    if name in _DIVISION_CHECKED:
        if name in ("div", "div_", "true_divide") and n.kwargs.get("rounding_mode") is None:
            return False   # true division never raises
        v = n.meta.get("example_value")
        return isinstance(v, torch.Tensor) and not (v.dtype.is_floating_point or v.dtype.is_complex)
    if name not in _INDEX_CHECKED:
        return False
    if n.target in (operator.getitem, "__getitem__"):
        idx = n.args[1] if len(n.args) > 1 else None
        idx = idx if isinstance(idx, (tuple, list)) else (idx,)
        return any(isinstance(a, torch.fx.Node) for a in idx)   # basic indexing checks nothing at run time
    return True


def _reads_values(user, n):
    """Does user read node n's values (not only its sizes or dtype)?"""
    name = _target_name(user)
    if user.op in ("call_function", "call_method") and name == "getattr" and len(user.args) > 1:
        return user.args[1] not in _METADATA_ATTRS
    meta = _METADATA_ONLY.get(name) if user.op in ("call_function", "call_method") else None
    if meta is None:
        return True
    flat = [a for i, a in enumerate(user.args) if i not in meta]
    flat += list(user.kwargs.values())
    while flat:
        a = flat.pop()
        if a is n:
            return True
        if isinstance(a, (tuple, list)):
            flat.extend(a)
        elif isinstance(a, dict):
            flat.extend(a.values())
    return False


def _indexes(u, n):
    """Does index op u read n only at its indices (some of n's elements)?
    n is its first argument, or for embedding either of its first two
    (F.embedding(input, weight) reads the weight at the indices, fuzzer
    tensor:5501032; torch.embedding(weight, indices) takes them the other
    way round): a check of n's own indices, fused into u, would see only
    those elements."""
    if _target_name(u) not in _INDEX_CHECKED:
        return False
    if _target_name(u) == "embedding":
        return n in u.args[:2] or u.kwargs.get("weight") is n
    return bool(u.args) and u.args[0] is n


def _dead_index_checks(gm):
    """The captured graph's nodes that check values (index ops, integer
    division) whose checks lowering would drop or narrow: results that reach
    no output through a read of their values (unused, used only by dead code
    or by `new_zeros`/`*_like`/`.shape`), or reach it only through views that
    show part of them (`x[:1]` checks only what it shows); and the targets
    of `t[i] = v` with a tensor key on a tensor no live node reads after the
    write (`y = t @ w; t[i] = v`: the write is dead though t is live).  Returned as
    the nodes to add as outputs, as two lists: the checking nodes (their
    values as computed) and the write targets (their values after the
    write: the write's own check; a target may be in both, or also
    overwritten, `v = a % b; v[i] = 0`).  An extra output that was live
    after all (a mutated input) only costs its store."""
    import operator

    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    # a node's values as computed are not what a user reads after an op
    # that overwrites the whole node (`v = silu(a[i]); v.zero_(); return v`:
    # functionalized, silu and a[i] are dead; fuzzer tensor:1704866)
    overwritten_at = {}
    for m in gm.graph.nodes:
        if m.op in ("call_method", "call_function") and _target_name(m) in _OVERWRITES_WHOLE and m.args and \
                isinstance(m.args[0], torch.fx.Node):
            overwritten_at.setdefault(m.args[0], []).append(order[m])

    def reads(u, a):
        """Does u read a's values as a's op computed them?"""
        return _reads_values(u, a) and not any(order[a] < o < order[u] for o in overwritten_at.get(a, ()))

    live, stack = set(), [n for n in gm.graph.nodes if n.op == "output"]
    while stack:
        n = stack.pop()
        if n not in live:
            live.add(n)
            stack.extend(a for a in n.all_input_nodes if reads(n, a))

    whole = {}

    def read_whole(n):
        """Does some live read of n see all of its elements?  A user that
        is not a partial view or an index into n sees all of n only if its
        own result is seen whole: lowering computes a pointwise op (a cast)
        only where its result is read (`x[:, i].double()[:, j]` computes
        x[:, i] only at j; fuzzer tensor:1008536)."""
        if n not in whole:
            whole[n] = False
            whole[n] = any(u in live and reads(u, n) and (
                u.op == "output" or _target_name(u) not in _PARTIAL_VIEWS and read_whole(u) and
                not _indexes(u, n))
                for u in n.users)
        return whole[n]

    def tensor_key(idx):
        idx = idx if isinstance(idx, (tuple, list)) else (idx,)
        return any(isinstance(a, torch.fx.Node) for a in idx)

    def read_after(tgt, n):
        """Does a live node read tgt's values after n (graph order)?"""
        return any(u in live and order[u] > order[n] and _reads_values(u, tgt) for u in tgt.users)

    dead, writes = [], []
    for n in gm.graph.nodes:
        if n.op not in ("call_method", "call_function"):
            continue
        if n.target in (operator.setitem, "__setitem__"):
            tgt = n.args[0] if n.args else None
            if isinstance(tgt, torch.fx.Node) and not read_after(tgt, n) and tgt not in writes and len(n.args) > 1 \
                    and tensor_key(n.args[1]):
                writes.append(tgt)
            continue
        if n in dead or not _checks_values(n) or (n in live and read_whole(n)):
            continue
        dead.append(n)
    return dead, writes


# in-place ops that overwrite what they write without reading it: a checked
# value they overwrite is dead once functionalized (`v = a % b; v.zero_()`);
# all but setitem overwrite every element of their target
_OVERWRITES_WHOLE = {"zero_", "fill_", "copy_", "normal_", "uniform_", "random_", "exponential_", "geometric_",
                     "log_normal_", "cauchy_", "bernoulli_"}
_OVERWRITES = _OVERWRITES_WHOLE | {"setitem", "__setitem__"}


def _overwritten_checks(gm):
    """The captured graph's value-checking nodes (index ops, integer
    division) that an in-place op overwrites, directly or through a view,
    without reading them (`_OVERWRITES`, `out=`): functionalized, their
    values are dead however the graph reads them afterwards.  Each is kept
    as a copy taken before the write (`_keep_index_checks`)."""
    found = []
    for m in gm.graph.nodes:
        if m.op not in ("call_method", "call_function"):
            continue
        if _target_name(m) not in _OVERWRITES and m.kwargs.get("out") is None:
            continue
        for w in _written_by(m):
            while not _checks_values(w) and w.op in ("call_method", "call_function") and w.args and \
                    isinstance(w.args[0], torch.fx.Node) and _target_name(w) in _VIEW_METHODS:
                w = w.args[0]
            if _checks_values(w) and w not in found:
                found.append(w)
    return found


def _views_input(n, v):
    """Is node n's value v a view of an input?  Its ops lead back to a
    placeholder through view methods, and (where the placeholder's example
    value is known) it shares that value's storage: `a[:, i]` with a tensor
    index is a getitem that copies."""
    root = _root(n)
    if root.op != "placeholder":
        return False
    rv = root.meta.get("example_value", root.meta.get("val"))
    return not isinstance(rv, torch.Tensor) or _storage(rv) == _storage(v)


def _keep_index_checks(gm):
    """A copy of gm that also returns its dead index-checking results (so
    their bounds checks run), and how many outputs were added.  Those that
    require grad are returned detached: else AOT autograd would run their
    backward too, with zero gradients that still give NaN where the local
    derivative is inf or NaN (0 * inf)."""
    overwritten = _overwritten_checks(gm)
    checks, writes = _dead_index_checks(gm)
    dead = [n for n in checks if n not in overwritten]
    dead += [t for t in writes if t not in dead]   # a target's value after its write: the write's check
    if not dead and not overwritten:
        return gm, 0, False
    graph = copy.deepcopy(gm.graph)
    env = dict(zip(gm.graph.nodes, graph.nodes))
    out = next(n for n in graph.nodes if n.op == "output")
    orig = out.args[0]
    tupled = isinstance(orig, (tuple, list))
    extra = [_snapshot(graph, env[n]) for n in overwritten]
    for n in dead:
        v = n.meta.get("example_value", n.meta.get("val"))
        name = _target_name(n)
        aliases = (name.endswith("_") and not name.startswith("_")) or name in _VIEW_METHODS
        if isinstance(v, torch.Tensor) and (v.requires_grad or aliases) and not _views_input(n, v):
            # detached (no backward for it) and, where n's value is an alias
            # of an intermediate (an in-place op's result, a view), a copy:
            # AOT autograd regenerates an aliasing output from its base, which
            # fails on an empty view (`v = x[:, 2:]; v.scatter_add_(...)`
            # with size 0; fuzzer tensor:1300218)
            with graph.inserting_before(out):
                d = graph.call_method("detach", (env[n],))
                extra.append(graph.call_method("clone", (d,)) if aliases else d)
        else:   # (a detached input would be an alias of it, for AOT autograd to replay)
            extra.append(env[n])
    out.args = ((tuple(orig) if tupled else (orig,)) + tuple(extra),)
    return torch.fx.GraphModule(gm, graph), len(extra), not tupled


def _snapshot(graph, n):
    """A detached copy of node n's value taken right after n (before any
    in-place write into it)."""
    v = n.meta.get("example_value")
    with graph.inserting_after(n):
        d = graph.call_method("detach", (n,))
    with graph.inserting_after(d):
        c = graph.call_method("clone", (d,))
    if isinstance(v, torch.Tensor):
        d.meta["example_value"] = v.detach()
        c.meta["example_value"] = v.detach().clone()
    return c


_EXPANDS = {"expand", "expand_as", "broadcast_to"}


def _same_shape_expand(n):
    """Is captured node n an expand to its input's own shape (`x.expand_as(x)`,
    `x.expand(*x.shape)`, `x.broadcast_to(x.shape)`, `torch.broadcast_to`:
    the input's and the result's example shapes are equal and static)?"""
    if n.op not in ("call_method", "call_function") or _target_name(n) not in _EXPANDS or not n.args \
            or not isinstance(n.args[0], torch.fx.Node):
        return False
    x = n.args[0]
    if n.op == "call_method" and n.target == "expand_as" and len(n.args) == 2 and n.args[1] is x and not n.kwargs:
        return True
    v, r = x.meta.get("example_value"), n.meta.get("example_value")
    return isinstance(v, torch.Tensor) and isinstance(r, torch.Tensor) and \
        all(type(d) is int for d in (*v.shape, *r.shape)) and tuple(v.shape) == tuple(r.shape)


def _exact_expands(gm):
    """gm with each expand to its input's own shape made a view of that
    shape.  Both read alike, but functionalization writes an in-place op on
    an expand back as `base + (written - base)` (PyTorch's expand inverse),
    NaN or inf wherever base holds NaN or inf (`x.expand_as(x).fill_(3)`
    left x's NaN; fuzzer seeds tensor:971452, 998037 through broadcast_to);
    a view's inverse is exact."""
    hits = [n for n in gm.graph.nodes if _same_shape_expand(n)]
    if not hits:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for n in gm.graph.nodes:
        if _same_shape_expand(n):
            x = n.args[0]
            n.op, n.target, n.args, n.kwargs = "call_method", "view_as", (x, x), {}
    gm.recompile()
    return gm
