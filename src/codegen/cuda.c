/* cuda.c — CUDA C code generation for NVIDIA GPUs.
 *
 * Consumes: the same fused kernels (compile/fuse.c) and planned buffers
 * (compile/plan.c) as codegen/c.c.  Produces: one CUDA translation unit (for
 * NVRTC, see runtime/cuda.c) holding one `extern "C" __global__` function per
 * kernel, whose arguments are the data pointers of the buffers it touches
 * (kn_kernel.cu_params), and each kernel's launch size (cu_threads,
 * cu_blocks).  Expressions are emitted by the code shared with the C renderer
 * (emit.h); what differs is how the loop nest maps onto threads:
 *
 *  - a pointwise kernel is one grid-stride loop over its flattened space,
 *    each thread decomposing its linear index into the loop variables;
 *  - a kernel with reductions gives each outer point (a row) to a group of G
 *    threads (G a power of two, up to a whole block of 1024).  Members run in
 *    order inside the row: a reduction strides over the row, then combines
 *    across the group with warp shuffles (and shared memory when G > 32),
 *    leaving the result in every thread's register; pointwise members over
 *    the row run as a strided loop that reads those registers.  softmax,
 *    layer_norm and RMSNorm are therefore one kernel and one pass of launches;
 *  - scans give each row to one thread.
 *
 * Half and bfloat16 are loaded and stored as such and computed in float.
 * Index arithmetic is 32-bit when every buffer and the iteration space fit.
 */
#include "emit.h"
#include <string.h>

#define KN_CU_THREADS 256

static int64_t
pow2_at_least(int64_t n)
{
    int64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

/* Declare the loop variables of dims [0, n) of ext (numbered var0 + d) from
   the linear index in `lin` (last dim fastest). */
static void
decompose(kn_gen *g, const char *lin, int n, const int64_t *ext, int var0)
{
    if (n == 0)
        return;
    if (n == 1) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "const kn_ix v%d = %s;\n", var0, lin);
        return;
    }
    kn_cg_ind(g);
    kn_str_printf(g->s, "kn_ix q_%d = %s;\n", var0, lin);
    for (int d = n - 1; d >= 0; d--) {
        kn_cg_ind(g);
        if (d == 0)
            kn_str_printf(g->s, "const kn_ix v%d = q_%d;\n", var0, var0);
        else
            kn_str_printf(g->s, "const kn_ix v%d = q_%d %% %lld; q_%d /= %lld;\n", var0 + d, var0, (long long)ext[d],
                          var0, (long long)ext[d]);
    }
}

static int
member_value(kn_gen *g, kn_buf *b, kn_expr **body, kn_expr **ix)
{
    *body = kn_member_body(g->c, g->k, b);
    *ix = *body ? kn_store_index(g->c, g->k, b) : NULL;
    return *body && *ix ? 0 : -1;
}

static int
gen_pointwise(kn_gen *g, kn_buf *b)
{
    kn_expr *body, *ix;
    if (member_value(g, b, &body, &ix) < 0)
        return -1;
    kn_str v = kn_cg_value(g, body);
    kn_cg_store(g, b, ix, v.p);
    kn_str_free(&v);
    return 0;
}

/* The combine of two partial results of reduction b, as text. */
static void
combine(kn_str *s, const kn_buf *b, const char *x, const char *y)
{
    const char *tag = kn_cg_tag((kn_dtype)b->acc_dt);
    switch (b->rop) {
    case KN_R_SUM: kn_str_printf(s, "%s + %s", x, y); break;
    case KN_R_PROD: kn_str_printf(s, "%s * %s", x, y); break;
    case KN_R_ANY: kn_str_printf(s, "%s | %s", x, y); break;
    case KN_R_ALL: kn_str_printf(s, "%s & %s", x, y); break;
    case KN_R_MAX: kn_str_printf(s, "kn_max_%s(%s, %s)", tag, x, y); break;
    default: kn_str_printf(s, "kn_min_%s(%s, %s)", tag, x, y); break;
    }
}

static const char *
acc_type(const kn_buf *b)
{
    if (b->rop == KN_R_ANY || b->rop == KN_R_ALL)
        return "int";
    return kn_cg_ctype((kn_dtype)b->acc_dt);
}

/* One reduction member inside a row: strided accumulation, then the group
   combine; leaves r<id> in every thread of the group. */
static int
gen_reduction(kn_gen *g, kn_buf *b, int G)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    kn_expr *body = kn_member_body(c, k, b);
    if (body == NULL)
        return -1;
    int isf, id = b->id, arg = b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN;
    const char *init = kn_cg_acc_init(b->rop, (kn_dtype)b->acc_dt, &isf);
    const char *at = acc_type(b);
    kn_cg_hoist(g, body);
    kn_cg_ind(g);
    if (arg)
        kn_str_printf(g->s, "%s m%d = %s; long long a%d = 0;\n", at, id, init, id);
    else
        kn_str_printf(g->s, "%s a%d = %s;\n", at, id, init);
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (kn_ix i = lane; i < lim; i += %d) {\n", G);
    kn_cg_open_scope(g);
    decompose(g, "i", k->ninner, k->inner, KN_VAR_I(0));
    kn_str v = kn_cg_value(g, body);
    kn_cg_ind(g);
    if (arg) {
        kn_str_printf(g->s, "kn_argcomb(m%d, a%d, (%s)%s, (long long)i, %s);\n", id, id, at, v.p,
                      b->rop == KN_R_ARGMAX ? "true" : "false");
    } else {
        char an[32];
        snprintf(an, sizeof an, "a%d", id);
        kn_str cv = {0};
        if (b->rop == KN_R_ANY || b->rop == KN_R_ALL) {
            kn_str t = {0};
            kn_str_printf(&t, "(int)(%s != 0)", v.p);
            combine(&cv, b, an, t.p);
            kn_str_free(&t);
        } else {
            kn_str t = {0};
            kn_str_printf(&t, "(%s)%s", at, v.p);
            combine(&cv, b, an, t.p);
            kn_str_free(&t);
        }
        kn_str_printf(g->s, "a%d = %s;\n", id, cv.p);
        kn_str_free(&cv);
    }
    kn_str_free(&v);
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
    /* across the group */
    if (G > 1) {
        int warp_g = G > 32 ? 32 : G;
        kn_cg_ind(g);
        kn_str_printf(g->s, "for (int o = %d; o > 0; o >>= 1) {", warp_g / 2);
        if (arg) {
            kn_str_printf(g->s, " %s mo_ = kn_shfl(m%d, o); long long ao_ = kn_shfl(a%d, o);", at, id, id);
            kn_str_printf(g->s, " kn_argcomb(m%d, a%d, mo_, ao_, %s); }\n", id, id,
                          b->rop == KN_R_ARGMAX ? "true" : "false");
        } else {
            char an[32], sh[64];
            snprintf(an, sizeof an, "a%d", id);
            snprintf(sh, sizeof sh, "kn_shfl(a%d, o)", id);
            kn_str cv = {0};
            combine(&cv, b, an, sh);
            kn_str_printf(g->s, " a%d = %s; }\n", id, cv.p);
            kn_str_free(&cv);
        }
        if (G > 32) {
            int nw = G / 32;
            kn_cg_ind(g);
            if (arg) {
                kn_str_printf(g->s, "__shared__ %s sm%d[%d]; __shared__ long long sa%d[%d];\n", at, id, nw, id, nw);
                kn_cg_ind(g);
                kn_str_printf(g->s, "if ((threadIdx.x & 31) == 0) { sm%d[threadIdx.x >> 5] = m%d; sa%d[threadIdx.x >> 5] = a%d; }\n",
                              id, id, id, id);
                kn_cg_ind(g);
                kn_str_printf(g->s, "__syncthreads(); m%d = sm%d[0]; a%d = sa%d[0];\n", id, id, id, id);
                kn_cg_ind(g);
                kn_str_printf(g->s, "for (int w = 1; w < %d; w++) kn_argcomb(m%d, a%d, sm%d[w], sa%d[w], %s);\n", nw, id,
                              id, id, id, b->rop == KN_R_ARGMAX ? "true" : "false");
            } else {
                kn_str_printf(g->s, "__shared__ %s sm%d[%d];\n", at, id, nw);
                kn_cg_ind(g);
                kn_str_printf(g->s, "if ((threadIdx.x & 31) == 0) sm%d[threadIdx.x >> 5] = a%d;\n", id, id);
                kn_cg_ind(g);
                kn_str_printf(g->s, "__syncthreads(); a%d = sm%d[0];\n", id, id);
                char an[32], sm[32];
                snprintf(an, sizeof an, "a%d", id);
                snprintf(sm, sizeof sm, "sm%d[w]", id);
                kn_str cv = {0};
                combine(&cv, b, an, sm);
                kn_cg_ind(g);
                kn_str_printf(g->s, "for (int w = 1; w < %d; w++) a%d = %s;\n", nw, id, cv.p);
                kn_str_free(&cv);
            }
            kn_cg_ind(g);
            kn_str_printf(g->s, "__syncthreads();\n");
        }
    }
    kn_dtype rdt = kn_dtype_compute(b->dt);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s r%d = (%s)a%d;\n", kn_cg_ctype(rdt), id, kn_cg_ctype(rdt), id);
    if (arg) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "(void)m%d;\n", id);
    }
    if (!b->local) {
        kn_expr *ix = kn_store_index(c, k, b);
        if (ix == NULL)
            return -1;
        char name[32];
        snprintf(name, sizeof name, "r%d", id);
        kn_cg_ind(g);
        kn_str_printf(g->s, "if (valid && lane == 0) {\n");
        kn_cg_open_scope(g);
        kn_cg_store(g, b, ix, name);
        kn_cg_close_scope(g);
        kn_cg_ind(g);
        kn_str_printf(g->s, "}\n");
    }
    return 0;
}

static int
has_scan(kn_ctx *c, const kn_kernel *k)
{
    for (int m = 0; m < k->nmembers; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        if (b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD))
            return 1;
    }
    return 0;
}

/* G threads per row.  A group of up to a warp reduces with shuffles, several
   rows to a block of 128; a larger group is the whole block (its warps
   combine through shared memory). */
static int64_t
rows_group(kn_ctx *c, const kn_kernel *k, int64_t inner_n)
{
    int64_t G;
    if (has_scan(c, k))
        G = 1;
    else if (inner_n <= 1024)   /* a warp per row at most: shuffles only, no barrier */
        G = pow2_at_least((inner_n + 7) / 8) < 32 ? pow2_at_least((inner_n + 7) / 8) : 32;
    else                        /* long rows: 32+ elements per thread, 64..1024 threads */
        G = pow2_at_least((inner_n + 31) / 32);
    if (G > 1024)
        G = 1024;
    if (G > 32 && G < 64)
        G = 64;
    return G;
}

static int
rows_threads(kn_ctx *c, const kn_kernel *k, int64_t inner_n)
{
    int64_t G = rows_group(c, k, inner_n);
    return G > 32 ? (int)G : 128;
}

/* Blocks of T threads for `units` work units (elements, or rows at rpb per
   block): enough for four waves of full occupancy at most, the kernels
   stride over the rest by the grid. */
static void
set_launch(kn_gen *g, int64_t units, int per_block, int T)
{
    int64_t blocks = (units + per_block - 1) / per_block;
    int64_t cap = (int64_t)(g->c->cuda_sms > 0 ? g->c->cuda_sms : 132) * (2048 / T) * 4;
    if (blocks > cap)
        blocks = cap;
    g->c->kernels[g->kid].cu_threads = T;
    g->c->kernels[g->kid].cu_blocks = blocks < 1 ? 1 : blocks;
}

static int
gen_rows(kn_gen *g, int64_t outer_n, int64_t inner_n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    int64_t G = rows_group(c, k, inner_n);
    int T = rows_threads(c, k, inner_n);
    int rpb = T / (int)G;
    set_launch(g, outer_n, rpb, T);
    kn_str *s = g->s;
    kn_cg_ind(g);
    kn_str_printf(s, "const int lane = threadIdx.x %% %d;\n", (int)G);
    kn_cg_ind(g);
    kn_str_printf(s, "(void)lane;\n");
    kn_cg_ind(g);
    kn_str_printf(s, "for (kn_ix base = (kn_ix)blockIdx.x * %d; base < %lld; base += (kn_ix)gridDim.x * %d) {\n", rpb,
                  (long long)outer_n, rpb);
    kn_cg_open_scope(g);
    kn_cg_ind(g);
    kn_str_printf(s, "const kn_ix row = base + (kn_ix)(threadIdx.x / %d);\n", (int)G);
    kn_cg_ind(g);
    kn_str_printf(s, "const bool valid = row < %lld;\n", (long long)outer_n);
    kn_cg_ind(g);
    kn_str_printf(s, "const kn_ix lim = valid ? %lld : 0;\n", (long long)inner_n);
    kn_cg_ind(g);
    kn_str_printf(s, "(void)lim;\n");
    decompose(g, "(valid ? row : 0)", k->nouter, k->outer, KN_VAR_O(0));
    int m = 0;
    while (m < k->nmembers) {
        kn_buf *b = c->bufs[k->members[m]];
        if (b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD)) {
            kn_cg_ind(g);
            kn_str_printf(s, "if (valid) {\n");
            kn_cg_open_scope(g);
            if (kn_cg_scan(g, b) < 0)
                return -1;
            kn_cg_close_scope(g);
            kn_cg_ind(g);
            kn_str_printf(s, "}\n");
            m++;
            continue;
        }
        if (b->kind == KN_B_REDUCTION) {
            if (gen_reduction(g, b, (int)G) < 0)
                return -1;
            m++;
            continue;
        }
        if (kn_cg_is_outer_member(k, b)) {
            kn_expr *body, *ix;
            if (member_value(g, b, &body, &ix) < 0)
                return -1;
            kn_str v = kn_cg_value(g, body);
            kn_dtype rdt = kn_dtype_compute(b->dt);
            kn_cg_ind(g);
            kn_str_printf(s, "const %s r%d = %s;\n", kn_cg_ctype(rdt), b->id, v.p);
            if (!b->local) {
                kn_cg_ind(g);
                kn_str_printf(s, "if (valid && lane == 0) {\n");
                kn_cg_open_scope(g);
                kn_cg_store(g, b, ix, v.p);
                kn_cg_close_scope(g);
                kn_cg_ind(g);
                kn_str_printf(s, "}\n");
            }
            kn_str_free(&v);
            m++;
            continue;
        }
        /* a run of pointwise members over the row shares one strided loop */
        for (int q = m; q < k->nmembers; q++) {
            kn_buf *p = c->bufs[k->members[q]];
            if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
                break;
            kn_expr *hb, *hix;
            if (member_value(g, p, &hb, &hix) < 0)
                return -1;
            kn_cg_hoist(g, hb);
        }
        kn_cg_ind(g);
        kn_str_printf(s, "for (kn_ix i = lane; i < lim; i += %d) {\n", (int)G);
        kn_cg_open_scope(g);
        decompose(g, "i", k->ninner, k->inner, KN_VAR_I(0));
        while (m < k->nmembers) {
            kn_buf *p = c->bufs[k->members[m]];
            if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
                break;
            if (gen_pointwise(g, p) < 0)
                return -1;
            m++;
        }
        kn_cg_close_scope(g);
        kn_cg_ind(g);
        kn_str_printf(s, "}\n");
    }
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(s, "}\n");
    return 0;
}

static int
gen_flat(kn_gen *g, int64_t n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    int T = KN_CU_THREADS;
    set_launch(g, n, T, T);
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (kn_ix x = (kn_ix)blockIdx.x * %d + threadIdx.x; x < %lld; x += (kn_ix)gridDim.x * %d) {\n",
                  T, (long long)n, T);
    kn_cg_open_scope(g);
    /* the flattened space is O ++ I */
    if (k->ninner > 0) {
        /* inner vars are numbered apart from outer ones: split the index */
        kn_cg_ind(g);
        int64_t inner_n = 1;
        for (int d = 0; d < k->ninner; d++)
            inner_n *= k->inner[d];
        kn_str_printf(g->s, "const kn_ix xo = x / %lld, xi = x %% %lld;\n", (long long)inner_n, (long long)inner_n);
        decompose(g, "xo", k->nouter, k->outer, KN_VAR_O(0));
        decompose(g, "xi", k->ninner, k->inner, KN_VAR_I(0));
    } else {
        decompose(g, "x", k->nouter, k->outer, KN_VAR_O(0));
    }
    for (int m = 0; m < k->nmembers; m++)
        if (gen_pointwise(g, c->bufs[k->members[m]]) < 0)
            return -1;
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
    return 0;
}

/* ---------------------------------------------------------------- vector path */
#define KN_VEC_MAX 8

/* e is a multiple of vw for every value of the kernel's variables, given
   that var `w` is. */
static int
mult_vec(kn_expr *e, int64_t w, int vw)
{
    switch (e->op) {
    case KN_S_CONST:
        return e->dt == KN_I64 && e->i % vw == 0;
    case KN_S_VAR:
        return e->i == w;
    case KN_S_ADD:
        return e->dt == KN_I64 && mult_vec(e->a[0], w, vw) && mult_vec(e->a[1], w, vw);
    case KN_S_MUL:
        if (e->dt != KN_I64)
            return 0;
        if (e->a[1]->op == KN_S_CONST && e->a[1]->i % vw == 0)
            return 1;
        return mult_vec(e->a[0], w, vw) && e->a[1]->op == KN_S_CONST;
    default:
        return 0;
    }
}

typedef struct {
    kn_ctx *c;
    int vw;                   /* lanes per thread */
    kn_expr *lane[KN_VEC_MAX];    /* I0 -> W + j */
    kn_expr *w;
    int kid;
    kn_expr *vl[64];          /* lane-0 loads fetched as vectors */
    int nvl;
    uint32_t stamp;
} vecscan;

static kn_expr *
at_lane(vecscan *v, kn_expr *e, int j)
{
    kn_subst s;
    memset(&s, 0, sizeof s);
    s.to[v->w->i] = v->lane[j];
    return kn_substitute(v->c, e, &s);
}

/* ix (over W) steps by one element per lane and starts on a vector boundary */
static int
contiguous(vecscan *v, kn_expr *ix)
{
    kn_expr *ix1 = at_lane(v, ix, 1);
    return ix1 && ix1 == kn_iadd(v->c, ix, kn_iconst(v->c, 1)) && mult_vec(ix, v->w->i, v->vw);
}

/* Collect lane-0 loads of buffers not stored by this kernel whose index is
   contiguous across lanes. */
static void
scan_loads(vecscan *v, kn_expr *e)
{
    if (e->visit == v->stamp)
        return;
    e->visit = v->stamp;
    if (e->op == KN_S_LOAD) {
        kn_buf *b = v->c->bufs[e->i];
        if (b->kernel != v->kid && e->a[0]->depth >= 2 && v->nvl < 64 && contiguous(v, e->a[0])) {
            for (int q = 0; q < v->nvl; q++)
                if (v->vl[q] == e)
                    return;
            v->vl[v->nvl++] = e;
        }
        return;
    }
    for (int j = 0; j < e->n; j++)
        scan_loads(v, e->a[j]);
}

static uint32_t vec_stamp = 7u << 28;

/* The vector form of a pointwise kernel whose innermost extent is a multiple
   of vw: each thread computes vw neighbours, loading and storing them as one
   aligned vector where the index allows, lane by lane elsewhere: 16 bytes
   (8 lanes) when every vector it touches holds 2-byte or 1-byte elements
   (bfloat16, half, bool), else 4 lanes (16 bytes of float32).  Emitted
   inside `if (vec_ok)`, the pointers' alignment being known only at run
   time.  Returns 0 (not applicable: the caller emits only the scalar loop),
   1 (emitted) or -1. */
static int gen_flat_vec_w(kn_gen *g, int64_t n, int vw, int max_elem);

static int
gen_flat_vec(kn_gen *g, int64_t n)
{
    int rc = gen_flat_vec_w(g, n, 8, 2);
    return rc != 0 ? rc : gen_flat_vec_w(g, n, 4, 8);
}

static int
gen_flat_vec_w(kn_gen *g, int64_t n, int vw, int max_elem)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    if (k->ninner != 1 || k->inner[0] % vw != 0 || n == 0 || n / vw >= ((int64_t)1 << 30))
        return 0;
    vecscan v;
    memset(&v, 0, sizeof v);
    v.c = c;
    v.vw = vw;
    v.kid = g->kid;
    v.w = kn_var(c, KN_VAR_I(1), k->inner[0]);
    if (v.w == NULL)
        return -1;
    for (int j = 0; j < vw; j++)
        if ((v.lane[j] = kn_iadd(c, v.w, kn_iconst(c, j))) == NULL)
            return -1;
    /* member bodies and store indices at lane 0 (I0 -> W) */
    int nm = k->nmembers;
    kn_expr **body = calloc((size_t)nm * 2 + 1, sizeof(kn_expr *)), **six = body + nm;
    if (body == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    v.stamp = ++vec_stamp;
    int rc = 1;
    for (int m = 0; m < nm && rc > 0; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        kn_expr *bd, *ix;
        if (member_value(g, b, &bd, &ix) < 0) {
            rc = -1;
            break;
        }
        kn_subst s;
        memset(&s, 0, sizeof s);
        s.to[KN_VAR_I(0)] = v.w;
        body[m] = kn_substitute(c, bd, &s);
        six[m] = kn_substitute(c, ix, &s);
        if (!body[m] || !six[m])
            rc = -1;
        else
            scan_loads(&v, body[m]);
    }
    /* every buffer accessed as vectors must fit vw lanes in 16 bytes */
    for (int q = 0; q < v.nvl && rc > 0; q++)
        if (kn_dtype_size[c->bufs[v.vl[q]->i]->dt] > max_elem)
            rc = 0;
    for (int m = 0; m < nm && rc > 0; m++)
        if (kn_dtype_size[c->bufs[k->members[m]]->dt] > max_elem && contiguous(&v, six[m]))
            rc = 0;
    if (rc <= 0) {
        free(body);
        return rc;
    }
    /* run-time alignment of every pointer accessed as vectors */
    kn_str_printf(g->s, "  bool vec_ok = true;\n");
    for (int q = 0; q < v.nvl; q++) {
        kn_buf *b = c->bufs[v.vl[q]->i];
        kn_str_printf(g->s, "  vec_ok &= ((unsigned long long)b%d & %d) == 0;\n", b->id,
                      vw * kn_dtype_size[b->dt] - 1);
    }
    for (int m = 0; m < nm; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        if (contiguous(&v, six[m]))
            kn_str_printf(g->s, "  vec_ok &= ((unsigned long long)b%d & %d) == 0;\n", b->id,
                          vw * kn_dtype_size[b->dt] - 1);
    }
    kn_str_printf(g->s, "  if (vec_ok) {\n");
    g->indent = 2;
    kn_cg_open_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (kn_ix x4 = (kn_ix)blockIdx.x * %d + threadIdx.x; x4 < %lld; x4 += (kn_ix)gridDim.x * %d) {\n",
                  KN_CU_THREADS, (long long)(n / vw), KN_CU_THREADS);
    kn_cg_open_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const kn_ix x = x4 * %d;\n", vw);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const kn_ix xo = x / %lld;\n", (long long)k->inner[0]);
    decompose(g, "xo", k->nouter, k->outer, KN_VAR_O(0));
    kn_cg_ind(g);
    kn_str_printf(g->s, "const kn_ix v%d = x %% %lld;\n", KN_VAR_I(1), (long long)k->inner[0]);
    /* the vector loads, then each lane's load is a register lane */
    g->nlanes = 0;
    for (int q = 0; q < v.nvl && rc > 0; q++) {
        kn_expr *ld = v.vl[q];
        kn_buf *b = c->bufs[ld->i];
        const char *st = b->dt == KN_F16 ? "uint16_t" : kn_dtype_ctype[b->dt];
        kn_str ix = kn_cg_value(g, ld->a[0]);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const kn_vec<%s, %d> vl%u = *(const kn_vec<%s, %d> *)(b%d + %s);\n", st, vw, ld->id,
                      st, vw, b->id, ix.p);
        kn_str_free(&ix);
        for (int j = 0; j < vw; j++) {
            kn_expr *lj = j ? at_lane(&v, ld, j) : ld;
            if (lj == NULL || g->nlanes >= 256) {
                rc = lj == NULL ? -1 : rc;
                break;
            }
            g->lane_e[g->nlanes] = lj;
            snprintf(g->lane_txt[g->nlanes], sizeof g->lane_txt[0], "vl%u.v[%d]", ld->id, j);
            g->nlanes++;
        }
    }
    /* members in order, each computed for all lanes, then stored */
    for (int m = 0; m < nm && rc > 0; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        kn_str val[KN_VEC_MAX];
        memset(val, 0, sizeof val);
        for (int j = 0; j < vw; j++) {
            kn_expr *bj = j ? at_lane(&v, body[m], j) : body[m];
            if (bj == NULL) {
                rc = -1;
                break;
            }
            val[j] = kn_cg_value(g, bj);
        }
        if (rc > 0 && contiguous(&v, six[m])) {
            const char *st = b->dt == KN_F16 ? "uint16_t" : kn_dtype_ctype[b->dt];
            kn_cg_ind(g);
            kn_str_printf(g->s, "{\n");
            kn_cg_ind(g);
            kn_str_printf(g->s, "  kn_vec<%s, %d> sv;\n", st, vw);
            for (int j = 0; j < vw; j++) {
                kn_cg_ind(g);
                if (b->dt == KN_BF16)
                    kn_str_printf(g->s, "  sv.v[%d] = kn_f2bf(%s);\n", j, val[j].p);
                else if (b->dt == KN_F16)
                    kn_str_printf(g->s, "  sv.v[%d] = kn_f2h(%s);\n", j, val[j].p);
                else
                    kn_str_printf(g->s, "  sv.v[%d] = (%s)(%s);\n", j, st, val[j].p);
            }
            kn_str ix = kn_cg_value(g, six[m]);
            kn_cg_ind(g);
            kn_str_printf(g->s, "  *(kn_vec<%s, %d> *)(b%d + %s) = sv;\n", st, vw, b->id, ix.p);
            kn_str_free(&ix);
            kn_cg_ind(g);
            kn_str_printf(g->s, "}\n");
        } else if (rc > 0) {
            for (int j = 0; j < vw; j++) {
                kn_expr *ixj = j ? at_lane(&v, six[m], j) : six[m];
                if (ixj == NULL) {
                    rc = -1;
                    break;
                }
                kn_cg_store(g, b, ixj, val[j].p);
            }
        }
        for (int j = 0; j < vw; j++)
            kn_str_free(&val[j]);
    }
    g->nlanes = 0;
    free(body);
    if (rc < 0)
        return -1;
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
    kn_cg_close_scope(g);
    kn_str_printf(g->s, "  } else {\n");
    return 1;
}

/* storage types as CUDA sees them (half is carried as its bits) */
static const char *
storage_type(kn_dtype dt)
{
    return dt == KN_F16 ? "uint16_t" : kn_dtype_ctype[dt];
}

static int
gen_kernel(kn_ctx *c, int kid, kn_str *s)
{
    kn_kernel *k = &c->kernels[kid];
    kn_gen g;
    memset(&g, 0, sizeof g);
    g.c = c;
    g.s = s;
    g.k = k;
    g.kid = kid;
    g.cuda = 1;
    uint8_t *used = kn_cg_used_bufs(c, k);
    if (used == NULL)
        return -1;
    int64_t outer_n = 1, inner_n = 1;
    for (int d = 0; d < k->nouter; d++)
        outer_n *= k->outer[d];
    for (int d = 0; d < k->ninner; d++)
        inner_n *= k->inner[d];
    /* 32-bit indexing when the space and every buffer span stay far from 2^31 */
    int64_t lim32 = (int64_t)1 << 30;
    g.ix32 = outer_n * inner_n < lim32;
    int np = 0;
    for (int i = 0; i < c->nbufs; i++)
        if (used[i] && !(c->bufs[i]->kernel == kid && c->bufs[i]->local)) {
            np++;
            if (kn_buf_span(c->bufs[i]) >= lim32)
                g.ix32 = 0;
        }
    k->cu_params = kn_alloc(&c->arena, sizeof(int) * (size_t)(np + 1));
    if (k->cu_params == NULL) {
        free(used);
        return -1;
    }
    k->cu_nparams = 0;
    /* the block size is fixed by the sizes: tell NVRTC, so it never uses
       more registers than a block of that size can have */
    int threads = k->has_reduction ? rows_threads(c, k, inner_n) : KN_CU_THREADS;
    kn_str_printf(s, "\nextern \"C\" __global__ void __launch_bounds__(%d) %sk%d(", threads, c->prefix, kid);
    for (int i = 0; i < c->nbufs; i++) {
        if (!used[i] || (c->bufs[i]->kernel == kid && c->bufs[i]->local))
            continue;
        kn_buf *b = c->bufs[i];
        kn_str_printf(s, "%s%s%s *__restrict__ b%d", k->cu_nparams ? ", " : "", used[i] & 2 ? "" : "const ",
                      storage_type(b->dt), i);
        k->cu_params[k->cu_nparams++] = i;
    }
    free(used);
    kn_str_printf(s, ")\n{\n  typedef %s kn_ix;\n", g.ix32 ? "int" : "long long");
    g.indent = 1;
    g.scope[g.nscope++] = 200000000 + kid;
    int rc;
    if (k->has_reduction) {
        rc = gen_rows(&g, outer_n, inner_n);
    } else {
        int vec = gen_flat_vec(&g, outer_n * inner_n);
        if (vec < 0)
            return -1;
        g.indent = vec ? 2 : 1;
        rc = gen_flat(&g, outer_n * inner_n);
        if (vec)
            kn_str_printf(s, "  }\n");
    }
    if (rc < 0)
        return -1;
    kn_str_printf(s, "}\n");
    return s->oom ? (PyErr_NoMemory(), -1) : 0;
}

int
kn_codegen_cuda(kn_ctx *c, kn_str *out)
{
    for (int k = 0; k < c->nkernels; k++)
        if (gen_kernel(c, k, out) < 0)
            return -1;
    return 0;
}
