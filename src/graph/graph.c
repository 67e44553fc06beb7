/* graph.c — parse the Python description of an ATen graph into a kn_graph.
 *
 * Consumes: the tuple built by kiln/fx_bridge.py:
 *   (nodes, inputs, outputs, ref_type)
 *   nodes:   list of (target: str, args: tuple, metas: tuple|None,
 *                     is_tuple: bool, uses: int, op: object,
 *                     call_args: tuple, call_kwargs: dict[, root: int])
 *   metas:   tuple of (sizes, strides, dtype code[, storage offset]) or None
 *            per result
 *   root:    the node whose storage the results share (a view, an in-place
 *            result), -1 when they have storage of their own
 *   inputs:  list of node indices
 *   outputs: list of arguments (references or constants)
 *   ref_type: the int subclass whose instances reference nodes
 * Produces: kn_graph in the compile arena.  Borrowed references to `op`
 * objects stay valid because the caller keeps `desc` alive.
 */
#include "../kiln.h"
#include <string.h>

static PyTypeObject *ref_type;

static int parse_arg(kn_ctx *c, PyObject *o, kn_arg *a);

static int
parse_list(kn_ctx *c, PyObject *seq, kn_arg *a)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    a->kind = KN_A_LIST;
    a->n = (int)n;
    a->items = n ? kn_alloc(&c->arena, sizeof(kn_arg) * (size_t)n) : NULL;
    if (n && a->items == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < n; k++)
        if (parse_arg(c, PySequence_Fast_GET_ITEM(seq, k), &a->items[k]) < 0)
            return -1;
    return 0;
}

/* Borrows o. */
static int
parse_arg(kn_ctx *c, PyObject *o, kn_arg *a)
{
    memset(a, 0, sizeof *a);
    if (o == Py_None) {
        a->kind = KN_A_NONE;
    } else if (ref_type && Py_TYPE(o) == ref_type) {
        a->kind = KN_A_REF;
        a->i = PyLong_AsLongLong(o);
    } else if (PyBool_Check(o)) {
        a->kind = KN_A_BOOL;
        a->i = o == Py_True;
    } else if (PyLong_Check(o)) {
        int overflow = 0;
        a->kind = KN_A_INT;
        a->i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow)
            a->kind = KN_A_OTHER;
    } else if (PyFloat_Check(o)) {
        a->kind = KN_A_FLOAT;
        a->f = PyFloat_AS_DOUBLE(o);
    } else if (PyList_Check(o) || PyTuple_Check(o)) {
        return parse_list(c, o, a);
    } else if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (s == NULL)
            return -1;
        a->kind = KN_A_STR;
        a->s = kn_strdup(&c->arena, s);
        if (a->s == NULL)
            return -1;
    } else {
        a->kind = KN_A_OTHER;
    }
    return PyErr_Occurred() ? -1 : 0;
}

static int
parse_meta(PyObject *o, kn_meta *m)
{
    memset(m, 0, sizeof *m);
    if (o == Py_None)
        return 0;
    PyObject *sz, *st;
    int dt;
    long long offset = 0, sym = 0;
    if (!PyArg_ParseTuple(o, "OOi|LL", &sz, &st, &dt, &offset, &sym))
        return -1;
    Py_ssize_t n = PyTuple_Size(sz);
    if (n < 0 || n > KN_MAXDIM || PyTuple_Size(st) != n || dt < 0 || dt >= KN_NDTYPES) {
        /* too many dims or an unknown dtype: leave invalid, the op falls back */
        PyErr_Clear();
        return 0;
    }
    m->ndim = (int)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        m->size[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(sz, k));
        m->stride[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(st, k));
    }
    m->dt = (kn_dtype)dt;
    m->offset = offset;
    m->sym = sym != 0;
    m->valid = 1;
    return PyErr_Occurred() ? -1 : 0;
}

int
kn_graph_parse(kn_ctx *c, PyObject *desc, kn_graph *g)
{
    PyObject *nodes, *inputs, *outputs, *rt;
    if (!PyArg_ParseTuple(desc, "O!O!O!O", &PyList_Type, &nodes, &PyList_Type, &inputs, &PyList_Type, &outputs, &rt))
        return -1;
    if (!PyType_Check(rt)) {
        PyErr_SetString(PyExc_TypeError, "kiln: graph description needs the reference type");
        return -1;
    }
    ref_type = (PyTypeObject *)rt;
    g->nnodes = (int)PyList_GET_SIZE(nodes);
    g->nodes = kn_alloc(&c->arena, sizeof(kn_node) * (size_t)(g->nnodes + 1));
    if (g->nodes == NULL)
        return -1;
    for (int i = 0; i < g->nnodes; i++) {
        PyObject *t = PyList_GET_ITEM(nodes, i), *args, *metas, *op, *cargs, *ckw;
        const char *target;
        int is_tuple, uses, root = -1;
        if (!PyArg_ParseTuple(t, "sO!OpiOOO|i", &target, &PyTuple_Type, &args, &metas, &is_tuple, &uses, &op, &cargs,
                              &ckw, &root))
            return -1;
        if (root < -1 || root >= i) {
            PyErr_Format(PyExc_ValueError, "kiln: node %d shares the storage of node %d, not an earlier one", i, root);
            return -1;
        }
        kn_node *nd = &g->nodes[i];
        nd->root = root;
        nd->target = kn_strdup(&c->arena, target);
        nd->is_tuple = is_tuple;
        nd->uses = uses;
        nd->op = op;
        nd->nargs = (int)PyTuple_GET_SIZE(args);
        nd->args = kn_alloc(&c->arena, sizeof(kn_arg) * (size_t)(nd->nargs + 1));
        if (nd->target == NULL || nd->args == NULL)
            return -1;
        for (int k = 0; k < nd->nargs; k++)
            if (parse_arg(c, PyTuple_GET_ITEM(args, k), &nd->args[k]) < 0)
                return -1;
        if (metas == Py_None) {
            nd->nout = 0;
        } else {
            if (!PyTuple_Check(metas)) {
                PyErr_SetString(PyExc_TypeError, "kiln: node metadata must be a tuple");
                return -1;
            }
            nd->nout = (int)PyTuple_GET_SIZE(metas);
            nd->out = kn_alloc(&c->arena, sizeof(kn_meta) * (size_t)(nd->nout + 1));
            if (nd->out == NULL)
                return -1;
            for (int k = 0; k < nd->nout; k++)
                if (parse_meta(PyTuple_GET_ITEM(metas, k), &nd->out[k]) < 0)
                    return -1;
        }
    }
    g->ninputs = (int)PyList_GET_SIZE(inputs);
    g->inputs = kn_alloc(&c->arena, sizeof(int) * (size_t)(g->ninputs + 1));
    if (g->inputs == NULL)
        return -1;
    for (int k = 0; k < g->ninputs; k++) {
        g->inputs[k] = (int)PyLong_AsLong(PyList_GET_ITEM(inputs, k));
        if (g->inputs[k] < 0 || g->inputs[k] >= g->nnodes) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "kiln: bad input index in graph description");
            return -1;
        }
    }
    g->noutputs = (int)PyList_GET_SIZE(outputs);
    g->outputs = kn_alloc(&c->arena, sizeof(kn_arg) * (size_t)(g->noutputs + 1));
    if (g->outputs == NULL)
        return -1;
    for (int k = 0; k < g->noutputs; k++)
        if (parse_arg(c, PyList_GET_ITEM(outputs, k), &g->outputs[k]) < 0)
            return -1;
    return 0;
}
