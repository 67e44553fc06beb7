/* lower_move.c — data movement (see lower.c): cat, pad, flip, repeat,
 * index tensors (gather, index_select, embedding, index.Tensor), pooling
 * windows, slice/select scatters.
 *
 * Consumes: a graph node.  Produces: a lazy buffer (two for max_pool2d)
 * whose body reads its inputs at computed indices.  Indices read from index
 * tensors are CHECKed (an out-of-range value is raised after the kernel,
 * as ATen raises) and clamped, so no read leaves its buffer.  Add such an op
 * here (its OP line in src/graph/ops.def).
 */
#include "lower.h"
#include <math.h>
#include <string.h>
/* ---------------------------------------------------------------- data movement */
int
kn_lower_cat(kn_ctx *c, int ni, int param)
{
    kn_arg *ts = arg(c, ni, 0);
    KN_LAZY_START(c, ni, ts->kind == KN_A_LIST, b, idx);
    int d = wrap_dim(arg(c, ni, 1)->kind == KN_A_INT ? arg(c, ni, 1)->i : 0, b->ndim);
    if (d < 0 || d >= b->ndim)
        return 0;
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *val = NULL;
    int64_t off = 0;
    /* one part per input (a fixed-size array once dropped the inputs past
       its end: a wrong result) */
    kn_expr **parts = kn_alloc(&c->arena, sizeof(kn_expr *) * (size_t)(ts->n + 1));
    int64_t *ends = kn_alloc(&c->arena, sizeof(int64_t) * (size_t)(ts->n + 1));
    if (parts == NULL || ends == NULL)
        return -1;
    int np = 0;
    for (int k = 0; k < ts->n; k++) {
        kn_buf *x = ref_buf(c, &ts->items[k]);
        if (x == NULL)
            return 0;
        if (x->ndim == 1 && x->size[0] == 0)
            continue; /* legacy empty tensors are skipped by cat */
        if (x->ndim != b->ndim)
            return 0;
        kn_expr *si[KN_MAXDIM];
        for (int j = 0; j < b->ndim; j++)
            si[j] = idx[j];
        if (x->size[d] == 0)
            continue;
        si[d] = kn_clamp_index(c, kn_iadd(c, idx[d], kn_iconst(c, -off)), x->size[d]);
        parts[np] = kn_cast(c, kn_buf_load(c, x, si), cd);
        if (parts[np] == NULL)
            return -1;
        off += x->size[d];
        ends[np++] = off;
    }
    if (np == 0 || off != b->size[d])
        return 0; /* the parts do not cover the result: ATen's cat */
    val = parts[np - 1];
    for (int k = np - 2; k >= 0; k--) {
        kn_expr *in = kn_op2(c, KN_S_LT, KN_BOOL, idx[d], kn_iconst(c, ends[k]));
        val = kn_op3(c, KN_S_WHERE, cd, in, parts[k], val);
    }
    b->body = kn_cast(c, val, b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

int
kn_lower_pad(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *pad = arg(c, ni, 1), *v = arg(c, ni, 2);
    KN_LAZY_START(c, ni, x && is_int_list(pad) && pad->n % 2 == 0 && pad->n / 2 <= x->ndim, b, idx);
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *si[KN_MAXDIM], *valid = kn_const_i(c, KN_BOOL, 1);
    for (int d = 0; d < x->ndim; d++)
        si[d] = idx[d];
    for (int k = 0; k < pad->n / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t lo = pad->items[2 * k].i;
        kn_expr *raw = kn_iadd(c, idx[d], kn_iconst(c, -lo));
        valid = kn_op2(c, KN_S_LAND, KN_BOOL, valid, kn_in_bounds(c, raw, x->size[d]));
        si[d] = kn_clamp_index(c, raw, x->size[d]);
    }
    kn_operand fill;
    kn_arg zero = {KN_A_INT, 0, 0, 0, NULL, NULL};
    int r = kn_make_operand(c, v->kind == KN_A_NONE ? &zero : v, b->ndim, b->size, idx, &fill);
    if (r <= 0)
        return r;
    kn_expr *xv = kn_cast(c, kn_buf_load(c, x, si), cd);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, valid, xv, kn_cast(c, fill.e, cd)), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* Index value loaded from an index tensor: checked (a value outside
   [0, n), or [-n, n) when `code` has KN_E_WRAP, is recorded as error `code`
   and raised after the kernel), wrapped for negatives when allowed, and
   clamped into [0, n) so a bad index can never read outside the buffer. */
static kn_expr *
index_value(kn_ctx *c, kn_buf *ib, kn_expr *const *iidx, int64_t n, int code)
{
    kn_expr *v = kn_cast(c, kn_buf_load(c, ib, iidx), KN_I64);
    if (v == NULL)
        return NULL;
    v = kn_op3(c, KN_S_CHECK, KN_I64, v, kn_iconst(c, n), kn_iconst(c, code));
    if (code & KN_E_WRAP) {
        kn_expr *neg = kn_op2(c, KN_S_LT, KN_BOOL, v, kn_iconst(c, 0));
        v = kn_op3(c, KN_S_WHERE, KN_I64, neg, kn_op2(c, KN_S_ADD, KN_I64, v, kn_iconst(c, n)), v);
    }
    return kn_clamp_index(c, v, n);
}

static int
is_index_dtype(kn_buf *b)
{
    return b->dt == KN_I64 || b->dt == KN_I32;
}

static int64_t
buf_numel(const kn_buf *b)
{
    int64_t n = 1;
    for (int d = 0; d < b->ndim; d++)
        n *= b->size[d];
    return n;
}

/* An index op whose result is empty (a 0-size dim of the data) while its
   index tensor is not: kiln's CHECK runs per element read and would never
   run, where ATen checks every index.  Such an op declines (ATen's call). */
static int
checks_unread(const kn_buf *b, const kn_buf *ib)
{
    return buf_numel(b) == 0 && buf_numel(ib) > 0;
}

int
kn_lower_gather(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 2));
    KN_LAZY_START(c, ni, x && ib && is_index_dtype(ib) && ib->ndim == x->ndim, b, idx);
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    if (d < 0 || (x->ndim && d >= x->ndim))
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    if (x->ndim)
        si[d] = index_value(c, ib, idx, x->size[d], KN_E_GATHER | d << 8);
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_index_select(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 2));
    KN_LAZY_START(c, ni, x && ib && is_index_dtype(ib) && ib->ndim <= 1 && x->ndim >= 1, b, idx);
    if (checks_unread(b, ib))
        return 0;
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    kn_expr *ii[1] = {idx[d]};
    /* ATen's CPU kernel words dim 1 of a tensor of 2+ dims its own way */
    si[d] = index_value(c, ib, ii, x->size[d], d == 1 && x->ndim > 1 ? KN_E_DATA_BOUNDS : KN_E_INDEX_SELF);
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_embedding(kn_ctx *c, int ni, int param)
{
    kn_buf *w = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 1));
    KN_LAZY_START(c, ni, w && ib && w->ndim == 2 && is_index_dtype(ib), b, idx);
    if (checks_unread(b, ib))
        return 0;
    kn_expr *si[2];
    si[0] = index_value(c, ib, idx, w->size[0], KN_E_INDEX_SELF);
    si[1] = idx[b->ndim - 1];
    return kn_view_of(c, ni, w, si, b);
}

int
kn_lower_flip(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *dims = arg(c, ni, 1);
    KN_LAZY_START(c, ni, x && is_int_list(dims), b, idx);
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    for (int k = 0; k < dims->n; k++) {
        int d = wrap_dim(dims->items[k].i, x->ndim);
        if (d < 0 || d >= x->ndim)
            return 0;
        si[d] = kn_iadd(c, kn_iconst(c, x->size[d] - 1), kn_imul(c, idx[d], -1));
    }
    return kn_view_of(c, ni, x, si, b);
}

/* One tap of a pooling window: x (3-D or 4-D) at spatial position (ih, iw)
   with the leading dims of idx, read through clamped indices; *valid says
   whether (ih, iw) lies inside x. */
static kn_expr *
window_tap(kn_ctx *c, kn_buf *x, kn_expr *const *idx, kn_expr *ih, kn_expr *iw, kn_dtype cd, kn_expr **valid)
{
    int hd = x->ndim - 2, wd = x->ndim - 1;
    *valid = kn_op2(c, KN_S_LAND, KN_BOOL, kn_in_bounds(c, ih, x->size[hd]), kn_in_bounds(c, iw, x->size[wd]));
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < hd; d++)
        si[d] = idx[d];
    si[hd] = kn_clamp_index(c, ih, x->size[hd]);
    si[wd] = kn_clamp_index(c, iw, x->size[wd]);
    return kn_cast(c, kn_buf_load(c, x, si), cd);
}

/* One or two ints from an int-list argument (a single value means both). */
static int
pair_arg(const kn_arg *a, int64_t dflt0, int64_t dflt1, int64_t out[2])
{
    if (a->kind == KN_A_INT) {
        out[0] = out[1] = a->i;
        return 1;
    }
    if (a->kind == KN_A_NONE || (a->kind == KN_A_LIST && a->n == 0)) {
        out[0] = dflt0;
        out[1] = dflt1;
        return 1;
    }
    if (!is_int_list(a) || a->n > 2)
        return 0;
    out[0] = a->items[0].i;
    out[1] = a->items[a->n - 1].i;
    return 1;
}

/* max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode):
   the window is unrolled; values are a NaN-propagating max, indices follow
   torch's scan (first strict maximum, a NaN takes over).  Either result is a
   lazy buffer, so pooling fuses with the activation before it and an unused
   index output costs nothing. */
int
kn_lower_max_pool2d(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m0 = out_meta(c, ni, 0), *m1 = out_meta(c, ni, 1);
    if (x == NULL || m0 == NULL || m1 == NULL || (x->ndim != 3 && x->ndim != 4) || !kn_dtype_is_float(x->dt))
        return 0;
    int64_t k[2], st[2], pd[2], dl[2];
    if (!pair_arg(arg(c, ni, 1), 1, 1, k) || !pair_arg(arg(c, ni, 2), k[0], k[1], st) ||
        !pair_arg(arg(c, ni, 3), 0, 0, pd) || !pair_arg(arg(c, ni, 4), 1, 1, dl))
        return 0;
    if (k[0] * k[1] > 64 || k[0] < 1 || k[1] < 1)
        return 0;
    int hd = x->ndim - 2, wd = x->ndim - 1;
    int64_t W = x->size[wd];
    kn_expr *idx[KN_MAXDIM], *idx2[KN_MAXDIM];
    kn_buf *vb;
    int r = kn_lazy_start(c, ni, &vb, idx, NULL, 0, NULL, 0);
    if (r <= 0)
        return r;
    kn_buf *ib = kn_lazy_like(c, ni, 1, idx2);
    if (ib == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (vb->ndim != x->ndim)
        return 0;
    kn_dtype cd = kn_dtype_compute(x->dt);
    kn_expr *best = kn_const_f(c, cd, -INFINITY), *bidx = kn_iconst(c, -1);
    kn_expr *vmax = best;
    for (int64_t kh = 0; kh < k[0]; kh++) {
        for (int64_t kw = 0; kw < k[1]; kw++) {
            kn_expr *ih = kn_iadd(c, kn_imul(c, idx[hd], st[0]), kn_iconst(c, kh * dl[0] - pd[0]));
            kn_expr *iw = kn_iadd(c, kn_imul(c, idx[wd], st[1]), kn_iconst(c, kw * dl[1] - pd[1]));
            kn_expr *valid, *v = window_tap(c, x, idx, ih, iw, cd, &valid);
            if (v == NULL)
                return -1;
            kn_expr *vv = kn_op3(c, KN_S_WHERE, cd, valid, v, kn_const_f(c, cd, -INFINITY));
            vmax = kn_op2(c, KN_S_MAX, cd, vmax, vv);
            kn_expr *better = kn_op2(c, KN_S_LOR, KN_BOOL, kn_op2(c, KN_S_GT, KN_BOOL, v, best),
                                     kn_op2(c, KN_S_LOR, KN_BOOL, kn_op1(c, KN_S_ISNAN, KN_BOOL, v),
                                            kn_op2(c, KN_S_LT, KN_BOOL, bidx, kn_iconst(c, 0))));
            kn_expr *take = kn_op2(c, KN_S_LAND, KN_BOOL, valid, better);
            kn_expr *pos = kn_iadd(c, kn_imul(c, ih, W), iw);
            best = kn_op3(c, KN_S_WHERE, cd, take, v, best);
            bidx = kn_op3(c, KN_S_WHERE, KN_I64, take, pos, bidx);
        }
    }
    vb->body = kn_cast(c, vmax, vb->dt);
    /* the index body is built over the value buffer's placeholders, which
       are the same variables (same output shape) */
    ib->body = kn_cast(c, bidx, ib->dt);
    if (vb->body == NULL || ib->body == NULL)
        return -1;
    return kn_set_results2(c, ni, vb, ib);
}

/* avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad,
   divisor_override): the window sum, unrolled, over the divisor. */
int
kn_lower_avg_pool2d(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    if (x == NULL || (x->ndim != 3 && x->ndim != 4) || !kn_dtype_is_float(x->dt))
        return 0;
    int64_t k[2], st[2], pd[2];
    if (!pair_arg(arg(c, ni, 1), 1, 1, k) || !pair_arg(arg(c, ni, 2), k[0], k[1], st) ||
        !pair_arg(arg(c, ni, 3), 0, 0, pd) || k[0] * k[1] > 64 || k[0] < 1 || k[1] < 1)
        return 0;
    kn_arg *ceil = arg(c, ni, 4), *cip = arg(c, ni, 5), *dov = arg(c, ni, 6);
    if (ceil->kind == KN_A_BOOL && ceil->i)
        return 0; /* windows may run past the padding: divisor rules differ */
    int include_pad = cip->kind == KN_A_BOOL ? (int)cip->i : 1;
    if (dov->kind != KN_A_NONE && dov->kind != KN_A_INT)
        return 0;
    int hd = x->ndim - 2, wd = x->ndim - 1;
    KN_LAZY_START(c, ni, 1, b, idx);
    if (b->ndim != x->ndim)
        return 0;
    kn_dtype cd = kn_dtype_compute(x->dt);
    kn_expr *sum = kn_const_f(c, cd, 0), *count = kn_iconst(c, 0);
    for (int64_t kh = 0; kh < k[0]; kh++) {
        for (int64_t kw = 0; kw < k[1]; kw++) {
            kn_expr *ih = kn_iadd(c, kn_imul(c, idx[hd], st[0]), kn_iconst(c, kh - pd[0]));
            kn_expr *iw = kn_iadd(c, kn_imul(c, idx[wd], st[1]), kn_iconst(c, kw - pd[1]));
            kn_expr *valid, *v = window_tap(c, x, idx, ih, iw, cd, &valid);
            if (v == NULL)
                return -1;
            sum = kn_op2(c, KN_S_ADD, cd, sum, kn_op3(c, KN_S_WHERE, cd, valid, v, kn_const_f(c, cd, 0)));
            count = kn_op2(c, KN_S_ADD, KN_I64, count, kn_cast(c, valid, KN_I64));
        }
    }
    kn_expr *div;
    if (dov->kind == KN_A_INT)
        div = kn_const_f(c, cd, (double)dov->i);
    else if (include_pad)
        div = kn_const_f(c, cd, (double)(k[0] * k[1]));
    else
        div = kn_cast(c, count, cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_DIV, cd, sum, div), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* repeat(x, repeats): output index modulo the input size, per dim. */
int
kn_lower_repeat(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    if (b->ndim < x->ndim)
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        int od = d + b->ndim - x->ndim;
        if (x->size[d] == 0)
            return 0;
        si[d] = kn_imod(c, idx[od], x->size[d]);
    }
    return kn_view_of(c, ni, x, si, b);
}

/* slice_scatter(input, src, dim, start, end, step): input with the slice
   replaced by src, as one lazy select per element. */
int
kn_lower_slice_scatter(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *src = ref_buf(c, arg(c, ni, 1));
    KN_LAZY_START(c, ni, x && src && src->ndim == x->ndim && x->ndim > 0, b, idx);
    kn_arg *ad = arg(c, ni, 2), *as = arg(c, ni, 3), *ast = arg(c, ni, 5);
    int d = wrap_dim(ad->kind == KN_A_INT ? ad->i : 0, x->ndim);
    if (d < 0 || d >= x->ndim || (as->kind != KN_A_INT && as->kind != KN_A_NONE))
        return 0;
    int64_t n = x->size[d], start = as->kind == KN_A_INT ? as->i : 0, step = ast->kind == KN_A_INT ? ast->i : 1;
    if (start < 0)
        start += n;
    if (start < 0)
        start = 0;
    if (step < 1 || src->size[d] == 0)
        return src->size[d] == 0 ? kn_cast_of_arg(c, ni, 0) : 0;
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *rel = kn_iadd(c, idx[d], kn_iconst(c, -start));
    kn_expr *in = kn_op2(c, KN_S_LAND, KN_BOOL, kn_op2(c, KN_S_GE, KN_BOOL, rel, kn_iconst(c, 0)),
                         kn_op2(c, KN_S_LT, KN_BOOL, rel, kn_iconst(c, src->size[d] * step)));
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    if (step > 1) {
        kn_expr *q = kn_op2(c, KN_S_FLOORDIV, KN_I64, rel, kn_iconst(c, step));
        in = kn_op2(c, KN_S_LAND, KN_BOOL, in,
                    kn_op2(c, KN_S_EQ, KN_BOOL, kn_op2(c, KN_S_REM, KN_I64, rel, kn_iconst(c, step)), kn_iconst(c, 0)));
        si[d] = kn_clamp_index(c, q, src->size[d]);
    } else {
        si[d] = kn_clamp_index(c, rel, src->size[d]);
    }
    kn_expr *xv = kn_cast(c, kn_buf_load(c, x, idx), cd), *sv = kn_cast(c, kn_buf_load(c, src, si), cd);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, in, sv, xv), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* select_scatter(input, src, dim, index): input with one index along dim
   replaced by src. */
int
kn_lower_select_scatter(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *src = ref_buf(c, arg(c, ni, 1));
    KN_LAZY_START(c, ni, x && src && src->ndim + 1 == x->ndim, b, idx);
    int d = wrap_dim(arg(c, ni, 2)->i, x->ndim);
    int64_t i = arg(c, ni, 3)->i;
    if (d < 0 || d >= x->ndim)
        return 0;
    if (i < 0)
        i += x->size[d];
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *si[KN_MAXDIM];
    for (int k = 0, o = 0; k < x->ndim; k++)
        if (k != d)
            si[o++] = idx[k];
    kn_expr *hit = kn_op2(c, KN_S_EQ, KN_BOOL, idx[d], kn_iconst(c, i));
    kn_expr *xv = kn_cast(c, kn_buf_load(c, x, idx), cd), *sv = kn_cast(c, kn_buf_load(c, src, si), cd);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, hit, sv, xv), b->dt);
    return b->body ? kn_set_result(c, ni, b) : -1;
}

/* index.Tensor(x, [None | index tensor, ...]) with integer index tensors. */
int
kn_lower_index(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *il = arg(c, ni, 1);
    if (x == NULL || il->kind != KN_A_LIST || il->n > x->ndim)
        return 0;
    kn_buf *ibs[KN_MAXDIM] = {0};
    int first = -1, last = -1, nb = 0;
    for (int k = 0; k < il->n; k++) {
        if (il->items[k].kind == KN_A_NONE)
            continue;
        kn_buf *ib = ref_buf(c, &il->items[k]);
        if (ib == NULL || !is_index_dtype(ib))
            return 0;
        ibs[k] = ib;
        if (first < 0)
            first = k;
        last = k;
        if (ib->ndim > nb)
            nb = ib->ndim;
    }
    if (first < 0)
        return 0;
    int adjacent = 1;
    for (int k = first; k <= last; k++)
        if (ibs[k] == NULL)
            adjacent = 0;
    KN_LAZY_START(c, ni, 1, b, idx);
    for (int k = first; k <= last; k++)
        if (ibs[k] && checks_unread(b, ibs[k]))
            return 0; /* (ATen raises when an indexed dim has size 0) */
    int bstart = adjacent ? first : 0;  /* position of the broadcast dims in the output */
    kn_expr *si[KN_MAXDIM];
    int o = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k < il->n && ibs[k]) {
            kn_buf *ib = ibs[k];
            kn_expr *ii[KN_MAXDIM];
            for (int j = 0; j < ib->ndim; j++) {
                int od = bstart + j + nb - ib->ndim;
                ii[j] = ib->size[j] == 1 ? kn_iconst(c, 0) : idx[od];
            }
            /* ATen names the position among the index tensors */
            int pos = 0;
            for (int j = 0; j < k; j++)
                pos += ibs[j] != NULL;
            si[k] = index_value(c, ib, ii, x->size[k], KN_E_INDEX | KN_E_WRAP | pos << 8);
        } else {
            if (adjacent && o == bstart)
                o += nb;
            if (!adjacent && o == 0)
                o = nb;
            si[k] = idx[o++];
        }
    }
    if (o > b->ndim)
        return 0;
    return kn_view_of(c, ni, x, si, b);
}
