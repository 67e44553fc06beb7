/* lower.c — ATen graph → buffers: the driver, the op table and the helpers
 * every lowering shares.
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
 * and storage offset (kn_lower_outputs); one that is its base's exact view
 * (detach, alias) is the base's own buffer, returned as the same tensor
 * (CompiledGraph hands it back as an aten.alias of it, a distinct tensor as
 * eager returns).
 *
 * The lowering is split by concern (private interface: lower.h):
 *   lower.c            driver (kn_lower_graph), op table, shared helpers
 *                      (results, operands, kn_lazy_start, index clamping)
 *   lower_buf.c        buffers: creation, realizing, loading (kn_buf_load)
 *   lower_pointwise.c  type promotion, pointwise ops, casts, creation ops
 *   lower_view.c       views: reshape, permute, slice, select, split, ...
 *   lower_move.c       data movement: cat, pad, gathers and index ops,
 *                      pooling windows, scatters
 *   kn_lower_reduce.c     reductions, mean/var, scans
 *   kn_lower_extern.c     extern steps (ATen calls), their layouts, packed linear
 *   lower_output.c     graph outputs and the views among them
 *
 * Adding a lowering: add a line OP("aten.x.overload", fn, param) to
 * src/graph/ops.def and define `int kn_lower_fn(kn_ctx *c, int ni, int param)`
 * in the file of its kind (lower.h declares it from ops.def).  It returns 1
 * when done (kn_set_result), 0 to decline with no exception (the op becomes
 * an extern), -1 with an exception set.  Most start with kn_lazy_start.
 */
#include "lower.h"
#include <string.h>

/* ---------------------------------------------------------------- op table */
/* one entry per line of graph/ops.def: the ATen op, its lowering, the
   lowering's parameter (a kn_sop, a kn_rop or a selector) */
typedef int (*lower_fn)(kn_ctx *c, int ni, int param);

typedef struct {
    const char *name;
    lower_fn fn;
    int param;
} op_entry;

static const op_entry op_table[] = {
#define OP(name, fn, param) {name, kn_lower_##fn, param},
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

/* Node ni's one result is buffer id (-1: a value that is not a tensor).
   0, or -1 with an exception. */
int
kn_bind_result(kn_ctx *c, int ni, int id)
{
    int *ids = kn_alloc(&c->arena, sizeof(int));
    if (ids == NULL)
        return -1;
    ids[0] = id;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = 1;
    return 0;
}

/* ---------------------------------------------------------------- helpers */
int
kn_set_result(kn_ctx *c, int ni, kn_buf *b)
{
    if (kn_bind_result(c, ni, b->id) < 0)
        return -1;
    b->uses = node(c, ni)->uses;
    return 1;
}

/* Node ni's n results (values and indices, var and mean, a layer norm's
   three) are bufs[0..n-1]. */
int
kn_set_results(kn_ctx *c, int ni, kn_buf *const *bufs, int n)
{
    int *ids = kn_alloc(&c->arena, sizeof(int) * (size_t)n);
    if (ids == NULL)
        return -1;
    for (int k = 0; k < n; k++)
        ids[k] = bufs[k]->id;
    c->node_bufs[ni] = ids;
    c->node_nres[ni] = n;
    return 1;
}

int
kn_set_results2(kn_ctx *c, int ni, kn_buf *a, kn_buf *b)
{
    kn_buf *bufs[2] = {a, b};
    return kn_set_results(c, ni, bufs, 2);
}

/* A new lazy buffer shaped like output k of node ni, with placeholders. */
kn_buf *
kn_lazy_like(kn_ctx *c, int ni, int k, kn_expr **idx)
{
    const kn_meta *m = out_meta(c, ni, k);
    if (m == NULL)
        return NULL;
    kn_buf *b = kn_lazy_buf(c, m->dt, m->ndim, m->size, idx);
    if (b == NULL)
        return NULL;
    kn_set_layout_from_meta(b, m);
    b->has_meta = 1;
    memcpy(b->meta_stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
    return b;
}

/* A lazy value with transcendental work that a consumer broadcasts (rotary
   embeddings' cos/sin, read once per head and batch) is computed once and
   stored, instead of being recomputed for every element that reads it. */
int
kn_store_if_broadcast(kn_ctx *c, kn_buf *b, int on, const int64_t *osize)
{
    if (b->kind != KN_B_LAZY)
        return 0;
    int64_t bn = 1, onum = 1;
    for (int d = 0; d < b->ndim; d++)
        bn *= b->size[d];
    for (int d = 0; d < on; d++)
        onum *= osize[d];
    if (onum <= bn || !kn_expensive(b->body))
        return 0;
    if (b->view_src >= 0)
        return kn_store_view_root(c, b);
    return kn_realize(c, b);
}

int
kn_make_operand(kn_ctx *c, const kn_arg *a, int on, const int64_t *osize, kn_expr *const *idx, kn_operand *o)
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
        if (kn_store_if_broadcast(c, b, on, osize) < 0)
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

/* An op's float16/bfloat16 result is computed in float32 and not rounded
   between fused ops (kn_cast), but a decision taken on it (a comparison,
   rounding to an integer, floor division, remainder, its sign) or its value
   leaving the narrow type (widened, or cast to an integer) is what eager
   holds: the rounded value (round(x * y) of bfloat16 -1.4993 is -2 in eager,
   where x * y rounds to -1.5).  Only such consumers pay for the rounding. */
int
kn_settle_narrow(kn_ctx *c, kn_operand *o)
{
    if (o->dt == KN_F16 || o->dt == KN_BF16)
        o->e = kn_round(c, o->e, o->dt);
    return o->e != NULL;
}

/* The start of most lowerings: *bp, a lazy buffer shaped like node ni's
   result (its placeholders in idx), and o[0..n): the node's arguments argk[k]
   (argument k when argk is NULL) as operands broadcast to that shape, each
   rounded to its narrow dtype when `settle` (kn_settle_narrow).  Returns 1
   when ready, else what the lowering returns: 0 to decline (no exception
   set), -1 on error (exception set). */
int
kn_lazy_start(kn_ctx *c, int ni, kn_buf **bp, kn_expr **idx, kn_operand *o, int n, const int *argk, int settle)
{
    kn_buf *b = kn_lazy_like(c, ni, 0, idx);
    *bp = b;
    if (b == NULL)
        return PyErr_Occurred() ? -1 : 0;
    for (int k = 0; k < n; k++) {
        int r = kn_make_operand(c, arg(c, ni, argk ? argk[k] : k), b->ndim, b->size, idx, &o[k]);
        if (r <= 0)
            return r;
        if (settle && !kn_settle_narrow(c, &o[k]))
            return -1;
    }
    return 1;
}

/* 0 <= i < n as a truth value: constant true when i's range proves it. */
kn_expr *
kn_in_bounds(kn_ctx *c, kn_expr *i, int64_t n)
{
    int64_t lo, hi;
    if (kn_expr_range(i, &lo, &hi) && lo >= 0 && hi < n)
        return kn_const_i(c, KN_BOOL, 1);
    return kn_op2(c, KN_S_LAND, KN_BOOL, kn_op2(c, KN_S_GE, KN_BOOL, i, kn_iconst(c, 0)),
                  kn_op2(c, KN_S_LT, KN_BOOL, i, kn_iconst(c, n)));
}

kn_expr *
kn_clamp_index(kn_ctx *c, kn_expr *i, int64_t n)
{
    int64_t lo, hi;
    if (kn_expr_range(i, &lo, &hi) && lo >= 0 && hi < n)
        return i;
    return kn_op2(c, KN_S_MIN, KN_I64, kn_op2(c, KN_S_MAX, KN_I64, i, kn_iconst(c, 0)), kn_iconst(c, n - 1));
}

/* ---------------------------------------------------------------- driver */
/* ATen node ni through its lowering in the op table, or as an extern call
   when it has none or the lowering declines.  0, or -1 with an exception. */
static int
lower_node(kn_ctx *c, int ni)
{
    kn_node *n = node(c, ni);
    c->n_aten_ops++;
    const op_entry *e = find_op(n->target);
    int done = 0;
    /* every tensor result needs valid metadata for kiln to lower it */
    int meta_ok = n->nout > 0;
    for (int k = 0; k < n->nout; k++)
        if (!n->out[k].valid || n->out[k].dt == KN_NDTYPES)
            meta_ok = 0;
    if (e && meta_ok) {
        KN_ASSERT(!PyErr_Occurred());
        /* a declining lowering may leave realized buffers behind; their
           steps stay (dead work, never wrong) */
        done = e->fn(c, ni, e->param);
        if (done < 0 && !PyErr_Occurred())
            return KN_INTERNAL("the lowering of %s failed without an exception", n->target);
        if (done < 0)
            return -1;
        /* a lowering that declines (0) or succeeds leaves no exception set */
        KN_ASSERT(!PyErr_Occurred());
    }
    if (!done && kn_lower_extern(c, ni) < 0)
        return -1;
    return 0;
}

/* Does arg a refer to a node whose sizes are symbols? */
static int
arg_sym(kn_ctx *c, const kn_arg *a, int depth)
{
    if (a->kind == KN_A_REF) {
        kn_node *n = node(c, (int)a->i);
        for (int k = 0; k < n->nout; k++)
            if (n->out[k].sym)
                return 1;
        return 0;
    }
    if (a->kind == KN_A_LIST && depth < 4)
        for (int j = 0; j < a->n; j++)
            if (arg_sym(c, &a->items[j], depth + 1))
                return 1;
    return 0;
}

/* Are node ni's sizes, or its inputs', symbols (kn_meta.sym)?  The buffers
   its lowering makes then have sizes that differ between the sizes of a
   symbolic graph (kn_buf.sym), even where its own result's do not. */
static int
node_sym(kn_ctx *c, int ni)
{
    kn_node *n = node(c, ni);
    for (int k = 0; k < n->nout; k++)
        if (n->out[k].sym)
            return 1;
    for (int j = 0; j < n->nargs; j++)
        if (arg_sym(c, &n->args[j], 0))
            return 1;
    return 0;
}

static int
lower_graph(kn_ctx *c)
{
    kn_graph *g = &c->g;
    c->node_bufs = kn_alloc(&c->arena, sizeof(int *) * (size_t)(g->nnodes + 1));
    c->node_nres = kn_alloc(&c->arena, sizeof(int) * (size_t)(g->nnodes + 1));
    char *bases = kn_output_bases(c);
    if (c->node_bufs == NULL || c->node_nres == NULL || bases == NULL)
        return -1;
    for (int k = 0; k < g->ninputs; k++) {
        int ni = g->inputs[k];
        kn_node *n = node(c, ni);
        const kn_meta *m = out_meta(c, ni, 0);
        c->cur_sym = m && m->sym;
        kn_buf *b = kn_buf_new(c, KN_B_INPUT, m ? m->dt : KN_NDTYPES, m ? m->ndim : 0, m ? m->size : NULL);
        if (b == NULL)
            return -1;
        if (m)
            memcpy(b->stride, m->stride, sizeof(int64_t) * (size_t)m->ndim);
        b->input_index = k;
        b->uses = n->uses;
        if (kn_bind_result(c, ni, b->id) < 0)
            return -1;
    }
    for (int ni = 0; ni < g->nnodes; ni++) {
        kn_node *n = node(c, ni);
        if (strcmp(n->target, "input") == 0)
            continue;
        if (strcmp(n->target, "getitem") == 0) {
            kn_arg *src = arg(c, ni, 0), *ix = arg(c, ni, 1);
            if (src->kind != KN_A_REF || ix->kind != KN_A_INT || ix->i < 0 || ix->i >= c->node_nres[src->i])
                return KN_INTERNAL("malformed getitem in graph (node %d)", ni);
            int id = c->node_bufs[src->i][ix->i];
            if (kn_bind_result(c, ni, id) < 0)
                return -1;
            if (id >= 0)
                c->bufs[id]->uses = n->uses;
            if (bases[ni] && kn_store_output_base(c, ni) < 0)
                return -1;
            continue;
        }
        c->cur_sym = node_sym(c, ni);
        if (lower_node(c, ni) < 0)
            return -1;
        if (bases[ni] && kn_store_output_base(c, ni) < 0)
            return -1;
    }
    c->cur_sym = 0;
    return kn_lower_outputs(c, bases);
}

int
kn_lower_graph(kn_ctx *c)
{
    int r = lower_graph(c);
    /* a failure says why: -1 with no exception set is a kiln bug */
    if (r < 0 && !PyErr_Occurred())
        return KN_INTERNAL("lowering the graph failed without an exception");
    return r;
}
