/* kn_lower_reduce.c — reductions (see lower.c): sum, prod, amax/amin, argmax,
 * any/all, max.dim/min.dim, mean, var/var_mean, cumsum/cumprod.
 *
 * Consumes: a graph node.  Produces: REDUCTION buffers, each with its kernel
 * step (its body over P vars for the output and R vars reduced), split in
 * two stages on a GPU when the rows are few and long (split_reduction), and
 * lazy buffers for what follows a reduction (mean's division).  Add a
 * reduction here (its OP line in src/graph/ops.def, param a kn_rop).
 */
#include "lower.h"
#include <math.h>
#include <string.h>
/* ---------------------------------------------------------------- reductions */
/* A reduction buffer of shape osize whose body reduces over R vars of
   extents rsize, with its kernel step.  NULL on failure. */
static kn_buf *
reduction_buf(kn_ctx *c, kn_dtype dt, int on, const int64_t *osize, kn_expr *body, kn_rop rop, int rn,
              const int64_t *rsize, kn_dtype acc)
{
    kn_buf *b = kn_buf_new(c, KN_B_REDUCTION, dt, on, osize);
    if (b == NULL)
        return NULL;
    b->body = body;
    b->rop = rop;
    b->nred = rn;
    memcpy(b->rsize, rsize, sizeof(int64_t) * (size_t)rn);
    b->acc_dt = acc;
    kn_step st = {0};
    st.kind = KN_ST_KERNEL;
    st.kernel = b->id;
    return kn_add_step(c, &st) < 0 ? NULL : b;
}

/* The value that leaves a reduction rop unchanged, in dtype dt. */
static kn_expr *
reduce_identity(kn_ctx *c, kn_rop rop, kn_dtype dt)
{
    int fl = kn_dtype_is_float(dt);
    int64_t lo = 0, hi = 1;   /* bool */
    switch (dt) {
    case KN_U8: lo = 0; hi = 255; break;
    case KN_I8: lo = -128; hi = 127; break;
    case KN_I16: lo = -32768; hi = 32767; break;
    case KN_I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case KN_I64: lo = INT64_MIN; hi = INT64_MAX; break;
    default: break;
    }
    switch (rop) {
    case KN_R_PROD:
    case KN_R_ALL: return fl ? kn_const_f(c, dt, 1.0) : kn_const_i(c, dt, 1);
    case KN_R_MAX: return fl ? kn_const_f(c, dt, -INFINITY) : kn_const_i(c, dt, lo);
    case KN_R_MIN: return fl ? kn_const_f(c, dt, INFINITY) : kn_const_i(c, dt, hi);
    default: return fl ? kn_const_f(c, dt, 0.0) : kn_const_i(c, dt, 0);
    }
}

/* Split form of a reduction on a GPU.  A kernel gives each output element (a
   row) to at most one block, so a reduction of few long rows (a loss, a norm
   of a whole tensor, batch statistics per channel) would leave most of the
   multiprocessors idle.  When the rows are few and long, the reduction body
   `*v` (over P vars 0..on-1 and R vars 0..rn-1 of extents rsize) is split:
   a partial reduction P of shape osize ++ [chunks] reduces each chunk of a
   row (the chunks are the leading reduction dims, the last of them possibly
   cut in `a` equal parts), and the reduction asked for becomes the same
   reduction over P's chunk dims, in the accumulator dtype.  Two kernels and
   no atomics: the result does not depend on scheduling.  On success *v, *rn
   and rsize describe the second stage; returns 0 (also when nothing is
   split) or -1. */
static int
split_reduction(kn_ctx *c, kn_expr **v, int on, const int64_t *osize, int *rnp, int64_t *rsize, kn_rop rop,
                kn_dtype acc)
{
    int rn = *rnp;
    if (!c->cuda || rn == 0 || !(rop == KN_R_SUM || rop == KN_R_PROD || rop == KN_R_MAX || rop == KN_R_MIN ||
                                 rop == KN_R_ANY || rop == KN_R_ALL))
        return 0;
    int64_t rows = 1, len = 1;
    for (int d = 0; d < on; d++)
        rows *= osize[d];
    for (int d = 0; d < rn; d++)
        len *= rsize[d];
    int64_t sms = c->cuda_sms > 0 ? c->cuda_sms : 132;
    /* a row per block already fills the device, or the rows are short */
    if (rows >= 2 * sms || len < 65536)
        return 0;
    /* chunks per row: about four blocks per multiprocessor in all, each
       chunk at least 4096 elements, at most 1024 chunks */
    int64_t want = (4 * sms + rows - 1) / rows, most = len / 4096;
    if (most > 1024)
        most = 1024;
    if (want > most)
        want = most;
    if (want < 2)
        return 0;
    /* leading reduction dims [0, k) whole, dim k cut in `a` parts */
    int k = 0, best_k = -1;
    int64_t pre = 1, best_a = 1, best_n = 0;
    for (; k < rn; k++) {
        for (int64_t a = 1; a <= rsize[k] && pre * a <= 2 * want; a++) {
            if (rsize[k] % a)
                continue;
            int64_t n = pre * a;
            /* closest to `want` from above or below (ratio), at least 2 */
            if (n >= 2 && (best_n == 0 || (n >= want ? (double)n / want : (double)want / n) <
                                              (best_n >= want ? (double)best_n / want : (double)want / best_n))) {
                best_n = n;
                best_k = k;
                best_a = a;
            }
        }
        pre *= rsize[k];
        if (pre > 2 * want)
            break;
    }
    /* no good divisor (a prime length): the first reduction dim cut in `a`
       parts of `part`, the last one short; positions past the end read a
       clamped index and reduce the identity instead */
    int64_t ragged = 0;
    if (best_k < 0 || best_n < want / 2) {
        int64_t part = (rsize[0] + want - 1) / want, a = (rsize[0] + part - 1) / part;
        if (a < 2 || rsize[0] % part == 0 || part * (a - 1) >= rsize[0])
            return 0;
        best_k = 0;
        best_a = a;
        ragged = part;
    }
    if (on + best_k + (best_a > 1) > KN_MAXDIM || on + best_k + 1 > 16)
        return 0;
    k = best_k;
    int64_t a = best_a;
    int extra = k + (a > 1);                 /* P's chunk dims */
    int64_t psize[KN_MAXDIM];
    memcpy(psize, osize, sizeof(int64_t) * (size_t)on);
    for (int j = 0; j < k; j++)
        psize[on + j] = rsize[j];
    if (a > 1)
        psize[on + k] = a;
    /* P's body: R_j (j < k) -> P(on+j); R_k -> P(on+k) * (rsize[k]/a) + R_0;
       R_j (j > k) -> R_(j-k) */
    kn_subst s;
    memset(&s, 0, sizeof s);
    int64_t prs[KN_MAXDIM];
    int prn = 0;
    for (int j = 0; j < k; j++)
        s.to[KN_VAR_R(j)] = kn_var(c, KN_VAR_P(on + j), rsize[j]);
    kn_expr *pos = NULL;                     /* ragged: the position along dim 0 */
    if (ragged) {
        pos = kn_iadd(c, kn_imul(c, kn_var(c, KN_VAR_P(on), a), ragged), kn_var(c, KN_VAR_R(0), ragged));
        s.to[KN_VAR_R(0)] = kn_clamp_index(c, pos, rsize[0]);
        prs[prn++] = ragged;
    } else if (a > 1) {
        int64_t part = rsize[k] / a;
        s.to[KN_VAR_R(k)] = kn_iadd(c, kn_imul(c, kn_var(c, KN_VAR_P(on + k), a), part),
                                    kn_var(c, KN_VAR_R(0), part));
        prs[prn++] = part;
    } else {
        s.to[KN_VAR_R(k)] = kn_var(c, KN_VAR_R(0), rsize[k]);
        prs[prn++] = rsize[k];
    }
    for (int j = k + 1; j < rn; j++) {
        s.to[KN_VAR_R(j)] = kn_var(c, KN_VAR_R(prn), rsize[j]);
        prs[prn++] = rsize[j];
    }
    kn_expr *pbody = kn_substitute(c, *v, &s);
    if (pbody && ragged)
        pbody = kn_op3(c, KN_S_WHERE, (kn_dtype)pbody->dt, kn_op2(c, KN_S_LT, KN_BOOL, pos, kn_iconst(c, rsize[0])),
                       pbody, reduce_identity(c, rop, (kn_dtype)pbody->dt));
    if (pbody == NULL)
        return -1;
    kn_buf *p = reduction_buf(c, acc, on + extra, psize, pbody, rop, prn, prs, acc);
    if (p == NULL)
        return -1;
    /* the second stage reduces P over its chunk dims */
    kn_expr *pi[KN_MAXDIM];
    for (int j = 0; j < on; j++)
        pi[j] = kn_var(c, KN_VAR_P(j), osize[j]);
    for (int j = 0; j < extra; j++) {
        pi[on + j] = kn_var(c, KN_VAR_R(j), psize[on + j]);
        rsize[j] = psize[on + j];
    }
    *rnp = extra;
    *v = kn_cast(c, kn_buf_load(c, p, pi), acc);
    return *v ? 0 : -1;
}

/* Build a reduction buffer over dims of x.  `dims` NULL or empty = all.  The
   buffer's shape is the output shape with keepdim. */
/* The reduction of x over dims; with a centre (indexed like the output) it
   reduces x - centre, squared where `square`. */
static kn_buf *
reduction(kn_ctx *c, kn_buf *x, const kn_arg *dims, int keepdim, kn_rop rop, kn_dtype out_dt, kn_dtype acc,
          kn_buf *centre, int square)
{
    int red[KN_MAXDIM] = {0};
    int nd = x->ndim;
    if (dims == NULL || dims->kind == KN_A_NONE || (dims->kind == KN_A_LIST && dims->n == 0)) {
        for (int d = 0; d < nd; d++)
            red[d] = 1;
    } else if (dims->kind == KN_A_INT) {
        int d = wrap_dim(dims->i, nd);
        if (nd && (d < 0 || d >= nd))
            return NULL;
        if (nd)
            red[d] = 1;
    } else if (is_int_list(dims)) {
        for (int k = 0; k < dims->n; k++) {
            int d = wrap_dim(dims->items[k].i, nd);
            if (nd && (d < 0 || d >= nd))
                return NULL;
            if (nd)
                red[d] = 1;
        }
    } else {
        return NULL;
    }
    int64_t osize[KN_MAXDIM], rsize[KN_MAXDIM];
    int on = 0, rn = 0;
    kn_expr *si[KN_MAXDIM], *oi[KN_MAXDIM];
    for (int d = 0; d < nd; d++) {
        if (red[d]) {
            rsize[rn] = x->size[d];
            si[d] = kn_var(c, KN_VAR_R(rn), x->size[d]);
            rn++;
            if (keepdim) {
                oi[on] = kn_iconst(c, 0);
                osize[on++] = 1;
            }
        } else {
            si[d] = kn_var(c, KN_VAR_P(on), x->size[d]);
            oi[on] = si[d];
            osize[on++] = x->size[d];
        }
    }
    kn_expr *v = kn_cast(c, kn_buf_load(c, x, si), acc);
    if (centre) {
        /* deviations from `centre` (indexed like the output), or their squares */
        kn_expr *m = kn_cast(c, kn_buf_load(c, centre, oi), acc);
        v = kn_op2(c, KN_S_SUB, acc, v, m);
        if (square)
            v = kn_op2(c, KN_S_MUL, acc, v, v);
    }
    if (v == NULL)
        return NULL;
    if (split_reduction(c, &v, on, osize, &rn, rsize, rop, acc) < 0)
        return NULL;
    return reduction_buf(c, out_dt, on, osize, v, rop, rn, rsize, acc);
}

static kn_dtype
acc_dtype(kn_rop rop, kn_dtype in, kn_dtype out)
{
    switch (rop) {
    case KN_R_SUM: case KN_R_PROD: case KN_R_CUMSUM: case KN_R_CUMPROD:
        return kn_dtype_compute(out);
    case KN_R_ANY: case KN_R_ALL:
        return KN_BOOL;
    default:
        return kn_dtype_compute(in);
    }
}

/* Position of the dims and keepdim arguments per op. */
static void
reduce_args(kn_ctx *c, int ni, const kn_arg **dims, int *keepdim)
{
    const char *t = node(c, ni)->target;
    *dims = NULL;
    *keepdim = 0;
    if (strstr(t, ".default") && strncmp(t, "aten.amax", 9) != 0 && strncmp(t, "aten.amin", 9) != 0 &&
        strncmp(t, "aten.argmax", 11) != 0 && strncmp(t, "aten.argmin", 11) != 0)
        return; /* full reduction */
    *dims = arg(c, ni, 1);
    kn_arg *kd = arg(c, ni, 2);
    *keepdim = kd->kind == KN_A_BOOL ? (int)kd->i : 0;
}

/* x itself, or for a lazy float16/bfloat16 x a lazy copy that rounds it:
   argmax/argmin pick among the rounded values, ties included, as eager
   (see kn_settle_narrow). */
static kn_buf *
settled_buf(kn_ctx *c, kn_buf *x)
{
    if (x->kind != KN_B_LAZY || (x->dt != KN_F16 && x->dt != KN_BF16))
        return x;
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = kn_lazy_buf(c, x->dt, x->ndim, x->size, idx);
    if (b == NULL)
        return NULL;
    b->body = kn_round(c, kn_buf_load(c, x, idx), x->dt);
    return b->body ? b : NULL;
}

int
kn_lower_reduce(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL)
        return 0;
    const kn_arg *dims;
    int keepdim;
    reduce_args(c, ni, &dims, &keepdim);
    kn_rop rop = (kn_rop)param;
    if ((rop == KN_R_ARGMAX || rop == KN_R_ARGMIN) && dims && dims->kind == KN_A_NONE)
        keepdim = 0; /* flattened argmax */
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++)
        numel *= x->size[d];
    if (numel == 0 && rop != KN_R_SUM && rop != KN_R_PROD && rop != KN_R_ANY && rop != KN_R_ALL)
        return 0;
    if ((rop == KN_R_ARGMAX || rop == KN_R_ARGMIN) && (x = settled_buf(c, x)) == NULL)
        return -1;
    kn_buf *b = reduction(c, x, dims, keepdim, rop, m->dt, acc_dtype(rop, x->dt, m->dt), NULL, 0);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (b->ndim != m->ndim)
        return 0; /* shape disagreement with torch: the op goes to ATen */
    kn_set_layout_from_meta(b, m);
    return kn_set_result(c, ni, b);
}

/* max.dim / min.dim: (values, indices) */
int
kn_lower_reduce_pair(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m0 = out_meta(c, ni, 0), *m1 = out_meta(c, ni, 1);
    if (x == NULL || m0 == NULL || m1 == NULL)
        return 0;
    kn_arg *kd = arg(c, ni, 2);
    int keepdim = kd->kind == KN_A_BOOL ? (int)kd->i : 0;
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++)
        numel *= x->size[d];
    if (numel == 0)
        return 0;
    kn_rop arg_rop = param == KN_R_MAX ? KN_R_ARGMAX : KN_R_ARGMIN;
    kn_buf *v = reduction(c, x, arg(c, ni, 1), keepdim, (kn_rop)param, m0->dt, acc_dtype((kn_rop)param, x->dt, m0->dt), NULL, 0);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if ((x = settled_buf(c, x)) == NULL)
        return -1;
    kn_buf *ix = reduction(c, x, arg(c, ni, 1), keepdim, arg_rop, m1->dt, kn_dtype_compute(x->dt), NULL, 0);
    if (ix == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return kn_set_results2(c, ni, v, ix);
}

/* How many elements of x each element of the reduction s reduces (0 when
   s is empty). */
static double
row_length(const kn_buf *x, const kn_buf *s)
{
    int64_t on = 1, xn = 1;
    for (int d = 0; d < s->ndim; d++)
        on *= s->size[d];
    for (int d = 0; d < x->ndim; d++)
        xn *= x->size[d];
    return on ? (double)xn / (double)on : 0.0;
}

/* sum / divisor (a division, as ATen's mean and variance: a product with
   a rounded 1/n differs in the last bit), a lazy buffer indexed like `sum`;
   computed in float64 when the sum is. */
static kn_buf *
lazy_div(kn_ctx *c, kn_buf *sum, double divisor, kn_dtype out_dt)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = kn_lazy_buf(c, out_dt, sum->ndim, sum->size, idx);
    if (b == NULL)
        return NULL;
    kn_dtype cd = sum->dt == KN_F64 ? KN_F64 : kn_dtype_compute(out_dt);
    kn_expr *v = kn_cast(c, kn_buf_load(c, sum, idx), cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_DIV, cd, v, kn_const_f(c, cd, divisor)), out_dt);
    return b->body ? b : NULL;
}

int
kn_lower_mean(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL || !kn_dtype_is_float(m->dt))
        return 0;
    const kn_arg *dims;
    int keepdim;
    reduce_args(c, ni, &dims, &keepdim);
    kn_buf *s = reduction(c, x, dims, keepdim, KN_R_SUM, KN_F32 == kn_dtype_compute(m->dt) ? KN_F32 : m->dt,
                          kn_dtype_compute(m->dt), NULL, 0);
    if (s == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_buf *b = lazy_div(c, s, row_length(x, s), m->dt);
    if (b == NULL)
        return -1;
    s->uses = 1;
    return kn_set_result(c, ni, b);
}

/* var_mean on a GPU, in the compute type (ATen's GPU kernels accumulate
   in float32; float64 would cost row kernels twice the registers and
   shuffles, and runs at 1/64 of float32's rate on consumer GPUs): the
   corrected two-pass form.  m1 = sum(x) / n, then in one pass over the row
   S1 = sum(x - m1) and S2 = sum((x - m1)^2): mean = m1 + S1 / n and
   var = (S2 - S1 * S1 / n) / (n - correction).  A constant row has
   x - m1 = d for every element, d a few ulps of x with few significant
   bits, so S1 = n d and S2 = n d^2 are exact: mean exactly x and variance
   exactly 0, as eager's Welford kernel gives (a mean that is inf or NaN
   is kept as sum / n).  The row stays where the
   kernel holds it (registers for short rows): no read of another
   thread's element. */
/* The variance (var_dt, its root where `root`) and, where mean_out is
   given, the mean (mean_dt) of x over dims, as lazy buffers indexed like
   the reduction's output: 1, 0 (not lowered) or -1.  On a GPU in x's
   compute dtype, centred on a first mean: s1 = sum(x - m1), s2 = sum((x -
   m1)^2), var = (s2 - s1^2 / n) / (n - correction).  On the CPU for
   float32 (and float16/bfloat16) the mean is summed in float64, as ATen's
   CPU kernel accumulates: n copies of one float32 add up exactly there, so
   a constant row has mean exactly x and variance exactly 0, as in eager
   (from a float32 sum / n the deviations of a constant row are not 0), and
   so are the squared deviations (ATen's Welford state is float64:
   deviations of 1e30 square past float32's range there without
   overflowing, fuzzer 2002176); a root is taken in float64 as ATen's CPU
   kernel takes it (a variance past float32's range has a root inside it). */
static int
var_mean_bufs(kn_ctx *c, kn_buf *x, const kn_arg *dims, int keepdim, double correction, kn_dtype var_dt,
              int root, kn_dtype mean_dt, kn_buf **var_out, kn_buf **mean_out)
{
    kn_dtype cd = kn_dtype_compute(var_dt), sd = !c->cuda && cd == KN_F32 ? KN_F64 : cd;
    kn_expr *idx[KN_MAXDIM];
    /* the mean, kept dims so that it indexes like the second pass's output */
    kn_buf *s = reduction(c, x, dims, keepdim, KN_R_SUM, sd, sd, NULL, 0);
    if (s == NULL)
        return PyErr_Occurred() ? -1 : 0;
    double n = row_length(x, s);
    kn_buf *m1 = lazy_div(c, s, n, sd);
    if (m1 == NULL)
        return -1;
    if (c->cuda) {
        m1->uses = 3;
        kn_buf *s1 = reduction(c, x, dims, keepdim, KN_R_SUM, cd, cd, m1, 0);
        kn_buf *s2 = s1 ? reduction(c, x, dims, keepdim, KN_R_SUM, cd, cd, m1, 1) : NULL;
        if (s2 == NULL)
            return PyErr_Occurred() ? -1 : 0;
        s1->uses = 2;
        kn_buf *var = kn_lazy_buf(c, var_dt, s->ndim, s->size, idx);
        if (var == NULL)
            return -1;
        /* ATen divides by max(n - correction, 0): inf or NaN (0/0) below 1 */
        double denom = n - correction;
        kn_expr *e1 = kn_buf_load(c, s1, idx), *nn = kn_const_f(c, cd, n);
        kn_expr *ss = kn_op2(c, KN_S_SUB, cd, kn_buf_load(c, s2, idx),
                             kn_op2(c, KN_S_DIV, cd, kn_op2(c, KN_S_MUL, cd, e1, e1), nn));
        kn_expr *v = kn_op2(c, KN_S_DIV, cd, ss, kn_const_f(c, cd, denom > 0 ? denom : 0.0));
        var->body = kn_cast(c, root ? kn_op1(c, KN_S_SQRT, cd, v) : v, var_dt);
        if (var->body == NULL)
            return -1;
        *var_out = var;
        if (mean_out == NULL)
            return 1;
        kn_buf *mean = kn_lazy_buf(c, mean_dt, s->ndim, s->size, idx);
        if (mean == NULL)
            return -1;
        /* (a row holding inf or NaN keeps sum / n: x - m1 would be NaN) */
        kn_expr *pm = kn_buf_load(c, m1, idx);
        kn_expr *bad = kn_op2(c, KN_S_LOR, KN_BOOL, kn_op1(c, KN_S_ISNAN, KN_BOOL, pm),
                              kn_op1(c, KN_S_ISINF, KN_BOOL, pm));
        mean->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, bad, pm,
                                       kn_op2(c, KN_S_ADD, cd, pm, kn_op2(c, KN_S_DIV, cd, kn_buf_load(c, s1, idx), nn))),
                             mean_dt);
        if (mean->body == NULL)
            return -1;
        *mean_out = mean;
        return 1;
    }
    m1->uses = 2;
    kn_buf *ss = reduction(c, x, dims, keepdim, KN_R_SUM, sd, sd, m1, 1);
    if (ss == NULL)
        return PyErr_Occurred() ? -1 : 0;
    /* ATen divides by max(n - correction, 0): inf or NaN (0/0) below 1 */
    double denom = n - correction;
    kn_buf *var = lazy_div(c, ss, denom > 0 ? denom : 0.0, root ? sd : var_dt);
    if (var == NULL)
        return -1;
    if (root) {
        kn_buf *sdv = kn_lazy_buf(c, var_dt, var->ndim, var->size, idx);
        if (sdv == NULL)
            return -1;
        sdv->body = kn_cast(c, kn_op1(c, KN_S_SQRT, sd, kn_buf_load(c, var, idx)), var_dt);
        if (sdv->body == NULL)
            return -1;
        var = sdv;
    }
    *var_out = var;
    if (mean_out == NULL)
        return 1;
    *mean_out = lazy_div(c, s, n, mean_dt);
    return *mean_out ? 1 : -1;
}

/* var.correction(x, dims, correction, keepdim), var_mean.correction and
   std.correction (param 0, 1, 2): two passes over the row inside one
   kernel, the mean, then the sum of squared deviations from it
   (var_mean_bufs). */
int
kn_lower_var_mean(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL || !kn_dtype_is_float(m->dt) || !kn_dtype_is_float(x->dt))
        return 0;
    const kn_meta *m1 = param == 1 ? out_meta(c, ni, 1) : NULL;
    if (param == 1 && m1 == NULL)
        return 0;
    kn_arg *dims = arg(c, ni, 1), *corr = arg(c, ni, 2), *kd = arg(c, ni, 3);
    int keepdim = kd->kind == KN_A_BOOL ? (int)kd->i : 0;
    double correction = corr->kind == KN_A_INT ? (double)corr->i : corr->kind == KN_A_FLOAT ? corr->f : 1.0;
    kn_buf *var = NULL, *mean = NULL;
    int r = var_mean_bufs(c, x, dims, keepdim, correction, m->dt, param == 2, m1 ? m1->dt : m->dt, &var,
                          param == 1 ? &mean : NULL);
    if (r <= 0)
        return r;
    return param == 1 ? kn_set_results2(c, ni, var, mean) : kn_set_result(c, ni, var);
}

/* native_layer_norm(x, normalized_shape, weight, bias, eps) -> (out, mean,
   rstd), lowered whole, as torch decomposes it: in x's compute dtype,
   var and mean over the normalized (last) dims (var_mean, correction 0,
   kept dims), rstd = rsqrt(var + eps), out = (x - mean) * rstd, times
   weight, plus bias; on the CPU without a bias plus 0 (ATen's CPU kernel
   ends each element with an addition, so an element that normalises to
   zero is +0; the decomposition gives -0 where x is a -0 equal to its
   row's mean, fuzzer 2102124).  Each result cast to its dtype.  Lowered
   here rather than decomposed while tracing: a symbolic trace pays torch's
   fake propagation per ATen op (the decomposition's eight to twelve), a
   sixth of BERT's symbolic compile and a third of its static one
   (kiln/decomp.py _KEEP). */
int
kn_lower_layer_norm(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *mo = out_meta(c, ni, 0), *mm = out_meta(c, ni, 1), *mr = out_meta(c, ni, 2);
    kn_arg *ns = arg(c, ni, 1), *wa = arg(c, ni, 2), *ba = arg(c, ni, 3), *ea = arg(c, ni, 4);
    if (x == NULL || mo == NULL || mm == NULL || mr == NULL || !kn_dtype_is_float(x->dt) ||
        !kn_dtype_is_float(mo->dt) || !kn_dtype_is_float(mm->dt) || !kn_dtype_is_float(mr->dt) ||
        !is_int_list(ns) || ns->n < 1 || ns->n > x->ndim || (ea->kind != KN_A_FLOAT && ea->kind != KN_A_INT))
        return 0;
    int nd = x->ndim, k0 = nd - ns->n;
    for (int k = 0; k < ns->n; k++)
        if (ns->items[k].i != x->size[k0 + k])
            return 0;
    kn_dtype cd = kn_dtype_compute(x->dt);
    kn_buf *w = NULL, *b = NULL;
    kn_buf **wb[2] = {&w, &b};
    kn_arg *wba[2] = {wa, ba};
    for (int j = 0; j < 2; j++) {
        if (wba[j]->kind == KN_A_NONE)
            continue;
        *wb[j] = ref_buf(c, wba[j]);
        kn_buf *t = *wb[j];
        /* (a weight or bias of another shape, or of a dtype that would
           promote the computation past x's: not lowered) */
        if (t == NULL || t->ndim != ns->n || !kn_dtype_is_float(t->dt) || kn_dtype_promote(cd, t->dt) != cd)
            return 0;
        for (int k = 0; k < ns->n; k++)
            if (t->size[k] != x->size[k0 + k])
                return 0;
    }
    double eps = ea->kind == KN_A_FLOAT ? ea->f : (double)ea->i;
    /* mean and rstd: x's sizes with the normalized dims 1 */
    if (mm->ndim != nd || mr->ndim != nd)
        return 0;
    for (int d = 0; d < nd; d++) {
        int64_t want = d < k0 ? x->size[d] : 1;
        if (mm->size[d] != want || mr->size[d] != want)
            return 0;
    }
    /* x (or its cast to the compute dtype, a value of its own as in the
       decomposition) is read by the mean's pass, the variance's and the
       output, counted as the decomposition's two readers, var_mean and sub:
       a shared value is stored once where recomputing it would re-read
       large tensors (lower_buf.c worth_storing), so the kernels are the
       decomposition's */
    if (cd == x->dt) {
        x->uses++;
    } else {
        /* (as _to_copy lowers: a narrow value settled to its dtype first,
           kn_cast_of_arg) */
        kn_expr *ci[KN_MAXDIM];
        kn_operand o;
        kn_buf *xc = kn_lazy_buf(c, cd, x->ndim, x->size, ci);
        if (xc == NULL)
            return -1;
        int r = kn_make_operand(c, arg(c, ni, 0), x->ndim, x->size, ci, &o);
        if (r <= 0)
            return r < 0 ? -1 : 0;
        if (o.dt != cd && !kn_settle_narrow(c, &o))
            return -1;
        xc->body = kn_round(c, o.e, cd);
        if (xc->body == NULL)
            return -1;
        xc->uses = 2;
        x = xc;
    }
    kn_arg items[KN_MAXDIM];
    kn_arg dims = {KN_A_LIST, 0, 0, ns->n, items, NULL};
    for (int k = 0; k < ns->n; k++)
        items[k] = (kn_arg){KN_A_INT, k0 + k, 0, 0, NULL, NULL};
    kn_buf *var = NULL, *mean = NULL;
    int r = var_mean_bufs(c, x, &dims, 1, 0.0, cd, 0, cd, &var, &mean);
    if (r <= 0)
        return r;
    kn_expr *ri[KN_MAXDIM], *xi[KN_MAXDIM];
    kn_buf *rstd = kn_lazy_buf(c, cd, var->ndim, var->size, ri);
    if (rstd == NULL)
        return -1;
    rstd->body = kn_op1(c, KN_S_RSQRT, cd, kn_op2(c, KN_S_ADD, cd, kn_buf_load(c, var, ri), kn_const_f(c, cd, eps)));
    rstd->uses = mean->uses = 2;
    kn_buf *out = kn_lazy_like(c, ni, 0, xi);
    if (out == NULL || rstd->body == NULL)
        return -1;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < nd; d++)
        si[d] = d < k0 ? xi[d] : kn_iconst(c, 0);
    kn_expr *v = kn_op2(c, KN_S_MUL, cd,
                        kn_op2(c, KN_S_SUB, cd, kn_cast(c, kn_buf_load(c, x, xi), cd), kn_buf_load(c, mean, si)),
                        kn_buf_load(c, rstd, si));
    if (w)
        v = kn_op2(c, KN_S_MUL, cd, v, kn_cast(c, kn_buf_load(c, w, xi + k0), cd));
    if (b)
        v = kn_op2(c, KN_S_ADD, cd, v, kn_cast(c, kn_buf_load(c, b, xi + k0), cd));
    else if (!c->cuda)
        v = kn_op2(c, KN_S_ADD, cd, v, kn_const_f(c, cd, 0.0));
    out->body = kn_cast(c, v, mo->dt);
    kn_expr *mi[KN_MAXDIM];
    kn_buf *mean_o = kn_lazy_buf(c, mm->dt, nd, mean->size, mi);
    kn_buf *rstd_o = mean_o ? kn_lazy_buf(c, mr->dt, nd, mean->size, mi) : NULL;
    if (out->body == NULL || rstd_o == NULL)
        return -1;
    mean_o->body = kn_cast(c, kn_buf_load(c, mean, mi), mm->dt);
    rstd_o->body = kn_cast(c, kn_buf_load(c, rstd, mi), mr->dt);
    if (mean_o->body == NULL || rstd_o->body == NULL)
        return -1;
    kn_buf *res[3] = {out, mean_o, rstd_o};
    return kn_set_results(c, ni, res, 3);
}

/* _native_batch_norm_legit_no_training(x, weight, bias, running_mean,
   running_var, momentum, eps) -> (out, save_mean, save_rstd): inference
   batch norm over channel dim 1, lowered whole.  In x's compute dtype, as
   ATen's kernels compute: scale = rsqrt(var + eps) (times weight), one
   value per channel, stored once only where the decomposition's view of it
   was (kn_store_if_broadcast: a transcendental body; rsqrt is not one, so
   it is computed in the kernel as before), then out = (x - mean) * scale
   (plus bias), cast to out's dtype: the decomposition's kernels, the same
   text but for buffer numbers.  The statistics results are what
   torch's decomposition (the op's fake) says: empty on the CPU, else the
   running mean and 1 / sqrt(var + eps) in the compute dtype.  Parameters
   of another float dtype are read in the compute dtype; one wider than it
   (a float64 weight on float32 x, which eager refuses) is not lowered.
   Lowered here rather than decomposed while tracing: a symbolic trace pays
   torch's fake propagation per ATen op, and the decomposition's four ops
   over x (sub, mul, add, their broadcasting views) were a quarter of a
   convolutional network's symbolic compile (kiln/decomp.py _KEEP). */
int
kn_lower_batch_norm(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *mo = out_meta(c, ni, 0), *mm = out_meta(c, ni, 1), *mr = out_meta(c, ni, 2);
    kn_arg *ea = arg(c, ni, 6);
    if (x == NULL || mo == NULL || mm == NULL || mr == NULL || x->ndim < 2 || !kn_dtype_is_float(x->dt) ||
        !kn_dtype_is_float(mo->dt) || mo->ndim != x->ndim || (ea->kind != KN_A_FLOAT && ea->kind != KN_A_INT))
        return 0;
    for (int d = 0; d < x->ndim; d++)
        if (mo->size[d] != x->size[d])
            return 0;
    int64_t nc = x->size[1];
    kn_dtype cd = kn_dtype_compute(x->dt);
    /* weight, bias, running mean, running var: none (weight, bias) or one
       value per channel */
    kn_buf *p[4] = {NULL, NULL, NULL, NULL};
    for (int j = 0; j < 4; j++) {
        kn_arg *a = arg(c, ni, j + 1);
        if (a->kind == KN_A_NONE && j < 2)
            continue;
        p[j] = ref_buf(c, a);
        if (p[j] == NULL || p[j]->ndim != 1 || p[j]->size[0] != nc || !kn_dtype_is_float(p[j]->dt) ||
            kn_dtype_promote(cd, p[j]->dt) != cd)
            return 0;
    }
    double eps = ea->kind == KN_A_FLOAT ? ea->f : (double)ea->i;
    kn_expr *ci[KN_MAXDIM];
    /* the per-channel scale */
    kn_buf *scale = kn_lazy_buf(c, cd, 1, &nc, ci);
    if (scale == NULL)
        return -1;
    kn_expr *sv = kn_op1(c, KN_S_RSQRT, cd,
                         kn_op2(c, KN_S_ADD, cd, kn_cast(c, kn_buf_load(c, p[3], ci), cd), kn_const_f(c, cd, eps)));
    if (p[0])
        sv = kn_op2(c, KN_S_MUL, cd, sv, kn_cast(c, kn_buf_load(c, p[0], ci), cd));
    scale->body = sv;
    if (scale->body == NULL)
        return -1;
    scale->uses = 1;
    if (kn_store_if_broadcast(c, scale, x->ndim, x->size) < 0)
        return -1;
    kn_expr *xi[KN_MAXDIM];
    kn_buf *out = kn_lazy_like(c, ni, 0, xi);
    if (out == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_expr *ch = xi[1];
    /* (x - mean first, then the scale: the decomposition's order, so the
       kernel's text is the decomposition's) */
    kn_expr *xm = kn_op2(c, KN_S_SUB, cd, kn_cast(c, kn_buf_load(c, x, xi), cd),
                         kn_cast(c, kn_buf_load(c, p[2], &ch), cd));
    kn_expr *v = kn_op2(c, KN_S_MUL, cd, xm, kn_buf_load(c, scale, &ch));
    if (p[1])
        v = kn_op2(c, KN_S_ADD, cd, v, kn_cast(c, kn_buf_load(c, p[1], &ch), cd));
    out->body = kn_cast(c, v, mo->dt);
    if (out->body == NULL)
        return -1;
    /* the statistics: as the fake has them (empty, or one per channel) */
    kn_buf *st[2];
    const kn_meta *sm[2] = {mm, mr};
    for (int k = 0; k < 2; k++) {
        kn_expr *si[KN_MAXDIM];
        if (!kn_dtype_is_float(sm[k]->dt) || sm[k]->ndim != 1 || (sm[k]->size[0] != 0 && sm[k]->size[0] != nc))
            return 0;
        st[k] = kn_lazy_like(c, ni, k + 1, si);
        if (st[k] == NULL)
            return PyErr_Occurred() ? -1 : 0;
        kn_expr *e;
        if (sm[k]->size[0] == 0)
            e = kn_const_f(c, cd, 0.0);
        else if (k == 0)
            e = kn_cast(c, kn_buf_load(c, p[2], si), cd);
        else
            e = kn_op2(c, KN_S_DIV, cd, kn_const_f(c, cd, 1.0),
                       kn_op1(c, KN_S_SQRT, cd, kn_op2(c, KN_S_ADD, cd, kn_cast(c, kn_buf_load(c, p[3], si), cd),
                                                      kn_const_f(c, cd, eps))));
        st[k]->body = kn_cast(c, e, sm[k]->dt);
        if (st[k]->body == NULL)
            return -1;
    }
    kn_buf *res[3] = {out, st[0], st[1]};
    return kn_set_results(c, ni, res, 3);
}

/* cumsum / cumprod along one dim: a sequential scan per row. */
int
kn_lower_scan(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL)
        return 0;
    int nd = x->ndim ? x->ndim : 0;
    int d = wrap_dim(arg(c, ni, 1)->i, nd);
    if (nd && (d < 0 || d >= nd))
        return 0;
    kn_buf *b = kn_buf_new(c, KN_B_REDUCTION, m->dt, x->ndim, x->size);
    if (b == NULL)
        return -1;
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < nd; k++)
        si[k] = k == d ? kn_var(c, KN_VAR_R(0), x->size[k]) : kn_var(c, KN_VAR_P(k), x->size[k]);
    b->acc_dt = acc_dtype((kn_rop)param, x->dt, m->dt);
    b->body = kn_cast(c, kn_buf_load(c, x, si), b->acc_dt);
    if (b->body == NULL)
        return -1;
    b->rop = (kn_rop)param;
    b->nred = 1;
    b->rsize[0] = nd ? x->size[d] : 1;
    b->scan_dim = nd ? d : -1;
    kn_step st = {0};
    st.kind = KN_ST_KERNEL;
    st.kernel = b->id;
    if (kn_add_step(c, &st) < 0)
        return -1;
    return kn_set_result(c, ni, b);
}
