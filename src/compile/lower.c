/* lower.c — ATen graph → buffers.
 *
 * Consumes: kn_graph (graph/graph.c).  Produces: one buffer per tensor value.
 * Pointwise ops and views become LAZY buffers whose body is an expression over
 * placeholder variables P0..Pn (one per output dim); loading a lazy buffer
 * substitutes its body, so chains of pointwise ops and views inline into their
 * consumer ("inline pointwise producers").  Reductions, graph outputs, extern
 * arguments and expensive multi-use values are realized: they get storage and
 * a step in the schedule (later grouped into kernels by compile/fuse.c).  An op
 * without a lowering (or one whose lowering declines) becomes an extern step
 * that calls the ATen op through Python.  Graph outputs are what eager
 * returns: an output that views an input or another output is an ALIAS (a
 * view of the input, or of one stored base) with the traced sizes, strides
 * and storage offset (lower_outputs); one that is its base's exact view
 * (detach, alias) is the base's own buffer, returned as the same tensor
 * (CompiledGraph hands it back as an aten.alias of it, a distinct tensor as
 * eager returns).
 */
#include "../kiln.h"
#include <math.h>
#include <string.h>

typedef int (*lower_fn)(kn_ctx *c, int ni, int param);

/* A lowering returns 1 when done, 0 to decline (the op becomes an extern),
   -1 on error with an exception set. */
#define OP(name, fn, arg) static int lower_##fn(kn_ctx *c, int ni, int param);
#include "../graph/ops.def"
#undef OP

typedef struct {
    const char *name;
    lower_fn fn;
    int param;
} op_entry;

static const op_entry op_table[] = {
#define OP(name, fn, param) {name, lower_##fn, param},
#include "../graph/ops.def"
#undef OP
};
#define NOPS ((int)(sizeof op_table / sizeof op_table[0]))

PyObject *
kn_lowered_ops(void)
{
    PyObject *l = PyList_New(NOPS);
    if (l == NULL)
        return NULL;
    for (int k = 0; k < NOPS; k++) {
        PyObject *s = PyUnicode_FromString(op_table[k].name);
        if (s == NULL) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, k, s);
    }
    return l;
}

static const op_entry *
find_op(const char *name)
{
    for (int k = 0; k < NOPS; k++)
        if (strcmp(op_table[k].name, name) == 0)
            return &op_table[k];
    return NULL;
}

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
    b->first = b->last = -1;
    c->bufs[c->nbufs++] = b;
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
static void
set_layout_from_meta(kn_buf *b, const kn_meta *m)
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
        if (!dup && b->kind != KN_B_REDUCTION && numel >= 4096) {
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

static int expensive(kn_expr *e);
static int store_view_root(kn_ctx *c, kn_buf *b);

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
    return !c->cuda && b->uses > 1 && expensive(b->body);
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
        if ((b->view_src >= 0 ? store_view_root(c, b) : kn_realize(c, b)) < 0)
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
        kn_buf *base = c->bufs[b->base];
        return kn_load(c, base->id, base->dt, load_address(c, b, idx));
    }
    return kn_load(c, b->id, b->dt, load_address(c, b, idx));
}

/* ---------------------------------------------------------------- helpers */
static kn_node *
node(kn_ctx *c, int ni)
{
    return &c->g.nodes[ni];
}

static kn_arg *
arg(kn_ctx *c, int ni, int k)
{
    static kn_arg none = {KN_A_NONE, 0, 0, 0, NULL, NULL};
    kn_node *n = node(c, ni);
    return k < n->nargs ? &n->args[k] : &none;
}

static kn_buf *
ref_buf(kn_ctx *c, const kn_arg *a)
{
    if (a->kind != KN_A_REF || a->i < 0 || a->i >= c->g.nnodes)
        return NULL;
    if (c->node_nres[a->i] != 1)
        return NULL;
    int id = c->node_bufs[a->i][0];
    return id >= 0 ? c->bufs[id] : NULL;
}

static const kn_meta *
out_meta(kn_ctx *c, int ni, int k)
{
    kn_node *n = node(c, ni);
    if (k >= n->nout || !n->out[k].valid)
        return NULL;
    return &n->out[k];
}

static int
set_result(kn_ctx *c, int ni, kn_buf *b)
{
    int *ids = kn_alloc(&c->arena, sizeof(int));
    if (ids == NULL)
        return -1;
    ids[0] = b->id;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = 1;
    b->uses = node(c, ni)->uses;
    return 1;
}

/* Node ni's two results (values and indices, var and mean) are a and b. */
static int
set_results2(kn_ctx *c, int ni, kn_buf *a, kn_buf *b)
{
    int *ids = kn_alloc(&c->arena, sizeof(int) * 2);
    if (ids == NULL)
        return -1;
    ids[0] = a->id;
    ids[1] = b->id;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = 2;
    return 1;
}

/* A new lazy buffer shaped like output k of node ni, with placeholders. */
static kn_buf *
lazy_like(kn_ctx *c, int ni, int k, kn_expr **idx)
{
    const kn_meta *m = out_meta(c, ni, k);
    if (m == NULL)
        return NULL;
    kn_buf *b = kn_buf_new(c, KN_B_LAZY, m->dt, m->ndim, m->size);
    if (b == NULL)
        return NULL;
    set_layout_from_meta(b, m);
    b->has_meta = 1;
    memcpy(b->meta_stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
    for (int d = 0; d < m->ndim; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), m->size[d]);
    return b;
}

static int
wrap_dim(int64_t d, int ndim)
{
    if (ndim == 0)
        ndim = 1;
    if (d < 0)
        d += ndim;
    return (int)d;
}

static int
is_int_list(const kn_arg *a)
{
    if (a->kind != KN_A_LIST)
        return 0;
    for (int k = 0; k < a->n; k++)
        if (a->items[k].kind != KN_A_INT)
            return 0;
    return 1;
}

/* Priority of an operand for type promotion: 2 tensor with dims, 1 zero-dim
   tensor, 0 Python scalar. */
typedef struct {
    kn_expr *e;
    kn_dtype dt;
    int prio;
} operand;

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
static int
expensive(kn_expr *e)
{
    int budget = 256;
    return e && expensive_rec(e, ++expensive_stamp, &budget);
}

/* A lazy value with transcendental work that a consumer broadcasts (rotary
   embeddings' cos/sin, read once per head and batch) is computed once and
   stored, instead of being recomputed for every element that reads it. */
static int
store_if_broadcast(kn_ctx *c, kn_buf *b, int on, const int64_t *osize)
{
    if (b->kind != KN_B_LAZY)
        return 0;
    int64_t bn = 1, onum = 1;
    for (int d = 0; d < b->ndim; d++)
        bn *= b->size[d];
    for (int d = 0; d < on; d++)
        onum *= osize[d];
    if (onum <= bn || !expensive(b->body))
        return 0;
    if (b->view_src >= 0)
        return store_view_root(c, b);
    return kn_realize(c, b);
}

static int
make_operand(kn_ctx *c, const kn_arg *a, int on, const int64_t *osize, kn_expr *const *idx, operand *o)
{
    memset(o, 0, sizeof *o);
    switch (a->kind) {
    case KN_A_INT:
        o->dt = KN_I64;
        o->e = kn_const_i(c, KN_I64, a->i);
        return o->e ? 1 : -1;
    case KN_A_BOOL:
        o->dt = KN_BOOL;
        o->e = kn_const_i(c, KN_BOOL, a->i);
        return o->e ? 1 : -1;
    case KN_A_FLOAT:
        o->dt = KN_F64;
        o->e = kn_const_f(c, KN_F64, a->f);
        return o->e ? 1 : -1;
    case KN_A_REF: {
        kn_buf *b = ref_buf(c, a);
        if (b == NULL || b->ndim > on)
            return 0;
        if (store_if_broadcast(c, b, on, osize) < 0)
            return -1;
        kn_expr *bi[KN_MAXDIM];
        for (int d = 0; d < b->ndim; d++) {
            int od = d + on - b->ndim;
            if (b->size[d] == 1)
                bi[d] = kn_iconst(c, 0);
            else if (b->size[d] == osize[od])
                bi[d] = idx[od];
            else
                return 0;
        }
        o->dt = b->dt;
        o->prio = b->ndim > 0 ? 2 : 1;
        o->e = kn_buf_load(c, b, bi);
        return o->e ? 1 : -1;
    }
    default:
        return 0;
    }
}

static int
category(kn_dtype d)
{
    return d == KN_BOOL ? 0 : kn_dtype_is_float(d) ? 2 : 1;
}

static kn_dtype
combine(kn_dtype hi, int have_hi, kn_dtype lo, int have_lo, int lo_is_scalar)
{
    if (!have_lo)
        return hi;
    if (!have_hi)
        return lo_is_scalar ? (category(lo) == 2 ? KN_F32 : lo) : lo;
    if (category(lo) > category(hi)) {
        if (lo_is_scalar)
            return category(lo) == 2 ? KN_F32 : KN_I64;
        return lo;
    }
    return hi;
}

/* torch.result_type over operands. */
static kn_dtype
result_type(operand *o, int n)
{
    kn_dtype r[3] = {KN_F32, KN_F32, KN_F32};   /* (read only where have[] is set; -O1 builds warn) */
    int have[3] = {0, 0, 0};
    for (int k = 0; k < n; k++) {
        int p = o[k].prio;
        r[p] = have[p] ? kn_dtype_promote(r[p], o[k].dt) : o[k].dt;
        have[p] = 1;
    }
    kn_dtype lo = combine(r[1], have[1], r[0], have[0], 1);
    int have_lo = have[0] || have[1];
    /* zero-dim tensors and scalars merged; the scalar flag matters only when
       no zero-dim tensor was present */
    if (!have[2])
        return have[1] ? lo : (have[0] ? (category(r[0]) == 2 ? KN_F64 : r[0]) : KN_F32);
    return combine(r[2], 1, lo, have_lo, !have[1]);
}

/* An op's float16/bfloat16 result is computed in float32 and not rounded
   between fused ops (kn_cast), but a decision taken on it (a comparison,
   rounding to an integer, floor division, remainder, its sign) or its value
   leaving the narrow type (widened, or cast to an integer) is what eager
   holds: the rounded value (round(x * y) of bfloat16 -1.4993 is -2 in eager,
   where x * y rounds to -1.5).  Only such consumers pay for the rounding. */
static int
settle_narrow(kn_ctx *c, operand *o)
{
    if (o->dt == KN_F16 || o->dt == KN_BF16)
        o->e = kn_round(c, o->e, o->dt);
    return o->e != NULL;
}

static int
decides(kn_sop op)
{
    int cls = kn_sops[op].cls;
    return cls == KN_SC_CMP || cls == KN_SC_PRED || op == KN_S_FLOOR || op == KN_S_CEIL || op == KN_S_ROUND ||
           op == KN_S_TRUNC || op == KN_S_FLOORDIV || op == KN_S_TRUNCDIV || op == KN_S_REM || op == KN_S_FMOD ||
           op == KN_S_SIGN;
}

/* Eager CPU ATen (TensorIterator) converts every input of a binary op to the
   op's common dtype before the kernel runs, so a scalar or zero-dim operand
   of a wider dtype (0.1, a float32 0-d tensor, an integer tensor) meets a
   float16/bfloat16 tensor rounded to that narrow type.  The one exception is
   a kernel that reads the second input, when it is a CPU scalar, in its
   original value in float32 (iter.original_scalar_value): mul and the
   divisions.  Established on torch 2.x CPU by probing every binary op with
   values whose rounding changes the result.  On CUDA a CPU scalar is read
   unrounded in opmath (opmath_gpu_kernel_with_scalars) and is left as is. */
static int
reads_scalar_unrounded(kn_sop op, int k)
{
    return k == 1 && (op == KN_S_MUL || op == KN_S_DIV || op == KN_S_FLOORDIV || op == KN_S_TRUNCDIV);
}

/* Round the operands of a binary op to its narrow common dtype `common` where
   eager converts them (see reads_scalar_unrounded). */
static int
settle_common(kn_ctx *c, kn_sop op, kn_dtype common, operand *o, int n)
{
    if (c->cuda || n < 2 || (common != KN_F16 && common != KN_BF16))
        return 1;
    for (int k = 0; k < n; k++) {
        if (o[k].dt == common || (o[k].prio < 2 && reads_scalar_unrounded(op, k)))
            continue;
        /* through float32, as c10's Half/BFloat16 conversions go */
        o[k].e = kn_round(c, kn_cast(c, o[k].e, KN_F32), common);
        if (o[k].e == NULL)
            return 0;
    }
    return 1;
}

static kn_expr *
apply(kn_ctx *c, kn_sop op, kn_dtype compute, operand *o, int n)
{
    kn_expr *a[3] = {0};
    for (int k = 0; k < n; k++) {
        a[k] = kn_cast(c, o[k].e, compute);
        if (a[k] == NULL)
            return NULL;
    }
    int cls = kn_sops[op].cls;
    kn_dtype rdt = (cls == KN_SC_CMP || cls == KN_SC_PRED || cls == KN_SC_LOGIC) ? KN_BOOL : compute;
    if (n == 1)
        return kn_op1(c, op, rdt, a[0]);
    if (n == 2)
        return kn_op2(c, op, rdt, a[0], a[1]);
    return kn_op3(c, op, rdt, a[0], a[1], a[2]);
}

/* Lower node ni as op over its first n operands. */
static int
pointwise(kn_ctx *c, int ni, kn_sop op, int n, const int *argk)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o[3];
    for (int k = 0; k < n; k++) {
        int r = make_operand(c, arg(c, ni, argk ? argk[k] : k), b->ndim, b->size, idx, &o[k]);
        if (r <= 0)
            return r;
        if (decides(op) && !settle_narrow(c, &o[k]))
            return -1;
    }
    int cls = kn_sops[op].cls;
    kn_dtype compute;
    if (cls == KN_SC_CMP || cls == KN_SC_PRED)
        compute = kn_dtype_compute(result_type(o, n));
    else if (cls == KN_SC_LOGIC)
        compute = KN_BOOL;
    else
        compute = kn_dtype_compute(b->dt);
    if (cls != KN_SC_LOGIC && !settle_common(c, op, result_type(o, n), o, n))
        return -1;
    if (cls == KN_SC_FLOAT && !kn_dtype_is_float(compute))
        return 0;
    if (cls == KN_SC_BITS && kn_dtype_is_float(compute))
        return 0;
    b->body = kn_cast(c, apply(c, op, compute, o, n), b->dt);
    if (b->body == NULL)
        return -1;
    return set_result(c, ni, b);
}

/* ---------------------------------------------------------------- pointwise lowerings */
static int
lower_binary(kn_ctx *c, int ni, int param)
{
    return pointwise(c, ni, (kn_sop)param, 2, NULL);
}

static int
lower_unary(kn_ctx *c, int ni, int param)
{
    return pointwise(c, ni, (kn_sop)param, 1, NULL);
}

static int
alpha_is_one(const kn_arg *a)
{
    return a->kind == KN_A_NONE || (a->kind == KN_A_INT && a->i == 1) || (a->kind == KN_A_FLOAT && a->f == 1.0);
}

/* add/sub with alpha: a op alpha*b */
static int
lower_add(kn_ctx *c, int ni, int param)
{
    if (alpha_is_one(arg(c, ni, 2)))
        return pointwise(c, ni, (kn_sop)param, 2, NULL);
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o[3];
    for (int k = 0; k < 3; k++) {
        int r = make_operand(c, arg(c, ni, k), b->ndim, b->size, idx, &o[k]);
        if (r <= 0)
            return r;
    }
    kn_dtype compute = kn_dtype_compute(b->dt);
    if (compute == KN_BOOL)
        return 0;
    kn_expr *scaled = kn_op2(c, KN_S_MUL, compute, kn_cast(c, o[1].e, compute), kn_cast(c, o[2].e, compute));
    b->body = kn_cast(c, kn_op2(c, (kn_sop)param, compute, kn_cast(c, o[0].e, compute), scaled), b->dt);
    if (b->body == NULL)
        return -1;
    return set_result(c, ni, b);
}

static int
lower_rsub(kn_ctx *c, int ni, int param)
{
    (void)param;
    if (!alpha_is_one(arg(c, ni, 2)))
        return 0;
    static const int order[2] = {1, 0};
    return pointwise(c, ni, KN_S_SUB, 2, order);
}

static int
lower_div_mode(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_arg *mode = arg(c, ni, 2);
    if (mode->kind == KN_A_NONE)
        return pointwise(c, ni, KN_S_DIV, 2, NULL);
    if (mode->kind != KN_A_STR)
        return 0;
    if (strcmp(mode->s, "trunc") == 0) {
        if (kn_dtype_is_float(out_meta(c, ni, 0) ? out_meta(c, ni, 0)->dt : KN_I64)) {
            /* trunc(a / b) in float */
            kn_expr *idx[KN_MAXDIM];
            kn_buf *b = lazy_like(c, ni, 0, idx);
            if (b == NULL)
                return PyErr_Occurred() ? -1 : 0;
            operand o[2];
            for (int k = 0; k < 2; k++) {
                int r = make_operand(c, arg(c, ni, k), b->ndim, b->size, idx, &o[k]);
                if (r <= 0)
                    return r;
                if (!settle_narrow(c, &o[k]))
                    return -1;
            }
            kn_dtype cd = kn_dtype_compute(b->dt);
            kn_expr *q = apply(c, KN_S_DIV, cd, o, 2);
            b->body = kn_cast(c, kn_op1(c, KN_S_TRUNC, cd, q), b->dt);
            return b->body ? set_result(c, ni, b) : -1;
        }
        return pointwise(c, ni, KN_S_TRUNCDIV, 2, NULL);
    }
    if (strcmp(mode->s, "floor") == 0)
        return pointwise(c, ni, KN_S_FLOORDIV, 2, NULL);
    return 0;
}

/* v's value in the narrow float dtype nd (F16/BF16): through float, then to
   nd's significand bits, ties to even, with nd's subnormals and overflow. */
static double
narrow_value(double v, kn_dtype nd)
{
    float f = (float)v;
    if (!isfinite(f) || f == 0.0f)
        return f;
    int bits = nd == KN_F16 ? 11 : 8, emin = nd == KN_F16 ? -13 : -125, e;
    double max = nd == KN_F16 ? 65504.0 : 0x1.fep127;
    (void)frexp(f, &e);
    if (e < emin)
        e = emin;
    double r = ldexp(nearbyint(ldexp((double)f, bits - e)), e - bits);
    return fabs(r) > max ? copysign(INFINITY, r) : r;
}

/* pow(x, scalar): small exponents become multiplies.  Eager takes the
   exponent in x's dtype (float16/bfloat16: rounded, also on CUDA). */
static int
lower_pow_scalar(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_arg *e = arg(c, ni, 1);
    const kn_meta *m = out_meta(c, ni, 0);
    if (m == NULL)
        return 0;
    if ((e->kind == KN_A_INT || e->kind == KN_A_FLOAT) && kn_dtype_is_float(m->dt)) {
        double v = e->kind == KN_A_INT ? (double)e->i : e->f;
        if (m->dt == KN_F16 || m->dt == KN_BF16)
            v = narrow_value(v, m->dt);
        kn_expr *idx[KN_MAXDIM];
        kn_buf *b = lazy_like(c, ni, 0, idx);
        if (b == NULL)
            return PyErr_Occurred() ? -1 : 0;
        operand o;
        int r = make_operand(c, arg(c, ni, 0), b->ndim, b->size, idx, &o);
        if (r <= 0)
            return r;
        kn_dtype cd = kn_dtype_compute(b->dt);
        kn_expr *x = kn_cast(c, o.e, cd), *y;
        if (v == 1.0)
            y = x;
        else if (v == 2.0)
            y = kn_op2(c, KN_S_MUL, cd, x, x);
        else if (v == 3.0)
            y = kn_op2(c, KN_S_MUL, cd, kn_op2(c, KN_S_MUL, cd, x, x), x);
        else if (v == 0.5)
            y = kn_op1(c, KN_S_SQRT, cd, x);
        else if (v == -0.5)
            y = kn_op1(c, KN_S_RSQRT, cd, x);
        else if (v == -1.0)
            y = kn_op1(c, KN_S_RECIP, cd, x);
        else
            y = kn_op2(c, KN_S_POW, cd, x, kn_const_f(c, cd, v));
        b->body = kn_cast(c, y, b->dt);
        return b->body ? set_result(c, ni, b) : -1;
    }
    return pointwise(c, ni, KN_S_POW, 2, NULL);
}

static int
lower_relu(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o;
    int r = make_operand(c, arg(c, ni, 0), b->ndim, b->size, idx, &o);
    if (r <= 0)
        return r;
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (cd == KN_BOOL)
        return 0;
    kn_expr *x = kn_cast(c, o.e, cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_MAX, cd, x, kn_const_i(c, cd, 0)), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

static int
lower_gelu(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_arg *ap = arg(c, ni, 1);
    int tanh_approx = ap->kind == KN_A_STR && strcmp(ap->s, "tanh") == 0;
    if (ap->kind == KN_A_STR && !tanh_approx && strcmp(ap->s, "none") != 0)
        return 0;
    return pointwise(c, ni, tanh_approx ? KN_S_GELU_TANH : KN_S_GELU, 1, NULL);
}

static int
lower_frac(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o;
    int r = make_operand(c, arg(c, ni, 0), b->ndim, b->size, idx, &o);
    if (r <= 0)
        return r;
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (!kn_dtype_is_float(cd))
        return 0;
    if (!settle_narrow(c, &o))
        return -1;
    kn_expr *x = kn_cast(c, o.e, cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_SUB, cd, x, kn_op1(c, KN_S_TRUNC, cd, x)), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

static int
lower_leaky_relu(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o[2];
    int r = make_operand(c, arg(c, ni, 0), b->ndim, b->size, idx, &o[0]);
    if (r <= 0)
        return r;
    kn_arg *s = arg(c, ni, 1);
    double slope = s->kind == KN_A_FLOAT ? s->f : s->kind == KN_A_INT ? (double)s->i : 0.01;
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (!kn_dtype_is_float(cd))
        return 0;
    kn_expr *x = kn_cast(c, o[0].e, cd);
    kn_expr *pos = kn_op2(c, KN_S_GT, KN_BOOL, x, kn_const_f(c, cd, 0));
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, pos, x, kn_op2(c, KN_S_MUL, cd, x, kn_const_f(c, cd, slope))), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

/* clamp(x, min, max); param 1: clamp_min(x, min), 2: clamp_max(x, max).
   hardtanh(x, min=-1, max=1) comes here with defaults. */
static int
lower_clamp(kn_ctx *c, int ni, int param)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o[3];
    int r = make_operand(c, arg(c, ni, 0), b->ndim, b->size, idx, &o[0]);
    if (r <= 0)
        return r;
    kn_arg *lo = param == 2 ? NULL : arg(c, ni, 1);
    kn_arg *hi = param == 1 ? NULL : param == 2 ? arg(c, ni, 1) : arg(c, ni, 2);
    int hard = strcmp(node(c, ni)->target, "aten.hardtanh.default") == 0;
    kn_arg dlo = {KN_A_FLOAT, 0, -1.0, 0, NULL, NULL}, dhi = {KN_A_FLOAT, 0, 1.0, 0, NULL, NULL};
    if (hard) {
        if (lo->kind == KN_A_NONE)
            lo = &dlo;
        if (hi->kind == KN_A_NONE)
            hi = &dhi;
    }
    kn_dtype cd = kn_dtype_compute(b->dt);
    if (cd == KN_BOOL)
        return 0;
    kn_expr *x = kn_cast(c, o[0].e, cd);
    if (lo && lo->kind != KN_A_NONE) {
        r = make_operand(c, lo, b->ndim, b->size, idx, &o[1]);
        if (r <= 0)
            return r;
        x = kn_op2(c, KN_S_MAX, cd, x, kn_cast(c, o[1].e, cd));
    }
    if (hi && hi->kind != KN_A_NONE) {
        r = make_operand(c, hi, b->ndim, b->size, idx, &o[2]);
        if (r <= 0)
            return r;
        x = kn_op2(c, KN_S_MIN, cd, x, kn_cast(c, o[2].e, cd));
    }
    b->body = kn_cast(c, x, b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

static int
lower_where(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o[3];
    for (int k = 0; k < 3; k++) {
        int r = make_operand(c, arg(c, ni, k), b->ndim, b->size, idx, &o[k]);
        if (r <= 0)
            return r;
    }
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *cond = kn_cast(c, o[0].e, KN_BOOL);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, cond, kn_cast(c, o[1].e, cd), kn_cast(c, o[2].e, cd)), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

/* Node ni's value is argument k broadcast to its shape and converted to its
   dtype (rounded to a narrow float dtype, also when fused: kn_round). */
static int
cast_of_arg(kn_ctx *c, int ni, int k)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    operand o;
    int r = make_operand(c, arg(c, ni, k), b->ndim, b->size, idx, &o);
    if (r <= 0)
        return r;
    if (b->dt != o.dt && !settle_narrow(c, &o))
        return -1;
    b->body = kn_round(c, o.e, b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

/* _to_copy(x, dtype=..., device=...): a cast.  The bridge passes the device
   change as a string arg; kiln declines those. */
static int
lower_to_copy(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_node *n = node(c, ni);
    for (int k = 1; k < n->nargs; k++)
        if (n->args[k].kind == KN_A_STR && strcmp(n->args[k].s, "device-change") == 0)
            return 0;
    return cast_of_arg(c, ni, 0);
}

/* copy(self, src): src broadcast to self's shape, in self's dtype */
static int
lower_copy(kn_ctx *c, int ni, int param)
{
    (void)param;
    return cast_of_arg(c, ni, 1);
}

static int
lower_identity(kn_ctx *c, int ni, int param)
{
    (void)param;
    return lower_to_copy(c, ni, 0);
}

/* ---------------------------------------------------------------- creation */
static int
lower_full(kn_ctx *c, int ni, int param)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_arg *v;
    kn_arg one = {KN_A_INT, 1, 0, 0, NULL, NULL}, zero = {KN_A_INT, 0, 0, 0, NULL, NULL};
    switch (param) {
    case 0: v = arg(c, ni, 1); break;      /* full(size, value) */
    case 1: v = arg(c, ni, 0); break;      /* scalar_tensor(value) */
    case 2: v = arg(c, ni, 1); break;      /* full_like(x, value) / fill(x, value) */
    case 3: v = &zero; break;
    default: v = &one; break;
    }
    operand o;
    int r = make_operand(c, v, b->ndim, b->size, idx, &o);
    if (r <= 0 || v->kind == KN_A_REF)
        return r < 0 ? -1 : 0;
    b->body = kn_cast(c, o.e, b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

static int
lower_arange(kn_ctx *c, int ni, int param)
{
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (b->ndim != 1)
        return 0;
    kn_arg *s = param == 2 ? NULL : arg(c, ni, 0), *st = param == 0 ? arg(c, ni, 2) : NULL;
    int isf = kn_dtype_is_float(b->dt);
    kn_dtype cd = isf ? KN_F64 : KN_I64;
    double start = s ? (s->kind == KN_A_FLOAT ? s->f : (double)s->i) : 0.0;
    double step = st ? (st->kind == KN_A_FLOAT ? st->f : st->kind == KN_A_INT ? (double)st->i : 1.0) : 1.0;
    if ((s && s->kind != KN_A_INT && s->kind != KN_A_FLOAT) || (st && st->kind == KN_A_REF))
        return 0;
    kn_expr *i = kn_cast(c, idx[0], cd);
    kn_expr *v = kn_op2(c, KN_S_ADD, cd, kn_const_f(c, cd, start), kn_op2(c, KN_S_MUL, cd, i, kn_const_f(c, cd, step)));
    b->body = kn_cast(c, v, b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

/* ---------------------------------------------------------------- views */
/* Lazy buffer for node ni whose value at idx is src at map(idx). */
static int
view_of(kn_ctx *c, int ni, kn_buf *src, kn_expr **srcidx, kn_buf *b)
{
    if (src->kind == KN_B_LAZY) {
        b->view_src = src->id;
        memcpy(b->view_idx, srcidx, sizeof(kn_expr *) * (size_t)src->ndim);
    }
    b->body = kn_buf_load(c, src, srcidx);
    if (b->body == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return set_result(c, ni, b);
}

static int
lower_reshape(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return view_of(c, ni, x, si, b);
}

static int
lower_permute(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *p = arg(c, ni, 1);
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && is_int_list(p) && p->n == x->ndim ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        si[wrap_dim(p->items[d].i, x->ndim)] = idx[d];
    return view_of(c, ni, x, si, b);
}

static int
lower_transpose(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int d0 = 0, d1 = 1;
    if (param == 0) {
        d0 = wrap_dim(arg(c, ni, 1)->i, x->ndim);
        d1 = wrap_dim(arg(c, ni, 2)->i, x->ndim);
    }
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        si[d] = idx[d];
    if (x->ndim >= 2) {
        si[d0] = idx[d1];
        si[d1] = idx[d0];
    }
    return view_of(c, ni, x, si, b);
}

static int
lower_expand(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (x->ndim > b->ndim)
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        si[d] = x->size[d] == 1 ? kn_iconst(c, 0) : idx[d + b->ndim - x->ndim];
    return view_of(c, ni, x, si, b);
}

static int
lower_slice(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return view_of(c, ni, x, si, b);
}

static int
lower_select(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    int64_t i = arg(c, ni, 2)->i;
    if (d < 0 || d >= x->ndim)
        return 0;
    if (i < 0)
        i += x->size[d];
    kn_expr *si[KN_MAXDIM];
    for (int k = 0, o = 0; k < x->ndim; k++)
        si[k] = k == d ? kn_iconst(c, i) : idx[o++];
    return view_of(c, ni, x, si, b);
}

/* split / split_with_sizes: one lazy slice per result. */
static int
lower_split(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_node *n = node(c, ni);
    if (x == NULL || n->nout < 1 || x->ndim == 0)
        return 0;
    int d = wrap_dim(arg(c, ni, 2)->kind == KN_A_INT ? arg(c, ni, 2)->i : 0, x->ndim);
    if (d < 0 || d >= x->ndim)
        return 0;
    (void)param;
    int *ids = kn_alloc(&c->arena, sizeof(int) * (size_t)n->nout);
    if (ids == NULL)
        return -1;
    int64_t off = 0;
    for (int k = 0; k < n->nout; k++) {
        kn_expr *idx[KN_MAXDIM];
        kn_buf *b = lazy_like(c, ni, k, idx);
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
static int
lower_as_strided(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    if (x == NULL || x->kind != KN_B_LAZY || x->body == NULL)
        return 0;
    /* only a freshly computed value (not a view of anything stored) */
    if (x->body->op == KN_S_LOAD)
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
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return b->body ? set_result(c, ni, b) : -1;
}

/* ---------------------------------------------------------------- data movement */
/* 0 <= i < n as a truth value: constant true when i's range proves it. */
static kn_expr *
in_bounds(kn_ctx *c, kn_expr *i, int64_t n)
{
    int64_t lo, hi;
    if (kn_expr_range(i, &lo, &hi) && lo >= 0 && hi < n)
        return kn_const_i(c, KN_BOOL, 1);
    return kn_op2(c, KN_S_LAND, KN_BOOL, kn_op2(c, KN_S_GE, KN_BOOL, i, kn_iconst(c, 0)),
                  kn_op2(c, KN_S_LT, KN_BOOL, i, kn_iconst(c, n)));
}

static kn_expr *
clamp_index(kn_ctx *c, kn_expr *i, int64_t n)
{
    int64_t lo, hi;
    if (kn_expr_range(i, &lo, &hi) && lo >= 0 && hi < n)
        return i;
    return kn_op2(c, KN_S_MIN, KN_I64, kn_op2(c, KN_S_MAX, KN_I64, i, kn_iconst(c, 0)), kn_iconst(c, n - 1));
}

static int
lower_cat(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_arg *ts = arg(c, ni, 0);
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = ts->kind == KN_A_LIST ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int d = wrap_dim(arg(c, ni, 1)->kind == KN_A_INT ? arg(c, ni, 1)->i : 0, b->ndim);
    if (d < 0 || d >= b->ndim)
        return 0;
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *val = NULL;
    int64_t off = 0;
    kn_expr *parts[256];
    int64_t ends[256];
    int np = 0;
    for (int k = 0; k < ts->n && np < 256; k++) {
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
        si[d] = clamp_index(c, kn_iadd(c, idx[d], kn_iconst(c, -off)), x->size[d]);
        parts[np] = kn_cast(c, kn_buf_load(c, x, si), cd);
        if (parts[np] == NULL)
            return -1;
        off += x->size[d];
        ends[np++] = off;
    }
    if (np == 0)
        return 0;
    val = parts[np - 1];
    for (int k = np - 2; k >= 0; k--) {
        kn_expr *in = kn_op2(c, KN_S_LT, KN_BOOL, idx[d], kn_iconst(c, ends[k]));
        val = kn_op3(c, KN_S_WHERE, cd, in, parts[k], val);
    }
    b->body = kn_cast(c, val, b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

static int
lower_pad(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *pad = arg(c, ni, 1), *v = arg(c, ni, 2);
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && is_int_list(pad) && pad->n % 2 == 0 && pad->n / 2 <= x->ndim ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_dtype cd = kn_dtype_compute(b->dt);
    kn_expr *si[KN_MAXDIM], *valid = kn_const_i(c, KN_BOOL, 1);
    for (int d = 0; d < x->ndim; d++)
        si[d] = idx[d];
    for (int k = 0; k < pad->n / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t lo = pad->items[2 * k].i;
        kn_expr *raw = kn_iadd(c, idx[d], kn_iconst(c, -lo));
        valid = kn_op2(c, KN_S_LAND, KN_BOOL, valid, in_bounds(c, raw, x->size[d]));
        si[d] = clamp_index(c, raw, x->size[d]);
    }
    operand fill;
    kn_arg zero = {KN_A_INT, 0, 0, 0, NULL, NULL};
    int r = make_operand(c, v->kind == KN_A_NONE ? &zero : v, b->ndim, b->size, idx, &fill);
    if (r <= 0)
        return r;
    kn_expr *xv = kn_cast(c, kn_buf_load(c, x, si), cd);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, valid, xv, kn_cast(c, fill.e, cd)), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
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
    return clamp_index(c, v, n);
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

static int
lower_gather(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 2));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && ib && is_index_dtype(ib) && ib->ndim == x->ndim ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    if (d < 0 || (x->ndim && d >= x->ndim))
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    if (x->ndim)
        si[d] = index_value(c, ib, idx, x->size[d], KN_E_GATHER | d << 8);
    return view_of(c, ni, x, si, b);
}

static int
lower_index_select(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 2));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && ib && is_index_dtype(ib) && ib->ndim <= 1 && x->ndim >= 1 ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL || checks_unread(b, ib))
        return PyErr_Occurred() ? -1 : 0;
    int d = wrap_dim(arg(c, ni, 1)->i, x->ndim);
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    kn_expr *ii[1] = {idx[d]};
    /* ATen's CPU kernel words dim 1 of a tensor of 2+ dims its own way */
    si[d] = index_value(c, ib, ii, x->size[d], d == 1 && x->ndim > 1 ? KN_E_DATA_BOUNDS : KN_E_INDEX_SELF);
    return view_of(c, ni, x, si, b);
}

static int
lower_embedding(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *w = ref_buf(c, arg(c, ni, 0)), *ib = ref_buf(c, arg(c, ni, 1));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = w && ib && w->ndim == 2 && is_index_dtype(ib) ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL || checks_unread(b, ib))
        return PyErr_Occurred() ? -1 : 0;
    kn_expr *si[2];
    si[0] = index_value(c, ib, idx, w->size[0], KN_E_INDEX_SELF);
    si[1] = idx[b->ndim - 1];
    return view_of(c, ni, w, si, b);
}

static int
lower_flip(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_arg *dims = arg(c, ni, 1);
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && is_int_list(dims) ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_expr *si[KN_MAXDIM];
    for (int k = 0; k < x->ndim; k++)
        si[k] = idx[k];
    for (int k = 0; k < dims->n; k++) {
        int d = wrap_dim(dims->items[k].i, x->ndim);
        if (d < 0 || d >= x->ndim)
            return 0;
        si[d] = kn_iadd(c, kn_iconst(c, x->size[d] - 1), kn_imul(c, idx[d], -1));
    }
    return view_of(c, ni, x, si, b);
}

/* One tap of a pooling window: x (3-D or 4-D) at spatial position (ih, iw)
   with the leading dims of idx, read through clamped indices; *valid says
   whether (ih, iw) lies inside x. */
static kn_expr *
window_tap(kn_ctx *c, kn_buf *x, kn_expr *const *idx, kn_expr *ih, kn_expr *iw, kn_dtype cd, kn_expr **valid)
{
    int hd = x->ndim - 2, wd = x->ndim - 1;
    *valid = kn_op2(c, KN_S_LAND, KN_BOOL, in_bounds(c, ih, x->size[hd]), in_bounds(c, iw, x->size[wd]));
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < hd; d++)
        si[d] = idx[d];
    si[hd] = clamp_index(c, ih, x->size[hd]);
    si[wd] = clamp_index(c, iw, x->size[wd]);
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
static int
lower_max_pool2d(kn_ctx *c, int ni, int param)
{
    (void)param;
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
    kn_buf *vb = lazy_like(c, ni, 0, idx);
    if (vb == NULL)
        return PyErr_Occurred() ? -1 : 0;
    kn_buf *ib = lazy_like(c, ni, 1, idx2);
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
    return set_results2(c, ni, vb, ib);
}

/* avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad,
   divisor_override): the window sum, unrolled, over the divisor. */
static int
lower_avg_pool2d(kn_ctx *c, int ni, int param)
{
    (void)param;
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
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return b->body ? set_result(c, ni, b) : -1;
}

/* repeat(x, repeats): output index modulo the input size, per dim. */
static int
lower_repeat(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (b->ndim < x->ndim)
        return 0;
    kn_expr *si[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++) {
        int od = d + b->ndim - x->ndim;
        if (x->size[d] == 0)
            return 0;
        si[d] = kn_imod(c, idx[od], x->size[d]);
    }
    return view_of(c, ni, x, si, b);
}

/* slice_scatter(input, src, dim, start, end, step): input with the slice
   replaced by src, as one lazy select per element. */
static int
lower_slice_scatter(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *src = ref_buf(c, arg(c, ni, 1));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && src && src->ndim == x->ndim && x->ndim > 0 ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
        return src->size[d] == 0 ? cast_of_arg(c, ni, 0) : 0;
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
        si[d] = clamp_index(c, q, src->size[d]);
    } else {
        si[d] = clamp_index(c, rel, src->size[d]);
    }
    kn_expr *xv = kn_cast(c, kn_buf_load(c, x, idx), cd), *sv = kn_cast(c, kn_buf_load(c, src, si), cd);
    b->body = kn_cast(c, kn_op3(c, KN_S_WHERE, cd, in, sv, xv), b->dt);
    return b->body ? set_result(c, ni, b) : -1;
}

/* select_scatter(input, src, dim, index): input with one index along dim
   replaced by src. */
static int
lower_select_scatter(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *src = ref_buf(c, arg(c, ni, 1));
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = x && src && src->ndim + 1 == x->ndim ? lazy_like(c, ni, 0, idx) : NULL;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return b->body ? set_result(c, ni, b) : -1;
}

/* index.Tensor(x, [None | index tensor, ...]) with integer index tensors. */
static int
lower_index(kn_ctx *c, int ni, int param)
{
    (void)param;
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
    kn_expr *idx[KN_MAXDIM];
    kn_buf *b = lazy_like(c, ni, 0, idx);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
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
    return view_of(c, ni, x, si, b);
}

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
        s.to[KN_VAR_R(0)] = clamp_index(c, pos, rsize[0]);
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
static kn_buf *
reduction(kn_ctx *c, kn_buf *x, const kn_arg *dims, int keepdim, kn_rop rop, kn_dtype out_dt, kn_dtype acc,
          kn_buf *centre)
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
        /* sum of squared deviations from `centre` (indexed like the output) */
        kn_expr *m = kn_cast(c, kn_buf_load(c, centre, oi), acc);
        kn_expr *dv = kn_op2(c, KN_S_SUB, acc, v, m);
        v = kn_op2(c, KN_S_MUL, acc, dv, dv);
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
   (see settle_narrow). */
static kn_buf *
settled_buf(kn_ctx *c, kn_buf *x)
{
    if (x->kind != KN_B_LAZY || (x->dt != KN_F16 && x->dt != KN_BF16))
        return x;
    kn_buf *b = kn_buf_new(c, KN_B_LAZY, x->dt, x->ndim, x->size);
    if (b == NULL)
        return NULL;
    kn_expr *idx[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), x->size[d]);
    b->body = kn_round(c, kn_buf_load(c, x, idx), x->dt);
    return b->body ? b : NULL;
}

static int
lower_reduce(kn_ctx *c, int ni, int param)
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
    kn_buf *b = reduction(c, x, dims, keepdim, rop, m->dt, acc_dtype(rop, x->dt, m->dt), NULL);
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (b->ndim != m->ndim)
        return 0; /* shape disagreement with torch: the op goes to ATen */
    set_layout_from_meta(b, m);
    return set_result(c, ni, b);
}

/* max.dim / min.dim: (values, indices) */
static int
lower_reduce_pair(kn_ctx *c, int ni, int param)
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
    kn_buf *v = reduction(c, x, arg(c, ni, 1), keepdim, (kn_rop)param, m0->dt, acc_dtype((kn_rop)param, x->dt, m0->dt), NULL);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if ((x = settled_buf(c, x)) == NULL)
        return -1;
    kn_buf *ix = reduction(c, x, arg(c, ni, 1), keepdim, arg_rop, m1->dt, kn_dtype_compute(x->dt), NULL);
    if (ix == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return set_results2(c, ni, v, ix);
}

/* sum / divisor (a division, as ATen's mean and variance: a product with
   a rounded 1/n differs in the last bit), a lazy buffer indexed like `sum`;
   computed in float64 when the sum is. */
static kn_buf *
lazy_div(kn_ctx *c, kn_buf *sum, double divisor, kn_dtype out_dt)
{
    kn_buf *b = kn_buf_new(c, KN_B_LAZY, out_dt, sum->ndim, sum->size);
    if (b == NULL)
        return NULL;
    kn_expr *idx[KN_MAXDIM];
    for (int d = 0; d < sum->ndim; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), sum->size[d]);
    kn_dtype cd = sum->dt == KN_F64 ? KN_F64 : kn_dtype_compute(out_dt);
    kn_expr *v = kn_cast(c, kn_buf_load(c, sum, idx), cd);
    b->body = kn_cast(c, kn_op2(c, KN_S_DIV, cd, v, kn_const_f(c, cd, divisor)), out_dt);
    return b->body ? b : NULL;
}

static int
lower_mean(kn_ctx *c, int ni, int param)
{
    (void)param;
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL || !kn_dtype_is_float(m->dt))
        return 0;
    const kn_arg *dims;
    int keepdim;
    reduce_args(c, ni, &dims, &keepdim);
    kn_buf *s = reduction(c, x, dims, keepdim, KN_R_SUM, KN_F32 == kn_dtype_compute(m->dt) ? KN_F32 : m->dt,
                          kn_dtype_compute(m->dt), NULL);
    if (s == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int64_t on = 1, xn = 1;
    for (int d = 0; d < s->ndim; d++)
        on *= s->size[d];
    for (int d = 0; d < x->ndim; d++)
        xn *= x->size[d];
    kn_buf *b = lazy_div(c, s, on ? (double)xn / (double)on : 0.0, m->dt);
    if (b == NULL)
        return -1;
    s->uses = 1;
    return set_result(c, ni, b);
}

/* var.correction(x, dims, correction, keepdim) and var_mean.correction:
   two passes over the row inside one kernel: the mean, then the sum of
   squared deviations from it.  For float32 (and float16/bfloat16) the mean
   is summed in float64, as ATen's Welford kernel accumulates: n copies of
   one float32 add up exactly there, so a constant row has mean exactly x
   and variance exactly 0, as in eager (from a float32 sum / n the
   deviations of a constant row are not 0). */
static int
lower_var_mean(kn_ctx *c, int ni, int param)
{
    kn_buf *x = ref_buf(c, arg(c, ni, 0));
    const kn_meta *m = out_meta(c, ni, 0);
    if (x == NULL || m == NULL || !kn_dtype_is_float(m->dt) || !kn_dtype_is_float(x->dt))
        return 0;
    kn_arg *dims = arg(c, ni, 1), *corr = arg(c, ni, 2), *kd = arg(c, ni, 3);
    int keepdim = kd->kind == KN_A_BOOL ? (int)kd->i : 0;
    double correction = corr->kind == KN_A_INT ? (double)corr->i : corr->kind == KN_A_FLOAT ? corr->f : 1.0;
    kn_dtype cd = kn_dtype_compute(m->dt), sd = cd == KN_F32 ? KN_F64 : cd;
    /* mean with keepdim=1 so it indexes like the output of the second pass */
    kn_buf *s = reduction(c, x, dims, keepdim, KN_R_SUM, sd, sd, NULL);
    if (s == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int64_t on = 1, xn = 1;
    for (int d = 0; d < s->ndim; d++)
        on *= s->size[d];
    for (int d = 0; d < x->ndim; d++)
        xn *= x->size[d];
    double n = on ? (double)xn / (double)on : 0.0;
    kn_buf *mean = lazy_div(c, s, n, cd);
    if (mean == NULL)
        return -1;
    mean->uses = 2;
    kn_buf *ss = reduction(c, x, dims, keepdim, KN_R_SUM, cd, cd, mean);
    if (ss == NULL)
        return PyErr_Occurred() ? -1 : 0;
    /* ATen divides by max(n - correction, 0): inf or NaN (0/0) below 1 */
    double denom = n - correction;
    kn_buf *var = lazy_div(c, ss, denom > 0 ? denom : 0.0, m->dt);
    if (var == NULL)
        return -1;
    if (param == 0)
        return set_result(c, ni, var);
    const kn_meta *m1 = out_meta(c, ni, 1);
    if (m1 == NULL)
        return 0;
    kn_buf *mean_out = lazy_div(c, s, n, m1->dt);
    if (mean_out == NULL)
        return -1;
    return set_results2(c, ni, var, mean_out);
}

/* cumsum / cumprod along one dim: a sequential scan per row. */
static int
lower_scan(kn_ctx *c, int ni, int param)
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
    return set_result(c, ni, b);
}

/* ---------------------------------------------------------------- externs */
/* If lazy b is a strided view of a stored buffer, make it an ALIAS. */
static int
try_alias(kn_ctx *c, kn_buf *b)
{
    kn_expr *e = b->body;
    if (e == NULL || e->op != KN_S_LOAD || (kn_dtype)e->ext != b->dt)
        return 0;
    kn_buf *base = c->bufs[e->i];
    if (base->kind == KN_B_LAZY || base->kind == KN_B_ALIAS)
        return 0;
    /* index must be affine in the P vars */
    int64_t st[KN_MAXDIM] = {0}, off = 0;
    kn_expr *stack[64];
    int64_t coef[64];
    int sp = 0;
    stack[sp] = e->a[0];
    coef[sp++] = 1;
    while (sp) {
        sp--;
        kn_expr *t = stack[sp];
        int64_t k = coef[sp];
        if (t->op == KN_S_CONST) {
            off += k * t->i;
        } else if (t->op == KN_S_ADD && sp + 2 < 64) {
            stack[sp] = t->a[0];
            coef[sp++] = k;
            stack[sp] = t->a[1];
            coef[sp++] = k;
        } else if (t->op == KN_S_MUL && t->a[1]->op == KN_S_CONST && sp + 1 < 64) {
            stack[sp] = t->a[0];
            coef[sp++] = k * t->a[1]->i;
        } else if (t->op == KN_S_VAR && t->i >= KN_VAR_P(0) && t->i < KN_VAR_P(0) + b->ndim) {
            st[t->i - KN_VAR_P(0)] += k;
        } else {
            return 0;
        }
    }
    if (off < 0)
        return 0;
    for (int d = 0; d < b->ndim; d++)
        if (st[d] < 0)
            return 0;
    /* An extern gets the layout torch traced: a view keeps its strides, but a
       clone(memory_format=contiguous) feeding an op that needs contiguous
       input must not collapse into a strided view of its source. */
    if (b->has_meta)
        for (int d = 0; d < b->ndim; d++) {
            if (b->size[d] > 1 && st[d] != b->meta_stride[d])
                return 0;
            /* a size-1 dim's stride addresses nothing: torch's, which ATen's
               view(dtype) checks (stride(-1) == 1) */
            if (b->size[d] <= 1)
                st[d] = b->meta_stride[d];
        }
    b->kind = KN_B_ALIAS;
    b->base = base->id;
    b->offset = off;
    memcpy(b->stride, st, sizeof st);
    base->needs_tensor = 1;
    return 1;
}

/* b is a lazy view of a lazy value: store the value it views (once, in the
   kernel that computes it) and rebuild b as a view of that storage.  Many
   views of one computed value (reshapes feeding several matmuls) then share
   one store instead of each recomputing it. */
static int
store_view_root(kn_ctx *c, kn_buf *b)
{
    kn_buf *src = c->bufs[b->view_src];
    if (src->kind == KN_B_LAZY && src->view_src >= 0) {
        if (store_view_root(c, src) < 0)
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

/* Make buffer b usable as a tensor argument of an extern. */
static int
materialize(kn_ctx *c, kn_buf *b)
{
    if (b->kind == KN_B_LAZY && b->view_src >= 0 && store_view_root(c, b) < 0)
        return -1;
    if (b->kind == KN_B_LAZY) {
        if (try_alias(c, b))
            return 0;
        if (kn_realize(c, b) < 0)
            return -1;
    }
    if (b->kind == KN_B_ALIAS)
        c->bufs[b->base]->needs_tensor = 1;
    b->needs_tensor = 1;
    return 0;
}

static int
collect_extern_inputs(kn_ctx *c, const kn_arg *a, kn_step *st)
{
    if (a->kind == KN_A_REF) {
        for (int o = 0; o < st->nover; o++)
            if (st->over_node[o] == a->i) {
                st->in_node[st->nin] = (int)a->i;
                st->in[st->nin++] = st->over_buf[o];
                return 0;
            }
        if (c->node_nres[a->i] != 1) {
            PyErr_Format(PyExc_RuntimeError, "kiln: extern argument refers to a tuple-valued node %d", (int)a->i);
            return -1;
        }
        kn_buf *b = c->bufs[c->node_bufs[a->i][0]];
        if (materialize(c, b) < 0)
            return -1;
        if (st->nin >= (int)(sizeof st->in / sizeof st->in[0])) {
            PyErr_SetString(PyExc_RuntimeError, "kiln: too many tensor arguments for an extern call");
            return -1;
        }
        st->in_node[st->nin] = (int)a->i;
        st->in[st->nin++] = b->id;
        return 0;
    }
    if (a->kind == KN_A_LIST)
        for (int k = 0; k < a->n; k++)
            if (collect_extern_inputs(c, &a->items[k], st) < 0)
                return -1;
    return 0;
}

/* ---------------------------------------------------------------- layout */
static void
nhwc_strides(const int64_t *size, int64_t *st)
{
    int64_t C = size[1] > 1 ? size[1] : 1, H = size[2] > 1 ? size[2] : 1, W = size[3] > 1 ? size[3] : 1;
    st[1] = 1;
    st[3] = C;
    st[2] = W * C;
    st[0] = H * W * C;
}

static int
same_layout(const kn_buf *b, const int64_t *st)
{
    for (int d = 0; d < b->ndim; d++)
        if (b->size[d] > 1 && b->stride[d] != st[d])
            return 0;
    return 1;
}

/* x stored in channels-last order: x itself when it already is (or is a
   computed value that can be stored that way), else a copy. */
static kn_buf *
to_channels_last(kn_ctx *c, kn_buf *x)
{
    int64_t st[4];
    nhwc_strides(x->size, st);
    if (x->kind != KN_B_LAZY && x->kind != KN_B_ALIAS && same_layout(x, st))
        return x;
    if (x->kind == KN_B_LAZY && x->view_src < 0 && x->body && x->body->op != KN_S_LOAD) {
        memcpy(x->stride, st, sizeof st);
        if (kn_realize(c, x) < 0)
            return NULL;
        x->needs_tensor = 1;
        return x;
    }
    if (x->kind == KN_B_ALIAS)
        return NULL;
    kn_buf *y = kn_buf_new(c, KN_B_LAZY, x->dt, 4, x->size);
    if (y == NULL)
        return NULL;
    kn_expr *idx[4];
    for (int d = 0; d < 4; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), x->size[d]);
    y->body = kn_buf_load(c, x, idx);
    if (y->body == NULL)
        return NULL;
    memcpy(y->stride, st, sizeof st);
    if (kn_realize(c, y) < 0)
        return NULL;
    y->needs_tensor = 1;
    return y;
}

static int
is_graph_output(kn_ctx *c, int ni)
{
    for (int k = 0; k < c->g.noutputs; k++)
        if (c->g.outputs[k].kind == KN_A_REF && c->g.outputs[k].i == ni)
            return 1;
    return 0;
}

/* 2-D convolutions run in channels-last order, which oneDNN executes much
   faster on CPUs: input and weight are stored NHWC (the producer's kernel
   writes that order directly), and the output, NHWC too, is read through its
   strides by the kernels after it.  A result that is itself a graph output
   keeps torch's layout. */
static int
conv_channels_last(kn_ctx *c, int ni, kn_step *st)
{
    kn_node *n = node(c, ni);
    if (strcmp(n->target, "aten.convolution.default") != 0 || n->nout != 1 || !n->out[0].valid ||
        n->out[0].ndim != 4 || is_graph_output(c, ni))
        return 0;
    kn_arg *tr = arg(c, ni, 6);
    if (tr->kind != KN_A_BOOL || tr->i)
        return 0;
    kn_buf *x = ref_buf(c, arg(c, ni, 0)), *w = ref_buf(c, arg(c, ni, 1));
    if (x == NULL || w == NULL || x->ndim != 4 || w->ndim != 4 || (x->dt != KN_F32 && x->dt != KN_BF16) ||
        w->dt != x->dt)
        return 0;
    kn_buf *xs = to_channels_last(c, x), *ws = to_channels_last(c, w);
    if (xs == NULL || ws == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (xs != x) {
        st->over_node[st->nover] = (int)arg(c, ni, 0)->i;
        st->over_buf[st->nover++] = xs->id;
    }
    if (ws != w) {
        st->over_node[st->nover] = (int)arg(c, ni, 1)->i;
        st->over_buf[st->nover++] = ws->id;
    }
    return 1;
}

/* ---------------------------------------------------------------- packed linear */
static int
is_one(const kn_arg *a)
{
    return a->kind == KN_A_NONE || (a->kind == KN_A_INT && a->i == 1) || (a->kind == KN_A_FLOAT && a->f == 1.0);
}

/* If lazy view v is W.t() for a 2-D contiguous graph input W, return W. */
static kn_buf *
transposed_input(kn_ctx *c, kn_buf *v)
{
    if (v == NULL || v->kind != KN_B_LAZY || v->ndim != 2 || v->body == NULL || v->body->op != KN_S_LOAD)
        return NULL;
    kn_buf *w = c->bufs[v->body->i];
    if (w->kind != KN_B_INPUT || w->ndim != 2 || w->dt != KN_F32 || w->size[0] != v->size[1] ||
        w->size[1] != v->size[0] || w->size[0] < 2 || w->size[1] < 2 || w->stride[1] != 1 || w->stride[0] != w->size[1])
        return NULL;
    /* the index must be P0 + P1 * K exactly */
    kn_expr *want = kn_iadd(c, kn_var(c, KN_VAR_P(0), v->size[0]), kn_imul(c, kn_var(c, KN_VAR_P(1), v->size[1]), w->size[1]));
    return want == v->body->a[0] ? w : NULL;
}

/* A 2-D contiguous float32 graph input used directly as mat2 ([K, N]; the
   weights of GPT-2's Conv1D layers). */
static kn_buf *
direct_input(kn_buf *v)
{
    if (v == NULL || v->kind != KN_B_INPUT || v->ndim != 2 || v->dt != KN_F32 || v->size[0] < 2 || v->size[1] < 2 ||
        v->stride[1] != 1 || v->stride[0] != v->size[1])
        return NULL;
    return v;
}

/* addmm(b, x, W.t()) / mm(x, W.t()) (or with W stored [K, N]) in float32 with
   W a graph input (a layer's weight): a LINEAR step on oneDNN's packed
   weight.  1 done, 0 no. */
static int
lower_packed_linear(kn_ctx *c, int ni)
{
    kn_node *n = node(c, ni);
    int addmm = strcmp(n->target, "aten.addmm.default") == 0;
    if (!c->packed_linear || (!addmm && strcmp(n->target, "aten.mm.default") != 0))
        return 0;
    const kn_meta *m = out_meta(c, ni, 0);
    if (m == NULL || m->dt != KN_F32 || m->ndim != 2)
        return 0;
    if (addmm && (!is_one(arg(c, ni, 3)) || !is_one(arg(c, ni, 4))))
        return 0;
    kn_buf *bias = addmm ? ref_buf(c, arg(c, ni, 0)) : NULL;
    kn_buf *x = ref_buf(c, arg(c, ni, addmm ? 1 : 0)), *wt = ref_buf(c, arg(c, ni, addmm ? 2 : 1));
    kn_buf *w = transposed_input(c, wt);
    int w_kn = 0;
    if (w == NULL && (w = direct_input(wt)) != NULL)
        w_kn = 1;
    if (x == NULL || w == NULL || x->dt != KN_F32 || x->ndim != 2 || x->size[0] < 1)
        return 0;
    int64_t nout = w_kn ? w->size[1] : w->size[0];
    if (addmm && (bias == NULL || bias->dt != KN_F32 || bias->ndim != 1 || bias->size[0] != nout))
        return 0;
    /* mat2 is materialized too: the ATen path (chosen where it is faster)
       calls the op with its original arguments */
    if (materialize(c, x) < 0 || (bias && materialize(c, bias) < 0) || materialize(c, wt) < 0)
        return -1;
    /* oneDNN reads x row-major: anything else takes the ATen path */
    if (x->kind == KN_B_ALIAS ? (x->stride[1] != 1 || x->stride[0] != x->size[1] || x->offset != 0)
                              : (x->size[1] > 1 && x->stride[1] != 1) || (x->size[0] > 1 && x->stride[0] != x->size[1]))
        return 0;
    if (bias && bias->kind == KN_B_ALIAS && bias->stride[0] != 1)
        return 0;
    kn_step st = {0};
    st.kind = KN_ST_LINEAR;
    st.node = ni;
    st.rows = x->size[0];
    st.w_kn = w_kn;
    st.has_bias = bias != NULL;
    /* in_node: the ATen path fills the call's node references with these
       buffers (w, the packed weight's source, stands for no argument) */
    const int xi = addmm ? 1 : 0;
    st.in_node[st.nin] = (int)arg(c, ni, xi)->i;
    st.in[st.nin++] = x->id;
    st.in_node[st.nin] = -1;
    st.in[st.nin++] = w->id;
    if (bias) {
        st.in_node[st.nin] = (int)arg(c, ni, 0)->i;
        st.in[st.nin++] = bias->id;
    }
    st.in_node[st.nin] = (int)arg(c, ni, xi + 1)->i;
    st.in[st.nin++] = wt->id;
    kn_buf *r = kn_buf_new(c, KN_B_EXTERN, KN_F32, 2, m->size);
    if (r == NULL)
        return -1;
    kn_contiguous_strides(2, m->size, r->stride);
    r->extern_step = c->nsteps;
    r->uses = n->uses;
    st.nres = 1;
    st.res[0] = r->id;
    int *ids = kn_alloc(&c->arena, sizeof(int));
    if (ids == NULL)
        return -1;
    ids[0] = r->id;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = 1;
    c->n_externs++;
    PyObject *s = PyUnicode_FromString(addmm ? "aten.addmm.default (or oneDNN packed linear)"
                                             : "aten.mm.default (or oneDNN packed linear)");
    if (s == NULL || PyList_Append(c->extern_names, s) < 0) {
        Py_XDECREF(s);
        return -1;
    }
    Py_DECREF(s);
    return kn_add_step(c, &st) < 0 ? -1 : 1;
}

static int
lower_extern(kn_ctx *c, int ni)
{
    int lin = lower_packed_linear(c, ni);
    if (lin != 0)
        return lin < 0 ? -1 : 0;
    kn_node *n = node(c, ni);
    kn_step st = {0};
    st.kind = KN_ST_EXTERN;
    st.node = ni;
    int nhwc = conv_channels_last(c, ni, &st);
    if (nhwc < 0)
        return -1;
    for (int k = 0; k < n->nargs; k++)
        if (collect_extern_inputs(c, &n->args[k], &st) < 0)
            return -1;
    int nres = n->nout > 0 ? n->nout : 1;
    if (nres > KN_MAXARGS) {
        PyErr_SetString(PyExc_RuntimeError, "kiln: too many results from an extern call");
        return -1;
    }
    int *ids = kn_alloc(&c->arena, sizeof(int) * (size_t)nres);
    if (ids == NULL)
        return -1;
    for (int k = 0; k < nres; k++) {
        const kn_meta *m = k < n->nout && n->out[k].valid ? &n->out[k] : NULL;
        kn_buf *b = kn_buf_new(c, KN_B_EXTERN, m ? m->dt : KN_F32, m ? m->ndim : 0, m ? m->size : NULL);
        if (b == NULL)
            return -1;
        if (m && nhwc)
            nhwc_strides(m->size, b->stride);
        else if (m)
            memcpy(b->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
        else
            b->dt = KN_NDTYPES; /* not a tensor: kept as a Python object */
        b->extern_step = c->nsteps;
        b->extern_index = n->is_tuple ? k : -1;
        b->uses = n->uses;
        ids[k] = b->id;
        st.res[k] = b->id;
    }
    st.nres = nres;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = nres;
    c->n_externs++;
    PyObject *s = PyUnicode_FromString(n->target);
    if (s == NULL || PyList_Append(c->extern_names, s) < 0) {
        Py_XDECREF(s);
        return -1;
    }
    Py_DECREF(s);
    return kn_add_step(c, &st);
}

/* ---------------------------------------------------------------- outputs */
/* Graph outputs are what eager returns.  An output that views an input is a
   view of that input; outputs that view one another, or a value the graph
   computed, are views of one stored base; each has the sizes, strides and
   storage offset torch traced.  AOT autograd depends on it: it rebuilds
   views of inputs and replays metadata mutations (t_, unsqueeze_) from an
   output's strides and offset, and its backward reads saved views at the
   strides it traced.  (fx_bridge gives each node the node whose storage it
   shares, and checks that a base and its views agree in dtype.) */

static int
storage_root(kn_ctx *c, int ni)
{
    int r = node(c, ni)->root;
    return r >= 0 ? r : ni;
}

static int
is_input_node(kn_ctx *c, int ni)
{
    return strcmp(node(c, ni)->target, "input") == 0;
}

/* Per node: 1 when it is the computed base that some other output node views. */
static char *
output_bases(kn_ctx *c)
{
    kn_graph *g = &c->g;
    char *bases = kn_alloc(&c->arena, (size_t)g->nnodes + 1);
    if (bases == NULL)
        return NULL;
    memset(bases, 0, (size_t)g->nnodes + 1);
    for (int k = 0; k < g->noutputs; k++) {
        kn_arg *a = &g->outputs[k];
        if (a->kind != KN_A_REF)
            continue;
        int r = storage_root(c, (int)a->i);
        if (r != a->i && !is_input_node(c, r))
            bases[r] = 1;
    }
    return bases;
}

/* A stored copy of buffer x in layout `stride` (torch's, when it is known). */
static kn_buf *
stored_copy(kn_ctx *c, kn_buf *x, const int64_t *stride)
{
    kn_buf *y = kn_buf_new(c, KN_B_LAZY, x->dt, x->ndim, x->size);
    if (y == NULL)
        return NULL;
    kn_expr *idx[KN_MAXDIM];
    for (int d = 0; d < x->ndim; d++)
        idx[d] = kn_var(c, KN_VAR_P(d), x->size[d]);
    y->body = kn_buf_load(c, x, idx);
    if (y->body == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "kiln: internal error: cannot copy a graph output");
        return NULL;
    }
    if (stride)
        memcpy(y->stride, stride, sizeof(int64_t) * (size_t)x->ndim);
    y->uses = x->uses;
    return kn_realize(c, y) < 0 ? NULL : y;
}

/* Node r is the base of output views: store it now, before any consumer
   reads it, in the layout torch traced, in a tensor of its own. */
static int
store_output_base(kn_ctx *c, int r)
{
    const kn_meta *m = out_meta(c, r, 0);
    kn_buf *b = c->node_nres[r] == 1 && c->node_bufs[r][0] >= 0 ? c->bufs[c->node_bufs[r][0]] : NULL;
    if (m == NULL || b == NULL || b->ndim != m->ndim || b->dt != m->dt) {
        PyErr_Format(PyExc_RuntimeError, "kiln: internal error: outputs view node %d (%s), which has no layout", r,
                     node(c, r)->target);
        return -1;
    }
    if (b->kind == KN_B_LAZY) {
        memcpy(b->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
        if (kn_realize(c, b) < 0)
            return -1;
    } else {
        int exact = b->kind != KN_B_INPUT && b->kind != KN_B_ALIAS && b->offset == 0;
        for (int d = 0; d < b->ndim; d++)
            if (b->size[d] > 1 && b->stride[d] != m->stride[d])
                exact = 0;
        if (!exact) {
            if ((b = stored_copy(c, b, m->stride)) == NULL || set_result(c, r, b) < 0)
                return -1;
        }
    }
    b->needs_tensor = 1;
    b->is_output = 1;   /* returned through views: alive to the end */
    return 0;
}

/* Do metas a and b give the same view of one storage (dtype, sizes,
   strides, offset)? */
static int
same_view(const kn_meta *a, const kn_meta *b)
{
    if (a->dt != b->dt || a->ndim != b->ndim || a->offset != b->offset)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->size[d] != b->size[d] || a->stride[d] != b->stride[d])
            return 0;
    return 1;
}

static int
lower_outputs(kn_ctx *c, const char *bases)
{
    kn_graph *g = &c->g;
    for (int k = 0; k < g->noutputs; k++) {
        kn_arg *a = &g->outputs[k];
        if (a->kind != KN_A_REF || c->node_nres[a->i] != 1 || c->node_bufs[a->i][0] < 0)
            continue;
        int ni = (int)a->i, r = storage_root(c, ni);
        kn_buf *b = c->bufs[c->node_bufs[ni][0]];
        const kn_meta *m = out_meta(c, ni, 0);
        if (r != ni && m != NULL) {
            /* a view of an input or of a stored base: exactly torch's view */
            const kn_meta *bm = out_meta(c, r, 0);
            kn_buf *base = c->node_nres[r] == 1 && c->node_bufs[r][0] >= 0 ? c->bufs[c->node_bufs[r][0]] : NULL;
            if (bm == NULL || base == NULL || base->dt != m->dt ||
                (base->kind != KN_B_INPUT && !(bases[r] && base->is_output))) {
                PyErr_Format(PyExc_RuntimeError, "kiln: internal error: output %d views node %d (%s), which is not "
                             "stored", k, r, node(c, r)->target);
                return -1;
            }
            if (same_view(m, bm)) {
                /* detach/alias (AOT autograd saves detach(out) for backward):
                   the base's own tensor, so that they share the version
                   counter as in eager (a write into the output after the
                   call makes backward raise, not read the written values) */
                c->node_bufs[ni] = c->node_bufs[r];
                base->is_output = 1;
                continue;
            }
            kn_buf *v = kn_buf_new(c, KN_B_ALIAS, m->dt, m->ndim, m->size);
            if (v == NULL)
                return -1;
            memcpy(v->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
            v->offset = m->offset - bm->offset;
            v->base = base->id;
            v->is_output = 1;
            if (set_result(c, ni, v) < 0)
                return -1;
            continue;
        }
        if (bases[ni])
            continue; /* stored where it was computed (store_output_base) */
        if (is_input_node(c, ni)) {
            b->is_output = 1; /* the input itself, as eager returns it */
            continue;
        }
        if (b->kind == KN_B_LAZY) {
            set_layout_from_meta(b, m);
            if (kn_realize(c, b) < 0)
                return -1;
        } else if (b->kind == KN_B_INPUT || b->kind == KN_B_ALIAS) {
            /* a fresh value in torch that kiln computed as an input or a view
               of stored data (clone, an identity cast): returned as a copy,
               never sharing storage */
            kn_buf *y = stored_copy(c, b, NULL);
            if (y == NULL)
                return -1;
            set_layout_from_meta(y, m);
            if (set_result(c, ni, y) < 0)
                return -1;
            b = y;
        }
        b->is_output = 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- driver */
int
kn_lower_graph(kn_ctx *c)
{
    kn_graph *g = &c->g;
    c->node_bufs = kn_alloc(&c->arena, sizeof(int *) * (size_t)(g->nnodes + 1));
    c->node_nres = kn_alloc(&c->arena, sizeof(int) * (size_t)(g->nnodes + 1));
    char *bases = output_bases(c);
    if (c->node_bufs == NULL || c->node_nres == NULL || bases == NULL)
        return -1;
    for (int k = 0; k < g->ninputs; k++) {
        int ni = g->inputs[k];
        kn_node *n = node(c, ni);
        const kn_meta *m = out_meta(c, ni, 0);
        kn_buf *b = kn_buf_new(c, KN_B_INPUT, m ? m->dt : KN_NDTYPES, m ? m->ndim : 0, m ? m->size : NULL);
        if (b == NULL)
            return -1;
        if (m)
            memcpy(b->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
        b->input_index = k;
        b->uses = n->uses;
        int *ids = kn_alloc(&c->arena, sizeof(int));
        if (ids == NULL)
            return -1;
        ids[0] = b->id;
        c->node_bufs[ni] = ids;
        c->node_nres[ni] = 1;
    }
    for (int ni = 0; ni < g->nnodes; ni++) {
        kn_node *n = node(c, ni);
        if (strcmp(n->target, "input") == 0)
            continue;
        if (strcmp(n->target, "getitem") == 0) {
            kn_arg *src = arg(c, ni, 0), *ix = arg(c, ni, 1);
            if (src->kind != KN_A_REF || ix->kind != KN_A_INT || ix->i < 0 || ix->i >= c->node_nres[src->i]) {
                PyErr_SetString(PyExc_RuntimeError, "kiln: malformed getitem in graph");
                return -1;
            }
            int id = c->node_bufs[src->i][ix->i];
            int *ids = kn_alloc(&c->arena, sizeof(int));
            if (ids == NULL)
                return -1;
            ids[0] = id;
            c->node_bufs[ni] = ids;
            c->node_nres[ni] = 1;
            if (id >= 0)
                c->bufs[id]->uses = n->uses;
            if (bases[ni] && store_output_base(c, ni) < 0)
                return -1;
            continue;
        }
        c->n_aten_ops++;
        const op_entry *e = find_op(n->target);
        int done = 0;
        /* every tensor result needs valid metadata for kiln to lower it */
        int meta_ok = n->nout > 0;
        for (int k = 0; k < n->nout; k++)
            if (!n->out[k].valid || n->out[k].dt == KN_NDTYPES)
                meta_ok = 0;
        if (e && meta_ok) {
            /* a declining lowering may leave realized buffers behind; their
               steps stay (dead work, never wrong) */
            done = e->fn(c, ni, e->param);
            if (done < 0)
                return -1;
        }
        if (!done && lower_extern(c, ni) < 0)
            return -1;
        if (bases[ni] && store_output_base(c, ni) < 0)
            return -1;
    }
    return lower_outputs(c, bases);
}
