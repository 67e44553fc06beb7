"""kiln.runtime — wiring the C runtime (src/runtime) to torch.

Consumes: torch's allocation and view functions, the dtype table
(fx_bridge.DTYPES), oneDNN's packed linear where this torch has it, and
torch's lean C++ bindings.  Produces: `wire()`, called once by
kiln/__init__.py before anything compiles, which hands them to kiln._C.
"""
import torch

from . import _C, fx_bridge


def _packed_linear_ops():
    """oneDNN's weight packing and packed linear, where this torch has them."""
    try:
        ops = torch.ops.mkldnn
        if not torch.backends.mkldnn.is_available():
            return None, None
        return ops._reorder_linear_weight.default, ops._linear_pointwise.default
    except (AttributeError, RuntimeError):
        return None, None


def _lean_bindings():
    """torch's lean C++ bindings for allocation and views (what torch.compile's
    own generated wrappers call: each Python-level call costs microseconds,
    which on a GPU is the whole budget of a small kernel)."""
    g = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    return getattr(g, "_empty_strided_cuda", None), getattr(g, "_reinterpret_tensor", None)


def wire():
    """Hand kiln._C the torch functions its runtime calls."""
    _C.set_runtime(torch.empty_strided, torch.empty, torch.as_strided, fx_bridge.DTYPES, torch.uint8, fx_bridge.Ref,
                   *_packed_linear_ops())
    _C.set_fast_runtime(*_lean_bindings())
