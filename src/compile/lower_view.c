/* lower_view.c — view ops (see lower.c).
 *
 * Consumes: a graph node whose result views its first argument.  Produces: a
 * lazy buffer whose body loads the source at an index map (kn_view_of, which
 * records the map so kn_store_view_root can later store the viewed value
 * once).  Add a view op here (its OP line in src/graph/ops.def).
 */
#include "lower.h"
#include <string.h>
/* ---------------------------------------------------------------- views */
/* Lazy buffer for node ni whose value at idx is src at map(idx). */
int
kn_view_of(kn_ctx *c, int ni, kn_buf *src, kn_expr **srcidx, kn_buf *b)
{
    if (src->kind == KN_B_LAZY) {
        b->view_src = src->id;
        memcpy(b->view_idx, srcidx, sizeof(kn_expr *) * (size_t)src->ndim);
    }
    b->body = kn_buf_load(c, src, srcidx);
    if (b->body == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return kn_set_result(c, ni, b);
}

int
kn_lower_reshape(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    int64_t ostr[KN_MAXDIM], istr[KN_MAXDIM];
    kn_contiguous_strides(b->ndim, b->size, ostr);
    kn_contiguous_strides(x->ndim, x->size, istr);
    kn_expr *flat = kn_iconst(c, 0);
    for (int d = 0; d < b->ndim; d++)
        flat = kn_iadd(c, flat, kn_imul(c, idx[d], ostr[d]));
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        si[d] = x->size[d] <= 1 ? kn_iconst(c, 0) : kn_imod(c, kn_idiv(c, flat, istr[d]), x->size[d]);
    b->dt = x->dt;
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_permute(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *p = arg(c, ni, 1);
    KN_LAZY_START(c, ni, x && is_int_list(p) && p->n == x->ndim, b, idx);
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        int s = wrap_dim(p->items[d].i, x->ndim);
        KN_ASSERT(s >= 0 && s < x->ndim);   /* torch checked the permutation */
        si[s] = idx[d];
    }
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_transpose(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    int d0 = 0, d1 = 1;
    if (param == 0) {
        d0 = wrap_dim(arg(c, ni, 1)->i, x->ndim);
        d1 = wrap_dim(arg(c, ni, 2)->i, x->ndim);
    }
    kn_expr *si[KN_MAXDIM];   /* the output's index with d0 and d1 swapped */
    memcpy(si, idx, sizeof(kn_expr *) * x->ndim);
    if (x->ndim >= 2) {
        si[d0] = idx[d1];
        si[d1] = idx[d0];
    }
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_expand(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    if (x->ndim > b->ndim)
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        si[d] = x->size[d] == 1 ? kn_iconst(c, 0) : idx[d + b->ndim - x->ndim];
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_slice(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    kn_arg *ad = arg(c, ni, 1), *as = arg(c, ni, 2), *ast = arg(c, ni, 4);
    int d = ad->kind == KN_A_INT ? wrap_dim(ad->i, x->ndim) : 0;
    if (d < 0 || d >= x->ndim)
        return 0;
    int64_t n = x->size[d];
    int64_t start = as->kind == KN_A_INT ? as->i : 0;
    int64_t step = ast->kind == KN_A_INT ? ast->i : 1;
    if (start < 0)
        start += n;
    if (start < 0)
        start = 0;
    if (start > n)
        start = n;
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    si[d] = kn_iadd(c, kn_iconst(c, start), kn_imul(c, idx[d], step));
    return kn_view_of(c, ni, x, si, b);
}

int
kn_lower_select(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    KN_LAZY_START(c, ni, x, b, idx);
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    int64_t i = arg(c, ni, 2)->i;
    if (d < 0 || d >= x->ndim)
        return 0;
    if (i < 0)
        i += x->size[d];
    kn_expr *si[KN_MAXDIM];
    for (int k = 0, o = 0; k < x->ndim; k++)
        si[k] = k == d ? kn_iconst(c, i) : idx[o++];
    return kn_view_of(c, ni, x, si, b);
}

/* split / split_with_sizes: one lazy slice per result. */
int
kn_lower_split(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_node *n = node(c, ni);
    if (x == NULL || n->nout < 1 || x->ndim == 0)
        return 0;
    int d = wrap_dim(arg(c, ni, 2)->kind == KN_A_INT ? arg(c, ni, 2)->i : 0, x->ndim);
    if (d < 0 || d >= x->ndim)
        return 0;
    int *ids = kn_alloc(&c->arena, sizeof(int) * (size_t)n->nout);
    if (ids == NULL)
        return -1;
    int64_t off = 0;
    for (int k = 0; k < n->nout; k++) {
        kn_expr *idx[KN_MAXDIM];
        kn_buf *b = kn_lazy_like(c, ni, k, idx);
        if (b == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (b->ndim != x->ndim)
            return 0;
        kn_expr *si[KN_MAXDIM];
        for (int j = 0; j < x->ndim; j++)
            si[j] = idx[j];
        si[d] = kn_iadd(c, idx[d], kn_iconst(c, off));
        b->body = kn_buf_load(c, x, si);
        if (b->body == NULL)
            return -1;
        b->uses = 1;
        ids[k] = b->id;
        off += b->size[d];
    }
    if (off != x->size[d])
        return 0;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = n->nout;
    return 1;
}

/* as_strided is lowered only over storage kiln allocated itself (offset 0),
   where storage indices are known; anything else is an extern. */
int
kn_lower_as_strided(kn_ctx *c, int ni, int param)
{
    kn_arg *a0 = arg(c, ni, 0);
    kn_buf *x = ref_buf(c, a0);
    if (x == NULL || x->kind != KN_B_LAZY || x->body == NULL)
        return 0;
    /* only a freshly computed value (not a view of anything stored), and
       not a view of one either: a view's storage is its base's (the slice
       v[:, ::2] of a fresh v indexes v's storage; fuzzer tensor:1702321),
       which the lazy view's inlined body does not show */
    if (x->body->op == KN_S_LOAD || (a0->kind == KN_A_REF && node(c, (int)a0->i)->root >= 0 &&
                                     node(c, (int)a0->i)->root != a0->i))
        return 0;
    kn_arg *sz = arg(c, ni, 1), *st = arg(c, ni, 2), *off = arg(c, ni, 3);
    if (!is_int_list(sz) || !is_int_list(st) || sz->n != st->n)
        return 0;
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++)
        numel *= x->size[d];
    /* the fresh value must be contiguous in its own storage */
    int64_t cs[KN_MAXDIM];
    kn_contiguous_strides(x->ndim, x->size, cs);
    for (int d = 0; d < x->ndim; d++)
        if (x->size[d] > 1 && x->stride[d] != cs[d])
            return 0;
    if (kn_realize(c, x) < 0)
        return -1;
    KN_LAZY_START(c, ni, 1, b, idx);
    kn_expr *ix = kn_iconst(c, off->kind == KN_A_INT ? off->i : 0);
    int64_t hi = off->kind == KN_A_INT ? off->i : 0;
    for (int d = 0; d < sz->n; d++) {
        ix = kn_iadd(c, ix, kn_imul(c, idx[d], st->items[d].i));
        if (sz->items[d].i > 0)
            hi += (sz->items[d].i - 1) * st->items[d].i;
    }
    if (hi >= numel)
        return 0;
    b->body = kn_load(c, x->id, x->dt, ix);
    return b->body ? kn_set_result(c, ni, b) : -1;
}
