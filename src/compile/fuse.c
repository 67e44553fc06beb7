/* fuse.c — group realized buffers into kernels.
 *
 * Consumes: the step list from lowering (one KERNEL step per realized buffer,
 * EXTERN steps between).  Produces: kn_kernel groups and a rewritten step list
 * with one KERNEL step per group.
 *
 * A kernel has an outer iteration space O and (when it holds a reduction) an
 * inner space I.  Members run in order inside one outer loop nest:
 *   - a reduction with output space O over reduction space I,
 *   - a pointwise store over O ++ I ("inner", its own inner loop) or over O
 *     ("outer", computed once per outer point),
 * so softmax, layer_norm and RMSNorm — reductions followed by the pointwise
 * work that uses them — are one kernel.  A pure pointwise kernel has a space F
 * that a joining reduction may split into O ++ I.  A member may read a buffer
 * stored earlier in the same kernel only at exactly the index that buffer was
 * stored at (equal canonical index expressions), which keeps the fused loop
 * order equivalent to running the members one after another; in a kernel over
 * a single element (no loop, so every read is computed before the stores) not
 * at all.
 */
#include "../kiln.h"
#include <string.h>

/* squeezed sizes: the dims of extent > 1 */
static int
squeeze(int n, const int64_t *size, int64_t *out)
{
    int k = 0;
    for (int d = 0; d < n; d++)
        if (size[d] != 1)
            out[k++] = size[d];
    return k;
}

static int
same_dims(int na, const int64_t *a, int nb, const int64_t *b)
{
    return na == nb && (na == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)na) == 0);
}

typedef enum { ROLE_INNER, ROLE_OUTER, ROLE_REDUCE, ROLE_SCAN } role;

static int
is_scan(const kn_buf *b)
{
    return b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD);
}

/* The role buffer b plays in kernel k (whose space is final). */
static role
member_role(const kn_kernel *k, const kn_buf *b)
{
    if (is_scan(b))
        return ROLE_SCAN;
    if (b->kind == KN_B_REDUCTION)
        return ROLE_REDUCE;
    int64_t s[KN_MAXDIM];
    int n = squeeze(b->ndim, b->size, s);
    if (k->ninner > 0 && same_dims(n, s, k->nouter, k->outer))
        return ROLE_OUTER;
    return ROLE_INNER;
}

/* Fill s so that b's placeholders become kernel k's loop variables. */
static void
member_positions(const kn_kernel *k, const kn_buf *b, kn_subst *s)
{
    memset(s, 0, sizeof *s);
    role r = member_role(k, b);
    int pos = 0;
    if (r == ROLE_SCAN)
        return; /* scans are alone in their kernel; codegen numbers them */
    /* entries hold 1 + the position in the concatenated O ++ I list;
       kn_member_map turns them into variables */
    for (int d = 0; d < b->ndim; d++) {
        if (b->size[d] == 1)
            continue;
        s->to[KN_VAR_P(d)] = (kn_expr *)(intptr_t)(pos + 1);
        pos++;
    }
    if (r == ROLE_REDUCE) {
        int rp = 0;
        for (int d = 0; d < b->nred; d++) {
            if (b->rsize[d] == 1)
                continue;
            s->to[KN_VAR_R(d)] = (kn_expr *)(intptr_t)(k->nouter + rp + 1);
            rp++;
        }
    }
}

/* Kernel variable for position p of O ++ I. */
static kn_expr *
kvar(kn_ctx *c, const kn_kernel *k, int p)
{
    if (k->permuted)
        p = k->perm[p];
    if (p < k->nouter)
        return kn_var(c, KN_VAR_O(p), k->outer[p]);
    return kn_var(c, KN_VAR_I(p - k->nouter), k->inner[p - k->nouter]);
}

/* Substitution map from b's placeholders to kernel vars.  0 or -1. */
int
kn_member_map(kn_ctx *c, const kn_kernel *k, const kn_buf *b, kn_subst *s)
{
    member_positions(k, b, s);
    for (int v = 0; v < KN_NVARS; v++) {
        if (s->to[v] == NULL)
            continue;
        int p = (int)(intptr_t)s->to[v] - 1;
        s->to[v] = kvar(c, k, p);
        if (s->to[v] == NULL)
            return -1;
    }
    return 0;
}

/* b's body over kernel k's loop variables, or NULL. */
kn_expr *
kn_member_body(kn_ctx *c, const kn_kernel *k, const kn_buf *b)
{
    kn_subst s;
    if (kn_member_map(c, k, b, &s) < 0)
        return NULL;
    return kn_substitute(c, b->body, &s);
}

/* Store index of b (in kernel vars). */
kn_expr *
kn_store_index(kn_ctx *c, const kn_kernel *k, const kn_buf *b)
{
    kn_subst s;
    if (kn_member_map(c, k, b, &s) < 0)
        return NULL;
    kn_expr *ix = kn_iconst(c, 0);
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] > 1)
            ix = kn_iadd(c, ix, kn_imul(c, s.to[KN_VAR_P(d)], b->stride[d]));
    return ix;
}

/* ---------------------------------------------------------------- grouping */
static int
kernel_add(kn_ctx *c, kn_kernel *k, int bid)
{
    if (k->nmembers == k->cap) {
        int ncap = k->cap ? k->cap * 2 : 8;
        int *nm = kn_alloc(&c->arena, sizeof(int) * (size_t)ncap);
        if (nm == NULL)
            return -1;
        if (k->nmembers)
            memcpy(nm, k->members, sizeof(int) * (size_t)k->nmembers);
        k->members = nm;
        k->cap = ncap;
    }
    k->members[k->nmembers++] = bid;
    c->bufs[bid]->kernel = (int)(k - c->kernels);
    return 0;
}

static int in_kernel(kn_ctx *c, const kn_kernel *k, int bid)
{
    return c->bufs[bid]->kernel == (int)(k - c->kernels) && bid >= 0;
}

typedef struct {
    kn_ctx *c;
    const kn_kernel *k;
    uint32_t gen;
    int ok;
    int scalar;   /* the kernel has no loop: no read of its own stores */
} depcheck;

static void
check_loads(depcheck *dc, kn_expr *e)
{
    if (!dc->ok || e->mark == (int)dc->gen)
        return;
    e->mark = (int)dc->gen;
    if (e->op == KN_S_LOAD && in_kernel(dc->c, dc->k, (int)e->i)) {
        kn_buf *p = dc->c->bufs[e->i];
        if (is_scan(p)) {
            dc->ok = 0;
            return;
        }
        kn_expr *st = kn_store_index(dc->c, dc->k, p);
        if (st != e->a[0] || dc->scalar)
            dc->ok = 0;
    }
    for (int j = 0; j < e->n; j++)
        check_loads(dc, e->a[j]);
}

static uint32_t gen_counter = 1000;

/* Would b's loads of buffers stored by kernel k be at their store indices?
   In a pointwise kernel over a single element (0-d values, all dims of
   extent 1) there is no inner loop, and code generation computes every
   member's loop-invariant reads before the first store: there a member
   never reads what another stores (it starts a kernel of its own). */
static int
deps_ok(kn_ctx *c, kn_kernel *k, kn_buf *b)
{
    kn_expr *body = kn_member_body(c, k, b);
    if (body == NULL)
        return -1;
    depcheck dc = {c, k, ++gen_counter, 1, !k->has_reduction && k->nouter == 0 && k->ninner == 0};
    check_loads(&dc, body);
    return dc.ok;
}

/* Try to add b to k, adjusting k's space.  1 joined, 0 not, -1 error. */
static int
try_join(kn_ctx *c, kn_kernel *k, kn_buf *b)
{
    if (is_scan(b) || k->nmembers == 0)
        return 0;
    if (is_scan(c->bufs[k->members[0]]))
        return 0;
    kn_kernel save = *k;
    int64_t s[KN_MAXDIM], r[KN_MAXDIM];
    int ns = squeeze(b->ndim, b->size, s), ok = 0;
    if (b->kind == KN_B_REDUCTION) {
        int nr = squeeze(b->nred, b->rsize, r);
        if (nr == 0)
            return 0;
        if (k->has_reduction) {
            ok = same_dims(ns, s, k->nouter, k->outer) && same_dims(nr, r, k->ninner, k->inner);
        } else {
            /* pure pointwise space F = outer: split it as s ++ r, or extend */
            int64_t f[2 * KN_MAXDIM];
            if (ns + nr <= 2 * KN_MAXDIM) {
                memcpy(f, s, sizeof(int64_t) * (size_t)ns);
                memcpy(f + ns, r, sizeof(int64_t) * (size_t)nr);
            }
            if (ns + nr <= KN_MAXDIM && same_dims(ns + nr, f, k->nouter, k->outer)) {
                ok = 1;
            } else if (same_dims(ns, s, k->nouter, k->outer)) {
                ok = 1;
            }
            if (ok) {
                k->nouter = ns;
                memcpy(k->outer, s, sizeof(int64_t) * (size_t)ns);
                k->ninner = nr;
                memcpy(k->inner, r, sizeof(int64_t) * (size_t)nr);
                k->has_reduction = 1;
                /* members that were over F must now be inner or outer members */
                for (int j = 0; j < k->nmembers && ok; j++) {
                    kn_buf *m = c->bufs[k->members[j]];
                    int64_t ms[KN_MAXDIM];
                    int mn = squeeze(m->ndim, m->size, ms);
                    if (!same_dims(mn, ms, ns, s) && !(ns + nr == mn && same_dims(mn, ms, ns + nr, f)))
                        ok = 0;
                }
            }
        }
    } else {
        if (k->has_reduction) {
            int64_t f[2 * KN_MAXDIM];
            memcpy(f, k->outer, sizeof(int64_t) * (size_t)k->nouter);
            memcpy(f + k->nouter, k->inner, sizeof(int64_t) * (size_t)k->ninner);
            ok = same_dims(ns, s, k->nouter + k->ninner, f) || same_dims(ns, s, k->nouter, k->outer);
        } else {
            ok = same_dims(ns, s, k->nouter, k->outer);
        }
    }
    if (ok) {
        int d = deps_ok(c, k, b);
        if (d < 0)
            return -1;
        ok = d;
    }
    if (!ok) {
        *k = save;
        return 0;
    }
    return kernel_add(c, k, b->id) < 0 ? -1 : 1;
}

static kn_kernel *
new_kernel(kn_ctx *c, kn_buf *b)
{
    if (c->nkernels == c->kcap) {
        int ncap = c->kcap ? c->kcap * 2 : 32;
        kn_kernel *nk = kn_alloc(&c->arena, sizeof(kn_kernel) * (size_t)ncap);
        if (nk == NULL)
            return NULL;
        if (c->nkernels)
            memcpy(nk, c->kernels, sizeof(kn_kernel) * (size_t)c->nkernels);
        c->kernels = nk;
        c->kcap = ncap;
    }
    kn_kernel *k = &c->kernels[c->nkernels++];
    memset(k, 0, sizeof *k);
    if (is_scan(b)) {
        /* outer: all dims but the scanned one; inner: the scan */
        for (int d = 0; d < b->ndim; d++)
            if (d != b->scan_dim && b->size[d] != 1)
                k->outer[k->nouter++] = b->size[d];
        if (b->scan_dim >= 0 && b->size[b->scan_dim] != 1)
            k->inner[k->ninner++] = b->size[b->scan_dim];
        k->has_reduction = 1;
    } else if (b->kind == KN_B_REDUCTION) {
        k->nouter = squeeze(b->ndim, b->size, k->outer);
        k->ninner = squeeze(b->nred, b->rsize, k->inner);
        k->has_reduction = 1;
    } else {
        k->nouter = squeeze(b->ndim, b->size, k->outer);
    }
    if (kernel_add(c, k, b->id) < 0)
        return NULL;
    return k;
}

/* A pure pointwise kernel iterates its dims in the storage order of what it
   stores (outermost = largest stride), so a channels-last result is written,
   and its channels-last inputs read, contiguously in the inner loop. */
static void
order_by_storage(kn_ctx *c, kn_kernel *k)
{
    kn_buf *b = c->bufs[k->members[0]];
    int64_t st[KN_MAXDIM];
    int n = 0;
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] != 1)
            st[n++] = b->stride[d];
    if (n != k->nouter || n < 2)
        return;
    int order[KN_MAXDIM];   /* loop position -> logical position */
    for (int q = 0; q < n; q++)
        order[q] = q;
    for (int x = 1; x < n; x++) {  /* stable sort by decreasing stride */
        int v = order[x], y = x - 1;
        while (y >= 0 && st[order[y]] < st[v]) {
            order[y + 1] = order[y];
            y--;
        }
        order[y + 1] = v;
    }
    int identity = 1;
    for (int q = 0; q < n; q++)
        identity &= order[q] == q;
    if (identity)
        return;
    int64_t ext[KN_MAXDIM];
    for (int q = 0; q < n; q++) {
        ext[q] = k->outer[order[q]];
        k->perm[order[q]] = q;
    }
    memcpy(k->outer, ext, sizeof(int64_t) * (size_t)n);
    k->permuted = 1;
}

/* A pure pointwise kernel iterates its last dim as the inner loop. */
static void
finish_kernel(kn_ctx *c, kn_kernel *k)
{
    if (!k->has_reduction)
        order_by_storage(c, k);
    if (!k->has_reduction && k->nouter > 0) {
        k->inner[0] = k->outer[k->nouter - 1];
        k->ninner = 1;
        k->nouter--;
    }
    int64_t w = 1;
    for (int d = 0; d < k->nouter; d++)
        w *= k->outer[d];
    for (int d = 0; d < k->ninner; d++)
        w *= k->inner[d];
    k->work = w * (k->nmembers > 0 ? k->nmembers : 1);
}

static int
is_empty(const kn_buf *b)
{
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] == 0)
            return 1;
    return 0;
}

/* A stored value with no elements (an empty key/value cache, a zero-length
   slice) computes nothing: it gets a kernel of its own that reads nothing,
   placed before the kernel being grown, so it never splits a fusion group.
   Returns the open kernel's new step index (0 when there is none), -1 on
   error. */
static int
schedule_empty(kn_ctx *c, kn_buf *b, int cur_step)
{
    b->body = kn_dtype_is_float(b->dt) ? kn_const_f(c, b->dt, 0.0) : kn_const_i(c, b->dt, 0);
    if (b->body == NULL)
        return -1;
    kn_kernel *k = new_kernel(c, b);
    if (k == NULL)
        return -1;
    finish_kernel(c, k);
    kn_step ks = {0};
    ks.kind = KN_ST_KERNEL;
    ks.kernel = c->nkernels - 1;
    if (kn_add_step(c, &ks) < 0)
        return -1;
    if (cur_step < 0)
        return 0; /* no open kernel: appended */
    memmove(&c->steps[cur_step + 1], &c->steps[cur_step], sizeof(kn_step) * (size_t)(c->nsteps - 1 - cur_step));
    c->steps[cur_step] = ks;
    return cur_step + 1;
}

/* The join decisions are recorded per KERNEL step (c->fuse_bits), and a
   reference's (c->fuse_ref, a size of a symbolic lowering: its first
   build's) restrict this compile's: a buffer tries to join the open kernel
   only where it joined in the reference.  Not joining is always sound (each
   buffer its own kernel is the unfused program), so the reference only
   removes fusions: those that hold at this size alone.  A reference of
   another length (a lowering that realized other buffers at this size) is
   not used. */
int
kn_fuse(kn_ctx *c)
{
    kn_step *old = c->steps;
    int nold = c->nsteps;
    int nk = 0;
    for (int i = 0; i < nold; i++)
        nk += old[i].kind == KN_ST_KERNEL;
    c->fuse_bits = kn_alloc(&c->arena, (size_t)(nk > 0 ? nk : 1));
    if (c->fuse_bits == NULL)
        return -1;
    memset(c->fuse_bits, 0, (size_t)(nk > 0 ? nk : 1));
    c->fuse_nbits = nk;
    const uint8_t *ref = c->fuse_ref != NULL && c->fuse_nref == nk ? c->fuse_ref : NULL;
    c->steps = NULL;
    c->nsteps = c->stepcap = 0;
    kn_kernel *cur = NULL;
    int cur_k = -1, cur_step = -1, q = -1;
    for (int i = 0; i < nold; i++) {
        kn_step *st = &old[i];
        q += st->kind == KN_ST_KERNEL;
        if (st->kind != KN_ST_KERNEL) {
            if (cur)
                finish_kernel(c, cur);
            cur = NULL;
            if (kn_add_step(c, st) < 0)
                return -1;
            continue;
        }
        kn_buf *b = c->bufs[st->kernel];
        if (b->kernel >= 0)
            continue; /* realized twice: already scheduled */
        if (is_empty(b) && !is_scan(b)) {
            int r = schedule_empty(c, b, cur ? cur_step : -1);
            if (r == -1)
                return -1;
            if (cur) {
                cur_step = r;
                cur = &c->kernels[cur_k]; /* the array may have moved */
            }
            continue;
        }
        if (cur) {
            /* a kernel index may move when the array grows: refetch */
            int j = ref == NULL || ref[q] ? try_join(c, cur, b) : 0;
            if (j < 0)
                return -1;
            if (j) {
                c->fuse_bits[q] = 1;
                continue;
            }
            finish_kernel(c, cur);
        }
        cur = new_kernel(c, b);
        if (cur == NULL)
            return -1;
        kn_step ks = {0};
        ks.kind = KN_ST_KERNEL;
        ks.kernel = cur_k = c->nkernels - 1;
        cur_step = c->nsteps;
        if (kn_add_step(c, &ks) < 0)
            return -1;
    }
    if (cur)
        finish_kernel(c, cur);
    return 0;
}
