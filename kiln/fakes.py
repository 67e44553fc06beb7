"""kiln.fakes — results a recording fakes itself instead of asking torch.

Consumes a torch function's arguments as the capture's recorder holds them
(FakeTensors, sizes possibly symbolic) and produces the result's fake, or
NotImplemented: torch's own fake then runs.  The recorder in C
(src/capture/record_value.c `kn_torch_op`) looks the function up in
`kiln._capture.fake_overrides`, the one table of these rules.

Why: a recording fakes every tensor op to learn its result's metadata, and
with symbolic sizes torch's fake of some ops runs a long Python
decomposition whose every intermediate tensor costs sympy work: F.linear on
a 3-d input goes through matmul's decomposition (folding the batch dims
into one, an mm, a view back), 2-3 ms a call with symbolic sizes where the
rule's fake takes 0.5 ms.  Where kiln knows the result's metadata for every size the
guards admit, it makes that fake directly.  A rule must give exactly what
eager gives (sizes, strides, dtype, device, no grad); everything it is not
sure of goes to torch.  Under KILN_DEBUG each rule's result is compared
with torch's fake of the same call, and a difference is a kiln bug.
"""
import contextlib

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensor

from . import config, errors

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def autocast_on(device_type):
    """autocast is on for `device_type` ("cuda", "cpu")"""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:   # (a torch whose is_autocast_enabled takes no device)
        return torch.is_autocast_enabled() if device_type == "cuda" else torch.is_autocast_cpu_enabled()


def _plain(t):
    """a fake of a plain dense tensor (no real tensor, no other subclass)"""
    return type(t) is FakeTensor and t.layout == torch.strided and not t.is_quantized and not t.is_nested


def _alike(ts):
    """ts (the first the input) are fakes of plain floating tensors of one
    dtype and device, none requiring grad (a rule's fake has no grad_fn: it
    would be a leaf), with autocast off (it casts the inputs first)"""
    x = ts[0]
    if x.dtype not in _FLOATS or any(t.dtype != x.dtype or t.device != x.device for t in ts):
        return False
    if not all(_plain(t) for t in ts):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in ts):
        return False
    return not autocast_on(x.device.type)


def recorded_linear(input, weight, bias=None):
    """F.linear(input, weight, bias)'s fake: input.shape[:-1] + (out
    features,), contiguous, of input's dtype and device, as eager's linear
    returns for a 2-d weight (its addmm / mm over the folded batch dims,
    viewed back).  Only for floating inputs of one dtype and one device, a
    1-d bias or none, sizes that agree, nothing requiring grad (a fake with
    no grad_fn would be a leaf) and autocast off (it casts first)."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)) or weight.dim() != 2 or input.dim() < 1:
        return NotImplemented
    ts = (input, weight) if bias is None else (input, weight, bias)
    if bias is not None and (not isinstance(bias, Tensor) or bias.dim() != 1):
        return NotImplemented
    if not _alike(ts):
        return NotImplemented
    # (symbolic sizes: each comparison guards as torch's own checks would;
    # one it cannot decide, a data-dependent size, leaves it to torch's fake)
    try:
        if input.size(-1) != weight.size(1) or (bias is not None and bias.size(0) != weight.size(0)):
            return NotImplemented   # (torch's fake raises eager's error)
        if weight.size(0) == 0 or weight.size(1) == 0 or any(n == 0 for n in input.shape):
            return NotImplemented   # (empty: strides of torch's own choosing)
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
        return NotImplemented
    out = input.new_empty(tuple(input.shape[:-1]) + (weight.size(0),))
    if config.debug:
        _check(torch._C._nn.linear, (input, weight, bias), out)
    return out


def recorded_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm's fake: input's sizes, contiguous, input's dtype and
    device.  Only for a contiguous floating input (eager's result is then
    contiguous on every device), weight and bias of normalized_shape or
    none, all of one dtype and device, nothing requiring grad and autocast
    off; torch's fake of a symbolic input runs native_layer_norm's Python
    reference."""
    if not isinstance(input, Tensor) or not isinstance(normalized_shape, (tuple, list, torch.Size)):
        return NotImplemented
    k = len(normalized_shape)
    if not 1 <= k <= input.dim() or not all(type(n) is int for n in normalized_shape):
        return NotImplemented
    ts = (input,) + tuple(t for t in (weight, bias) if t is not None)
    if not all(isinstance(t, Tensor) for t in ts) or not isinstance(eps, float):
        return NotImplemented
    if not _alike(ts):
        return NotImplemented
    want = tuple(normalized_shape)
    try:
        if any(tuple(t.shape) != want for t in ts[1:]) or tuple(input.shape[-k:]) != want:
            return NotImplemented   # (torch's fake raises eager's error)
        if any(n == 0 for n in input.shape) or not input.is_contiguous():
            return NotImplemented
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
        return NotImplemented
    out = input.new_empty(input.shape)
    if config.debug:
        _check(torch.nn.functional.layer_norm, (input, normalized_shape, weight, bias, eps), out)
    return out


def _same(a, b):
    """Sizes or strides a and b are the same ints or the same symbolic
    expressions (compared as expressions: no guard)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is int and type(y) is int:
            if x != y:
                return False
        elif type(x) is int or type(y) is int or x.node.expr != y.node.expr:
            return False
    return True


def like_dense(x):
    """A new tensor (in the current fake mode) of x's sizes, dtype and device
    laid out as x, where x is contiguous or a 4-d channels-last tensor, known
    by comparing x's strides with the new tensor's as expressions (no guard,
    no contiguity test with sympy); else None."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if _same(out.stride(), x.stride()):
        return out
    if x.dim() == 4:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
        if _same(out.stride(), x.stride()):
            return out
    return None


def recorded_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                        eps=1e-5):
    """F.batch_norm's fake in inference (training False, running statistics
    given): input's sizes, dtype and device, contiguous for a contiguous
    input, channels-last for a 4-d channels-last one (eager's kernels lay
    their result out by the input's suggested memory format).  Only for
    weight, bias and running statistics of one value per channel (a plain
    int) or no weight and bias, all floating of one dtype and device,
    nothing requiring grad and autocast off; torch's fake of a symbolic
    input runs batch norm's Python decomposition (four ops over the input
    with broadcasting)."""
    if training or not isinstance(input, Tensor) or input.dim() < 2:
        return NotImplemented
    ts = (input,) + tuple(t for t in (running_mean, running_var, weight, bias) if t is not None)
    if running_mean is None or running_var is None or not all(isinstance(t, Tensor) for t in ts) or \
            not isinstance(eps, float):
        return NotImplemented
    if not _alike(ts):
        return NotImplemented
    nc = input.shape[1]
    if type(nc) is not int or any(t.dim() != 1 or type(t.shape[0]) is not int or t.shape[0] != nc for t in ts[1:]):
        return NotImplemented   # (torch's fake raises eager's error, or guards)
    try:
        if any(n == 0 for n in input.shape):
            return NotImplemented
    except torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
        return NotImplemented
    out = like_dense(input)
    if out is None:
        return NotImplemented
    if config.debug:
        _check(torch.nn.functional.batch_norm, (input, running_mean, running_var, weight, bias, training, momentum,
                                                 eps), out)
    return out


def _check(fn, args, got):
    """(KILN_DEBUG) torch's own fake of fn(*args) against the rule's, made
    with the fake mode's dispatch cache off: an entry it left would answer
    the lowering's own call of the op, where kiln's fake of it is meant to
    run (kiln/trace.py _kept_fakes), so the check would change what runs."""
    from torch._subclasses.fake_tensor import disable_fake_tensor_cache
    mode = getattr(args[0], "fake_mode", None)
    with disable_fake_tensor_cache(mode) if mode is not None else contextlib.nullcontext():
        want = fn(*args)
    same = (tuple(want.shape) == tuple(got.shape) and want.dtype == got.dtype and want.device == got.device and
            want.requires_grad == got.requires_grad and
            all(n < 2 or a == b for n, a, b in zip(want.shape, want.stride(), got.stride())))
    if not same:
        errors.internal(AssertionError(
            f"kiln.fakes: {getattr(fn, '__name__', fn)}'s recorded fake is {tuple(got.shape)} strides "
            f"{got.stride()} {got.dtype}, torch's {tuple(want.shape)} strides {want.stride()} {want.dtype}"),
            "a recording's own fake (kiln.fakes)")
