/* lower_output.c — graph outputs (see lower.c).
 *
 * Consumes: the lowered graph (every node has its buffers).  Produces: the
 * outputs' buffers as eager returns them: stored in torch's layout, the
 * bases of output views stored where they are computed
 * (kn_store_output_base), views of inputs and of those bases as ALIASes
 * with the traced sizes, strides and offsets, exact views as their base's
 * own buffer.  Not an op lowering.
 */
#include "lower.h"
#include <string.h>
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
char *
kn_output_bases(kn_ctx *c)
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
    kn_expr *idx[KN_MAXDIM];
    kn_buf *y = kn_lazy_buf(c, x->dt, x->ndim, x->size, idx);
    if (y == NULL)
        return NULL;
    y->body = kn_buf_load(c, x, idx);
    if (y->body == NULL) {
        if (!PyErr_Occurred())
            KN_INTERNAL("cannot copy a graph output");
        return NULL;
    }
    if (stride)
        memcpy(y->stride, stride, sizeof(int64_t) * (size_t)x->ndim);
    y->uses = x->uses;
    return kn_realize(c, y) < 0 ? NULL : y;
}

/* Node r is the base of output views: store it now, before any consumer
   reads it, in the layout torch traced, in a tensor of its own. */
int
kn_store_output_base(kn_ctx *c, int r)
{
    const kn_meta *m = out_meta(c, r, 0);
    kn_buf *b = c->node_nres[r] == 1 && c->node_bufs[r][0] >= 0 ? c->bufs[c->node_bufs[r][0]] : NULL;
    if (m == NULL || b == NULL || b->ndim != m->ndim || b->dt != m->dt)
        return KN_INTERNAL("outputs view node %d (%s), which has no layout", r, node(c, r)->target);
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
            if ((b = stored_copy(c, b, m->stride)) == NULL || kn_set_result(c, r, b) < 0)
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

int
kn_lower_outputs(kn_ctx *c, const char *bases)
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
                (base->kind != KN_B_INPUT && !(bases[r] && base->is_output)))
                return KN_INTERNAL("output %d views node %d (%s), which is not stored", k, r, node(c, r)->target);
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
            if (kn_set_result(c, ni, v) < 0)
                return -1;
            continue;
        }
        if (bases[ni])
            continue; /* stored where it was computed (kn_store_output_base) */
        if (is_input_node(c, ni)) {
            b->is_output = 1; /* the input itself, as eager returns it */
            continue;
        }
        if (b->kind == KN_B_LAZY) {
            kn_set_layout_from_meta(b, m);
            if (kn_realize(c, b) < 0)
                return -1;
        } else if (b->kind == KN_B_INPUT || b->kind == KN_B_ALIAS) {
            /* a fresh value in torch that kiln computed as an input or a view
               of stored data (clone, an identity cast): returned as a copy,
               never sharing storage */
            kn_buf *y = stored_copy(c, b, NULL);
            if (y == NULL)
                return -1;
            kn_set_layout_from_meta(y, m);
            if (kn_set_result(c, ni, y) < 0)
                return -1;
            b = y;
        }
        b->is_output = 1;
    }
    return 0;
}
