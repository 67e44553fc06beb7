"""kiln._calls — how a call met while recording is recorded: the class of a
callable, asked by the C capture core (src/capture/record_call.c through
kiln._capture.classify).

Consumes: a callable.  Produces: its class (0..7, below), cached per object.
"""
import functools
import math
import os
import sysconfig
import types

import torch

# 0: unknown (graph break)  1: a torch op, a graph node  2: Python code, inlined
# 3: pure function of constants, run at record time (math, operator, numpy's ufuncs, read-only
#    container methods, functools.lru_cache wrappers)  4: functools.partial
# 5: a query whose answer under kiln is a constant (compiling: True)
# 7: a standard-library function: run for real on real objects, else inlined
# 8: marked torch.compiler.disable (or kiln.disable): a graph break, run eagerly
# 9: a TorchScript function: its Python source (f._torchdynamo_inline) is inlined, as Dynamo does
# 10: marked assume_constant_result: run for real at record time, its result a constant (unguarded)
# 11: torch.autograd.Function.apply (bound to a subclass): its forward inlined where no gradient is
#     needed (kiln._capture.function_apply), else a graph break
# 12: a torch higher-order function taking a pure Python function first (associative_scan): one
#     graph node, called whole, when that function reads no closure and no global but modules
# 13: a query of a tensor's metadata (torch.is_complex(p)): answered on the fake tensors, whose dtype,
#     shape and device the guards pin

_PURE_MODULES = {"math", "operator", "_operator", "cmath", "string"}
_GRAPH_PY_MODULES = ("torch.nn.functional", "torch.functional", "torch._refs", "torch.nn.init",
                     "torch.special", "torch.linalg", "torch.fft", "torch.random")
_TORCH_C_MODULES = ("torch._C._nn", "torch._C._linalg", "torch._C._special", "torch._C._fft",
                    "torch._C._VariableFunctions", "torch")
_cache = {}
_STDLIB = tuple(os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"],
                                                      os.path.dirname(functools.__file__)})
# methods of builtin containers that only read: run at record time on constants
_CONTAINERS = (dict, list, tuple, str, set, frozenset, bytes)
_READ_ONLY = {"get", "keys", "values", "items", "__contains__", "__getitem__", "index", "count", "copy",
              "startswith", "endswith", "split", "join", "lower", "upper", "strip", "format", "replace",
              "isdigit", "isidentifier", "__len__", "issubset", "issuperset", "union", "intersection",
              "difference", "rsplit", "lstrip", "rstrip", "partition", "rpartition", "find", "rfind"}


def _is_compiling():
    return True


_COMPILING_QUERIES = set()
for _path in ("torch.compiler.is_compiling", "torch._dynamo.is_compiling",
              "torch._dynamo.external_utils.is_compiling", "torch.compiler.is_dynamo_compiling"):
    try:
        _obj = torch
        for _p in _path.split(".")[1:]:
            _obj = getattr(_obj, _p)
        _COMPILING_QUERIES.add(_obj)
    except AttributeError:
        pass

_TENSOR_QUERIES = {getattr(torch, q) for q in ("is_complex", "is_floating_point", "numel") if hasattr(torch, q)}
_PURE_TORCH = set()
for _f in ("is_autocast_enabled", "get_default_dtype",
           "promote_types", "result_type", "can_cast", "finfo", "iinfo"):
    if hasattr(torch, _f):
        _PURE_TORCH.add(getattr(torch, _f))
for _f in (torch.jit.is_scripting, torch.jit.is_tracing, torch._C._get_tracing_state):
    _PURE_TORCH.add(_f)

# Function.apply: a Python classmethod in some torch versions, _FunctionBase's C one in others
_FUNCTION_APPLY = torch.autograd.Function.__dict__.get("apply", torch.autograd.Function.apply)
_FUNCTION_APPLY = getattr(_FUNCTION_APPLY, "__func__", _FUNCTION_APPLY)


def _function_apply(f):
    """f is Fn.apply bound to a torch.autograd.Function subclass."""
    owner = getattr(f, "__self__", None)
    return (getattr(f, "__name__", None) == "apply" and isinstance(owner, type)
            and issubclass(owner, torch.autograd.Function) and owner is not torch.autograd.Function)

# higher-order functions Dynamo records as one node (a HOP) whose function argument kiln passes whole
# (fx names a node's target by its module path, which torch._higher_order_ops's own function of the
# same name shadows: a graph calls it through the alias here)
HIGHER_ORDER_ALIAS = {}
try:
    from torch._higher_order_ops.associative_scan import associative_scan as _ascan

    def associative_scan(*args, **kwargs):
        return _ascan(*args, **kwargs)

    HIGHER_ORDER_ALIAS[_ascan] = associative_scan
except ImportError:  # an older torch without it
    pass
_HIGHER_ORDER = set(HIGHER_ORDER_ALIAS)

_NOT_GRAPH = {torch.manual_seed, torch.set_default_dtype, torch.set_grad_enabled,
              torch.compile, torch.save, torch.load}


def _allowed_in_graph(f):
    """torch.compiler.allow_in_graph (kiln.allow_in_graph): one graph node,
    never inlined."""
    rules = getattr(torch._dynamo, "trace_rules", None)
    try:
        return isinstance(f, types.FunctionType) and rules is not None and bool(rules.is_callable_allowed(f))
    except Exception:  # noqa: BLE001  (an older torch without the registry: not allowed)
        return False


# the wrapper torch._disable_dynamo puts on torch's own functions (Optimizer.zero_grad, ...):
# it makes its torch._dynamo.disable wrapper on the first call
_DISABLE_DYNAMO_CODE = getattr(getattr(torch, "_disable_dynamo", None), "__call__", None) and \
    getattr(torch._disable_dynamo(lambda: None), "__code__", None)


def _classify(f):
    if getattr(f, "_torchdynamo_disable", False) is True:
        return 8
    if _DISABLE_DYNAMO_CODE is not None and getattr(f, "__code__", None) is _DISABLE_DYNAMO_CODE:
        return 8
    if getattr(f, "_dynamo_marked_constant", False) is True:
        return 10
    if _allowed_in_graph(f):
        return 1
    if isinstance(f, torch.jit.ScriptFunction) and isinstance(getattr(f, "_torchdynamo_inline", None),
                                                               types.FunctionType):
        return 9
    if f in _COMPILING_QUERIES:
        return 5
    if f in _HIGHER_ORDER:
        return 12
    if f in _TENSOR_QUERIES:
        return 13
    if isinstance(f, functools.partial):
        # a subclass that redefines __call__ is not a partial application
        return 4 if type(f).__call__ is functools.partial.__call__ else 0
    if f in _NOT_GRAPH:
        return 0
    if f in _PURE_TORCH:
        return 3
    if isinstance(f, functools._lru_cache_wrapper):
        # the cache's contract: the same arguments give the same (cached) result
        return 3
    if type(f).__name__ == "ufunc" and type(f).__module__ == "numpy":
        return 3  # np.sqrt(d_model) and the like, on constants
    if f is _FUNCTION_APPLY:
        return 11
    mod = getattr(f, "__module__", None) or ""
    if isinstance(f, types.FunctionType):
        if mod in _PURE_MODULES:
            return 3
        if mod.startswith(_GRAPH_PY_MODULES):
            return 1
        fn = f.__code__.co_filename
        if fn.startswith(_STDLIB) or fn.startswith("<frozen "):
            return 7
        return 2
    if _function_apply(f):
        return 11
    if isinstance(f, types.MethodType):
        return 2
    if isinstance(f, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return 1
    if isinstance(f, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                      types.BuiltinMethodType)):
        owner = getattr(f, "__self__", None)
        objclass = getattr(f, "__objclass__", None) or (type(owner) if owner is not None else None)
        if objclass is not None and getattr(f, "__name__", "") in _READ_ONLY:
            for base in _CONTAINERS:
                if isinstance(objclass, type) and issubclass(objclass, base):
                    return 3
        if mod in _PURE_MODULES or isinstance(owner, types.ModuleType) and owner.__name__ in _PURE_MODULES:
            return 3
        if (mod == "torch._C" or owner is torch._C) and getattr(f, "__name__", "").startswith(("_cuda_", "_nvtx")):
            # torch._C's CUDA runtime bindings (synchronize, streams, the
            # jiterator's kernel launcher) bypass the dispatcher: a graph
            # traced through them would miss their effect
            return 0
        if mod.startswith("torch") or owner is torch._C._VariableFunctions:
            return 1
        objclass = getattr(f, "__objclass__", None)
        if objclass is not None and issubclass(objclass, torch._C.TensorBase):
            return 1
        qn = getattr(f, "__qualname__", "")
        if qn.startswith(("TensorBase.", "Tensor.")):
            return 1
        return 0
    if isinstance(f, type):
        if f in (torch.Size, torch.device, torch.dtype, slice, frozenset, set, complex):
            return 3
        return 0
    if f in (math.sqrt,):
        return 3
    return 0


def classify(f):
    try:
        hit = _cache.get(f)
    except TypeError:
        return _classify(f)
    if hit is None:
        hit = _classify(f)
        try:
            _cache[f] = hit
        except TypeError:
            pass
    return hit
