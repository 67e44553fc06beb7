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
 */
#include "../kiln.h"
#include <math.h>
#include <string.h>

#include "emit.h"
#include "prelude.inc" /* static const char kn_prelude_text[] (from prelude.h) */
#include "prelude_cuda.inc" /* kn_prelude_cuda_text (from prelude_cuda.h) */

const kn_sop_info kn_sops[KN_S__COUNT] = {
#define SOP(name, nargs, cls, tmpl) {#name, nargs, KN_SC_##cls, tmpl},
#include "scalar.def"
#undef SOP
};

const char *
kn_codegen_prelude(void)
{
    return kn_prelude_text;
}

const char *
kn_codegen_prelude_cuda(void)
{
    return kn_prelude_cuda_text;
}


static const char *ctype_of[KN_NDTYPES] = {"b_t", "uint8_t", "int8_t", "int16_t", "int32_t", "int64_t",
                                            "float", "float", "float", "double"};
static const char *tag_of[KN_NDTYPES] = {"b", "u8", "i8", "i16", "i32", "i64", "f32", "f32", "f32", "f64"};

const char *
kn_cg_ctype(kn_dtype dt)
{
    return ctype_of[dt];
}

const char *
kn_cg_tag(kn_dtype dt)
{
    return tag_of[dt];
}

static int
active(kn_gen *g, int mark)
{
    for (int i = 0; i < g->nscope; i++)
        if (g->scope[i] == mark)
            return 1;
    return 0;
}

/* Scope tokens are unique across kernels and stay clear of the generation
   numbers that fuse.c and plan.c leave in kn_expr.mark. */
static int token_counter = 100000000;

void
kn_cg_open_scope(kn_gen *g)
{
    g->scope[g->nscope++] = ++token_counter;
    g->indent++;
}

void
kn_cg_close_scope(kn_gen *g)
{
    g->nscope--;
    g->indent--;
}

void
kn_cg_ind(kn_gen *g)
{
    for (int i = 0; i < g->indent; i++)
        kn_str_printf(g->s, "  ");
}

/* CUDA: a pure index expression whose range fits in int32 is computed in
   32-bit arithmetic (64-bit division is a long instruction sequence on GPUs). */
static int
fits32(kn_expr *e)
{
    int64_t lo, hi;
    if (!kn_expr_range(e, &lo, &hi) || lo < INT32_MIN || hi > INT32_MAX)
        return 0;
    /* every intermediate too: a sum can fit while a term does not */
    for (int j = 0; j < e->n; j++)
        if (e->a[j]->dt == KN_I64 && !fits32(e->a[j]))
            return 0;
    return 1;
}

static int
is32(kn_gen *g, kn_expr *e)
{
    if (!g->cuda || !g->ix32 || e->dt != KN_I64)
        return 0;
    return fits32(e);
}

static void
render_const(kn_str *s, kn_expr *e, int plain)
{
    switch ((kn_dtype)e->dt) {
    case KN_F32:
    case KN_F64: {
        double v = e->f;
        /* a negative constant is parenthesised: an operator template
           before it ("(-%s)") must not make "--1.5f", a decrement */
        if (isnan(v))
            kn_str_printf(s, "%s", e->dt == KN_F32 ? "NAN" : "((double)NAN)");
        else if (isinf(v))
            kn_str_printf(s, "%s%s%s", v < 0 ? "(-" : "", e->dt == KN_F32 ? "INFINITY" : "((double)INFINITY)",
                          v < 0 ? ")" : "");
        else {
            char buf[64];
            snprintf(buf, sizeof buf, e->dt == KN_F32 ? "%.9g" : "%.17g", v);
            kn_str_printf(s, "%s%s%s%s%s", buf[0] == '-' ? "(" : "", buf, strpbrk(buf, ".e") ? "" : ".0",
                          e->dt == KN_F32 ? "f" : "", buf[0] == '-' ? ")" : "");
        }
        break;
    }
    case KN_BOOL:
        kn_str_printf(s, "%d", e->i ? 1 : 0);
        break;
    case KN_I64:
        if (plain)
            kn_str_printf(s, e->i < 0 ? "(%lld)" : "%lld", (long long)e->i);
        else if (e->i == INT64_MIN)
            kn_str_printf(s, "INT64_MIN");
        else
            kn_str_printf(s, "INT64_C(%lld)", (long long)e->i);
        break;
    default:
        kn_str_printf(s, "((%s)%lld)", ctype_of[e->dt], (long long)e->i);
    }
}

static void emit_ref(kn_gen *g, kn_expr *e, kn_str *out);

/* Values computed once per outer point of this kernel (reductions and outer
   pointwise members) live in registers r<id>. */
int
kn_cg_in_register(kn_gen *g, const kn_buf *b)
{
    if (b->kernel != g->kid)
        return 0;
    if (b->kind == KN_B_REDUCTION)
        return b->rop != KN_R_CUMSUM && b->rop != KN_R_CUMPROD;
    return kn_cg_is_outer_member(g->k, b);
}

static const char *
lane_of(kn_gen *g, kn_expr *e)
{
    for (int q = 0; q < g->nlanes; q++)
        if (g->lane_e[q] == e)
            return g->lane_txt[q];
    return NULL;
}

/* Emit the statements needed for e in the current scope; afterwards
   emit_ref renders a reference to its value. */
void
kn_cg_emit(kn_gen *g, kn_expr *e)
{
    if (e->op == KN_S_CONST || e->op == KN_S_VAR || e->op == KN_S_LOCAL)
        return;
    if (e->mark > 0 && active(g, e->mark))
        return;
    int lane = e->op == KN_S_LOAD && g->nlanes && lane_of(g, e);
    for (int j = 0; j < e->n && !lane; j++)
        kn_cg_emit(g, e->a[j]);
    /* A load of a value kept in a register by this kernel is that register. */
    if (e->op == KN_S_LOAD && kn_cg_in_register(g, g->c->bufs[e->i]))
        return;
    /* index arithmetic stays inline; everything else becomes a temporary */
    if (e->dt == KN_I64 && (e->op == KN_S_ADD || e->op == KN_S_MUL) && e->depth > 0)
        return;
    kn_str rhs = {0};
    switch (e->op) {
    case KN_S_LOAD: {
        kn_buf *b = g->c->bufs[e->i];
        kn_str ix = {0};
        const char *lane = lane_of(g, e);
        if (lane) {   /* one lane of a vector load */
            kn_dtype lt = (kn_dtype)e->ext;
            kn_str_printf(&rhs, lt == KN_BF16 ? "kn_bf2f(%s)" : lt == KN_F16 ? "kn_h2f(%s)" : "%s", lane);
            break;
        }
        emit_ref(g, e->a[0], &ix);
        kn_dtype st = (kn_dtype)e->ext;
        if (st == KN_BF16)
            kn_str_printf(&rhs, "kn_bf2f(b%d[%s])", b->id, ix.p ? ix.p : "0");
        else if (st == KN_F16)
            kn_str_printf(&rhs, g->cuda ? "kn_h2f(b%d[%s])" : "(float)b%d[%s]", b->id, ix.p ? ix.p : "0");
        else
            kn_str_printf(&rhs, "b%d[%s]", b->id, ix.p ? ix.p : "0");
        kn_str_free(&ix);
        break;
    }
    case KN_S_CAST: {
        kn_str a = {0};
        emit_ref(g, e->a[0], &a);
        if (e->dt == KN_BOOL)
            kn_str_printf(&rhs, "(%s != 0)", a.p);
        else if (e->i == KN_BF16)
            kn_str_printf(&rhs, "kn_bf2f(kn_f2bf((float)%s))", a.p);
        else if (e->i == KN_F16)
            kn_str_printf(&rhs, g->cuda ? "kn_h2f(kn_f2h((float)%s))" : "(float)(_Float16)%s", a.p);
        else if (!g->cuda && kn_dtype_is_float((kn_dtype)e->a[0]->dt) && kn_dtype_is_int((kn_dtype)e->dt))
            /* a C cast of an out-of-range float is undefined (gcc folds
               (float)(int)x to trunc(x)): the prelude's kn_f2* give eager's values */
            kn_str_printf(&rhs, "kn_f2%s_%s(%s)", tag_of[e->dt], tag_of[e->a[0]->dt], a.p);
        else
            kn_str_printf(&rhs, "(%s)%s", ctype_of[e->dt], a.p);
        kn_str_free(&a);
        break;
    }
    case KN_S_CHECK: {
        int k = 0;
        while (k < g->nchk && g->chk[k] != e)
            k++;
        if (k == g->nchk)
            goto templ; /* outside a checked inner loop: kn_chk's branch */
        /* a flag and the bad value, reduced over the loop (no branch) */
        kn_str v = {0};
        emit_ref(g, e->a[0], &v);
        int64_t n = e->a[1]->i, lo = (e->a[2]->i & KN_E_WRAP) ? -n : 0;
        kn_cg_ind(g);
        kn_str_printf(g->s, "const int64_t t%u = %s;\n", e->id, v.p);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const int64_t q%u = (t%u < INT64_C(%lld)) | (t%u >= INT64_C(%lld));\n", e->id, e->id,
                      (long long)lo, e->id, (long long)n);
        kn_cg_ind(g);
        kn_str_printf(g->s, "kb%u_%d |= q%u;\n", e->id, g->chkgen, e->id);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const int64_t w%u = q%u ? t%u : INT64_MIN;\n", e->id, e->id, e->id);
        kn_cg_ind(g);
        kn_str_printf(g->s, "kv%u_%d = kv%u_%d > w%u ? kv%u_%d : w%u;\n", e->id, g->chkgen, e->id, g->chkgen, e->id,
                      e->id, g->chkgen, e->id);
        kn_str_free(&v);
        e->mark = g->scope[g->nscope - 1];
        return;
    }
    case KN_S_WHERE: {
        kn_str a = {0}, b = {0}, d = {0};
        emit_ref(g, e->a[0], &a);
        emit_ref(g, e->a[1], &b);
        emit_ref(g, e->a[2], &d);
        kn_str_printf(&rhs, "(%s ? %s : %s)", a.p, b.p, d.p);
        kn_str_free(&a);
        kn_str_free(&b);
        kn_str_free(&d);
        break;
    }
    default:
    templ: {
        const char *t = kn_sops[e->op].tmpl;
        kn_dtype adt = e->n ? (kn_dtype)e->a[0]->dt : (kn_dtype)e->dt;
        kn_str args[3] = {{0}, {0}, {0}};
        for (int j = 0; j < e->n; j++)
            emit_ref(g, e->a[j], &args[j]);
        for (const char *p = t; p && *p; p++) {
            if (*p != '%') {
                kn_str_printf(&rhs, "%c", *p);
                continue;
            }
            p++;
            if (*p >= '0' && *p <= '2')
                kn_str_printf(&rhs, "%s", args[*p - '0'].p ? args[*p - '0'].p : "0");
            else if (*p == 't')
                kn_str_printf(&rhs, "%s", tag_of[adt]);
            else if (*p == 'f')
                kn_str_printf(&rhs, "%s", adt == KN_F32 ? "f" : "");
            else if (*p == '%')
                kn_str_printf(&rhs, "%%");
        }
        for (int j = 0; j < 3; j++)
            kn_str_free(&args[j]);
    }
    }
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s t%u = %s;\n", is32(g, e) ? "int" : ctype_of[e->dt], e->id, rhs.p ? rhs.p : "0");
    kn_str_free(&rhs);
    e->mark = g->scope[g->nscope - 1];
}

static void
emit_ref(kn_gen *g, kn_expr *e, kn_str *out)
{
    switch (e->op) {
    case KN_S_CONST:
        render_const(out, e, is32(g, e));
        return;
    case KN_S_VAR:
        kn_str_printf(out, "v%lld", (long long)e->i);
        return;
    case KN_S_LOAD:
        if (kn_cg_in_register(g, g->c->bufs[e->i])) {
            kn_str_printf(out, "r%lld", (long long)e->i);
            return;
        }
        break;
    default:
        break;
    }
    if (e->dt == KN_I64 && (e->op == KN_S_ADD || e->op == KN_S_MUL) && e->depth > 0) {
        kn_str a = {0}, b = {0};
        emit_ref(g, e->a[0], &a);
        emit_ref(g, e->a[1], &b);
        /* CUDA with 32-bit loop variables: an index expression that may leave
           int32 is computed in 64 bits */
        int widen = g->cuda && g->ix32 && !is32(g, e);
        kn_str_printf(out, "(%s%s %c %s)", widen ? "(long long)" : "", a.p, e->op == KN_S_ADD ? '+' : '*', b.p);
        kn_str_free(&a);
        kn_str_free(&b);
        return;
    }
    kn_str_printf(out, "t%u", e->id);
}

/* Emit, in the current (outer) scope, every subexpression of e that does not
   depend on inner loop variables, so inner loops hold only per-element work
   (loop-invariant code motion; it also helps gcc's vectoriser). */
static uint32_t hoist_gen = 1;

static void
hoist_rec(kn_gen *g, kn_expr *e, uint32_t stamp)
{
    if (e->visit == stamp || e->op == KN_S_CONST || e->op == KN_S_VAR)
        return;
    e->visit = stamp;
    if (e->depth <= 1) {
        kn_cg_emit(g, e);
        return;
    }
    for (int j = 0; j < e->n; j++)
        hoist_rec(g, e->a[j], stamp);
}

void
kn_cg_hoist(kn_gen *g, kn_expr *e)
{
    /* an empty inner space runs no iteration: hoisting would read its
       buffers anyway (empty tensors, maybe without storage) */
    for (int d = 0; d < g->k->ninner; d++)
        if (g->k->inner[d] == 0)
            return;
    hoist_rec(g, e, ++hoist_gen);
}

/* Emit everything e needs, then return its reference text (caller frees). */
kn_str
kn_cg_value(kn_gen *g, kn_expr *e)
{
    kn_cg_emit(g, e);
    kn_str r = {0};
    emit_ref(g, e, &r);
    return r;
}

void
kn_cg_store(kn_gen *g, kn_buf *b, kn_expr *ix, const char *val)
{
    kn_str i = kn_cg_value(g, ix);
    kn_cg_ind(g);
    switch (b->dt) {
    case KN_BF16:
        kn_str_printf(g->s, "b%d[%s] = kn_f2bf(%s);\n", b->id, i.p, val);
        break;
    case KN_F16:
        kn_str_printf(g->s, g->cuda ? "b%d[%s] = kn_f2h(%s);\n" : "b%d[%s] = (_Float16)(%s);\n", b->id, i.p, val);
        break;
    default:
        kn_str_printf(g->s, "b%d[%s] = (%s)(%s);\n", b->id, i.p, kn_dtype_ctype[b->dt], val);
    }
    kn_str_free(&i);
}

/* ---------------------------------------------------------------- loops */
void
kn_cg_open_loops(kn_gen *g, int n, const int64_t *ext, int var0, int simd_last, const char *clause)
{
    if (g->par_red && simd_last && clause && n > 0) {
        /* a reduction over a large space with little outer parallelism:
           threads split the reduction space, each with vector lanes */
        kn_cg_ind(g);
        kn_str_printf(g->s, "#pragma omp parallel for simd collapse(%d) schedule(static) %s\n", n, clause);
        simd_last = 0;
    }
    for (int d = 0; d < n; d++) {
        if (d == n - 1 && simd_last) {
            kn_cg_ind(g);
            kn_str_printf(g->s, "#pragma omp simd%s%s\n", clause ? " " : "", clause ? clause : "");
        }
        kn_cg_ind(g);
        kn_str_printf(g->s, "for (%s v%d = 0; v%d < %lld; v%d++) {\n", g->cuda ? "kn_ix" : "int64_t", var0 + d,
                      var0 + d, (long long)ext[d], var0 + d);
        kn_cg_open_scope(g);
    }
}

void
kn_cg_close_loops(kn_gen *g, int n)
{
    for (int d = 0; d < n; d++) {
        kn_cg_close_scope(g);
        kn_cg_ind(g);
        kn_str_printf(g->s, "}\n");
    }
}

const char *
kn_cg_acc_init(kn_rop r, kn_dtype acc, int *is_float)
{
    *is_float = kn_dtype_is_float(acc);
    switch (r) {
    case KN_R_SUM: case KN_R_CUMSUM: case KN_R_ANY:
        return "0";
    case KN_R_PROD: case KN_R_CUMPROD: case KN_R_ALL:
        return "1";
    case KN_R_MAX: case KN_R_ARGMAX:
        if (*is_float)
            return "-INFINITY";
        switch (acc) {
        case KN_BOOL: return "0";
        case KN_U8: return "0";
        case KN_I8: return "INT8_MIN";
        case KN_I16: return "INT16_MIN";
        case KN_I32: return "INT32_MIN";
        default: return "INT64_MIN";
        }
    case KN_R_MIN: case KN_R_ARGMIN:
        if (*is_float)
            return "INFINITY";
        switch (acc) {
        case KN_BOOL: return "1";
        case KN_U8: return "UINT8_MAX";
        case KN_I8: return "INT8_MAX";
        case KN_I16: return "INT16_MAX";
        case KN_I32: return "INT32_MAX";
        default: return "INT64_MAX";
        }
    default:
        return "0";
    }
}

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
    if (e->mark > 0 && active(g, e->mark))
        return; /* emitted already, before the loop */
    if (e->op == KN_S_CHECK && g->nchk < (int)(sizeof g->chk / sizeof g->chk[0]))
        g->chk[g->nchk++] = e;
    for (int j = 0; j < e->n; j++)
        collect_checks(g, e->a[j], stamp);
}

/* Before the inner loop over `bodies`: the index checks left inside it
   become accumulators (declared here) reduced by the loop, whose clauses
   are appended to *clause; checks_end records what they found.  The CUDA
   renderer keeps kn_chk's branch. */
static void
checks_begin(kn_gen *g, kn_expr *const *bodies, int nb, kn_str *clause)
{
    g->nchk = 0;
    if (g->cuda)
        return;
    uint32_t stamp = ++hoist_gen;
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

static int
gen_reduction(kn_gen *g, kn_buf *b)
{
    kn_ctx *c = g->c;
    kn_expr *body = kn_member_body(c, g->k, b);
    if (body == NULL)
        return -1;
    int isf;
    const char *init = kn_cg_acc_init(b->rop, (kn_dtype)b->acc_dt, &isf);
    const char *at = b->acc_dt == KN_BOOL ? "int" : ctype_of[b->acc_dt];
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
        checks_begin(g, &body, 1, &clause);
        kn_cg_open_loops(g, k->ninner, k->inner, KN_VAR_I(0), 1, clause.p);
        kn_str_free(&clause);
        kn_str v = kn_cg_value(g, body);
        kn_cg_ind(g);
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
        checks_begin(g, &body, 1, &clause);
        kn_cg_open_loops(g, k->ninner, k->inner, KN_VAR_I(0), 1, clause.p);
        kn_str_free(&clause);
        kn_str v = kn_cg_value(g, body);
        kn_cg_ind(g);
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
        PyErr_SetString(PyExc_RuntimeError, "kiln: unknown reduction");
        return -1;
    }
    /* the result: a register r<id>, stored unless local */
    kn_dtype rdt = kn_dtype_compute(b->dt);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s r%d = (%s)a%d;\n", ctype_of[rdt], id, ctype_of[rdt], id);
    if (!b->local) {
        kn_expr *ix = kn_store_index(c, k, b);
        if (ix == NULL)
            return -1;
        char name[32];
        snprintf(name, sizeof name, "r%d", id);
        kn_cg_store(g, b, ix, name);
    }
    return 0;
}

/* cumsum/cumprod: for each outer point, a sequential loop over the scan dim. */
int
kn_cg_scan(kn_gen *g, kn_buf *b)
{
    kn_ctx *c = g->c;
    kn_subst s;
    memset(&s, 0, sizeof s);
    int o = 0;
    for (int d = 0; d < b->ndim; d++) {
        if (d == b->scan_dim || b->size[d] == 1)
            continue;
        s.to[KN_VAR_P(d)] = kn_var(c, KN_VAR_O(o), b->size[d]);
        o++;
    }
    kn_expr *scanvar = b->scan_dim >= 0 ? kn_var(c, KN_VAR_I(0), b->size[b->scan_dim]) : kn_iconst(c, 0);
    s.to[KN_VAR_R(0)] = scanvar;
    kn_expr *body = kn_substitute(c, b->body, &s);
    if (body == NULL)
        return -1;
    kn_expr *ix = kn_iconst(c, 0);
    for (int d = 0; d < b->ndim; d++) {
        if (b->size[d] == 1)
            continue;
        kn_expr *v = d == b->scan_dim ? scanvar : s.to[KN_VAR_P(d)];
        ix = kn_iadd(c, ix, kn_imul(c, v, b->stride[d]));
    }
    int isf;
    const char *init = kn_cg_acc_init(b->rop, (kn_dtype)b->acc_dt, &isf);
    kn_cg_ind(g);
    kn_str_printf(g->s, "%s a%d = %s;\n", ctype_of[b->acc_dt], b->id, init);
    kn_cg_open_loops(g, g->k->ninner, g->k->inner, KN_VAR_I(0), 0, NULL);
    kn_str v = kn_cg_value(g, body);
    kn_cg_ind(g);
    kn_str_printf(g->s, "a%d %s= %s;\n", b->id, b->rop == KN_R_CUMSUM ? "+" : "*", v.p);
    kn_str_free(&v);
    char name[32];
    snprintf(name, sizeof name, "a%d", b->id);
    kn_cg_store(g, b, ix, name);
    kn_cg_close_loops(g, g->k->ninner);
    return 0;
}

int
kn_cg_is_outer_member(const kn_kernel *k, const kn_buf *b)
{
    if (b->kind != KN_B_POINTWISE || !k->has_reduction)
        return 0;
    int64_t s[KN_MAXDIM];
    int n = 0;
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] != 1)
            s[n++] = b->size[d];
    return n == k->nouter && (n == 0 || memcmp(s, k->outer, sizeof(int64_t) * (size_t)n) == 0);
}

static int
gen_pointwise_value(kn_gen *g, kn_buf *b, int outer_only)
{
    kn_expr *body = kn_member_body(g->c, g->k, b);
    kn_expr *ix = kn_store_index(g->c, g->k, b);
    if (body == NULL || ix == NULL)
        return -1;
    kn_str v = kn_cg_value(g, body);
    if (outer_only) {
        kn_dtype rdt = kn_dtype_compute(b->dt);
        kn_cg_ind(g);
        kn_str_printf(g->s, "const %s r%d = %s;\n", ctype_of[rdt], b->id, v.p);
        if (!b->local)
            kn_cg_store(g, b, ix, v.p);
    } else {
        kn_cg_store(g, b, ix, v.p);
    }
    kn_str_free(&v);
    return 0;
}

/* ---------------------------------------------------------------- kernels */
static void
collect_bufs(kn_expr *e, uint8_t *used, int nbufs, uint32_t gen)
{
    if (e->mark == (int)gen)
        return;
    e->mark = (int)gen;
    if (e->op == KN_S_LOAD)
        used[e->i] |= 1;
    if (e->op == KN_S_CHECK)
        used[nbufs] = 1;
    for (int j = 0; j < e->n; j++)
        collect_bufs(e->a[j], used, nbufs, gen);
}

static uint32_t cg_gen = 1u << 29;

/* Per buffer id: 1 if kernel k reads it, 2 if it stores it; entry nbufs is 1
   when the kernel checks indices (a calloc'd array the caller frees; NULL
   with MemoryError). */
uint8_t *
kn_cg_used_bufs(kn_ctx *c, const kn_kernel *k)
{
    uint8_t *used = calloc((size_t)c->nbufs + 1, 1);
    if (used == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    uint32_t gg = ++cg_gen;
    for (int m = 0; m < k->nmembers; m++) {
        kn_buf *b = c->bufs[k->members[m]];
        collect_bufs(b->body, used, c->nbufs, gg);
        if (!b->local)
            used[b->id] |= 2;
    }
    return used;
}

static int
gen_kernel(kn_ctx *c, int kid, kn_str *s)
{
    kn_kernel *k = &c->kernels[kid];
    kn_gen g = {0};
    g.c = c;
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
                      kn_dtype_ctype[b->dt], i, kn_dtype_ctype[b->dt], i);
    }
    free(used);
    /* the call's error record (prelude.h: kn_flag) follows the buffers */
    kn_str_printf(s, "  int64_t *const kn_err = (int64_t *)B[%d];\n  (void)kn_err;\n", c->nbufs);
    g.indent = 1;
    g.scope[g.nscope++] = ++token_counter;
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
    if (par_outer) {
        kn_cg_ind(&g);
        if (k->nouter > 1)
            kn_str_printf(s, "#pragma omp parallel for collapse(%d) schedule(static)\n", k->nouter);
        else
            kn_str_printf(s, "#pragma omp parallel for schedule(static)\n");
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
        for (int q = m; q < k->nmembers; q++) {
            kn_buf *p = c->bufs[k->members[q]];
            if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
                break;
            kn_expr *hb = kn_member_body(c, k, p);
            if (hb == NULL)
                return -1;
            kn_cg_hoist(&g, hb);
        }
        /* index checks left inside the loop: OR-reduced, no branch */
        kn_expr *bodies[64];
        int nb = 0;
        for (int q = m; q < k->nmembers && nb < 64; q++) {
            kn_buf *p = c->bufs[k->members[q]];
            if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
                break;
            bodies[nb++] = kn_member_body(c, k, p);
        }
        kn_str clause = {0};
        checks_begin(&g, bodies, nb, &clause);
        if (par_inner) {
            kn_cg_ind(&g);
            kn_str_printf(s, "#pragma omp parallel for simd schedule(static)%s%s\n", clause.p ? " " : "",
                          clause.p ? clause.p : "");
        }
        kn_cg_open_loops(&g, k->ninner, k->inner, KN_VAR_I(0), !par_inner, par_inner ? NULL : clause.p);
        kn_str_free(&clause);
        while (m < k->nmembers) {
            kn_buf *p = c->bufs[k->members[m]];
            if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
                break;
            if (gen_pointwise_value(&g, p, 0) < 0)
                return -1;
            m++;
        }
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
    for (int k = 0; k < c->nkernels; k++)
        if (gen_kernel(c, k, out) < 0)
            return -1;
    return 0;
}
