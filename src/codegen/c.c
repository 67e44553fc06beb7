/* c.c — C code generation for CPU kernels.
 *
 * Consumes: fused kernels (compile/fuse.c) with planned buffers
 * (compile/plan.c).  Produces: one C translation unit holding one function
 * per kernel, `void <prefix>k<N>(void *const *B)`, where B[i] is the data
 * pointer of buffer i and B[nbufs] the call's error record (int64_t[3],
 * prelude.h: a bad index or an integer division by zero is recorded there
 * and raised by runtime/run.c after the kernel).  Loops: the outer space is a loop nest parallelised
 * with OpenMP (collapsed) when the work is large enough; each member of the
 * kernel gets an inner loop nest whose innermost loop carries `omp simd`
 * (with a reduction clause for sums, products, max/min, any/all, so the
 * compiler keeps several accumulators in vector lanes).  float16/bfloat16 are
 * loaded into float, computed in float and rounded once when stored.
 * Expressions, stores, loop headers and scans are emitted by codegen/emit.c
 * from the C target descriptor below; this file holds the kernel function,
 * its OpenMP parallelisation, the reductions and the vectorisable index
 * checks.
 */
#include "../kiln.h"
#include "../error.h"
#include <math.h>
#include <string.h>

#include "emit.h"
#include "prelude.inc" /* static const char kn_prelude_text[] (from prelude.h) */

/* What C spells its own way (emit.h).  float16 is the compiler's _Float16
   (converted by casts), bfloat16 its bits (the prelude's kn_bf2f/kn_f2bf). */
const kn_target kn_target_c = {
    .name = "C",
    .ix_type = "int64_t",
    .load = {[KN_F16] = "(float)%0", [KN_BF16] = "kn_bf2f(%0)"},
    .store = {[KN_F16] = "(_Float16)(%0)", [KN_BF16] = "kn_f2bf(%0)"},
    .round = {[KN_F16] = "(float)(_Float16)%0", [KN_BF16] = "kn_bf2f(kn_f2bf((float)%0))"},
    .exact_f2i = 1,
    .prelude = kn_prelude_text,
};

/* Flat index within the inner space (for argmax/argmin). */
static void
flat_inner(kn_gen *g, kn_str *out)
{
    const kn_kernel *k = g->k;
    kn_str_printf(out, "(INT64_C(0)");
    int64_t mul = 1;
    for (int d = k->ninner - 1; d >= 0; d--) {
        kn_str_printf(out, " + v%d * INT64_C(%lld)", KN_VAR_I(d), (long long)mul);
        mul *= k->inner[d];
    }
    kn_str_printf(out, ")");
}

/* The index checks of e left for the inner loop (not hoisted before it),
   up to the room in g->chk (the rest keep kn_chk's branch). */
static void
collect_checks(kn_gen *g, kn_expr *e, uint32_t stamp)
{
    if (e->visit == stamp || e->op == KN_S_CONST || e->op == KN_S_VAR)
        return;
    e->visit = stamp;
    if (e->mark > 0 && kn_cg_active(g, e->mark))
        return; /* emitted already, before the loop */
    if (e->op == KN_S_CHECK && g->nchk < (int)(sizeof g->chk / sizeof g->chk[0]))
        g->chk[g->nchk++] = e;
    for (int j = 0; j < e->n; j++)
        collect_checks(g, e->a[j], stamp);
}

/* Before the inner loop over `bodies`: the index checks left inside it
   become accumulators (declared here) reduced by the loop, whose clauses
   are appended to *clause; checks_end records what they found.  (The CUDA
   renderer keeps kn_chk's branch: it lists no checks in g->chk.) */
static void
checks_begin(kn_gen *g, kn_expr *const *bodies, int nb, kn_str *clause)
{
    g->nchk = 0;
    uint32_t stamp = kn_cg_stamp();
    for (int i = 0; i < nb; i++)
        collect_checks(g, bodies[i], stamp);
    /* one kernel may hold several checked loops over the same check (two
       reductions of one indexed value): each loop's accumulators are its own */
    g->chkgen++;
    for (int j = 0; j < g->nchk; j++) {
        unsigned id = g->chk[j]->id;
        int q = g->chkgen;
        kn_cg_ind(g);
        kn_str_printf(g->s, "int64_t kb%u_%d = 0, kv%u_%d = INT64_MIN;\n", id, q, id, q);
        kn_str_printf(clause, "%sreduction(|:kb%u_%d) reduction(max:kv%u_%d)", clause->p ? " " : "", id, q, id, q);
    }
}

static void
checks_end(kn_gen *g)
{
    for (int j = 0; j < g->nchk; j++) {
        kn_expr *e = g->chk[j];
        kn_cg_ind(g);
        kn_str_printf(g->s, "if (kb%u_%d) kn_flag(kn_err, %lld, kv%u_%d, %lld);\n", e->id, g->chkgen,
                      (long long)e->a[2]->i, e->id, g->chkgen, (long long)e->a[1]->i);
    }
    g->nchk = 0;
}

/* Opens the inner loops of an OpenMP reduction under `clause` (freed
   here; the index checks of body OR-reduced with it) and returns the text
   of body's value inside them, indented for the update that follows. */
static kn_str
open_reduction(kn_gen *g, kn_expr *body, kn_str *clause)
{
    checks_begin(g, &body, 1, clause);
    kn_cg_open_loops(g, g->k->ninner, g->k->inner, KN_VAR_I(0), 1, clause->p);
    kn_str_free(clause);
    kn_str v = kn_cg_value(g, body);
    kn_cg_ind(g);
    return v;
}

static int
gen_reduction(kn_gen *g, kn_buf *b)
{
    kn_ctx *c = g->c;
    kn_expr *body = kn_member_body(c, g->k, b);
    if (body == NULL)
        return -1;
    int isf;
    const char *init = kn_cg_acc_init(b->rop, (kn_dtype)b->acc_dt, &isf);
    const char *at = b->acc_dt == KN_BOOL ? "int" : kn_dtypes[b->acc_dt].cctype;
    int id = b->id;
    const kn_kernel *k = g->k;
    kn_cg_hoist(g, body);
    kn_cg_ind(g);
    switch (b->rop) {
    case KN_R_SUM: case KN_R_PROD: case KN_R_ANY: case KN_R_ALL: {
        /* an OpenMP-combinable update: a op= v (truth values for any/all) */
        int truth = b->rop == KN_R_ANY || b->rop == KN_R_ALL;
        char opc = b->rop == KN_R_SUM ? '+' : b->rop == KN_R_PROD ? '*' : b->rop == KN_R_ANY ? '|' : '&';
        kn_str_printf(g->s, "%s a%d = %s;\n", truth ? "int" : at, id, init);
        kn_str clause = {0};
        kn_str_printf(&clause, "reduction(%c:a%d)", opc, id);
        kn_str v = open_reduction(g, body, &clause);
        kn_str_printf(g->s, truth ? "a%d %c= (%s != 0);\n" : "a%d %c= %s;\n", id, opc, v.p);
        kn_str_free(&v);
        kn_cg_close_loops(g, k->ninner);
        checks_end(g);
        break;
    }
    case KN_R_MAX: case KN_R_MIN: {
        const char *mm = b->rop == KN_R_MAX ? "max" : "min";
        kn_str_printf(g->s, "%s a%d = %s; int n%d = 0;\n", at, id, init, id);
        kn_str clause = {0};
        if (isf)
            kn_str_printf(&clause, "reduction(%s:a%d) reduction(|:n%d)", mm, id, id);
        else
            kn_str_printf(&clause, "reduction(%s:a%d)", mm, id);
        kn_str v = open_reduction(g, body, &clause);
        kn_str_printf(g->s, "a%d = (%s %s a%d) ? %s : a%d;\n", id, v.p, b->rop == KN_R_MAX ? ">" : "<", id, v.p, id);
        if (isf) {
            kn_cg_ind(g);
            kn_str_printf(g->s, "n%d |= __builtin_isnan(%s);\n", id, v.p);
        }
        kn_str_free(&v);
        kn_cg_close_loops(g, k->ninner);
        checks_end(g);
        if (isf) {
            kn_cg_ind(g);
            kn_str_printf(g->s, "if (n%d) a%d = NAN;\n", id, id);
        } else {
            kn_cg_ind(g);
            kn_str_printf(g->s, "(void)n%d;\n", id);
        }
        break;
    }
    case KN_R_ARGMAX: case KN_R_ARGMIN: {
        kn_str_printf(g->s, "%s m%d = %s; int64_t a%d = 0;\n", at, id, init, id);
        kn_cg_open_loops(g, k->ninner, k->inner, KN_VAR_I(0), 0, NULL);
        kn_str v = kn_cg_value(g, body);
        kn_str fi = {0};
        flat_inner(g, &fi);
        kn_cg_ind(g);
        if (isf)
            kn_str_printf(g->s, "if ((%s %s m%d || __builtin_isnan(%s)) && !__builtin_isnan(m%d)) { m%d = %s; a%d = %s; }\n",
                          v.p, b->rop == KN_R_ARGMAX ? ">" : "<", id, v.p, id, id, v.p, id, fi.p);
        else
            kn_str_printf(g->s, "if (%s %s m%d) { m%d = %s; a%d = %s; }\n", v.p, b->rop == KN_R_ARGMAX ? ">" : "<", id,
                          id, v.p, id, fi.p);
        kn_str_free(&v);
        kn_str_free(&fi);
        kn_cg_close_loops(g, k->ninner);
        kn_cg_ind(g);
        kn_str_printf(g->s, "(void)m%d;\n", id);
        break;
    }
    default:
        return KN_INTERNAL("reduction %d in a %s kernel", (int)b->rop, g->t->name);
    }
    return kn_cg_result(g, b, NULL);   /* the register r<id>, stored unless local */
}
static int
gen_pointwise_value(kn_gen *g, kn_buf *b, int outer_only)
{
    kn_expr *body = kn_member_body(g->c, g->k, b);
    kn_expr *ix = kn_store_index(g->c, g->k, b);
    if (body == NULL || ix == NULL)
        return -1;
    kn_str v = kn_cg_value(g, outer_only ? body : kn_cg_stored(body, b->dt));
    if (outer_only) {
        kn_dtype rdt = kn_dtype_compute(b->dt);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const %s r%d = %s;\n", kn_dtypes[rdt].cctype, b->id, v.p);
        if (!b->local)
            kn_cg_store(g, b, ix, v.p);
    } else {
        kn_cg_store(g, b, ix, v.p);
    }
    kn_str_free(&v);
    return 0;
}

static int
gen_kernel(kn_ctx *c, int kid, kn_str *s)
{
    kn_kernel *k = &c->kernels[kid];
    kn_gen g = {0};
    g.c = c;
    g.t = &kn_target_c;
    g.s = s;
    g.k = k;
    g.kid = kid;
    uint8_t *used = kn_cg_used_bufs(c, k);
    if (used == NULL)
        return -1;
    kn_str_printf(s, "\nvoid %sk%d(void *const *B)\n{\n", c->prefix, kid);
    for (int i = 0; i < c->nbufs; i++) {
        if (!used[i])
            continue;
        kn_buf *b = c->bufs[i];
        if (b->kernel == kid && b->local)
            continue;
        kn_str_printf(s, "  %s%s *restrict b%d = (%s *)B[%d];\n", used[i] & 2 ? "" : "const ",
                      kn_cg_storage(&g, b->dt), i, kn_cg_storage(&g, b->dt), i);
    }
    free(used);
    /* the call's error record (prelude.h: kn_flag) follows the buffers */
    kn_str_printf(s, "  int64_t *const kn_err = (int64_t *)B[%d];\n  (void)kn_err;\n", c->nbufs);
    g.indent = 1;
    g.scope[g.nscope++] = kn_cg_root_scope();
    int64_t outer_n = 1;
    for (int d = 0; d < k->nouter; d++)
        outer_n *= k->outer[d];
    int64_t inner_n = 1;
    for (int d = 0; d < k->ninner; d++)
        inner_n *= k->inner[d];
    int64_t work = k->work;
    int par_outer = k->nouter > 0 && outer_n >= 4 && work >= 32768;
    int par_inner = !par_outer && !k->has_reduction && k->ninner == 1 && work >= 65536;
    /* few outer points, big reductions, and only reductions that OpenMP can
       combine across threads: split the reduction itself */
    if (!par_outer && k->has_reduction && inner_n >= 65536 && outer_n < 4) {
        g.par_red = 1;
        for (int m = 0; m < k->nmembers; m++) {
            kn_buf *b = c->bufs[k->members[m]];
            if (b->kind != KN_B_REDUCTION || b->rop == KN_R_ARGMAX || b->rop == KN_R_ARGMIN ||
                b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD)
                g.par_red = 0;
        }
    }
    /* the outer split, or where the size is too small for it a comment
       saying which it would be: kiln/kernel_params.py reads both, so that
       one parametric build serves the sizes on either side of the
       threshold (a flag per size) */
    if (k->nouter > 0) {
        kn_cg_ind(&g);
        if (!par_outer)
            kn_str_printf(s, "/* kn:serial ");
        if (k->nouter > 1)
            kn_str_printf(s, "#pragma omp parallel for collapse(%d) schedule(static)", k->nouter);
        else
            kn_str_printf(s, "#pragma omp parallel for schedule(static)");
        kn_str_printf(s, par_outer ? "\n" : " */\n");
    }
    kn_cg_open_loops(&g, k->nouter, k->outer, KN_VAR_O(0), 0, NULL);
    int m = 0;
    while (m < k->nmembers) {
        kn_buf *b = c->bufs[k->members[m]];
        if (b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD)) {
            if (kn_cg_scan(&g, b) < 0)
                return -1;
            m++;
            continue;
        }
        if (b->kind == KN_B_REDUCTION) {
            if (gen_reduction(&g, b) < 0)
                return -1;
            m++;
            continue;
        }
        if (kn_cg_is_outer_member(k, b)) {
            if (gen_pointwise_value(&g, b, 1) < 0)
                return -1;
            m++;
            continue;
        }
        /* a run of inner pointwise members shares one inner loop */
        int end = kn_cg_inner_run(c, k, m);
        for (int q = m; q < end; q++) {
            kn_expr *hb = kn_member_body(c, k, c->bufs[k->members[q]]);
            if (hb == NULL)
                return -1;
            kn_cg_hoist(&g, hb);
        }
        /* index checks left inside the loop: OR-reduced, no branch */
        kn_expr *bodies[64];
        int nb = 0;
        for (int q = m; q < end && nb < 64; q++)
            bodies[nb++] = kn_member_body(c, k, c->bufs[k->members[q]]);
        kn_str clause = {0};
        checks_begin(&g, bodies, nb, &clause);
        if (par_inner) {
            kn_cg_ind(&g);
            kn_str_printf(s, "#pragma omp parallel for simd schedule(static)%s%s\n", clause.p ? " " : "",
                          clause.p ? clause.p : "");
        }
        kn_cg_open_loops(&g, k->ninner, k->inner, KN_VAR_I(0), !par_inner, par_inner ? NULL : clause.p);
        kn_str_free(&clause);
        for (; m < end; m++)
            if (gen_pointwise_value(&g, c->bufs[k->members[m]], 0) < 0)
                return -1;
        kn_cg_close_loops(&g, k->ninner);
        checks_end(&g);
    }
    kn_cg_close_loops(&g, k->nouter);
    kn_str_printf(s, "}\n");
    return s->oom ? (PyErr_NoMemory(), -1) : 0;
}

int
kn_codegen_c(kn_ctx *c, kn_str *out)
{
    KN_ASSERT(!c->cuda);
    for (int k = 0; k < c->nkernels; k++) {
        size_t from = out->n;
        if (gen_kernel(c, k, out) < 0)
            return -1;
        if (kn_cg_canon_locals(out, from) < 0)
            return PyErr_NoMemory(), -1;
    }
    return 0;
}
