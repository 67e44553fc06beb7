/* cuda.c — CUDA C code generation for NVIDIA GPUs.
 *
 * Consumes: the same fused kernels (compile/fuse.c) and planned buffers
 * (compile/plan.c) as codegen/c.c.  Produces: one CUDA translation unit (for
 * NVRTC, see runtime/cuda.c) holding one `extern "C" __global__` function per
 * kernel, whose arguments are the data pointers of the buffers it touches
 * (kn_kernel.cu_params; index nbufs: the call's error record, for kernels
 * that check indices), and each kernel's launch size (cu_threads,
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
#include "../error.h"
#include <string.h>

#include "prelude_cuda.inc" /* kn_prelude_cuda_text (from prelude_cuda.h) */

/* What CUDA spells its own way (emit.h).  Half is carried as its bits
   (uint16_t, the prelude's kn_h2f/kn_f2h), bfloat16 too (kn_bf2f/kn_f2bf);
   loop variables are kn_ix, 32-bit where the sizes allow (gen_kernel). */
const kn_target kn_target_cuda = {
    .name = "CUDA",
    .ix_type = "kn_ix",
    .storage = {[KN_F16] = "uint16_t"},
    .load = {[KN_F16] = "kn_h2f(%0)", [KN_BF16] = "kn_bf2f(%0)"},
    .store = {[KN_F16] = "kn_f2h(%0)", [KN_BF16] = "kn_f2bf(%0)"},
    .round = {[KN_F16] = "kn_h2f(kn_f2h((float)%0))", [KN_BF16] = "kn_bf2f(kn_f2bf((float)%0))"},
    .exact_f2i = 0,
    .prelude = kn_prelude_cuda_text,
};

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
    kn_str v = kn_cg_value(g, kn_cg_stored(body, b->dt));
    kn_cg_store(g, b, ix, v.p);
    kn_str_free(&v);
    return 0;
}

/* The combine of two partial results of reduction b, as text. */
static void
combine(kn_str *s, const kn_buf *b, const char *x, const char *y)
{
    const char *tag = kn_dtypes[b->acc_dt].tag;
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
    return kn_dtypes[b->acc_dt].cctype;
}

/* Declare reduction b's accumulator(s). */
static void
declare_acc(kn_gen *g, const kn_buf *b)
{
    int isf, id = b->id;
    const char *init = kn_cg_acc_init(b->rop, (kn_dtype)b->acc_dt, &isf);
    kn_cg_ind(g);
    if (b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN)
        kn_str_printf(g->s, "%s m%d = %s; long long a%d = 0;\n", acc_type(b), id, init, id);
    else
        kn_str_printf(g->s, "%s a%d = %s;\n", acc_type(b), id, init);
}

/* Fold value v (at inner position pos, for arg reductions) into b's
   accumulator. */
static void
accumulate(kn_gen *g, const kn_buf *b, const char *v, const char *pos)
{
    int id = b->id;
    const char *at = acc_type(b);
    kn_cg_ind(g);
    if (b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN) {
        kn_str_printf(g->s, "kn_argcomb(m%d, a%d, (%s)%s, (long long)(%s), %s);\n", id, id, at, v, pos,
                      b->rop == KN_R_ARGMAX ? "true" : "false");
        return;
    }
    char an[32];
    snprintf(an, sizeof an, "a%d", id);
    kn_str t = {0}, cv = {0};
    if (b->rop == KN_R_ANY || b->rop == KN_R_ALL)
        kn_str_printf(&t, "(int)(%s != 0)", v);
    else
        kn_str_printf(&t, "(%s)%s", at, v);
    combine(&cv, b, an, t.p);
    kn_str_printf(g->s, "a%d = %s;\n", id, cv.p);
    kn_str_free(&t);
    kn_str_free(&cv);
}

/* The combine of reduction b's partial results a<id> (m<id> for arg
   reductions) across the G threads of a row, leaving r<id> in every one of
   them, and its store by the row's first thread. */
static int group_finish(kn_gen *g, kn_buf *b);

static int
group_combine(kn_gen *g, kn_buf *b, int G)
{
    int id = b->id, arg = b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN;
    const char *at = acc_type(b);
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
    return group_finish(g, b);
}

/* r<id> of reduction b from its combined a<id>, and its store by the row's
   first thread. */
static int
group_finish(kn_gen *g, kn_buf *b)
{
    if (b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "(void)m%d;\n", b->id);
    }
    return kn_cg_result(g, b, "valid && lane == 0");
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
    kn_cg_hoist(g, body);
    declare_acc(g, b);
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (kn_ix i = lane; i < lim; i += %d) {\n", G);
    kn_cg_open_scope(g);
    decompose(g, "i", k->ninner, k->inner, KN_VAR_I(0));
    kn_str v = kn_cg_value(g, body);
    accumulate(g, b, v.p, "i");
    kn_str_free(&v);
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
    return group_combine(g, b, G);
}

/* A pointwise member over the row's outer point only: r<id> in every
   thread of the row, stored by its first. */
static int
gen_outer_member(kn_gen *g, kn_buf *b)
{
    kn_expr *body, *ix;
    if (member_value(g, b, &body, &ix) < 0)
        return -1;
    kn_str v = kn_cg_value(g, body);
    kn_dtype rdt = kn_dtype_compute(b->dt);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s r%d = %s;\n", kn_dtypes[rdt].cctype, b->id, v.p);
    if (!b->local) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "if (valid && lane == 0) {\n");
        kn_cg_open_scope(g);
        kn_cg_store(g, b, ix, v.p);
        kn_cg_close_scope(g);
        kn_cg_ind(g);
        kn_str_printf(g->s, "}\n");
    }
    kn_str_free(&v);
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
   block): four waves of full occupancy at most, the kernels striding over
   the rest by the grid.  Past that cap every block makes the same number of
   trips: a grid of `cap` blocks would leave most threads one trip short of
   the busiest (2.24 trips on average, 3 for some, costs 3). */
static void
set_launch(kn_gen *g, int64_t units, int per_block, int T)
{
    int64_t blocks = (units + per_block - 1) / per_block;
    int64_t cap = (int64_t)(g->c->cuda_sms > 0 ? g->c->cuda_sms : 132) * (2048 / T) * 4;
    if (blocks > cap) {
        int64_t trips = (blocks + cap - 1) / cap;
        blocks = (blocks + trips - 1) / trips;
    }
    g->c->kernels[g->kid].cu_threads = T;
    g->c->kernels[g->kid].cu_blocks = blocks < 1 ? 1 : blocks;
}

/* The loop over rows: blocks of T threads, groups of G per row (`lane`
   within it), `row`, `valid`, the row's length `lim` (0 past the end) and
   the outer loop variables; leaves the loop's scope open. */
static void
open_rows(kn_gen *g, int G, int T, int64_t outer_n, int64_t inner_n)
{
    const kn_kernel *k = g->k;
    kn_str *s = g->s;
    int rpb = T / G;
    set_launch(g, outer_n, rpb, T);
    kn_cg_ind(g);
    kn_str_printf(s, "const int lane = threadIdx.x %% %d;\n", G);
    kn_cg_ind(g);
    kn_str_printf(s, "(void)lane;\n");
    kn_cg_ind(g);
    kn_str_printf(s, "for (kn_ix base = (kn_ix)blockIdx.x * %d; base < %lld; base += (kn_ix)gridDim.x * %d) {\n", rpb,
                  (long long)outer_n, rpb);
    kn_cg_open_scope(g);
    kn_cg_ind(g);
    kn_str_printf(s, "const kn_ix row = base + (kn_ix)(threadIdx.x / %d);\n", G);
    kn_cg_ind(g);
    kn_str_printf(s, "const bool valid = row < %lld;\n", (long long)outer_n);
    kn_cg_ind(g);
    kn_str_printf(s, "const kn_ix lim = valid ? %lld : 0;\n", (long long)inner_n);
    kn_cg_ind(g);
    kn_str_printf(s, "(void)lim;\n");
    decompose(g, "(valid ? row : 0)", k->nouter, k->outer, KN_VAR_O(0));
}

static int
gen_rows(kn_gen *g, int64_t G, int T, int64_t outer_n, int64_t inner_n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    kn_str *s = g->s;
    open_rows(g, (int)G, T, outer_n, inner_n);
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
            if (gen_outer_member(g, b) < 0)
                return -1;
            m++;
            continue;
        }
        /* a run of pointwise members over the row shares one strided loop */
        int end = kn_cg_inner_run(c, k, m);
        for (int q = m; q < end; q++) {
            kn_expr *hb, *hix;
            if (member_value(g, c->bufs[k->members[q]], &hb, &hix) < 0)
                return -1;
            kn_cg_hoist(g, hb);
        }
        kn_cg_ind(g);
        kn_str_printf(s, "for (kn_ix i = lane; i < lim; i += %d) {\n", (int)G);
        kn_cg_open_scope(g);
        decompose(g, "i", k->ninner, k->inner, KN_VAR_I(0));
        for (; m < end; m++)
            if (gen_pointwise(g, c->bufs[k->members[m]]) < 0)
                return -1;
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

/* `bool vec_ok`: every pointer the vector form reads (v's loads) or writes
   (members whose store index `six` is contiguous) as vectors is aligned. */
static void
emit_vec_ok(kn_gen *g, vecscan *v, kn_expr **six)
{
    kn_ctx *c = g->c;
    kn_cg_ind(g);
    kn_str_printf(g->s, "bool vec_ok = true;\n");
    for (int q = 0; q < v->nvl; q++) {
        kn_buf *b = c->bufs[v->vl[q]->i];
        kn_cg_ind(g);
        kn_str_printf(g->s, "vec_ok &= ((unsigned long long)b%d & %d) == 0;\n", b->id, v->vw * kn_dtypes[b->dt].size - 1);
    }
    for (int m = 0; m < g->k->nmembers; m++) {
        kn_buf *b = c->bufs[g->k->members[m]];
        if (six[m] && contiguous(v, six[m])) {
            kn_cg_ind(g);
            kn_str_printf(g->s, "vec_ok &= ((unsigned long long)b%d & %d) == 0;\n", b->id,
                          v->vw * kn_dtypes[b->dt].size - 1);
        }
    }
}

/* Load ld's lanes are register text `<reg>.v[l]` from now on. */
static int
add_lanes(kn_gen *g, vecscan *v, kn_expr *ld, const char *reg)
{
    for (int l = 0; l < v->vw; l++) {
        kn_expr *e = l ? at_lane(v, ld, l) : ld;
        if (e == NULL || g->nlanes >= 256)
            return -1;
        g->lane_e[g->nlanes] = e;
        snprintf(g->lane_txt[g->nlanes], sizeof g->lane_txt[0], "%s.v[%d]", reg, l);
        g->nlanes++;
    }
    return 0;
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
        if (kn_dtypes[c->bufs[v.vl[q]->i]->dt].size > max_elem)
            rc = 0;
    for (int m = 0; m < nm && rc > 0; m++)
        if (kn_dtypes[c->bufs[k->members[m]]->dt].size > max_elem && contiguous(&v, six[m]))
            rc = 0;
    if (rc <= 0) {
        free(body);
        return rc;
    }
    /* run-time alignment of every pointer accessed as vectors */
    emit_vec_ok(g, &v, six);
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
        const char *st = kn_cg_storage(g, b->dt);
        kn_str ix = kn_cg_value(g, ld->a[0]);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const kn_vec<%s, %d> vl%u = *(const kn_vec<%s, %d> *)(b%d + %s);\n", st, vw, ld->id,
                      st, vw, b->id, ix.p);
        kn_str_free(&ix);
        char reg[32];
        snprintf(reg, sizeof reg, "vl%u", ld->id);
        if (add_lanes(g, &v, ld, reg) < 0)
            rc = -1;
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
            val[j] = kn_cg_value(g, kn_cg_stored(bj, b->dt));
        }
        if (rc > 0 && contiguous(&v, six[m])) {
            const char *st = kn_cg_storage(g, b->dt);
            kn_cg_ind(g);
            kn_str_printf(g->s, "{\n");
            kn_cg_ind(g);
            kn_str_printf(g->s, "  kn_vec<%s, %d> sv;\n", st, vw);
            for (int j = 0; j < vw; j++) {
                kn_str t = {0};
                kn_cg_to_storage(g, &t, b->dt, val[j].p);
                kn_cg_ind(g);
                kn_str_printf(g->s, "  sv.v[%d] = %s;\n", j, t.p);
                kn_str_free(&t);
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
    g->vw = vw;
    return 1;
}

/* ---------------------------------------------------------------- rows in registers */
/* A kernel with reductions over short rows (softmax, layer_norm, RMSNorm)
   can hold its row in registers: thread `lane` of the row's G owns the
   vectors j*G + lane (j < nch) of vw neighbouring elements.  Each input
   read along the row is loaded once, as aligned vectors, before any member
   runs; each pointwise member over the row keeps the values it stores (as
   stored, so a later member reads what eager reads back), and later members
   read those registers instead of memory.  Every pass of the row then runs
   from registers: one read of each input and one write of each output, with
   nch * vw independent loads in flight per thread instead of one.  The
   trip loops over j are unrolled, so the arrays stay in registers. */
#define KN_ROW_ELEMS 16      /* elements per thread a row aims for */
#define KN_ROW_MAX_CHUNKS 8  /* vectors per thread at most */
#define KN_ROW_MAX_WORDS 96  /* 32-bit registers the resident row may take per thread */

typedef struct {
    int regs;              /* 1: the register form below; 0: gen_rows */
    int G, T, vw, nch;
    int words;             /* registers per vector position the row takes */
    vecscan v;
    kn_expr **body, **six; /* per member, I0 -> W (NULL for outer members) */
    kn_expr **own;         /* per member: its load by later members, when kept */
} rowplan;

static uint32_t own_stamp = 9u << 28;

/* Loads of this kernel's own pointwise members inside e: each must read the
   element its member stores at the same position (then the member keeps its
   values in registers), else the kernel is not for this form (0). */
static int
scan_own(rowplan *p, kn_gen *g, kn_expr *e, int m, uint32_t stamp)
{
    if (e->visit == stamp)
        return 1;
    e->visit = stamp;
    if (e->op == KN_S_LOAD) {
        kn_buf *b = g->c->bufs[e->i];
        if (b->kernel == g->kid && b->kind == KN_B_POINTWISE && !kn_cg_is_outer_member(g->k, b)) {
            int q = 0;
            while (q < m && g->k->members[q] != b->id)
                q++;
            if (q == m || p->six[q] == NULL || e->a[0] != p->six[q] || (p->own[q] && p->own[q] != e))
                return 0;
            p->own[q] = e;
        }
    }
    for (int j = 0; j < e->n; j++)
        if (!scan_own(p, g, e->a[j], m, stamp))
            return 0;
    return 1;
}

static void
rowplan_free(rowplan *p)
{
    free(p->body);
    p->body = p->six = p->own = NULL;
}

/* Member bodies at lane 0 for vectors of vw lanes, the vector loads, and
   the register values.  1: usable; 2: some vector would pass 16 bytes
   (try fewer lanes); 0: not this form; -1: error. */
static int
rowplan_scan(rowplan *p, kn_gen *g, int vw)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    int nm = k->nmembers;
    memset(&p->v, 0, sizeof p->v);
    p->v.c = c;
    p->v.vw = vw;
    p->v.kid = g->kid;
    if ((p->v.w = kn_var(c, KN_VAR_I(1), k->inner[0])) == NULL)
        return -1;
    for (int j = 0; j < (vw > 1 ? vw : 2); j++)
        if ((p->v.lane[j] = kn_iadd(c, p->v.w, kn_iconst(c, j))) == NULL)
            return -1;
    memset(p->body, 0, sizeof(kn_expr *) * (size_t)nm * 3);
    p->v.stamp = ++vec_stamp;
    uint32_t stamp = ++own_stamp;
    for (int m = 0; m < nm; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        if (kn_cg_is_outer_member(k, b))
            continue;
        kn_expr *bd, *ix;
        if (member_value(g, b, &bd, &ix) < 0)
            return -1;
        kn_subst s;
        memset(&s, 0, sizeof s);
        s.to[KN_VAR_I(0)] = p->v.w;
        if ((p->body[m] = kn_substitute(c, bd, &s)) == NULL)
            return -1;
        if (b->kind == KN_B_POINTWISE && (p->six[m] = kn_substitute(c, ix, &s)) == NULL)
            return -1;
        scan_loads(&p->v, p->body[m]);
        if (!scan_own(p, g, p->body[m], m, stamp))
            return 0;
    }
    int words = 0, arrays = p->v.nvl;
    for (int q = 0; q < p->v.nvl; q++) {
        int sz = kn_dtypes[c->bufs[p->v.vl[q]->i]->dt].size;
        if (sz * vw > 16)
            return 2;
        words += (sz * vw + 3) / 4;
    }
    for (int m = 0; m < nm; m++) {
        if (p->six[m] == NULL)
            continue;
        int sz = kn_dtypes[c->bufs[k->members[m]]->dt].size;
        if (sz * vw > 16 && contiguous(&p->v, p->six[m]))
            return 2;
        if (p->own[m]) {
            words += (sz * vw + 3) / 4;
            arrays++;
        }
    }
    if (arrays * vw > 256)   /* g->lane_e */
        return 0;
    p->words = words;
    return 1;
}

static const int32_t *forms_of(kn_gen *g, int kind_has_rows);

/* Choose the form of a kernel with reductions (see gen_rows_regs). */
static int
rowplan_make(rowplan *p, kn_gen *g, int64_t inner_n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    memset(p, 0, sizeof *p);
    p->G = (int)rows_group(c, k, inner_n);
    p->T = rows_threads(c, k, inner_n);
    if (!c->cuda_row_regs || has_scan(c, k) || k->ninner != 1 || inner_n < 1)
        return 0;
    p->body = calloc((size_t)k->nmembers * 3 + 1, sizeof(kn_expr *));
    if (p->body == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->six = p->body + k->nmembers;
    p->own = p->six + k->nmembers;
    const int32_t *given = forms_of(g, 1);
    if (given != NULL && given[KN_FORM_KIND] == KN_FORM_REGS)
        return 0;   /* (take_row_forms takes the given register form or plain rows: no own search) */
    /* G threads per row: about KN_ROW_ELEMS elements each, or up to twice
       that to keep a row of at most 1024 in one warp (shuffles only) */
    int64_t G = pow2_at_least((inner_n + KN_ROW_ELEMS - 1) / KN_ROW_ELEMS);
    if (G > 32 && inner_n <= 32 * 2 * KN_ROW_ELEMS)
        G = 32;
    if (G > 1024)
        G = 1024;
    /* lanes per vector: the fewest elements per thread (a last vector
       partly past the row's end counts whole), then the widest */
    int vw = 0;
    int64_t best = 0;
    for (int w = 8; w >= 1; w /= 2) {
        if (inner_n % w != 0)
            continue;
        int rc = rowplan_scan(p, g, w);
        if (rc < 0)
            return -1;
        if (rc == 0)
            break;                      /* not this form at any width */
        if (rc == 2)
            continue;                   /* some vector would pass 16 bytes */
        if (w > 1) {
            /* wider vectors only where something is read or written as one */
            int any = p->v.nvl > 0;
            for (int m = 0; m < k->nmembers && !any; m++)
                any = p->six[m] && contiguous(&p->v, p->six[m]);
            if (!any)
                continue;
        }
        int64_t per = (inner_n / w + G - 1) / G * w;
        if (vw == 0 || per < best) {
            vw = w;
            best = per;
        }
    }
    if (vw == 0 || rowplan_scan(p, g, vw) != 1) {
        rowplan_free(p);
        return 0;
    }
    int words = p->words;
    int64_t nvec = inner_n / vw, nch = (nvec + G - 1) / G;
    while (nch * words > KN_ROW_MAX_WORDS && G < 1024) {
        G *= 2;
        nch = (nvec + G - 1) / G;
    }
    if (nch > KN_ROW_MAX_CHUNKS || nch * words > KN_ROW_MAX_WORDS) {
        rowplan_free(p);
        return 0;
    }
    p->regs = 1;
    p->vw = vw;
    p->G = (int)G;
    p->nch = (int)nch;
    p->T = G > 32 ? (int)G : 128;
    return 0;
}

/* ---------------------------------------------------------------- forms for every size */
/* The sizes of a symbolic lowering share a parametric build only where the
   C core writes their kernels the same way (kiln/kernel_params.py), but a
   row's threads, its vector lanes, its chunks in registers and the index
   width are chosen from sizes.  So a size is given the forms of the build
   it should share (kn_ctx.cuda_forms, the kernels' cu_form of that build's
   first size) and takes each one that is valid at its own sizes: any
   threads per row at least its own (a warp or more for a short row idles
   some lanes, never computes otherwise), a register row whose chunks cover
   its row and whose lanes divide it, vector lanes the kernel's form allows
   at this size (gen_flat_vec_w checks; where it does not, no lanes: the
   sizes that miss them share one build), 64-bit indexing always, 32-bit
   where it holds.  Where a register row's form is not valid, the kernel
   takes plain rows with a warp each at least (as every such size does, so
   they share one build); where given fewer threads per row than it would
   take, its own.  Own forms are
   robust (kn_ctx.cuda_robust): rows take a warp at least, so that rows of
   other lengths keep them, and flat kernels 4 lanes at most, so that the
   sizes whose extents are multiples of 4 take the same ones. */
static const int32_t *
forms_of(kn_gen *g, int kind_has_rows)
{
    kn_ctx *c = g->c;
    if (c->cuda_forms == NULL || (g->kid + 1) * KN_FORM_N > c->cuda_nforms)
        return NULL;
    const int32_t *f = c->cuda_forms + (size_t)g->kid * KN_FORM_N;
    int rows = f[KN_FORM_KIND] == KN_FORM_ROWS || f[KN_FORM_KIND] == KN_FORM_REGS;
    return rows == kind_has_rows ? f : NULL;
}

/* A row kernel's plan p (rowplan_make's own choice) given the forms to take. */
static int
take_row_forms(rowplan *p, kn_gen *g, int64_t inner_n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    const int32_t *f = forms_of(g, 1);
    if (has_scan(c, k))
        return 0;   /* (one thread per row: a scan's order) */
    if (f != NULL && f[KN_FORM_KIND] == KN_FORM_REGS) {
        int vw = f[KN_FORM_VW], G = f[KN_FORM_G], nch = f[KN_FORM_NCH];
        if (p->body == NULL && c->cuda_row_regs && k->ninner == 1) {
            p->body = calloc((size_t)k->nmembers * 3 + 1, sizeof(kn_expr *));
            if (p->body == NULL)
                return PyErr_NoMemory(), -1;
            p->six = p->body + k->nmembers;
            p->own = p->six + k->nmembers;
        }
        if (p->body != NULL && vw >= 1 && inner_n % vw == 0 && (int64_t)nch * G >= (inner_n / vw) &&
            nch <= KN_ROW_MAX_CHUNKS) {
            int rc = rowplan_scan(p, g, vw);
            if (rc < 0)
                return -1;
            if (rc == 1 && (int64_t)nch * p->words <= KN_ROW_MAX_WORDS) {
                p->regs = 1;
                p->vw = vw;
                p->G = G;
                p->nch = nch;
                p->T = G > 32 ? G : 128;
                return 0;
            }
        }
        /* not valid here (a row past its chunks, lanes that do not divide
           it): the plain form, a warp per row at least, which every length
           takes alike, so that such sizes share one build */
        p->regs = 0;
        p->G = (int)rows_group(c, k, inner_n);
        if (p->G < 32)
            p->G = 32;
        p->T = p->G > 32 ? p->G : 128;
        return 0;
    }
    if (f != NULL && f[KN_FORM_KIND] == KN_FORM_ROWS) {
        if (f[KN_FORM_G] >= p->G && f[KN_FORM_G] <= 1024) {
            p->regs = 0;
            p->G = f[KN_FORM_G];
            p->T = p->G > 32 ? p->G : 128;
        }
        return 0;
    }
    if (f == NULL && c->cuda_robust && p->G < 32) {
        p->G = 32;
        p->T = 128;
        if (p->regs) {
            int64_t nvec = inner_n / p->vw;
            p->nch = (int)((nvec + 31) / 32);
        }
    }
    return 0;
}

static void
record_forms(kn_kernel *k, int ix32, int kind, int G, int vw, int nch)
{
    k->cu_form[KN_FORM_IX32] = ix32;
    k->cu_form[KN_FORM_KIND] = kind;
    k->cu_form[KN_FORM_G] = G;
    k->cu_form[KN_FORM_VW] = vw;
    k->cu_form[KN_FORM_NCH] = nch;
}

/* Open `for j` over the thread's vectors of the row, with v<W> the first
   element of vector j; its body runs only inside the row. */
static void
open_chunks(kn_gen *g, const rowplan *p)
{
    kn_cg_ind(g);
    kn_str_printf(g->s, "#pragma unroll\n");
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (int j = 0; j < %d; j++) {\n", p->nch);
    g->indent++;
    kn_cg_ind(g);
    kn_str_printf(g->s, "const kn_ix v%d = (lane + j * %d) * %d;\n", KN_VAR_I(1), p->G, p->vw);
    kn_cg_ind(g);
    kn_str_printf(g->s, "if (v%d < lim) {\n", KN_VAR_I(1));
    kn_cg_open_scope(g);
}

static void
close_chunks(kn_gen *g)
{
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
    g->indent--;
    kn_cg_ind(g);
    kn_str_printf(g->s, "}\n");
}

/* A pointwise member over the row: each vector's values, stored (as a
   vector where contiguous) and, when later members read them, kept. */
static int
gen_regs_pointwise(kn_gen *g, rowplan *p, int m)
{
    kn_ctx *c = g->c;
    kn_buf *b = c->bufs[g->k->members[m]];
    const char *st = kn_cg_storage(g, b->dt);
    int vw = p->vw, vec = contiguous(&p->v, p->six[m]);
    char arr[32];
    snprintf(arr, sizeof arr, "p%d", b->id);
    kn_expr *hb, *hix;
    if (member_value(g, b, &hb, &hix) < 0)
        return -1;
    kn_cg_hoist(g, hb);
    if (p->own[m]) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "kn_vec<%s, %d> %s[%d];\n", st, vw, arr, p->nch);
    }
    open_chunks(g, p);
    kn_cg_ind(g);
    if (p->own[m])
        kn_str_printf(g->s, "kn_vec<%s, %d> &sv = %s[j];\n", st, vw, arr);
    else
        kn_str_printf(g->s, "kn_vec<%s, %d> sv;\n", st, vw);
    for (int l = 0; l < vw; l++) {
        kn_expr *e = l ? at_lane(&p->v, p->body[m], l) : p->body[m];
        if (e == NULL)
            return -1;
        kn_str v = kn_cg_value(g, kn_cg_stored(e, b->dt)), t = {0};
        kn_cg_to_storage(g, &t, b->dt, v.p);
        kn_cg_ind(g);
        kn_str_printf(g->s, "sv.v[%d] = %s;\n", l, t.p);
        kn_str_free(&v);
        kn_str_free(&t);
    }
    if (vec) {
        kn_str ix = kn_cg_value(g, p->six[m]);
        kn_cg_ind(g);
        if (vw > 1)
            kn_str_printf(g->s, "if (vec_ok) *(kn_vec<%s, %d> *)(b%d + %s) = sv; else for (int l = 0; l < %d; l++) b%d[%s + l] = sv.v[l];\n",
                          st, vw, b->id, ix.p, vw, b->id, ix.p);
        else
            kn_str_printf(g->s, "b%d[%s] = sv.v[0];\n", b->id, ix.p);
        kn_str_free(&ix);
    } else {
        for (int l = 0; l < vw; l++) {
            kn_expr *ixl = l ? at_lane(&p->v, p->six[m], l) : p->six[m];
            if (ixl == NULL)
                return -1;
            kn_str ix = kn_cg_value(g, ixl);
            kn_cg_ind(g);
            kn_str_printf(g->s, "b%d[%s] = sv.v[%d];\n", b->id, ix.p, l);
            kn_str_free(&ix);
        }
    }
    close_chunks(g);
    snprintf(arr, sizeof arr, "p%d[j]", b->id);
    return p->own[m] ? add_lanes(g, &p->v, p->own[m], arr) : 0;
}

static uint32_t dep_stamp = 11u << 28;

/* Does e read buffer id? */
static int
reads_buf(kn_expr *e, int id, uint32_t stamp)
{
    if (e->visit == stamp)
        return 0;
    e->visit = stamp;
    if (e->op == KN_S_LOAD && (int)e->i == id)
        return 1;
    for (int j = 0; j < e->n; j++)
        if (reads_buf(e->a[j], id, stamp))
            return 1;
    return 0;
}

/* How many reduction members from m on form one pass: consecutive, none
   reading another's result (a mean's centred sum and sum of squares). */
static int
reduction_run(kn_gen *g, rowplan *p, int m)
{
    const kn_kernel *k = g->k;
    int n = 1;
    while (m + n < k->nmembers && n < 4) {
        kn_buf *b = g->c->bufs[k->members[m + n]];
        if (b->kind != KN_B_REDUCTION)
            break;
        int dep = 0;
        for (int q = m; q < m + n && !dep; q++)
            dep = reads_buf(p->body[m + n], k->members[q], ++dep_stamp);
        if (dep)
            break;
        n++;
    }
    return n;
}

/* Reduction members m .. m+n-1 (reduction_run) in one pass over the row's
   registers; within a warp their shuffles interleave, so the combines'
   latencies overlap instead of adding up. */
static int
gen_regs_reductions(kn_gen *g, rowplan *p, int m, int n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    for (int q = m; q < m + n; q++) {
        kn_buf *b = c->bufs[k->members[q]];
        kn_expr *hb = kn_member_body(c, k, b);
        if (hb == NULL)
            return -1;
        kn_cg_hoist(g, hb);
        declare_acc(g, b);
    }
    open_chunks(g, p);
    for (int l = 0; l < p->vw; l++) {
        for (int q = m; q < m + n; q++) {
            kn_expr *e = l ? at_lane(&p->v, p->body[q], l) : p->body[q];
            if (e == NULL)
                return -1;
            kn_str v = kn_cg_value(g, e);
            char pos[48];
            snprintf(pos, sizeof pos, "v%d + %d", KN_VAR_I(1), l);
            accumulate(g, c->bufs[k->members[q]], v.p, pos);
            kn_str_free(&v);
        }
    }
    close_chunks(g);
    int plain = p->G > 1 && p->G <= 32;
    for (int q = m; q < m + n && plain; q++) {
        kn_buf *b = c->bufs[k->members[q]];
        plain = b->rop != KN_R_ARGMAX && b->rop != KN_R_ARGMIN;
    }
    if (n == 1 || !plain) {
        for (int q = m; q < m + n; q++)
            if (group_combine(g, c->bufs[k->members[q]], p->G) < 0)
                return -1;
        return 0;
    }
    kn_cg_ind(g);
    kn_str_printf(g->s, "for (int o = %d; o > 0; o >>= 1) {", p->G / 2);
    for (int q = m; q < m + n; q++) {
        kn_buf *b = c->bufs[k->members[q]];
        char an[32], sh[64];
        snprintf(an, sizeof an, "a%d", b->id);
        snprintf(sh, sizeof sh, "kn_shfl(a%d, o)", b->id);
        kn_str cv = {0};
        combine(&cv, b, an, sh);
        kn_str_printf(g->s, " a%d = %s;", b->id, cv.p);
        kn_str_free(&cv);
    }
    kn_str_printf(g->s, " }\n");
    for (int q = m; q < m + n; q++)
        if (group_finish(g, c->bufs[k->members[q]]) < 0)
            return -1;
    return 0;
}

static int
gen_rows_regs(kn_gen *g, rowplan *p, int64_t outer_n, int64_t inner_n)
{
    kn_ctx *c = g->c;
    const kn_kernel *k = g->k;
    int G = p->G, vw = p->vw;
    kn_str *s = g->s;
    /* vectors need aligned pointers, known only at run time: lane by lane
       otherwise */
    emit_vec_ok(g, &p->v, p->six);
    kn_cg_ind(g);
    kn_str_printf(s, "(void)vec_ok;\n");
    open_rows(g, G, p->T, outer_n, inner_n);
    /* the row's inputs, once */
    g->nlanes = 0;
    for (int q = 0; q < p->v.nvl; q++) {
        kn_buf *b = c->bufs[p->v.vl[q]->i];
        kn_cg_ind(g);
        kn_str_printf(s, "kn_vec<%s, %d> vl%u[%d];\n", kn_cg_storage(g, b->dt), vw, p->v.vl[q]->id, p->nch);
    }
    if (p->v.nvl) {
        open_chunks(g, p);
        for (int q = 0; q < p->v.nvl; q++) {
            kn_expr *ld = p->v.vl[q];
            kn_buf *b = c->bufs[ld->i];
            const char *st = kn_cg_storage(g, b->dt);
            kn_str ix = kn_cg_value(g, ld->a[0]);
            kn_cg_ind(g);
            if (vw > 1)
                kn_str_printf(s, "if (vec_ok) vl%u[j] = *(const kn_vec<%s, %d> *)(b%d + %s); else for (int l = 0; l < %d; l++) vl%u[j].v[l] = b%d[%s + l];\n",
                              ld->id, st, vw, b->id, ix.p, vw, ld->id, b->id, ix.p);
            else
                kn_str_printf(s, "vl%u[j].v[0] = b%d[%s];\n", ld->id, b->id, ix.p);
            kn_str_free(&ix);
        }
        close_chunks(g);
        for (int q = 0; q < p->v.nvl; q++) {
            char reg[32];
            snprintf(reg, sizeof reg, "vl%u[j]", p->v.vl[q]->id);
            if (add_lanes(g, &p->v, p->v.vl[q], reg) < 0)
                return -1;
        }
    }
    for (int m = 0; m < k->nmembers; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        int rc;
        if (b->kind == KN_B_REDUCTION) {
            int n = reduction_run(g, p, m);
            rc = gen_regs_reductions(g, p, m, n);
            m += n - 1;
        } else if (kn_cg_is_outer_member(k, b))
            rc = gen_outer_member(g, b);
        else
            rc = gen_regs_pointwise(g, p, m);
        if (rc < 0)
            return -1;
    }
    g->nlanes = 0;
    kn_cg_close_scope(g);
    kn_cg_ind(g);
    kn_str_printf(s, "}\n");
    return 0;
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
    g.t = &kn_target_cuda;
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
    const int32_t *given = forms_of(&g, k->has_reduction != 0);
    int np = 0;
    for (int i = 0; i <= c->nbufs; i++)
        if (used[i] && (i == c->nbufs || !(c->bufs[i]->kernel == kid && c->bufs[i]->local))) {
            np++;
            if (i == c->nbufs)
                continue;
            if (kn_buf_span(c->bufs[i]) >= lim32)
                g.ix32 = 0;
        }
    if (given != NULL && given[KN_FORM_IX32] == 0)
        g.ix32 = 0;   /* (always valid) */
    k->cu_params = kn_alloc(&c->arena, sizeof(int) * (size_t)(np + 1));
    if (k->cu_params == NULL) {
        free(used);
        return -1;
    }
    k->cu_nparams = 0;
    /* the block size is fixed by the sizes: tell NVRTC, so it never uses
       more registers than a block of that size can have */
    rowplan rp;
    memset(&rp, 0, sizeof rp);
    if (k->has_reduction && (rowplan_make(&rp, &g, inner_n) < 0 || take_row_forms(&rp, &g, inner_n) < 0)) {
        rowplan_free(&rp);
        free(used);
        return -1;
    }
    int threads = k->has_reduction ? rp.T : KN_CU_THREADS;
    kn_str_printf(s, "\nextern \"C\" __global__ void __launch_bounds__(%d) %sk%d(", threads, c->prefix, kid);
    for (int i = 0; i < c->nbufs; i++) {
        if (!used[i] || (c->bufs[i]->kernel == kid && c->bufs[i]->local))
            continue;
        kn_buf *b = c->bufs[i];
        kn_str_printf(s, "%s%s%s *__restrict__ b%d", k->cu_nparams ? ", " : "", used[i] & 2 ? "" : "const ",
                      kn_cg_storage(&g, b->dt), i);
        k->cu_params[k->cu_nparams++] = i;
    }
    /* a kernel that checks indices takes the call's error record (buffer
       index nbufs for runtime/run.c); the others have a null one */
    int checks = used[c->nbufs];
    if (checks) {
        kn_str_printf(s, "%sint64_t *__restrict__ kn_err", k->cu_nparams ? ", " : "");
        k->cu_params[k->cu_nparams++] = c->nbufs;
    }
    free(used);
    kn_str_printf(s, ")\n{\n  typedef %s kn_ix;\n", g.ix32 ? "int" : "long long");
    if (!checks)
        kn_str_printf(s, "  int64_t *const kn_err = 0;\n  (void)kn_err;\n");
    g.indent = 1;
    g.scope[g.nscope++] = 200000000 + kid;
    int rc;
    if (k->has_reduction) {
        record_forms(k, g.ix32, rp.regs ? KN_FORM_REGS : KN_FORM_ROWS, rp.G, rp.regs ? rp.vw : 0, rp.regs ? rp.nch : 0);
        rc = rp.regs ? gen_rows_regs(&g, &rp, outer_n, inner_n) : gen_rows(&g, rp.G, rp.T, outer_n, inner_n);
        rowplan_free(&rp);
    } else {
        /* the lanes given where this size allows them, else none (so the
           sizes that miss them share one build); no forms: the own choice,
           robust at 4 lanes (sizes that are multiples of 4 and of 8 then
           share a build) */
        int vec = 0, vw = given ? given[KN_FORM_VW] : -1;
        if (vw == 8 || vw == 4)
            vec = gen_flat_vec_w(&g, outer_n * inner_n, vw, vw == 8 ? 2 : 8);
        else if (vw < 0 && c->cuda_robust)
            vec = gen_flat_vec_w(&g, outer_n * inner_n, 4, 8);
        else if (vw < 0)
            vec = gen_flat_vec(&g, outer_n * inner_n);
        if (vec < 0)
            return -1;
        record_forms(k, g.ix32, KN_FORM_FLAT, 0, vec ? g.vw : 0, 0);
        g.indent = vec ? 2 : 1;
        rc = gen_flat(&g, outer_n * inner_n);
        if (vec) {
            kn_str_printf(s, "  }\n");
            /* sized for the vector loop (the scalar one strides further) */
            set_launch(&g, outer_n * inner_n / g.vw, KN_CU_THREADS, KN_CU_THREADS);
        }
    }
    if (rc < 0)
        return -1;
    kn_str_printf(s, "}\n");
    return s->oom ? (PyErr_NoMemory(), -1) : 0;
}

int
kn_codegen_cuda(kn_ctx *c, kn_str *out)
{
    KN_ASSERT(c->cuda);
    for (int k = 0; k < c->nkernels; k++) {
        size_t from = out->n;
        if (gen_kernel(c, k, out) < 0)
            return -1;
        if (kn_cg_canon_locals(out, from) < 0)
            return PyErr_NoMemory(), -1;
    }
    return 0;
}
