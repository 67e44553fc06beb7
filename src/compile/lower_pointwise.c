/* lower_pointwise.c — pointwise ops, casts and creation ops (see lower.c).
 *
 * Consumes: a graph node and its operands (kn_lazy_start).  Produces: a lazy
 * buffer whose body computes the op per element, with torch's type
 * promotion (result_type) and its float16/bfloat16 rounding (settle_common,
 * kn_settle_narrow).  A new pointwise op is usually one line in
 * src/graph/ops.def (`binary` or `unary` with its kn_sop); one with extra
 * arguments gets a kn_lower_* function here.
 */
#include "lower.h"
#include <math.h>
#include <string.h>
/* ---------------------------------------------------------------- type promotion */
static int
category(kn_dtype d)
{
    return d == KN_BOOL ? 0 : kn_dtype_is_float(d) ? 2 : 1;
}

static kn_dtype
combine(kn_dtype hi, int have_hi, kn_dtype lo, int have_lo, int lo_is_scalar)
{
    if (!have_lo)
        return hi;
    if (!have_hi)
        return lo_is_scalar ? (category(lo) == 2 ? KN_F32 : lo) : lo;
    if (category(lo) > category(hi)) {
        if (lo_is_scalar)
            return category(lo) == 2 ? KN_F32 : KN_I64;
        return lo;
    }
    return hi;
}

/* torch.result_type over operands. */
static kn_dtype
result_type(kn_operand *o, int n)
{
    kn_dtype r[3] = {KN_F32, KN_F32, KN_F32};   /* (read only where have[] is set; -O1 builds warn) */
    int have[3] = {0, 0, 0};
    for (int k = 0; k < n; k++) {
        int p = o[k].prio;
        r[p] = have[p] ? kn_dtype_promote(r[p], o[k].dt) : o[k].dt;
        have[p] = 1;
    }
    kn_dtype lo = combine(r[1], have[1], r[0], have[0], 1);
    int have_lo = have[0] || have[1];
    /* zero-dim tensors and scalars merged; the scalar flag matters only when
       no zero-dim tensor was present */
    if (!have[2])
        return have[1] ? lo : (have[0] ? (category(r[0]) == 2 ? KN_F64 : r[0]) : KN_F32);
    return combine(r[2], 1, lo, have_lo, !have[1]);
}

static int
decides(kn_sop op)
{
    int cls = kn_sops[op].cls;
    return cls == KN_SC_CMP || cls == KN_SC_PRED || op == KN_S_FLOOR || op == KN_S_CEIL || op == KN_S_ROUND ||
           op == KN_S_TRUNC || op == KN_S_FLOORDIV || op == KN_S_TRUNCDIV || op == KN_S_REM || op == KN_S_FMOD ||
           op == KN_S_SIGN;
}

/* Eager CPU ATen (TensorIterator) converts every input of a binary op to the
   op's common dtype before the kernel runs, so a scalar or zero-dim operand
   of a wider dtype (0.1, a float32 0-d tensor, an integer tensor) meets a
   float16/bfloat16 tensor rounded to that narrow type.  The one exception is
   a kernel that reads the second input, when it is a CPU scalar, in its
   original value in float32 (iter.original_scalar_value): mul and the
   divisions.  Established on torch 2.x CPU by probing every binary op with
   values whose rounding changes the result.  On CUDA a CPU scalar is read
   unrounded in opmath (opmath_gpu_kernel_with_scalars) and is left as is. */
static int
reads_scalar_unrounded(kn_sop op, int k)
{
    return k == 1 && (op == KN_S_MUL || op == KN_S_DIV || op == KN_S_FLOORDIV || op == KN_S_TRUNCDIV);
}

/* Round the operands of a binary op to its narrow common dtype `common` where
   eager converts them (see reads_scalar_unrounded). */
static int
settle_common(kn_ctx *c, kn_sop op, kn_dtype common, kn_operand *o, int n)
{
    if (c->cuda || n < 2 || (common != KN_F16 && common != KN_BF16))
        return 1;
    for (int k = 0; k < n; k++) {
        if (o[k].dt == common || (o[k].prio < 2 && reads_scalar_unrounded(op, k)))
            continue;
        /* through float32, as c10's Half/BFloat16 conversions go */
        o[k].e = kn_round(c, kn_cast(c, o[k].e, KN_F32), common);
        if (o[k].e == NULL)
            return 0;
    }
    return 1;
}

static kn_expr *
apply(kn_ctx *c, kn_sop op, kn_dtype compute, kn_operand *o, int n)
{
    kn_expr *a[3] = {0};
    for (int k = 0; k < n; k++) {
        a[k] = kn_cast(c, o[k].e, compute);
        if (a[k] == NULL)
            return NULL;
    }
    int cls = kn_sops[op].cls;
    kn_dtype rdt = (cls == KN_SC_CMP || cls == KN_SC_PRED || cls == KN_SC_LOGIC) ? KN_BOOL : compute;
    if (n == 1)
        return kn_op1(c, op, rdt, a[0]);
    if (n == 2)
        return kn_op2(c, op, rdt, a[0], a[1]);
    return kn_op3(c, op, rdt, a[0], a[1], a[2]);
}

/* Lower node ni as op over its first n operands. */
static int
pointwise(kn_ctx *c, int ni, kn_sop op, int n, const int *argk)
{
    kn_operand o[3];
    KN_LAZY_START_OPS(c, ni, b, idx, o, n, argk, decides(op));
    int cls = kn_sops[op].cls;
    kn_dtype compute;
    if (cls == KN_SC_CMP || cls == KN_SC_PRED)
        compute = kn_dtype_compute(result_type(o, n));
    else if (cls == KN_SC_LOGIC)
        compute = KN_BOOL;
    else
        compute = kn_dtype_compute(b->dt);
    if (cls != KN_SC_LOGIC && !settle_common(c, op, result_type(o, n), o, n))
        return -1;
    if (cls == KN_SC_FLOAT && !kn_dtype_is_float(compute))
        return 0;
    if (cls == KN_SC_BITS && kn_dtype_is_float(compute))
        return 0;
    b->body = kn_cast(c, apply(c, op, compute, o, n), b->dt);
    if (b->body == NULL)
        return -1;
    return kn_set_result(c, ni, b);
}

/* ---------------------------------------------------------------- pointwise lowerings */
int
kn_lower_binary(kn_ctx *c, int ni, int param)
{
    return pointwise(c, ni, (kn_sop)param, 2, NULL);
}

int
kn_lower_unary(kn_ctx *c, int ni, int param)
{
    return pointwise(c, ni, (kn_sop)param, 1, NULL);
}

/* add/sub with alpha: a op alpha*b */
int
kn_lower_add(kn_ctx *c, int ni, int param)
{
    if (is_one(arg(c, ni, 2)))
        return pointwise(c, ni, (kn_sop)param, 2, NULL);
    kn_operand o[3];
    KN_LAZY_START_OPS(c, ni, b, idx, o, 3, NULL, 0);
    kn_dtype compute = kn_dtype_compute(b->dt);
    if (compute == KN_BOOL)
        return 0;
    kn_expr *scaled = kn_op2(c, KN_S_MUL, compute, kn_cast(c, o[1].e, compute), kn_cast(c, o[2].e, compute));
    b->body = kn_cast(c, kn_op2(c, (kn_sop)param, compute, kn_cast(c, o[0].e, compute), scaled), b->dt);
    if (b->body == NULL)
        return -1;
    return kn_set_result(c, ni, b);
}

int
kn_lower_rsub(kn_ctx *c, int ni, int param)
{
    if (!is_one(arg(c, ni, 2)))
        return 0;
    static const int order[2] = {1, 0};
    return pointwise(c, ni, KN_S_SUB, 2, order);
}

int
kn_lower_div_mode(kn_ctx *c, int ni, int param)
{
    kn_arg *mode = arg(c, ni, 2);
    if (mode->kind == KN_A_NONE)
        return pointwise(c, ni, KN_S_DIV, 2, NULL);
    if (mode->kind != KN_A_STR)
        return 0;
    if (strcmp(mode->s, "trunc") == 0) {
        if (kn_dtype_is_float(out_meta(c, ni, 0) ? out_meta(c, ni, 0)->dt : KN_I64)) {
            /* trunc(a / b) in float */
            kn_expr *idx[KN_MAXDIM];
            kn_buf *b;
            kn_operand o[2];
            int r = kn_lazy_start(c, ni, &b, idx, o, 2, NULL, 1);
            if (r <= 0)
                return r;
            kn_dtype cd = kn_dtype_compute(b->dt);
            kn_expr *q = apply(c, KN_S_DIV, cd, o, 2);
            b->body = kn_cast(c, kn_op1(c, KN_S_TRUNC, cd, q), b->dt);
            return b->body ? kn_set_result(c, ni, b) : -1;
        }
        return pointwise(c, ni, KN_S_TRUNCDIV, 2, NULL);
    }
    if (strcmp(mode->s, "floor") == 0)
        return pointwise(c, ni, KN_S_FLOORDIV, 2, NULL);
    return 0;
}

/* v's value in the narrow float dtype nd (F16/BF16): through float, then to
   nd's significand bits, ties to even, with nd's subnormals and overflow. */
static double
narrow_value(double v, kn_dtype nd)
{
    float f = (float)v;
    if (!isfinite(f) || f == 0.0f)
        return f;
    int bits = nd == KN_F16 ? 11 : 8, emin = nd == KN_F16 ? -13 : -125, e;
    double max = nd == KN_F16 ? 65504.0 : 0x1.fep127;
    (void)frexp(f, &e);
    if (e < emin)
        e = emin;
    double r = ldexp(nearbyint(ldexp((double)f, bits - e)), e - bits);
    return fabs(r) > max ? copysign(INFINITY, r) : r;
}

/* pow(x, scalar): small exponents become multiplies.  Eager takes the
   exponent in x's dtype (float16/bfloat16: rounded, also on CUDA). */
int
kn_lower_pow_scalar(kn_ctx *c, int ni, int param)
{
    kn_arg *e = arg(c, ni, 1);
    const kn_meta *m = out_meta(c, ni, 0);
    if (m == NULL)
        return 0;
    if ((e->kind == KN_A_INT || e->kind == KN_A_FLOAT) && kn_dtype_is_float(m->dt)) {
        double v = e->kind == KN_A_INT ? (double)e->i : e->f;
        if (m->dt == KN_F16 || m->dt == KN_BF16)
            v = narrow_value(v, m->dt);
        kn_expr *idx[KN_MAXDIM];
        kn_buf *b;
        kn_operand o;
        int r = kn_lazy_start(c, ni, &b, idx, &o, 1, NULL, 0);
        if (r <= 0)
            return r;
        kn_dtype cd = kn_dtype_compute(b->dt);
        kn_expr *x = kn_cast(c, o.e, cd), *y;
        if (v == 1.0)
            y = x;
        else if (v == 2.0)
            y = kn_op2(c, KN_S_MUL, cd, x, x);
        else if (v == 3.0)
            y = kn_op2(c, KN_S_MUL, cd, kn_op2(c, KN_S_MUL, cd, x, x), x);
        else if (v == 0.5)
            y = kn_op1(c, KN_S_SQRT, cd, x);
        else if (v == -0.5)
            y = kn_op1(c, KN_S_RSQRT, cd, x);
        else if (v == -1.0)
            y = kn_op1(c, KN_S_RECIP, cd, x);
        else
            y = kn_op2(c, KN_S_POW, cd, x, kn_const_f(c, cd, v));
        b->body = kn_cast(c, y, b->dt);
        return b->body ? kn_set_result(c, ni, b) : -1;
    }
    return pointwise(c, ni, KN_S_POW, 2, NULL);
}

int
kn_lower_relu(kn_ctx *c, int ni, int param)
{
    kn_operand o;
    KN_LAZY_START_OPS(c, ni, b, idx, &o, 1, NULL, 0);
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (cd == KN_BOOL)
        return 0;
    kn_expr *x = kn_cast(c, o.e, cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_MAX, cd, x, kn_const_i(c, cd, 0)), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

int
kn_lower_gelu(kn_ctx *c, int ni, int param)
{
    kn_arg *ap = arg(c, ni, 1);
    int tanh_approx = ap->kind == KN_A_STR && strcmp(ap->s, "tanh") == 0;
    if (ap->kind == KN_A_STR && !tanh_approx && strcmp(ap->s, "none") != 0)
        return 0;
    return pointwise(c, ni, tanh_approx ? KN_S_GELU_TANH : KN_S_GELU, 1, NULL);
}

int
kn_lower_frac(kn_ctx *c, int ni, int param)
{
    kn_operand o;
    KN_LAZY_START_OPS(c, ni, b, idx, &o, 1, NULL, 0);
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (!kn_dtype_is_float(cd))
        return 0;
    if (!kn_settle_narrow(c, &o))
        return -1;
    kn_expr *x = kn_cast(c, o.e, cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_SUB, cd, x, kn_op1(c, KN_S_TRUNC, cd, x)), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

int
kn_lower_leaky_relu(kn_ctx *c, int ni, int param)
{
    kn_operand o[2];
    KN_LAZY_START_OPS(c, ni, b, idx, o, 1, NULL, 0);
    kn_arg *s = arg(c, ni, 1);
    double slope = s->kind == KN_A_FLOAT ? s->f : s->kind == KN_A_INT ? (double)s->i : 0.01;
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (!kn_dtype_is_float(cd))
        return 0;
    kn_expr *x = kn_cast(c, o[0].e, cd);
    kn_expr *pos = kn_op2(c, KN_S_GT, KN_BOOL, x, kn_const_f(c, cd, 0));
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, pos, x, kn_op2(c, KN_S_MUL, cd, x, kn_const_f(c, cd, slope))), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* clamp(x, min, max); param 1: clamp_min(x, min), 2: clamp_max(x, max).
   hardtanh(x, min=-1, max=1) comes here with defaults. */
int
kn_lower_clamp(kn_ctx *c, int ni, int param)
{
    kn_operand o[3];
    KN_LAZY_START_OPS(c, ni, b, idx, o, 1, NULL, 0);
    kn_arg *lo = param == 2 ? NULL : arg(c, ni, 1);
    kn_arg *hi = param == 1 ? NULL : param == 2 ? arg(c, ni, 1) : arg(c, ni, 2);
    int hard = strcmp(node(c, ni)->target, "aten.hardtanh.default") == 0;
    kn_arg dlo = {KN_A_FLOAT, 0, -1.0, 0, NULL, NULL}, dhi = {KN_A_FLOAT, 0, 1.0, 0, NULL, NULL};
    if (hard) {
        if (lo->kind == KN_A_NONE)
            lo = &dlo;
        if (hi->kind == KN_A_NONE)
            hi = &dhi;
    }
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (cd == KN_BOOL)
        return 0;
    kn_expr *x = kn_cast(c, o[0].e, cd);
    if (lo && lo->kind != KN_A_NONE) {
        int r = kn_make_operand(c, lo, b->ndim, b->size, idx, &o[1]);
        if (r <= 0)
            return r;
        x = kn_op2(c, KN_S_MAX, cd, x, kn_cast(c, o[1].e, cd));
    }
    if (hi && hi->kind != KN_A_NONE) {
        int r = kn_make_operand(c, hi, b->ndim, b->size, idx, &o[2]);
        if (r <= 0)
            return r;
        x = kn_op2(c, KN_S_MIN, cd, x, kn_cast(c, o[2].e, cd));
    }
    b->body = kn_cast(c, x, b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

int
kn_lower_where(kn_ctx *c, int ni, int param)
{
    kn_operand o[3];
    KN_LAZY_START_OPS(c, ni, b, idx, o, 3, NULL, 0);
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *cond = kn_cast(c, o[0].e, KN_BOOL);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, cond, kn_cast(c, o[1].e, cd), kn_cast(c, o[2].e, cd)), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* Node ni's value is argument k broadcast to its shape and converted to its
   dtype (rounded to a narrow float dtype, also when fused: kn_round). */
int
kn_cast_of_arg(kn_ctx *c, int ni, int k)
{
    kn_operand o;
    KN_LAZY_START_OPS(c, ni, b, idx, &o, 1, &k, 0);
    if (b->dt != o.dt && !kn_settle_narrow(c, &o))
        return -1;
    b->body = kn_round(c, o.e, b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* _to_copy(x, dtype=..., device=...): a cast.  The bridge passes the device
   change as a string arg; kiln declines those. */
int
kn_lower_to_copy(kn_ctx *c, int ni, int param)
{
    kn_node *n = node(c, ni);
    for (int k = 1; k < n->nargs; k++)
        if (n->args[k].kind == KN_A_STR && strcmp(n->args[k].s, "device-change") == 0)
            return 0;
    return kn_cast_of_arg(c, ni, 0);
}

/* copy(self, src): src broadcast to self's shape, in self's dtype */
int
kn_lower_copy(kn_ctx *c, int ni, int param)
{
    return kn_cast_of_arg(c, ni, 1);
}

int
kn_lower_identity(kn_ctx *c, int ni, int param)
{
    return kn_lower_to_copy(c, ni, 0);
}

/* ---------------------------------------------------------------- creation */
int
kn_lower_full(kn_ctx *c, int ni, int param)
{
    KN_LAZY_START(c, ni, 1, b, idx);
    kn_arg *v;
    kn_arg one = {KN_A_INT, 1, 0, 0, NULL, NULL}, zero = {KN_A_INT, 0, 0, 0, NULL, NULL};
    switch (param) {
    case 0: v = arg(c, ni, 1); break;      /* full(size, value) */
    case 1: v = arg(c, ni, 0); break;      /* scalar_tensor(value) */
    case 2: v = arg(c, ni, 1); break;      /* full_like(x, value) / fill(x, value) */
    case 3: v = &zero; break;
    default: v = &one; break;
    }
    kn_operand o;
    int r = kn_make_operand(c, v, b->ndim, b->size, idx, &o);
    if (r <= 0 || v->kind == KN_A_REF)
        return r < 0 ? -1 : 0;
    b->body = kn_cast(c, o.e, b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

int
kn_lower_arange(kn_ctx *c, int ni, int param)
{
    KN_LAZY_START(c, ni, 1, b, idx);
    if (b->ndim != 1)
        return 0;
    kn_arg *s = param == 2 ? NULL : arg(c, ni, 0), *st = param == 0 ? arg(c, ni, 2) : NULL;
    int isf = kn_dtype_is_float(b->dt);
    kn_dtype cd = isf ? KN_F64 : KN_I64;
    double start = s ? (s->kind == KN_A_FLOAT ? s->f : (double)s->i) : 0.0;
    double step = st ? (st->kind == KN_A_FLOAT ? st->f : st->kind == KN_A_INT ? (double)st->i : 1.0) : 1.0;
    if ((s && s->kind != KN_A_INT && s->kind != KN_A_FLOAT) || (st && st->kind == KN_A_REF))
        return 0;
    kn_expr *i = kn_cast(c, idx[0], cd);
    kn_expr *v = kn_op2(c, KN_S_ADD, cd, kn_const_f(c, cd, start), kn_op2(c, KN_S_MUL, cd, i, kn_const_f(c, cd, step)));
    b->body = kn_cast(c, v, b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}
