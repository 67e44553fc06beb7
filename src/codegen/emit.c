/* emit.c — the expression emitter shared by the C and CUDA renderers.
 *
 * Consumes: kernel member bodies (kn_expr DAGs over a kernel's loop
 * variables, compile/fuse.c) and a target descriptor (emit.h: kn_target,
 * filled by codegen/c.c and codegen/cuda.c).  Produces: text into the
 * renderer's kn_str: one `const <type> t<id> = ...;` temporary per value
 * (hash-consed expressions make CSE free; a value is emitted once per open
 * scope), references to them, loads, stores, loop headers, reduction
 * accumulator initial values and scans.  Scalar ops are rendered from
 * scalar.def's templates; LOAD, CAST, WHERE, CHECK and constants by hand.
 * Whatever a target spells its own way (narrow dtypes, loop variable type,
 * float-to-int casts) comes from the descriptor; CUDA's 32-bit index
 * arithmetic from kn_gen.ix32.
 */
#include "../kiln.h"
#include "../error.h"
#include <math.h>
#include <string.h>

#include "emit.h"

const kn_sop_info kn_sops[KN_S__COUNT] = {
#define COMM KN_SF_COMM
#define SOP(name, nargs, cls, flags, tmpl) {#name, nargs, KN_SC_##cls, flags, tmpl},
#include "scalar.def"
#undef SOP
#undef COMM
};

const char *
kn_codegen_prelude(const char *target)
{
    return strcmp(target, "c") == 0 ? kn_target_c.prelude : strcmp(target, "cuda") == 0 ? kn_target_cuda.prelude : NULL;
}

int
kn_cg_active(kn_gen *g, int mark)
{
    for (int i = 0; i < g->nscope; i++)
        if (g->scope[i] == mark)
            return 1;
    return 0;
}

/* Scope tokens are unique across kernels and stay clear of the generation
   numbers that fuse.c and plan.c leave in kn_expr.mark. */
static int token_counter = 100000000;

int
kn_cg_root_scope(void)
{
    return ++token_counter;
}

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
    if (!g->ix32 || e->dt != KN_I64)
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
        kn_str_printf(s, "((%s)%lld)", kn_dtypes[e->dt].cctype, (long long)e->i);
    }
}

static void emit_ref(kn_gen *g, kn_expr *e, kn_str *out);

/* Render template t (scalar.def's language: %0..%2 the arguments' text, %t
   the tag of dtype adt, %f "f" when adt is float32, %% a percent sign). */
static void
expand(kn_str *out, const char *t, const char *const *args, kn_dtype adt)
{
    for (const char *p = t; p && *p; p++) {
        if (*p != '%') {
            const char *q = strchr(p, '%');   /* (the run of plain text, copied at once) */
            size_t k = q ? (size_t)(q - p) : strlen(p);
            kn_str_put(out, p, k);
            p += k - 1;
            continue;
        }
        p++;
        const char *piece = NULL;
        if (*p >= '0' && *p <= '2')
            piece = args[*p - '0'] ? args[*p - '0'] : "(null)";   /* (as %s wrote it) */
        else if (*p == 't')
            piece = kn_dtypes[adt].tag;
        else if (*p == 'f')
            piece = adt == KN_F32 ? "f" : "";
        else if (*p == '%')
            piece = "%";
        else if (*p == '\0')
            break;   /* (a template ending in %: nothing more) */
        if (piece)
            kn_str_put(out, piece, strlen(piece));
    }
}

/* Is integer expression e a float truncated (through integer casts)? */
static int
truncated_float(const kn_expr *e)
{
    while (e->op == KN_S_CAST && kn_dtype_is_int((kn_dtype)e->dt)) {
        if (kn_dtype_is_float((kn_dtype)e->a[0]->dt))
            return 1;
        e = e->a[0];
    }
    return 0;
}

/* A target template of one argument (%0). */
static void
expand1(kn_str *out, const char *t, const char *arg, kn_dtype adt)
{
    const char *args[3] = {arg, "0", "0"};
    expand(out, t, args, adt);
}

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
    if (e->mark > 0 && kn_cg_active(g, e->mark))
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
        kn_dtype st = (kn_dtype)e->ext;   /* the storage dtype loaded */
        kn_str elem = {0};
        if (lane) {   /* one lane of a vector load */
            kn_str_put(&elem, lane, strlen(lane));
        } else {
            emit_ref(g, e->a[0], &ix);
            kn_str_printf(&elem, "b%d[%s]", b->id, ix.p ? ix.p : "0");
            kn_str_free(&ix);
        }
        if (g->t->load[st])
            expand1(&rhs, g->t->load[st], elem.p, st);
        else
            kn_str_put(&rhs, elem.p ? elem.p : "(null)", strlen(elem.p ? elem.p : "(null)"));
        kn_str_free(&elem);
        break;
    }
    case KN_S_CAST: {
        kn_str a = {0};
        emit_ref(g, e->a[0], &a);
        if (e->dt == KN_BOOL)
            kn_str_printf(&rhs, "(%s != 0)", a.p);
        else if (e->i > 0 && e->i < KN_NDTYPES && g->t->round[e->i])   /* kn_round: through a narrow dtype */
            expand1(&rhs, g->t->round[e->i], a.p, (kn_dtype)e->dt);
        else if (g->t->exact_f2i && kn_dtype_is_float((kn_dtype)e->a[0]->dt) && kn_dtype_is_int((kn_dtype)e->dt))
            /* the prelude's kn_f2* give eager's values */
            kn_str_printf(&rhs, "kn_f2%s_%s(%s)", kn_dtypes[e->dt].tag, kn_dtypes[e->a[0]->dt].tag, a.p);
        else if (g->t->exact_f2i && kn_dtype_is_float((kn_dtype)e->dt) && truncated_float(e->a[0]))
            /* float -> int(s) -> float: gcc (-fno-trapping-math) would make
               it trunc(x), -0.0 for x in (-1, 0); an integer's float is +0
               (prelude: kn_opaque_zero) */
            kn_str_printf(&rhs, "(%s)(%s ^ (%s)kn_opaque_zero)", kn_dtypes[e->dt].cctype, a.p,
                          kn_dtypes[e->a[0]->dt].cctype);
        else
            kn_str_printf(&rhs, "(%s)%s", kn_dtypes[e->dt].cctype, a.p);
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
        kn_dtype adt = e->n ? (kn_dtype)e->a[0]->dt : (kn_dtype)e->dt;
        kn_str args[3] = {{0}, {0}, {0}};
        const char *txt[3];
        for (int j = 0; j < e->n; j++)
            emit_ref(g, e->a[j], &args[j]);
        for (int j = 0; j < 3; j++)
            txt[j] = args[j].p ? args[j].p : "0";
        expand(&rhs, kn_sops[e->op].tmpl, txt, adt);
        if (kn_fault_bad_expr && e->op == KN_S_ADD)   /* kiln._C.test_fault("bad_expr") */
            kn_str_printf(&rhs, " +* kn_broken_on_purpose(");
        for (int j = 0; j < 3; j++)
            kn_str_free(&args[j]);
    }
    }
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s t%u = %s;\n", is32(g, e) ? "int" : kn_dtypes[e->dt].cctype, e->id, rhs.p ? rhs.p : "0");
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
        int widen = g->ix32 && !is32(g, e);
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

uint32_t
kn_cg_stamp(void)
{
    return ++hoist_gen;
}

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

/* The element type of a buffer of dtype dt, as the target declares it. */
const char *
kn_cg_storage(kn_gen *g, kn_dtype dt)
{
    return g->t->storage[dt] ? g->t->storage[dt] : kn_dtypes[dt].ctype;
}

/* What a store into dtype dt needs of value e: a value rounded through dt
   (kn_round) is its operand, since the store's conversion rounds the same
   way (rounding twice to bfloat16 or half is rounding once). */
kn_expr *
kn_cg_stored(kn_expr *e, kn_dtype dt)
{
    return e->op == KN_S_CAST && e->i == (int64_t)dt && (dt == KN_F16 || dt == KN_BF16) && e->n == 1 ? e->a[0] : e;
}

/* The text of compute value `val` converted to storage dtype dt. */
void
kn_cg_to_storage(kn_gen *g, kn_str *out, kn_dtype dt, const char *val)
{
    if (g->t->store[dt])
        expand1(out, g->t->store[dt], val, dt);
    else
        kn_str_printf(out, "(%s)(%s)", kn_cg_storage(g, dt), val);
}

void
kn_cg_store(kn_gen *g, kn_buf *b, kn_expr *ix, const char *val)
{
    kn_str i = kn_cg_value(g, ix), v = {0};
    kn_cg_to_storage(g, &v, b->dt, val);
    kn_cg_ind(g);
    kn_str_printf(g->s, "b%d[%s] = %s;\n", b->id, i.p, v.p);
    kn_str_free(&i);
    kn_str_free(&v);
}

int
kn_cg_result(kn_gen *g, kn_buf *b, const char *guard)
{
    kn_dtype rdt = kn_dtype_compute(b->dt);
    kn_cg_ind(g);
    kn_str_printf(g->s, "const %s r%d = (%s)a%d;\n", kn_dtypes[rdt].cctype, b->id, kn_dtypes[rdt].cctype, b->id);
    if (b->local)
        return 0;
    kn_expr *ix = kn_store_index(g->c, g->k, b);
    if (ix == NULL)
        return -1;
    char name[32];
    snprintf(name, sizeof name, "r%d", b->id);
    if (guard) {
        kn_cg_ind(g);
        kn_str_printf(g->s, "if (%s) {\n", guard);
        kn_cg_open_scope(g);
    }
    kn_cg_store(g, b, ix, name);
    if (guard) {
        kn_cg_close_scope(g);
        kn_cg_ind(g);
        kn_str_printf(g->s, "}\n");
    }
    return 0;
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
        kn_str_printf(g->s, "for (%s v%d = 0; v%d < %lld; v%d++) {\n", g->t->ix_type, var0 + d,
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


/* cumsum/cumprod: for each outer point, a sequential loop over the scan dim. */
int
kn_cg_scan(kn_gen *g, kn_buf *b)
{
    kn_ctx *c = g->c;
    KN_ASSERT(b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD));
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
    kn_str_printf(g->s, "%s a%d = %s;\n", kn_dtypes[b->acc_dt].cctype, b->id, init);
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
kn_cg_inner_run(kn_ctx *c, const kn_kernel *k, int m)
{
    while (m < k->nmembers) {
        const kn_buf *p = c->bufs[k->members[m]];
        if (p->kind != KN_B_POINTWISE || kn_cg_is_outer_member(k, p))
            break;
        m++;
    }
    return m;
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

/* ------------------------------------------------- local names, canonical */

/* the prefixes of the locals the renderers name by graph ids (temporaries,
   accumulators, argmax pairs, index checks, NaN flags, rows, register
   loads, shared arrays); buffers (b<n>, named by their frame slot) and loop variables
   (v<n>, by depth) keep their names.  Longer prefixes first. */
static const char *const local_prefixes[] = {"kb", "kv", "vl", "sm", "sa", "t", "a", "m", "n", "p", "q", "r", "w", NULL};
/* (local_prefix's table below spells this list by first character: change both) */

/* 1 for a character of an identifier (letters, digits, _) */
static const unsigned char ident_tab[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['_'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
    ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1,
    ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
};

/* The local_prefixes entry identifier p..q starts with, followed by a digit
 * (the first in table order: longer prefixes first), setting *plen; -1 for
 * none.  (A table lookup per identifier: this scan is a sixth of a size
 * plan's C core.) */
static int
local_prefix(const char *p, const char *q, int *plen)
{
    /* per first character, its local_prefixes entries plus one (0 ends) */
    static const unsigned char first[256][2] = {
        ['k'] = {1, 2}, ['v'] = {3}, ['s'] = {4, 5}, ['t'] = {6}, ['a'] = {7}, ['m'] = {8},
        ['n'] = {9}, ['p'] = {10}, ['q'] = {11}, ['r'] = {12}, ['w'] = {13},
    };
    const unsigned char *f = first[(unsigned char)*p];
    for (int k = 0; k < 2 && f[k]; k++) {
        const char *pre = local_prefixes[f[k] - 1];
        size_t l = pre[1] ? 2 : 1;
        if ((size_t)(q - p) > l && (l == 1 || p[1] == pre[1]) && p[l] >= '0' && p[l] <= '9') {
            *plen = (int)l;
            return f[k] - 1;
        }
    }
    return -1;
}

int
kn_cg_canon_locals(kn_str *s, size_t from)
{
    if (s->oom || from >= s->n)
        return 0;
    /* (prefix, old number) -> new number: open addressing, grown as needed */
    size_t cap = 256, used = 0;
    long long *keys = malloc(sizeof(long long) * cap);
    int *vals = malloc(sizeof(int) * cap);
    int next[16] = {0};
    kn_str out = {0};
    if (keys == NULL || vals == NULL)
        goto oom;
    memset(keys, -1, sizeof(long long) * cap);
    const char *p = s->p + from, *end = s->p + s->n, *copied = p;
    while (p < end) {
        if (!ident_tab[(unsigned char)*p]) {
            p++;
            continue;
        }
        const char *q = p + 1;
        while (q < end && ident_tab[(unsigned char)*q])
            q++;
        /* an identifier (not a number's tail): a local's prefix, <digits>, and an optional _<digits> */
        int plen = 0, which = local_prefix(p, q, &plen);
        if (which >= 0) {
            const char *d = p + plen;
            long long num = 0;
            while (d < q && *d >= '0' && *d <= '9' && num < (1LL << 40))
                num = num * 10 + (*d++ - '0');
            int ok = d == q;
            if (!ok && *d == '_' && d + 1 < q) {
                const char *e = d + 1;
                while (e < q && *e >= '0' && *e <= '9')
                    e++;
                ok = e == q;
            }
            if (ok) {
                long long key = num * 16 + which;
                if (2 * (used + 1) > cap) {
                    size_t ncap = cap * 2;
                    long long *nk = malloc(sizeof(long long) * ncap);
                    int *nv = malloc(sizeof(int) * ncap);
                    if (nk == NULL || nv == NULL) {
                        free(nk);
                        free(nv);
                        goto oom;
                    }
                    memset(nk, -1, sizeof(long long) * ncap);
                    for (size_t i = 0; i < cap; i++) {
                        if (keys[i] < 0)
                            continue;
                        size_t h = (size_t)(keys[i] * 0x9E3779B97F4A7C15ULL) & (ncap - 1);
                        while (nk[h] >= 0)
                            h = (h + 1) & (ncap - 1);
                        nk[h] = keys[i];
                        nv[h] = vals[i];
                    }
                    free(keys);
                    free(vals);
                    keys = nk;
                    vals = nv;
                    cap = ncap;
                }
                size_t h = (size_t)(key * 0x9E3779B97F4A7C15ULL) & (cap - 1);
                while (keys[h] >= 0 && keys[h] != key)
                    h = (h + 1) & (cap - 1);
                if (keys[h] < 0) {
                    keys[h] = key;
                    vals[h] = next[which]++;
                    used++;
                }
                kn_str_put(&out, copied, (size_t)(p - copied) + (size_t)plen);
                kn_str_int(&out, vals[h]);
                copied = d;   /* (the _<digits> suffix, if any, is copied as it is) */
            }
        }
        p = q;
    }
    if (copied == s->p + from) {   /* nothing renamed */
        free(keys);
        free(vals);
        kn_str_free(&out);
        return 0;
    }
    kn_str_put(&out, copied, (size_t)(end - copied));
    if (out.oom)
        goto oom;
    s->n = from;
    s->p[s->n] = 0;
    kn_str_put(s, out.p, out.n);
    free(keys);
    free(vals);
    kn_str_free(&out);
    return s->oom ? -1 : 0;
oom:
    free(keys);
    free(vals);
    kn_str_free(&out);
    s->oom = 1;
    return -1;
}
