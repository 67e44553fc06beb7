"""kiln.decomp — the decomposition table kiln lowers with.

Consumes: torch's core ATen decomposition table.  Produces: `decompositions()`,
that table with kiln's changes (ops kept whole as externs, composites split so
they fuse, inference batch norm as pointwise work), built once.
"""
import torch
from torch._decomp import core_aten_decompositions, decomposition_table


aten = torch.ops.aten

# Ops kiln keeps whole (extern calls into ATen's own kernels, which beat a
# decomposition): attention, and the matmul family is not decomposed anyway;
# index_add/index_copy/index_fill, whose decomposition into index_put (an
# extern too) checks indices where eager does not (an empty tensor).
_KEEP = {
    aten.scaled_dot_product_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten.index_add.default, aten.index_add_.default, aten.index_copy.default, aten.index_copy_.default,
    aten.index_fill.int_Scalar, aten.index_fill.int_Tensor, aten.index_fill_.int_Scalar,
    aten.index_fill_.int_Tensor,
    # lowered whole (lower_reduce.c): ATen's CPU kernel takes the root of a
    # float64 variance, which sqrt(var) in float32 would overflow first
    aten.std.correction,
    # lowered whole (lower_reduce.c kn_lower_layer_norm, as torch decomposes
    # it): a symbolic trace pays torch's fake propagation per ATen op, and
    # the decomposition is eight to twelve of them
    aten.native_layer_norm.default,
    # lowered whole (lower_reduce.c kn_lower_batch_norm): the decomposition's
    # ops over x (sub, mul, add and their broadcasting views) were a quarter
    # of a convolutional network's symbolic compile; batch_norm reaches it
    # through native_batch_norm and cudnn_batch_norm below
    aten._native_batch_norm_legit_no_training.default,
    # views lowered whole (lower_view.c, the kernels the same text): their
    # references (to permute) run sympy work per dim under symbolic sizes;
    # torch's own fake of each is one view of its input (BERT's symbolic
    # compile 0.98x, within noise)
    aten.transpose.int, aten.t.default,
    # kept (lowered as the identity): decomposed, AOT autograd took a detach
    # under symbolic sizes for an alias of its input, which then required
    # grad (torch 2.13; fuzzer 2200240)
    aten.detach.default,
}
# Composite ops that core ATen keeps but kiln fuses better from their parts:
# normalisations and softmax become reductions + pointwise in one kernel.
_EXTRA = [
    aten._softmax.default, aten._log_softmax.default,
    aten.native_group_norm.default,
    aten.logsumexp.default, aten.hardswish.default, aten.hardsigmoid.default, aten.mish.default,
    aten.elu.default, aten.silu.default, aten.softplus.default, aten.addcmul.default, aten.addcdiv.default,
    aten.lerp.Scalar, aten.lerp.Tensor, aten.nan_to_num.default, aten.isfinite.default,
    aten.squeeze.dims, aten.native_dropout.default, aten.rms_norm.default if hasattr(aten, "rms_norm") else None,
]

_table_cache = None


def _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    if training or running_mean is None or running_var is None:
        return NotImplemented   # training: ATen's kernel, as eager
    # inference: the op kiln lowers whole (its pointwise work fuses into the
    # convolution's epilogue kernel)
    return aten._native_batch_norm_legit_no_training.default(x, weight, bias, running_mean, running_var,
                                                             momentum, eps)


def _cudnn_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    r = _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)
    if r is NotImplemented:
        return r   # training: cuDNN's kernel, as eager
    empty = x.new_zeros((0,))
    return r[0], empty, empty, x.new_zeros((0,), dtype=torch.uint8)   # + cuDNN's (empty) reserve


def _int_scalar_value(ref):
    """addcmul on integer tensors: eager's kernel converts a float `value` to
    the integer dtype (truncating); the reference decomposition refuses it."""
    def decomp(self, tensor1, tensor2, *, value=1):
        dt = torch.promote_types(torch.promote_types(self.dtype, tensor1.dtype), tensor2.dtype)
        if isinstance(value, float) and not dt.is_floating_point and not dt.is_complex and dt != torch.bool:
            value = int(value)
        return ref(self, tensor1, tensor2, value=value)
    return decomp


def _pow_scalar_contiguous(base, exponent):
    """pow(Scalar, Tensor): eager's kernel returns a contiguous tensor whatever
    the exponent's layout, while its meta function keeps the exponent's strides.
    Tracing it over a contiguous exponent gives the traced value eager's layout
    (an `as_strided` of it then reads what eager reads); the inner call, on a
    contiguous exponent, is traced as it is."""
    if exponent.is_contiguous():
        return NotImplemented
    return aten.pow.Scalar(base, exponent.contiguous())


def decompositions():
    """The decomposition table kiln lowers with (built once)."""
    global _table_cache
    if _table_cache is None:
        t = dict(core_aten_decompositions())
        for op in _KEEP:
            t.pop(op, None)
        for op in _EXTRA:
            if op is not None and op in decomposition_table:
                t[op] = decomposition_table[op]
        for op in (aten.addcmul.default, aten.addcmul_.default):
            if op in t:
                t[op] = _int_scalar_value(t[op])
        t[aten.pow.Scalar] = _pow_scalar_contiguous
        # on a GPU, tracing without the Python dispatcher reaches the kernel
        # batch_norm picks at trace time (cuDNN's, or native_batch_norm for
        # bfloat16): the same pointwise work in inference
        t[aten.cudnn_batch_norm.default] = _cudnn_batch_norm
        t[aten.native_batch_norm.default] = _native_batch_norm
        _table_cache = t
    return _table_cache
