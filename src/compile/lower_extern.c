/* kn_lower_extern.c — extern steps (see lower.c).
 *
 * Consumes: a graph node that no lowering took.  Produces: an EXTERN step
 * that calls the ATen op through Python (its tensor arguments materialized:
 * a strided view of stored data becomes an ALIAS, anything else is stored),
 * EXTERN result buffers with torch's layout, channels-last storage for 2-D
 * convolutions, and a LINEAR step (oneDNN packed weight) for float32 mm and
 * addmm of a weight input.  Not an op lowering: ops.def lists none here.
 */
#include "lower.h"
#include <string.h>
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

/* Make buffer b usable as a tensor argument of an extern. */
static int
materialize(kn_ctx *c, kn_buf *b)
{
    if (b->kind == KN_B_LAZY && b->view_src >= 0 && kn_store_view_root(c, b) < 0)
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
        if (c->node_nres[a->i] != 1)
            return KN_INTERNAL("extern argument refers to a tuple-valued node %d", (int)a->i);
        kn_buf *b = c->bufs[c->node_bufs[a->i][0]];
        if (materialize(c, b) < 0)
            return -1;
        if (st->nin >= (int)(sizeof st->in / sizeof st->in[0]))
            return kn_unsupported("%s takes more than %d tensor arguments (an extern call's limit)",
                                  node(c, st->node)->target, (int)(sizeof st->in / sizeof st->in[0]));
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
    kn_expr *idx[4];
    kn_buf *y = kn_lazy_buf(c, x->dt, 4, x->size, idx);
    if (y == NULL)
        return NULL;
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
    if (kn_bind_result(c, ni, r->id) < 0)
        return -1;
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

int
kn_lower_extern(kn_ctx *c, int ni)
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
    if (nres > KN_MAXARGS)
        return kn_unsupported("%s returns more than %d tensors (an extern call's limit)", n->target, KN_MAXARGS);
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
