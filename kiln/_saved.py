"""Autograd's version check on results eager saves for backward.

Consumes: the fx graph a backend receives (before AOT autograd) and the
outputs its compiled form returns.  Produces: a per-call check that raises
autograd's "modified by an inplace operation" error at backward, as eager
does, when the user writes in place into an output that eager's backward
node would have saved (`y = x.exp(); y.add_(1); y.sum().backward()`).

Why: AOT autograd saves its own copy (or recomputes), so a write into the
returned tensor after the graph -- in user code, or in the next graph after
a break -- goes unseen, and backward silently returns a gradient eager
refuses to compute.  Writes inside the graph are AOT's trace error already
(`trace._backward_only_error`).

The table: torch-level op names whose eager backward reads the op's own
result (derivatives.yaml's `result`).  `tests/compile/test_soundness_grads.py`
checks every row against eager autograd, so a torch that changes a formula
shows here.  A row's predicate says which calls of the op save the result
(`max` saves it only as a full reduction, `pow` only with a tensor exponent
or a number base).
"""
import operator

import torch

_ANY = lambda node: True   # noqa: E731


def _no_dim(node):
    """A full reduction: the tensor is the only argument."""
    return len(node.args) == 1 and not node.kwargs


def _pow_saves(node):
    """pow(t, t) and pow(number, t) save the result; pow(t, number) saves t."""
    base, exp = (list(node.args) + [node.kwargs.get("exponent")])[:2]
    return isinstance(exp, torch.fx.Node) or not isinstance(base, torch.fx.Node)


SAVES_RESULT = {
    # pointwise
    "exp": _ANY, "exp2": _ANY, "expm1": _ANY, "tanh": _ANY, "sigmoid": _ANY,
    "sqrt": _ANY, "rsqrt": _ANY, "reciprocal": _ANY, "relu": _ANY, "hypot": _ANY,
    "special_expit": _ANY, "special_exp2": _ANY, "special_expm1": _ANY,
    "pow": _pow_saves, "__pow__": _pow_saves, "__rpow__": lambda node: True,
    # reductions and scans
    "prod": _ANY, "cumprod": _ANY, "logsumexp": _ANY, "special_logsumexp": _ANY,
    "logcumsumexp": _ANY, "amax": _ANY, "amin": _ANY, "std": _ANY,
    "norm": _ANY, "linalg_vector_norm": _ANY, "linalg_norm": _ANY, "linalg_matrix_norm": _ANY,
    "max": _no_dim, "min": _no_dim, "median": _no_dim, "nanmedian": _no_dim,
    "dist": _ANY, "cdist": _ANY, "pdist": _ANY,
    # softmax family
    "softmax": _ANY, "log_softmax": _ANY, "softmin": _ANY,
    "special_softmax": _ANY, "special_log_softmax": _ANY,
    # linear algebra
    "det": _ANY, "linalg_det": _ANY, "inverse": _ANY, "linalg_inv": _ANY,
}

# modules whose forward is one of the ops above
_MODULES = {torch.nn.ReLU: "relu", torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh",
            torch.nn.Softmax: "softmax", torch.nn.LogSoftmax: "log_softmax",
            torch.nn.Softmin: "softmin"}

# ops whose result is a view of their first argument (the saved tensor's
# version counter is the view's)
_VIEWS = {"view", "reshape", "select", "narrow", "transpose", "permute", "t", "unsqueeze",
          "squeeze", "expand", "expand_as", "view_as", "flatten", "unflatten", "diagonal",
          "movedim", "swapaxes", "swapdims", "as_strided", "contiguous", "alias"}


def _basic_index(idx):
    """No graph value in the index (ints, slices, None, Ellipsis): a view.
    An index holding a graph value may be a tensor (a copy): not followed."""
    items = []
    torch.fx.node.map_arg(idx, items.append)
    return not items


def _name(gm, node):
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        t = node.target
        return getattr(t, "_opname", None) or getattr(t, "__name__", None)
    if node.op == "call_module":
        try:
            return _MODULES.get(type(gm.get_submodule(node.target)))
        except AttributeError:
            return None
    return None


def _producer(gm, node):
    """The op whose result `node` is, through views and basic indexing."""
    for _ in range(64):
        if not isinstance(node, torch.fx.Node) or not node.args:
            return None, None
        name = _name(gm, node)
        src = node.args[0]
        if node.op == "call_function" and node.target is operator.getitem:
            # t[i, 1:] is a view of t; t[idx_tensor] a copy; tuple[0] an op's output
            if not isinstance(src, torch.fx.Node) or not _basic_index(node.args[1]) \
                    or isinstance(src.meta.get("example_value"), (tuple, list)):
                return None, None
            node = src
            continue
        if name in _VIEWS:
            node = src
            continue
        return name, node
    return None, None


def saved_outputs(gm):
    """Indices of the graph's outputs that eager's backward would save
    (and version-check): [(index, op name)]."""
    out = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if out is None:
        return []
    res = out.args[0]
    if not isinstance(res, (tuple, list)):
        return []
    found = []
    for i, node in enumerate(res):
        name, prod = _producer(gm, node)
        if name is None:
            continue
        base = name[:-1] if name.endswith("_") and not name.startswith("_") else name
        pred = SAVES_RESULT.get(base)
        if pred is not None and pred(prod):
            found.append((i, base))
    return found


def _watch(t, op):
    """Raise eager's error if `t`'s data changes before its gradient is
    computed.  The detached alias shares t's version counter and keeps the
    storage eager's saved variable would keep; it holds no reference to t,
    so the hook makes no cycle."""
    alias, version = t.detach(), t._version

    def hook(grad):
        # grad is None where no gradient reaches t (another output of the
        # same compiled graph is differentiated): eager's node would not run
        if grad is not None and alias._version != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{alias.type()} {list(alias.shape)}], which is output 0 of "
                f"{op} (compiled by kiln), is at version {alias._version}; expected version "
                f"{version} instead.")
        return None
    t.register_hook(hook)


def keep_version_checks(fn, gm):
    """`fn` (a compiled graph's callable, outputs as a tuple/list) wrapped so
    the outputs eager saves keep autograd's version check; `fn` itself when
    the graph has none."""
    watched = saved_outputs(gm)
    if not watched:
        return fn

    def run(*args):
        out = fn(*args)
        if torch.is_grad_enabled():
            for i, op in watched:
                t = out[i]
                if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None:
                    _watch(t, op)
        return out
    return wrapping(run, fn)


def wrapping(run, fn):
    """run, a wrapper of AOT autograd's callable fn, with fn's attributes
    (zero_grad, ...) and __wrapped__."""
    for attr in ("zero_grad", "named_parameters", "named_buffers", "serialize"):
        if hasattr(fn, attr):
            setattr(run, attr, getattr(fn, attr))
    run.__wrapped__ = fn
    return run
