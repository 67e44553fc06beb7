/* lower.h — private interface of the lowering (src/compile/lower*.c).
 *
 * Consumes: kiln.h (kn_ctx, kn_buf, kn_expr builders).  Produces: the
 * declarations the lowering files share: one kn_lower_<fn> per lowering
 * named in src/graph/ops.def, the operand type, the small accessors of a
 * node's arguments and results (static inline), and the helpers of
 * lower.c, lower_buf.c, lower_view.c, lower_pointwise.c, lower_extern.c and
 * lower_output.c.  Nothing outside src/compile/lower*.c includes it; the
 * public entry points (kn_lower_graph, kn_buf_load, kn_realize, ...) stay
 * in kiln.h.
 *
 * Contract of a lowering kn_lower_<fn>(c, ni, param): 1 when node ni has its
 * buffers (kn_set_result), 0 to decline with NO exception set (the op
 * becomes an extern), -1 with an exception set.
 */
#ifndef KN_LOWER_H
#define KN_LOWER_H

#include "../kiln.h"
#include "../error.h"
#include <string.h>

/* one lowering per ops.def line: OP(aten name, fn, param) -> kn_lower_fn */
#define OP(name, fn, arg) int kn_lower_##fn(kn_ctx *c, int ni, int param);
#include "../graph/ops.def"
#undef OP

/* An operand of a pointwise op, with its priority for type promotion: 2
   tensor with dims, 1 zero-dim tensor, 0 Python scalar. */
typedef struct {
    kn_expr *e;
    kn_dtype dt;
    int prio;
} kn_operand;

/* ---------------------------------------------------------------- node accessors */
static inline kn_node *
node(kn_ctx *c, int ni)
{
    return &c->g.nodes[ni];
}

/* argument k of node ni; a NONE argument past the last */
static inline kn_arg *
arg(kn_ctx *c, int ni, int k)
{
    static kn_arg none = {KN_A_NONE, 0, 0, 0, NULL, NULL};
    kn_node *n = node(c, ni);
    return k < n->nargs ? &n->args[k] : &none;
}

/* the buffer of a node reference with one tensor result, else NULL */
static inline kn_buf *
ref_buf(kn_ctx *c, const kn_arg *a)
{
    if (a->kind != KN_A_REF || a->i < 0 || a->i >= c->g.nnodes)
        return NULL;
    if (c->node_nres[a->i] != 1)
        return NULL;
    int id = c->node_bufs[a->i][0];
    return id >= 0 ? c->bufs[id] : NULL;
}

/* torch's metadata of result k of node ni (NULL when not known) */
static inline const kn_meta *
out_meta(kn_ctx *c, int ni, int k)
{
    kn_node *n = node(c, ni);
    if (k >= n->nout || !n->out[k].valid)
        return NULL;
    return &n->out[k];
}

static inline int
wrap_dim(int64_t d, int ndim)
{
    if (ndim == 0)
        ndim = 1;
    if (d < 0)
        d += ndim;
    return (int)d;
}

static inline int
is_int_list(const kn_arg *a)
{
    if (a->kind != KN_A_LIST)
        return 0;
    for (int k = 0; k < a->n; k++)
        if (a->items[k].kind != KN_A_INT)
            return 0;
    return 1;
}

/* an absent alpha/beta argument or one equal to 1 */
static inline int
is_one(const kn_arg *a)
{
    return a->kind == KN_A_NONE || (a->kind == KN_A_INT && a->i == 1) || (a->kind == KN_A_FLOAT && a->f == 1.0);
}

/* ---------------------------------------------------------------- lower.c */
int kn_bind_result(kn_ctx *c, int ni, int id);
int kn_set_result(kn_ctx *c, int ni, kn_buf *b);
int kn_set_results(kn_ctx *c, int ni, kn_buf *const *bufs, int n);
int kn_set_results2(kn_ctx *c, int ni, kn_buf *a, kn_buf *b);
kn_buf *kn_lazy_like(kn_ctx *c, int ni, int k, kn_expr **idx);
int kn_make_operand(kn_ctx *c, const kn_arg *a, int on, const int64_t *osize, kn_expr *const *idx, kn_operand *o);
int kn_store_if_broadcast(kn_ctx *c, kn_buf *b, int on, const int64_t *osize);
int kn_settle_narrow(kn_ctx *c, kn_operand *o);
int kn_lazy_start(kn_ctx *c, int ni, kn_buf **bp, kn_expr **idx, kn_operand *o, int n, const int *argk,
                  int settle);
/* The preamble of a lowering that reads its operands itself (views, moves,
 * gathers): declares b and idx[] and starts node ni's lazy result in them
 * when `ok` holds, else declines (the lowering returns 0); returns from the
 * lowering too when kn_lazy_start declines (0) or fails (-1). */
#define KN_LAZY_START(c, ni, ok, b, idx)                                         \
    kn_buf *b;                                                                 \
    kn_expr *idx[KN_MAXDIM];                                                   \
    do {                                                                       \
        int r_ = (ok) ? kn_lazy_start((c), (ni), &b, idx, NULL, 0, NULL, 0) : 0; \
        if (r_ <= 0)                                                           \
            return r_;                                                         \
    } while (0)
/* The same with operands: kn_lazy_start makes the n operands o[] of node
 * ni (argk, settle: as kn_lazy_start takes them). */
#define KN_LAZY_START_OPS(c, ni, b, idx, o, n, argk, settle)                    \
    kn_buf *b;                                                                 \
    kn_expr *idx[KN_MAXDIM];                                                   \
    do {                                                                       \
        int r_ = kn_lazy_start((c), (ni), &b, idx, (o), (n), (argk), (settle)); \
        if (r_ <= 0)                                                           \
            return r_;                                                         \
    } while (0)
kn_expr *kn_in_bounds(kn_ctx *c, kn_expr *i, int64_t n);
kn_expr *kn_clamp_index(kn_ctx *c, kn_expr *i, int64_t n);

/* ---------------------------------------------------------------- lower_buf.c */
/* (the first four are also in kiln.h, which no file outside lower*.c needs
   them from: kiln.h can drop them) */
kn_buf *kn_buf_new(kn_ctx *c, kn_bufkind kind, kn_dtype dt, int ndim, const int64_t *size);
void kn_contiguous_strides(int ndim, const int64_t *size, int64_t *stride);
kn_expr *kn_buf_load(kn_ctx *c, kn_buf *b, kn_expr *const *idx);
int kn_realize(kn_ctx *c, kn_buf *b);
kn_buf *kn_lazy_buf(kn_ctx *c, kn_dtype dt, int ndim, const int64_t *size, kn_expr **idx);
void kn_set_layout_from_meta(kn_buf *b, const kn_meta *m);
int kn_expensive(kn_expr *e);
int kn_store_view_root(kn_ctx *c, kn_buf *b);

/* ---------------------------------------------------------------- lower_view.c, lower_pointwise.c */
int kn_view_of(kn_ctx *c, int ni, kn_buf *src, kn_expr **srcidx, kn_buf *b);
int kn_cast_of_arg(kn_ctx *c, int ni, int k);

/* ---------------------------------------------------------------- lower_extern.c, lower_output.c */
int kn_lower_extern(kn_ctx *c, int ni);
char *kn_output_bases(kn_ctx *c);
int kn_store_output_base(kn_ctx *c, int r);
int kn_lower_outputs(kn_ctx *c, const char *bases);

#endif
