/* lower_buf.c — buffers of the lowering (see lower.c).
 *
 * Consumes: a kn_ctx being lowered.  Produces: new buffers (kn_buf_new,
 * kn_lazy_buf), schedule steps (kn_add_step), lazy buffers made stored
 * (kn_realize, kn_store_view_root), and the value of a buffer at an index
 * (kn_buf_load: inlines a lazy body, keeps index checks, reads aliases
 * through their strides).  The policy that stores a multi-use lazy value
 * instead of recomputing it (worth_storing, shared_libm) lives here.  No op
 * lowerings.
 */
#include "lower.h"
#include <string.h>
/* ---------------------------------------------------------------- buffers */
void
kn_contiguous_strides(int ndim, const int64_t *size, int64_t *stride)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= size[d] > 1 ? size[d] : 1;
    }
}

kn_buf *
kn_buf_new(kn_ctx *c, kn_bufkind kind, kn_dtype dt, int ndim, const int64_t *size)
{
    if (c->nbufs == c->bufcap) {
        int ncap = c->bufcap ? c->bufcap * 2 : 64;
        kn_buf **nb = kn_alloc(&c->arena, sizeof(kn_buf *) * (size_t)ncap);
        if (nb == NULL)
            return NULL;
        if (c->nbufs)
            memcpy(nb, c->bufs, sizeof(kn_buf *) * (size_t)c->nbufs);
        c->bufs = nb;
        c->bufcap = ncap;
    }
    kn_buf *b = kn_alloc(&c->arena, sizeof *b);
    if (b == NULL)
        return NULL;
    b->id = c->nbufs;
    b->kind = kind;
    b->dt = dt;
    b->ndim = ndim;
    if (ndim)
        memcpy(b->size, size, sizeof(int64_t) * (size_t)ndim);
    kn_contiguous_strides(ndim, b->size, b->stride);
    b->kernel = -1;
    b->arena_off = -1;
    b->base = -1;
    b->view_src = -1;
    b->inplace_of = -1;
    b->extern_index = -1;
    b->uses = 1;
    b->sym = c->cur_sym;
    b->first = b->last = -1;
    c->bufs[c->nbufs++] = b;
    return b;
}

/* A new lazy buffer of that shape; idx[d] its placeholder P(d). */
kn_buf *
kn_lazy_buf(kn_ctx *c, kn_dtype dt, int ndim, const int64_t *size, kn_expr **idx)
{
    kn_buf *b = kn_buf_new(c, KN_B_LAZY, dt, ndim, size);
    if (b == NULL)
        return NULL;
    for (int d = 0; d < ndim; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), size[d]);
    return b;
}

int
kn_add_step(kn_ctx *c, const kn_step *st)
{
    if (c->nsteps == c->stepcap) {
        int ncap = c->stepcap ? c->stepcap * 2 : 64;
        kn_step *ns = kn_alloc(&c->arena, sizeof(kn_step) * (size_t)ncap);
        if (ns == NULL)
            return -1;
        if (c->nsteps)
            memcpy(ns, c->steps, sizeof(kn_step) * (size_t)c->nsteps);
        c->steps = ns;
        c->stepcap = ncap;
    }
    c->steps[c->nsteps++] = *st;
    return 0;
}

/* 1 if the strides describe a dense, non-overlapping layout of size. */
static int
dense_layout(int ndim, const int64_t *size, const int64_t *stride)
{
    int perm[KN_MAXDIM], n = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= size[d];
        if (size[d] > 1)
            perm[n++] = d;
    }
    if (numel == 0)
        return 0;
    for (int x = 1; x < n; x++) {
        int p = perm[x], y = x - 1;
        while (y >= 0 && stride[perm[y]] > stride[p]) {
            perm[y + 1] = perm[y];
            y--;
        }
        perm[y + 1] = p;
    }
    int64_t expect = 1;
    for (int x = 0; x < n; x++) {
        if (stride[perm[x]] != expect)
            return 0;
        expect *= size[perm[x]];
    }
    return 1;
}

/* Give a lazy buffer storage: it becomes a pointwise store in the schedule.
   Layout: the one torch would produce (from the node metadata) when dense,
   else contiguous. */
int
kn_realize(kn_ctx *c, kn_buf *b)
{
    if (b->kind != KN_B_LAZY)
        return 0;
    b->kind = KN_B_POINTWISE;
    kn_step st = {0};
    st.kind = KN_ST_KERNEL;
    st.kernel = b->id;
    return kn_add_step(c, &st);
}

/* (A value with no elements takes torch's strides whatever they are: they
   address nothing, and ATen's view(dtype) checks them.) */
void
kn_set_layout_from_meta(kn_buf *b, const kn_meta *m)
{
    if (m == NULL || !m->valid || m->ndim != b->ndim)
        return;
    int64_t numel = 1;
    for (int d = 0; d < m->ndim; d++)
        numel *= m->size[d];
    if (numel == 0 || dense_layout(m->ndim, m->size, m->stride))
        memcpy(b->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
}

/* Number of distinct large stored buffers that e reads (reduction results
   and small tensors such as biases are cheap to re-read and do not count). */
static int
big_reads(kn_ctx *c, kn_expr *e, int *seen, int *nseen, int depth)
{
    if (depth > 64 || *nseen >= 8)
        return 0;
    int n = 0;
    if (e->op == KN_S_LOAD) {
        kn_buf *b = c->bufs[e->i];
        int64_t numel = 1;
        for (int d = 0; d < b->ndim; d++)
            numel *= b->size[d];
        int dup = 0;
        for (int k = 0; k < *nseen; k++)
            dup |= seen[k] == b->id;
        /* (a buffer of symbolic size counts as large at every size: the
           decision is then the same for every size of the graph) */
        if (!dup && b->kind != KN_B_REDUCTION && (numel >= 4096 || b->sym)) {
            seen[(*nseen)++] = b->id;
            n++;
        }
    }
    for (int j = 0; j < e->n; j++)
        n += big_reads(c, e->a[j], seen, nseen, depth + 1);
    return n;
}

/* A lazy value read by several consumers is stored once when recomputing it
   would re-read several large tensors (a residual stream, a gathered
   embedding) or repeat a long expression; cheap ones stay inlined (one that
   calls libm is stored on the CPU: shared_libm). */
static int
worth_storing(kn_ctx *c, kn_buf *b)
{
    if (b->uses <= 1 || b->body == NULL)
        return 0;
    if (kn_expr_size(b->body, 48) >= 40)
        return 1;
    int seen[8], nseen = 0;
    return big_reads(c, b->body, seen, &nseen, 0) >= 2;
}

/* Does e contain an index CHECK?  A bounded walk: past the budget it answers
   yes (the caller then keeps the expression, which is only slower). */
static int
has_check(kn_expr *e, int *budget)
{
    if (e == NULL)
        return 0;
    if (e->op == KN_S_CHECK || --*budget < 0)
        return 1;
    for (int k = 0; k < e->n; k++)
        if (has_check(e->a[k], budget))
            return 1;
    return 0;
}

/* Element offset of b[idx].  A dim whose term vanishes (size 1, or stride 0
   of an expanded dim) would drop its index expression, and with it an index
   CHECK inside (a[:, i] over a size-1 dim never raised); such an index is
   kept as min(idx, 0), which is 0 since a load index is never negative. */
static kn_expr *
load_address(kn_ctx *c, kn_buf *b, kn_expr *const *idx)
{
    kn_expr *ix = kn_iconst(c, b->offset);
    for (int d = 0; d < b->ndim; d++) {
        int budget = 256;
        if (b->size[d] > 1 && b->stride[d] != 0)
            ix = kn_iadd(c, ix, kn_imul(c, idx[d], b->stride[d]));
        else if (has_check(idx[d], &budget))
            ix = kn_iadd(c, ix, kn_op2(c, KN_S_MIN, KN_I64, idx[d], kn_iconst(c, 0)));
    }
    return ix;
}

/* Is x inside e?  Bounded like has_check: past the budget it answers no. */
static int
contains(kn_expr *e, kn_expr *x, int *budget)
{
    if (e == x)
        return 1;
    if (e == NULL || --*budget < 0)
        return 0;
    for (int k = 0; k < e->n; k++)
        if (contains(e->a[k], x, budget))
            return 1;
    return 0;
}

/* The first index CHECK inside e (NULL if none within the budget). */
static kn_expr *
first_check(kn_expr *e, int *budget)
{
    if (e == NULL || --*budget < 0)
        return NULL;
    if (e->op == KN_S_CHECK)
        return e;
    for (int k = 0; k < e->n; k++) {
        kn_expr *f = first_check(e->a[k], budget);
        if (f)
            return f;
    }
    return NULL;
}

/* A lazy body that never reads a dim (an expanded size-1 dim reads const 0)
   drops the index substituted for it, and an index CHECK inside with it.
   Where a checked index is not found in the loaded value r, r is kept as
   where(idx < 0, 0, r) (1 for an r of 0): the same value (a load index is
   never negative) that still evaluates the check.  A check past the search
   budget counts as lost. */
static kn_expr *
keep_checks(kn_ctx *c, kn_expr *r, kn_expr *const *idx, int ndim)
{
    for (int d = 0; r && d < ndim; d++) {
        int budget = 256, found = 4096;
        if (!has_check(idx[d], &budget))
            continue;
        budget = 256;
        kn_expr *chk = first_check(idx[d], &budget);
        if (chk && contains(r, chk, &found))
            continue;
        kn_dtype dt = (kn_dtype)r->dt;
        kn_expr *zero = kn_dtype_is_float(dt) ? kn_const_f(c, dt, 0.0) : kn_const_i(c, dt, 0);
        if (zero == r) /* where(c, 0, 0) folds to 0 (a load of zeros_like) */
            zero = kn_dtype_is_float(dt) ? kn_const_f(c, dt, 1.0) : kn_const_i(c, dt, 1);
        r = kn_op3(c, KN_S_WHERE, dt, kn_op2(c, KN_S_LT, KN_BOOL, idx[d], kn_iconst(c, 0)), zero, r);
    }
    return r;
}

/* A read of a buffer with no elements: it runs only where an index check
   fails (the index clamps to -1) or under a where() that discards it (pad),
   and the buffer's data pointer may be NULL, so it touches no memory.  Its
   value, any(idx < 0) for the checked indices, keeps their checks. */
static kn_expr *
empty_read(kn_ctx *c, kn_buf *b, kn_expr *const *idx)
{
    kn_expr *any = kn_const_i(c, KN_BOOL, 0);
    for (int d = 0; any && d < b->ndim; d++) {
        int budget = 256;
        if (has_check(idx[d], &budget))
            any = kn_op2(c, KN_S_LOR, KN_BOOL, any, kn_op2(c, KN_S_LT, KN_BOOL, idx[d], kn_iconst(c, 0)));
    }
    return kn_cast(c, any, kn_dtype_compute(b->dt));
}

static uint32_t expensive_stamp = 1;

static int
expensive_rec(kn_expr *e, uint32_t stamp, int *budget)
{
    if (e->visit == stamp || --*budget < 0)
        return 0;
    e->visit = stamp;
    switch (e->op) {
    case KN_S_EXP: case KN_S_EXP2: case KN_S_EXPM1: case KN_S_LOG: case KN_S_LOG2: case KN_S_LOG10:
    case KN_S_LOG1P: case KN_S_SIN: case KN_S_COS: case KN_S_TAN: case KN_S_ASIN: case KN_S_ACOS:
    case KN_S_ATAN: case KN_S_SINH: case KN_S_COSH: case KN_S_TANH: case KN_S_ASINH: case KN_S_ACOSH:
    case KN_S_ATANH: case KN_S_ERF: case KN_S_ERFC: case KN_S_SIGMOID: case KN_S_POW: case KN_S_ATAN2:
    case KN_S_GELU: case KN_S_GELU_TANH:
        return 1;
    default:
        break;
    }
    for (int j = 0; j < e->n; j++)
        if (expensive_rec(e->a[j], stamp, budget))
            return 1;
    return 0;
}

/* 1 if the expression computes a transcendental function. */
int
kn_expensive(kn_expr *e)
{
    int budget = 256;
    return e && expensive_rec(e, ++expensive_stamp, &budget);
}

/* b is a lazy view of a lazy value: store the value it views (once, in the
   kernel that computes it) and rebuild b as a view of that storage.  Many
   views of one computed value (reshapes feeding several matmuls) then share
   one store instead of each recomputing it. */
int
kn_store_view_root(kn_ctx *c, kn_buf *b)
{
    KN_ASSERT(b->view_src >= 0 && b->view_src < c->nbufs);
    kn_buf *src = c->bufs[b->view_src];
    if (src->kind == KN_B_LAZY && src->view_src >= 0) {
        if (kn_store_view_root(c, src) < 0)
            return -1;
        /* src is now a load of the stored root (rebuild b through it, so it
           can alias that storage), or its root stayed lazy (b is fine) */
        if (src->kind == KN_B_LAZY && src->view_src >= 0)
            return 0;
    } else if (src->kind == KN_B_LAZY) {
        if (src->body == NULL || src->body->op == KN_S_LOAD)
            return 0; /* a plain view of stored data: nothing to share */
        if (kn_realize(c, src) < 0)
            return -1;
    }
    kn_expr *body = kn_buf_load(c, src, b->view_idx);
    if (body == NULL)
        return -1;
    b->body = body;
    b->view_src = -1;
    return 0;
}

/* A lazy value that calls libm (exp, log, tanh, erf, ...) and is read by
   several consumers is stored once, so every consumer reads the same bits.
   On the CPU a vectorised loop calls libmvec's vector functions and its
   scalar tail, or a scalar reduction loop elsewhere, calls the scalar ones;
   the two may round differently (by an ulp), so a value recomputed in two
   kernels could differ from itself (amin's backward compares amin(log(a))
   with the stored log(a): NaN gradients).  Exact IEEE ops are the same
   everywhere and stay inlined; CUDA's math functions are the same in every
   kernel, so the CUDA target keeps recomputing. */
static int
shared_libm(kn_ctx *c, kn_buf *b)
{
    return !c->cuda && b->uses > 1 && kn_expensive(b->body);
}

kn_expr *
kn_buf_load(kn_ctx *c, kn_buf *b, kn_expr *const *idx)
{
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] == 0)
            return empty_read(c, b, idx);
    if (b->kind == KN_B_LAZY && worth_storing(c, b)) {
        if (kn_realize(c, b) < 0)
            return NULL;
    }
    if (b->kind == KN_B_LAZY && shared_libm(c, b)) {
        if ((b->view_src >= 0 ? kn_store_view_root(c, b) : kn_realize(c, b)) < 0)
            return NULL;
    }
    if (b->kind == KN_B_LAZY) {
        kn_subst s;
        memset(&s, 0, sizeof s);
        for (int d = 0; d < b->ndim; d++)
            s.to[KN_VAR_P(d)] = idx[d];
        return keep_checks(c, kn_substitute(c, b->body, &s), idx, b->ndim);
    }
    if (b->kind == KN_B_ALIAS) {
        /* a strided view of stored data: read its base through the view */
        KN_ASSERT_NULL(b->base >= 0 && b->base < c->nbufs);
        kn_buf *base = c->bufs[b->base];
        return kn_load(c, base->id, base->dt, load_address(c, b, idx));
    }
    return kn_load(c, b->id, b->dt, load_address(c, b, idx));
}
