/* guard.c — sources and guards, evaluated in C before a cached segment runs.
 *
 * Consumes: a segment's source list (how to reach each value the recording
 * read: a local, a global, an attribute of a source, ...) and its guard list
 * (facts about those values).  Produces: pass/miss, and the values of every
 * source, which the segment then uses as its graph inputs.
 *
 * Sources are evaluated parent-first into a value array; a source whose parent
 * is missing is missing.  A missing attribute or key is a miss, not an error.
 * Also here: binding opcode numbers to the table, and the exception table.
 */
#include "capture/capture.h"

int16_t kn_opmap[512];
uint8_t kn_opcaches[512];

/* New reference, or NULL (no exception) when the value is absent. */
static PyObject *
src_eval(kn_src *s, PyObject **vals, PyObject **locals, int nlocals, PyObject **stack, int nstack,
         PyObject *globals, PyObject *builtins)
{
    PyObject *p = s->parent >= 0 ? vals[s->parent] : NULL, *v = NULL;
    switch (s->kind) {
    case KN_SRC_LOCAL:
        return s->idx < nlocals ? Py_XNewRef(locals[s->idx]) : NULL;
    case KN_SRC_STACK:
        return s->idx < nstack ? Py_XNewRef(stack[s->idx]) : NULL;
    case KN_SRC_CONST:
        return Py_NewRef(s->key);
    case KN_SRC_GLOBAL:
        v = PyDict_GetItemWithError(globals, s->key);
        if (v == NULL && !PyErr_Occurred() && PyDict_Check(builtins))
            v = PyDict_GetItemWithError(builtins, s->key);
        if (v == NULL)
            PyErr_Clear();
        return Py_XNewRef(v);
    default:
        break;
    }
    if (p == NULL)
        return NULL;
    switch (s->kind) {
    case KN_SRC_ATTR:
        v = PyObject_GetAttr(p, s->key);
        break;
    case KN_SRC_DICT:
        if (!PyDict_Check(p))
            return NULL;
        v = Py_XNewRef(PyDict_GetItemWithError(p, s->key));
        break;
    case KN_SRC_INSTDICT:
        v = PyObject_GenericGetDict(p, NULL);
        break;
    case KN_SRC_ITEM:
        if (PyList_CheckExact(p) && s->idx < PyList_GET_SIZE(p))
            v = Py_NewRef(PyList_GET_ITEM(p, s->idx));
        else if (PyTuple_Check(p) && s->idx < PyTuple_GET_SIZE(p))
            v = Py_NewRef(PyTuple_GET_ITEM(p, s->idx));
        break;
    case KN_SRC_CELL:
        if (PyCell_Check(p))
            v = Py_XNewRef(PyCell_GET(p));
        break;
    case KN_SRC_CLOSURE:
        if (PyFunction_Check(p)) {
            PyObject *cl = PyFunction_GET_CLOSURE(p);
            if (cl && s->idx < PyTuple_GET_SIZE(cl))
                v = Py_NewRef(PyTuple_GET_ITEM(cl, s->idx));
        }
        break;
    case KN_SRC_DEFAULTS:
        if (PyFunction_Check(p))
            v = Py_XNewRef(PyFunction_GET_DEFAULTS(p));
        break;
    case KN_SRC_SIZE:
        if (s->idx < 0) {   /* an int argument: its value, an int exactly */
            if (PyLong_CheckExact(p))
                v = Py_NewRef(p);
        } else if (PyObject_TypeCheck(p, (PyTypeObject *)kn_cenv.torch_tensor)) {
            PyObject *shape = PyObject_GetAttr(p, kn_cenv.s_shape);
            if (shape && PyTuple_Check(shape) && s->idx < PyTuple_GET_SIZE(shape))
                v = Py_NewRef(PyTuple_GET_ITEM(shape, s->idx));
            Py_XDECREF(shape);
        }
        break;
    }
    if (v == NULL)
        PyErr_Clear();
    return v;
}

static int
seq_equal(PyObject *a, PyObject *b)
{
    /* a: a tuple-like from torch (Size or tuple), b: the recorded tuple */
    Py_ssize_t n = PyTuple_GET_SIZE(b);
    if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != n)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
        if (x == y || y == Py_None)   /* None: a symbolic size (KN_G_SIZES relates it) */
            continue;
        int ov1, ov2;
        long lx = PyLong_AsLongAndOverflow(x, &ov1), ly = PyLong_AsLongAndOverflow(y, &ov2);
        if (lx == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (ov1 || ov2 || lx != ly)
            return 0;
    }
    return 1;
}

/* 1 pass, 0 fail, -1 error.  obj3 is (sizes, strides, contiguous, on_cpu):
 * a tensor recorded contiguous is checked with is_contiguous() rather than
 * its stride tuple, and a CPU tensor with is_cpu rather than a device
 * comparison; both are cheaper and mean the same for the graph. */
static PyObject *s_is_contiguous, *s_is_cpu;

/* The descriptors of the two exact tensor types (Tensor, Parameter), looked
 * up once: a tensor's dtype read through its getset descriptor skips the
 * generic attribute lookup, and is_contiguous is called unbound. */
typedef struct {
    PyTypeObject *tp;
    PyObject *dtype, *shape, *rg, *cpu, *contig;   /* strong */
} tdesc;
static tdesc tdescs[4];

static tdesc *
tensor_desc(PyTypeObject *tp)
{
    int i = 0;
    for (; i < 4 && tdescs[i].tp; i++)
        if (tdescs[i].tp == tp)
            return &tdescs[i];
    if (i == 4)
        return NULL;
    PyObject *names[5] = {kn_cenv.s_dtype, kn_cenv.s_shape, kn_cenv.s_requires_grad, s_is_cpu, s_is_contiguous};
    PyObject *d[5];
    for (int k = 0; k < 5; k++) {
        d[k] = _PyType_Lookup(tp, names[k]);   /* borrowed */
        if (d[k] == NULL || Py_TYPE(d[k])->tp_descr_get == NULL)
            return NULL;
    }
    if (Py_TYPE(d[4]) != &PyMethodDescr_Type)
        return NULL;
    tdesc *t = &tdescs[i];
    t->dtype = Py_NewRef(d[0]);
    t->shape = Py_NewRef(d[1]);
    t->rg = Py_NewRef(d[2]);
    t->cpu = Py_NewRef(d[3]);
    t->contig = Py_NewRef(d[4]);
    t->tp = (PyTypeObject *)Py_NewRef((PyObject *)tp);
    return t;
}

static PyObject *
tget(tdesc *td, PyObject *d, PyObject *v, PyObject *name)
{
    if (td)
        return Py_TYPE(d)->tp_descr_get(d, v, (PyObject *)td->tp);
    return PyObject_GetAttr(v, name);
}

static int
check_tensor(kn_guard *g, PyObject *v)
{
    if ((PyObject *)Py_TYPE(v) != g->obj)
        return 0;
    tdesc *td = tensor_desc(Py_TYPE(v));
    PyObject *t = tget(td, td ? td->dtype : NULL, v, kn_cenv.s_dtype);
    if (t == NULL)
        return -1;
    int ok = t == g->obj2;
    Py_DECREF(t);
    if (!ok)
        return 0;
    t = tget(td, td ? td->shape : NULL, v, kn_cenv.s_shape);
    if (t == NULL)
        return -1;
    ok = seq_equal(t, PyTuple_GET_ITEM(g->obj3, 0));
    Py_DECREF(t);
    if (!ok)
        return 0;
    if (PyTuple_GET_ITEM(g->obj3, 2) == Py_True) {
        t = td ? PyObject_Vectorcall(td->contig, &v, 1, NULL) : PyObject_CallMethodNoArgs(v, s_is_contiguous);
        if (t == NULL)
            return -1;
        ok = t == Py_True;
    } else {
        t = PyObject_CallMethodNoArgs(v, kn_cenv.s_stride);
        if (t == NULL)
            return -1;
        ok = seq_equal(t, PyTuple_GET_ITEM(g->obj3, 1));
    }
    Py_DECREF(t);
    if (!ok)
        return 0;
    t = tget(td, td ? td->rg : NULL, v, kn_cenv.s_requires_grad);
    if (t == NULL)
        return -1;
    ok = (t == Py_True) == (g->n != 0);
    Py_DECREF(t);
    if (!ok)
        return 0;
    if (PyTuple_GET_ITEM(g->obj3, 3) == Py_True) {
        t = tget(td, td ? td->cpu : NULL, v, s_is_cpu);
        if (t == NULL)
            return -1;
        ok = t == Py_True;
        Py_DECREF(t);
        return ok;
    }
    t = PyObject_GetAttr(v, kn_cenv.s_device);
    if (t == NULL)
        return -1;
    ok = PyObject_RichCompareBool(t, g->obj4, Py_EQ);
    Py_DECREF(t);
    return ok;
}

static int
ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int
check_distinct(kn_guard *g, PyObject **vals)
{
    Py_ssize_t n = PyTuple_GET_SIZE(g->obj);
    uintptr_t small[64], *p = n <= 64 ? small : PyMem_Malloc(sizeof(uintptr_t) * n);
    if (p == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        p[i] = (uintptr_t)vals[PyLong_AsLong(PyTuple_GET_ITEM(g->obj, i))];
    qsort(p, n, sizeof *p, ptr_cmp);
    int ok = 1;
    for (Py_ssize_t i = 1; i < n; i++)
        if (p[i] == p[i - 1])
            ok = 0;
    if (p != small)
        PyMem_Free(p);
    return ok;
}

/* ------------------------------------------------------------------ global torch state */

/* (fn, args, want) triples, built once: the callables of torch's global
 * state that change what a recording computes. */
static PyObject *st_dtype, *st_fstack_len, *st_fstack_at, *st_any_autocast, *st_autocast_on, *st_autocast_dtype;
static PyObject *st_devs;   /* ("cpu", "cuda") */

static int
state_init(void)
{
    if (st_dtype)
        return 0;
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *C = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    if (C) {
        st_dtype = PyObject_GetAttrString(torch, "get_default_dtype");
        st_fstack_len = PyObject_GetAttrString(C, "_len_torch_function_stack");
        st_fstack_at = PyObject_GetAttrString(C, "_get_function_stack_at");
        st_any_autocast = PyObject_GetAttrString(C, "_is_any_autocast_enabled");
        st_autocast_on = PyObject_GetAttrString(torch, "is_autocast_enabled");
        st_autocast_dtype = PyObject_GetAttrString(torch, "get_autocast_dtype");
        st_devs = Py_BuildValue("(ss)", "cpu", "cuda");
    }
    Py_XDECREF(torch);
    Py_XDECREF(C);
    if (!st_dtype || !st_fstack_len || !st_fstack_at || !st_any_autocast || !st_autocast_on ||
        !st_autocast_dtype || !st_devs) {
        Py_CLEAR(st_dtype);
        return -1;
    }
    return 0;
}

/* append (fn, args, fn(*args)) to out */
static int
state_add(PyObject *out, PyObject *fn, PyObject *args, PyObject **got)
{
    PyObject *v = PyObject_Call(fn, args, NULL);
    PyObject *t = v ? PyTuple_Pack(3, fn, args, v) : NULL;
    int rc = t ? PyList_Append(out, t) : -1;
    Py_XDECREF(t);
    if (got && rc == 0)
        *got = Py_NewRef(v);
    Py_XDECREF(v);
    return rc;
}

PyObject *
kn_state_snapshot(void)
{
    if (state_init() < 0)
        return NULL;
    PyObject *out = PyList_New(0), *none = PyTuple_New(0), *n = NULL, *any = NULL;
    int rc = out && none ? 0 : -1;
    if (rc == 0)
        rc = state_add(out, st_dtype, none, NULL);
    if (rc == 0)
        rc = state_add(out, st_fstack_len, none, &n);
    /* the modes themselves (set_default_device makes a new one each time) */
    Py_ssize_t nm = rc == 0 ? PyLong_AsSsize_t(n) : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < nm; i++) {
        PyObject *a = Py_BuildValue("(n)", i);
        rc = a ? state_add(out, st_fstack_at, a, NULL) : -1;
        Py_XDECREF(a);
    }
    if (rc == 0)
        rc = state_add(out, st_any_autocast, none, &any);
    for (Py_ssize_t i = 0; rc == 0 && any == Py_True && i < PyTuple_GET_SIZE(st_devs); i++) {
        PyObject *a = PyTuple_Pack(1, PyTuple_GET_ITEM(st_devs, i)), *on = NULL;
        rc = a ? state_add(out, st_autocast_on, a, &on) : -1;
        if (rc == 0 && on == Py_True)
            rc = state_add(out, st_autocast_dtype, a, NULL);
        Py_XDECREF(on);
        Py_XDECREF(a);
    }
    Py_XDECREF(none);
    Py_XDECREF(n);
    Py_XDECREF(any);
    PyObject *t = rc == 0 ? PyList_AsTuple(out) : NULL;
    Py_XDECREF(out);
    return t;
}

/* 1: every recorded (fn, args, want) still holds; 0: one changed; -1 error */
static int
check_state(kn_guard *g)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g->obj); i++) {
        PyObject *t = PyTuple_GET_ITEM(g->obj, i), *args = PyTuple_GET_ITEM(t, 1);
        PyObject *v = PyObject_Vectorcall(PyTuple_GET_ITEM(t, 0), &PyTuple_GET_ITEM(args, 0),
                                          PyTuple_GET_SIZE(args), NULL);
        if (v == NULL)
            return -1;
        PyObject *want = PyTuple_GET_ITEM(t, 2);
        int ok = v == want || (Py_TYPE(v) == Py_TYPE(want) && PyObject_RichCompareBool(v, want, Py_EQ) == 1);
        Py_DECREF(v);
        if (PyErr_Occurred())
            return -1;
        if (!ok)
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ aliasing tensor inputs */

/* KN_G_ALIAS blob, int64: [n, npair, src[n], span[n], written[n], then npair
 * triples (i, j, data_ptr(j) - data_ptr(i))]: every pair i < j of inputs
 * whose byte ranges [data_ptr, data_ptr + span) intersect, one of them
 * written by the graph.  Sizes and strides are fixed by the tensor guards,
 * so the same pairs at the same relative offsets mean the same overlap,
 * element for element (what AOT autograd compiled the graph for); ranges
 * that do not intersect never share an element.  A tensor whose pointer
 * cannot be read (meta, say) or with no elements has an empty range. */
static PyObject *s_data_ptr;

static int64_t
tensor_ptr(PyObject *t)
{
    PyObject *args[2] = {NULL, t};
    PyObject *p = PyObject_VectorcallMethod(s_data_ptr, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    int64_t d = p ? (int64_t)PyLong_AsUnsignedLongLong(p) : 0;
    Py_XDECREF(p);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return d;
}

typedef struct {
    int64_t lo, hi;
    int k;
} range_k;

static int
range_cmp(const void *a, const void *b)
{
    const range_k *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

static int
triple_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* The overlapping pairs of tensors ts[0..n) (see the blob), sorted, into
 * *pairs (PyMem, 3 per pair; NULL when none); their count, -1 on no memory. */
static Py_ssize_t
overlap_pairs(PyObject **ts, int n, const int64_t *span, const int64_t *wr, int64_t **pairs)
{
    range_k small[32], *rg = n <= 32 ? small : PyMem_Malloc(sizeof(range_k) * n);
    Py_ssize_t np = 0, cap = 0;
    *pairs = NULL;
    if (rg == NULL)
        return -1;
    int m = 0;
    for (int k = 0; k < n; k++) {
        int64_t p = span[k] > 0 ? tensor_ptr(ts[k]) : 0;
        if (p != 0)
            rg[m++] = (range_k){p, p + span[k], k};
    }
    qsort(rg, m, sizeof *rg, range_cmp);
    for (int a = 0; a < m && np >= 0; a++) {
        for (int b = a + 1; b < m && rg[b].lo < rg[a].hi; b++) {
            if (!wr[rg[a].k] && !wr[rg[b].k])
                continue;
            if (np == cap) {
                cap = cap ? 2 * cap : 8;
                int64_t *q = PyMem_Realloc(*pairs, sizeof(int64_t) * 3 * cap);
                if (q == NULL) {
                    np = -1;
                    break;
                }
                *pairs = q;
            }
            range_k x = rg[a].k < rg[b].k ? rg[a] : rg[b], y = rg[a].k < rg[b].k ? rg[b] : rg[a];
            int64_t *t = *pairs + 3 * np++;
            t[0] = x.k;
            t[1] = y.k;
            t[2] = y.lo - x.lo;
        }
    }
    if (rg != small)
        PyMem_Free(rg);
    if (np < 0) {
        PyMem_Free(*pairs);
        *pairs = NULL;
        return -1;
    }
    if (np > 1)
        qsort(*pairs, np, sizeof(int64_t) * 3, triple_cmp);
    return np;
}

/* Bytes from a tensor's first element to one past its last one (0: none). */
static int64_t
tensor_span(PyObject *t)
{
    PyObject *shape = PyObject_GetAttr(t, kn_cenv.s_shape), *stride = PyObject_CallMethodNoArgs(t, kn_cenv.s_stride);
    PyObject *es = PyObject_CallMethod(t, "element_size", NULL);
    int64_t span = es ? PyLong_AsLongLong(es) : 0;
    Py_ssize_t nd = shape && stride && PyTuple_Check(shape) && PyTuple_Check(stride) ? PyTuple_GET_SIZE(shape) : -1;
    int64_t last = 0;
    for (Py_ssize_t i = 0; i < nd && span > 0; i++) {
        long long sz = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (sz == 0)
            span = 0;
        last += (sz - 1) * PyLong_AsLongLong(PyTuple_GET_ITEM(stride, i));
    }
    int bad = nd < 0 || PyErr_Occurred();
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(es);
    PyErr_Clear();
    return bad || span <= 0 ? (bad ? -1 : 0) : (last + 1) * span;
}

PyObject *
kn_alias_facts(const int *srcs, int n, PyObject *reals, PyObject *fakes)
{
    if (s_data_ptr == NULL && (s_data_ptr = PyUnicode_InternFromString("data_ptr")) == NULL)
        return NULL;
    if (n < 2 || PyList_GET_SIZE(reals) < n)
        return NULL;
    int64_t *w = PyMem_Malloc(sizeof(int64_t) * (2 + 3 * (size_t)n)), *pairs = NULL;
    if (w == NULL)
        return PyErr_NoMemory();
    int64_t *src = w + 2, *span = src + n, *wr = span + n;
    int any = 0;
    w[0] = n;
    for (int k = 0; k < n; k++) {
        PyObject *t = PyList_GET_ITEM(reals, k);
        PyObject *f = fakes && k < PyList_GET_SIZE(fakes) ? PyList_GET_ITEM(fakes, k) : Py_None;
        PyObject *ver = f != Py_None ? PyObject_GetAttrString(f, "_version") : NULL;
        if (ver == NULL)
            PyErr_Clear();
        src[k] = srcs[k];
        span[k] = tensor_span(t);
        if (span[k] < 0)   /* an extent kiln cannot read: any address may be shared */
            span[k] = INT64_MAX / 4;
        wr[k] = !(ver && PyLong_Check(ver) && PyLong_AsLong(ver) == 0);   /* unknown: written */
        any |= (int)wr[k];
        Py_XDECREF(ver);
        PyErr_Clear();
    }
    Py_ssize_t np = any ? overlap_pairs(&PyList_GET_ITEM(reals, 0), n, span, wr, &pairs) : 0;
    PyObject *blob = NULL;
    if (np < 0)
        PyErr_NoMemory();
    else if (any && (blob = PyBytes_FromStringAndSize(NULL, sizeof(int64_t) * (2 + 3 * (size_t)n + 3 * np)))) {
        w[1] = np;
        memcpy(PyBytes_AS_STRING(blob), w, sizeof(int64_t) * (2 + 3 * (size_t)n));
        if (np)
            memcpy(PyBytes_AS_STRING(blob) + sizeof(int64_t) * (2 + 3 * (size_t)n), pairs, sizeof(int64_t) * 3 * np);
    }
    PyMem_Free(w);
    PyMem_Free(pairs);
    return blob;
}

/* 1 the inputs overlap as recorded, 0 not, -1 error */
static int
check_alias(kn_guard *g, PyObject **vals)
{
    const int64_t *w = (const int64_t *)PyBytes_AS_STRING(g->obj);
    int n = (int)w[0];
    Py_ssize_t want = (Py_ssize_t)w[1];
    const int64_t *src = w + 2, *span = src + n, *wr = span + n, *wpairs = wr + n;
    PyObject *tsmall[32], **ts = n <= 32 ? tsmall : PyMem_Malloc(sizeof(PyObject *) * n);
    if (ts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int ok = 1;
    for (int k = 0; ok && k < n; k++)
        if ((ts[k] = vals[src[k]]) == NULL)
            ok = 0;
    int64_t *pairs = NULL;
    Py_ssize_t np = ok ? overlap_pairs(ts, n, span, wr, &pairs) : 0;
    if (np < 0) {
        PyErr_NoMemory();
        ok = -1;
    } else if (ok) {
        ok = np == want && (np == 0 || memcmp(pairs, wpairs, sizeof(int64_t) * 3 * np) == 0);
    }
    PyMem_Free(pairs);
    if (ts != tsmall)
        PyMem_Free(ts);
    return ok;
}

static int
int_of(PyObject *v, int64_t *out)
{
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    int ov;
    long long x = PyLong_AsLongLongAndOverflow(v, &ov);
    if (ov || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

static int sizes_run(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int *failed,
                     int64_t *out);

int
kn_sizes_eval(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int *failed)
{
    return sizes_run(prog, n, vals, nvals, failed, NULL);
}

int
kn_sizes_value(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int64_t *out)
{
    int failed;
    return sizes_run(prog, n, vals, nvals, &failed, out);
}

/* out NULL: relations, each checked; else one value left on the stack */
static int
sizes_run(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int *failed, int64_t *out)
{
    int64_t st[64];
    int sp = 0, rel = 0;
    *failed = -1;
    for (Py_ssize_t pc = 0; pc < n; pc++) {
        int64_t op = prog[pc], a, b, r;
        if (op == KN_SZ_SLOT || op == KN_SZ_CONST) {
            if (pc + 1 >= n || sp >= 64)
                return -1;
            if (op == KN_SZ_CONST)
                st[sp++] = prog[++pc];
            else if (prog[pc + 1] < 0 || prog[pc + 1] >= nvals)
                return -1;
            else if (!int_of(vals[prog[++pc]], &st[sp++])) {
                *failed = rel;
                return 0;
            }
            continue;
        }
        if (op == KN_SZ_NEG || op == KN_SZ_NOT || op == KN_SZ_CHECK) {
            if (sp < 1)
                return -1;
            a = st[sp - 1];
            if (op == KN_SZ_CHECK) {
                sp--;
                if (a == 0) {
                    *failed = rel;
                    return 0;
                }
                rel++;
            } else if (op == KN_SZ_NOT) {
                st[sp - 1] = a == 0;
            } else if (__builtin_sub_overflow((int64_t)0, a, &st[sp - 1])) {
                *failed = rel;
                return 0;
            }
            continue;
        }
        if (sp < 2)
            return -1;
        a = st[sp - 2];
        b = st[sp - 1];
        int bad = 0;
        switch (op) {
        case KN_SZ_ADD: bad = __builtin_add_overflow(a, b, &r); break;
        case KN_SZ_SUB: bad = __builtin_sub_overflow(a, b, &r); break;
        case KN_SZ_MUL: bad = __builtin_mul_overflow(a, b, &r); break;
        case KN_SZ_FLOORDIV:
        case KN_SZ_MOD:
            if (b == 0 || (a == INT64_MIN && b == -1)) {
                bad = 1;
                break;
            }
            {
                int64_t q = a / b, m = a % b;
                if (m != 0 && ((m < 0) != (b < 0))) {   /* Python's: the remainder has the divisor's sign */
                    q -= 1;
                    m += b;
                }
                r = op == KN_SZ_FLOORDIV ? q : m;
            }
            break;
        case KN_SZ_MIN: r = a < b ? a : b; break;
        case KN_SZ_MAX: r = a > b ? a : b; break;
        case KN_SZ_EQ: r = a == b; break;
        case KN_SZ_NE: r = a != b; break;
        case KN_SZ_LT: r = a < b; break;
        case KN_SZ_LE: r = a <= b; break;
        case KN_SZ_AND: r = a != 0 && b != 0; break;
        case KN_SZ_OR: r = a != 0 || b != 0; break;
        default: return -1;
        }
        if (bad) {
            *failed = rel;
            return 0;
        }
        st[sp - 2] = r;
        sp--;
    }
    if (out) {
        if (sp != 1)
            return -1;
        *out = st[0];
        return 1;
    }
    return sp == 0 ? 1 : -1;
}

int
kn_guard_check(kn_seg *seg, PyObject **locals, int nlocals, PyObject **stack, int nstack, PyObject *globals,
               PyObject *builtins, PyObject **vals)
{
    for (int i = 0; i < seg->nsrc; i++) {
        vals[i] = src_eval(&seg->srcs[i], vals, locals, nlocals, stack, nstack, globals, builtins);
        if (PyErr_Occurred())
            PyErr_Clear();
    }
    for (int i = 0; i < seg->nguard; i++) {
        kn_guard *g = &seg->guards[i];
        PyObject *v = g->src >= 0 ? vals[g->src] : NULL;
        int ok = 0;
        if (g->kind == KN_G_GRAD) {
            PyObject *r = PyObject_CallNoArgs(kn_cenv.is_grad);
            if (r == NULL)
                return -1;
            ok = (r == Py_True) == (g->n != 0);
            Py_DECREF(r);
            if (!ok)
                return 0;
            continue;
        }
        if (g->kind == KN_G_DISTINCT) {
            if (!check_distinct(g, vals))
                return 0;
            continue;
        }
        if (g->kind == KN_G_SIZES) {
            int failed;
            if (kn_sizes_eval((const int64_t *)PyBytes_AS_STRING(g->obj),
                              PyBytes_GET_SIZE(g->obj) / (Py_ssize_t)sizeof(int64_t), vals, seg->nsrc, &failed) != 1)
                return 0;
            continue;
        }
        if (g->kind == KN_G_STATE || g->kind == KN_G_ALIAS) {
            ok = g->kind == KN_G_STATE ? check_state(g) : check_alias(g, vals);
            if (ok <= 0)
                return ok;
            continue;
        }
        if (g->kind == KN_G_NULL) {
            if (v != NULL)
                return 0;
            continue;
        }
        if (v == NULL)
            return 0;
        switch (g->kind) {
        case KN_G_TYPE:
            ok = (PyObject *)Py_TYPE(v) == g->obj;
            break;
        case KN_G_ID:
            ok = v == g->obj;
            break;
        case KN_G_WEAKID: {
            PyObject *o = kn_weak_get(g->obj2);
            ok = v == o;
            Py_DECREF(o);
            break;
        }
        case KN_G_CODE:
            ok = PyFunction_Check(v) && PyFunction_GET_CODE(v) == g->obj &&
                 PyFunction_GET_DEFAULTS(v) == g->obj2 && PyFunction_GET_KW_DEFAULTS(v) == g->obj3;
            break;
        case KN_G_EQ:
            if (v == g->obj) {
                ok = 1;
                break;
            }
            if (Py_TYPE(v) != Py_TYPE(g->obj))
                break;
            ok = PyObject_RichCompareBool(v, g->obj, Py_EQ);
            if (ok < 0) {
                PyErr_Clear();
                ok = 0;
            }
            break;
        case KN_G_TENSOR:
            ok = check_tensor(g, v);
            if (ok < 0) {
                PyErr_Clear();
                ok = 0;
            }
            break;
        case KN_G_LEN: {
            Py_ssize_t n = PyObject_Length(v);
            if (n < 0)
                PyErr_Clear();
            ok = n == g->n;
            break;
        }
        case KN_G_KEYS: {
            if (!PyDict_Check(v) || PyDict_GET_SIZE(v) != PyTuple_GET_SIZE(g->obj))
                break;
            Py_ssize_t pos = 0, j = 0;
            PyObject *k, *val;
            ok = 1;
            while (PyDict_Next(v, &pos, &k, &val)) {
                PyObject *want = PyTuple_GET_ITEM(g->obj, j++);
                if (k != want) {
                    int e = PyObject_RichCompareBool(k, want, Py_EQ);
                    if (e <= 0) {
                        PyErr_Clear();
                        ok = 0;
                        break;
                    }
                }
            }
            break;
        }
        case KN_G_SAME:
            ok = v == vals[g->n];
            break;
        case KN_G_HASKEY: {
            int e = PyDict_Check(v) ? PyDict_Contains(v, g->obj) : -1;
            if (e < 0)
                PyErr_Clear();
            ok = e == g->n;
            break;
        }
        case KN_G_EMPTY:
            ok = PyDict_Check(v);
            for (Py_ssize_t k = 0; ok && k < PyTuple_GET_SIZE(g->obj); k++) {
                PyObject *d = PyDict_GetItemWithError(v, PyTuple_GET_ITEM(g->obj, k));
                ok = d != NULL && PyDict_Check(d) && PyDict_GET_SIZE(d) == 0;
            }
            if (PyErr_Occurred())
                PyErr_Clear();
            break;
        default:
            ok = 0;
        }
        if (!ok)
            return 0;
    }
    return 1;
}

/* ", ".join(parts), parts (a list, or NULL after an error) dropped */
static PyObject *
comma_join(PyObject *parts)
{
    PyObject *sep = parts ? PyUnicode_FromString(", ") : NULL;
    PyObject *d = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_XDECREF(parts);
    return d;
}

PyObject *
kn_src_describe(kn_src *srcs, int i, PyCodeObject *code)
{
    kn_src *s = &srcs[i];
    PyObject *p = NULL, *r = NULL;
    if (s->parent >= 0 && (p = kn_src_describe(srcs, s->parent, code)) == NULL)
        return NULL;
    switch (s->kind) {
    case KN_SRC_LOCAL: {
        PyObject *names = PyObject_GetAttrString((PyObject *)code, "co_varnames");
        PyObject *cell = PyObject_GetAttrString((PyObject *)code, "co_cellvars");
        PyObject *fr = PyObject_GetAttrString((PyObject *)code, "co_freevars");
        PyObject *all = NULL;
        if (names && cell && fr) {
            PyObject *t = PySequence_Concat(names, cell);
            if (t) {
                all = PySequence_Concat(t, fr);
                Py_DECREF(t);
            }
        }
        /* localsplus order differs from co_varnames+cellvars+freevars only for
         * argument cells, which appear once among the varnames */
        if (all && s->idx < PyTuple_GET_SIZE(all))
            r = Py_NewRef(PyTuple_GET_ITEM(all, s->idx));
        else
            r = PyUnicode_FromFormat("local[%zd]", s->idx);
        PyErr_Clear();
        Py_XDECREF(names);
        Py_XDECREF(cell);
        Py_XDECREF(fr);
        Py_XDECREF(all);
        break;
    }
    case KN_SRC_STACK: r = PyUnicode_FromFormat("stack[%zd]", s->idx); break;
    case KN_SRC_GLOBAL: r = PyUnicode_FromFormat("G[%R]", s->key); break;
    case KN_SRC_ATTR: r = PyUnicode_FromFormat("%U.%U", p, s->key); break;
    case KN_SRC_DICT:
        r = PyObject_TypeCheck(s->key, (PyTypeObject *)kn_cenv.torch_tensor)
                ? PyUnicode_FromFormat("%U[<tensor at %p>]", p, s->key)
                : PyUnicode_FromFormat("%U[%R]", p, s->key);
        break;
    case KN_SRC_INSTDICT: r = PyUnicode_FromFormat("%U.__dict__", p); break;
    case KN_SRC_ITEM: r = PyUnicode_FromFormat("%U[%zd]", p, s->idx); break;
    case KN_SRC_CELL: r = PyUnicode_FromFormat("%U.cell_contents", p); break;
    case KN_SRC_CLOSURE: r = PyUnicode_FromFormat("%U.__closure__[%zd]", p, s->idx); break;
    case KN_SRC_DEFAULTS: r = PyUnicode_FromFormat("%U.__defaults__", p); break;
    case KN_SRC_SIZE:
        r = s->idx < 0 ? Py_NewRef(p) : PyUnicode_FromFormat("%U.size()[%zd]", p, s->idx);
        break;
    case KN_SRC_CONST:
        r = PyDict_Check(s->key) && PyDict_GetItemString(s->key, "__name__")
                ? PyUnicode_FromFormat("%S.__dict__", PyDict_GetItemString(s->key, "__name__"))
                : PyUnicode_FromFormat("<%s>", Py_TYPE(s->key)->tp_name);
        break;
    }
    Py_XDECREF(p);
    return r;
}

PyObject *
kn_guard_describe(kn_seg *seg, PyCodeObject *code)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < seg->nguard; i++) {
        kn_guard *g = &seg->guards[i];
        PyObject *s = NULL, *d = NULL;
        if (g->src >= 0 && (s = kn_src_describe(seg->srcs, g->src, code)) == NULL)
            goto error;
        switch (g->kind) {
        case KN_G_TYPE: d = PyUnicode_FromFormat("type(%U) is %s", s, ((PyTypeObject *)g->obj)->tp_name); break;
        case KN_G_ID: d = PyUnicode_FromFormat("%U is <%s object at %p>", s, Py_TYPE(g->obj)->tp_name, g->obj); break;
        case KN_G_EQ: d = PyUnicode_FromFormat("%U == %R", s, g->obj); break;
        case KN_G_TENSOR:
            d = PyUnicode_FromFormat("%U: %s %S %S size=%S stride=%S requires_grad=%s", s,
                                     ((PyTypeObject *)g->obj)->tp_name, g->obj2, g->obj4,
                                     PyTuple_GET_ITEM(g->obj3, 0), PyTuple_GET_ITEM(g->obj3, 1),
                                     g->n ? "True" : "False");
            break;
        case KN_G_LEN: d = PyUnicode_FromFormat("len(%U) == %zd", s, g->n); break;
        case KN_G_KEYS: d = PyUnicode_FromFormat("list(%U.keys()) == %R", s, g->obj); break;
        case KN_G_NULL: d = PyUnicode_FromFormat("%U is unbound", s); break;
        case KN_G_SAME: {
            PyObject *o = kn_src_describe(seg->srcs, (int)g->n, code);
            d = o ? PyUnicode_FromFormat("%U is %U", s, o) : NULL;
            Py_XDECREF(o);
            break;
        }
        case KN_G_WEAKID: {
            PyObject *o = kn_weak_get(g->obj2);
            d = PyUnicode_FromFormat("%U is <%s object at %p>%s", s, Py_TYPE(o)->tp_name, o,
                                     o == Py_None ? " (gone)" : "");
            Py_DECREF(o);
            break;
        }
        case KN_G_EMPTY: d = PyUnicode_FromFormat("%U[k] == {} for k in %R", s, g->obj); break;
        case KN_G_HASKEY: d = PyUnicode_FromFormat("(%R in %U) == %s", g->obj, s, g->n ? "True" : "False"); break;
        case KN_G_SIZES: {
            PyObject *sep = PyUnicode_FromString(" and ");
            d = sep ? PyUnicode_Join(sep, g->obj2) : NULL;
            Py_XDECREF(sep);
            break;
        }
        case KN_G_DISTINCT: d = PyUnicode_FromFormat("the %zd tensor inputs are distinct objects", PyTuple_GET_SIZE(g->obj)); break;
        case KN_G_GRAD: d = PyUnicode_FromFormat("torch.is_grad_enabled() == %s", g->n ? "True" : "False"); break;
        case KN_G_CODE: d = PyUnicode_FromFormat("%U.__code__ is <code %U>, __defaults__ and __kwdefaults__ unchanged", s,
                                                 ((PyCodeObject *)g->obj)->co_qualname); break;
        case KN_G_STATE: {
            PyObject *parts = PyList_New(0);
            for (Py_ssize_t k = 0; parts && k < PyTuple_GET_SIZE(g->obj); k++) {
                PyObject *t = PyTuple_GET_ITEM(g->obj, k), *fn = PyTuple_GET_ITEM(t, 0), *a = PyTuple_GET_ITEM(t, 1);
                PyObject *nm = PyObject_GetAttrString(fn, "__name__");
                PyObject *p = nm ? PyUnicode_FromFormat("%U%R == %R", nm, a,
                                                        PyTuple_GET_ITEM(t, 2)) : NULL;
                if (p == NULL || PyList_Append(parts, p) < 0)
                    Py_CLEAR(parts);
                Py_XDECREF(nm);
                Py_XDECREF(p);
            }
            d = comma_join(parts);
            break;
        }
        case KN_G_ALIAS: {
            const int64_t *w = (const int64_t *)PyBytes_AS_STRING(g->obj);
            d = PyUnicode_FromFormat("the %d tensor inputs overlap in memory as recorded (%d overlapping pairs "
                                     "with one written)", (int)w[0], (int)w[1]);
            break;
        }
        default: d = PyUnicode_FromString("?"); break;
        }
        Py_XDECREF(s);
        if (d == NULL || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            goto error;
        }
        Py_DECREF(d);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

static PyObject **got_vals;   /* kn_guard_failure's source values, while it runs (KN_G_SIZES) */

/* The value a failed guard saw, for kn_guard_failure: a tensor as the
 * guard describes one, another value as its repr (cut short). */
static PyObject *
guard_got(kn_guard *g, PyObject *v)
{
    switch (g->kind) {
    case KN_G_GRAD: {
        PyObject *r = PyObject_CallNoArgs(kn_cenv.is_grad);
        PyObject *d = r ? PyUnicode_FromFormat("torch.is_grad_enabled() is %R", r) : NULL;
        Py_XDECREF(r);
        return d;
    }
    case KN_G_STATE: {   /* the parts of the global torch state that changed */
        PyObject *parts = PyList_New(0);
        for (Py_ssize_t k = 0; parts && k < PyTuple_GET_SIZE(g->obj); k++) {
            PyObject *t = PyTuple_GET_ITEM(g->obj, k), *fn = PyTuple_GET_ITEM(t, 0), *a = PyTuple_GET_ITEM(t, 1);
            PyObject *got = PyObject_Call(fn, a, NULL), *nm = PyObject_GetAttrString(fn, "__name__");
            int same = got ? PyObject_RichCompareBool(got, PyTuple_GET_ITEM(t, 2), Py_EQ) : -1;
            PyObject *p = got && nm && same == 0 ? PyUnicode_FromFormat("%U%R == %R", nm, a, got) : NULL;
            if (same < 0 || (p && PyList_Append(parts, p) < 0))
                Py_CLEAR(parts);
            Py_XDECREF(got);
            Py_XDECREF(nm);
            Py_XDECREF(p);
        }
        return comma_join(parts);
    }
    case KN_G_DISTINCT: return PyUnicode_FromString("two of them are the same object");
    case KN_G_SIZES: {   /* obj3: ((source, name), ...) of the sizes; got_vals: their values now */
        PyObject *parts = PyList_New(0);
        for (Py_ssize_t k = 0; parts && got_vals && k < PyTuple_GET_SIZE(g->obj3); k++) {
            PyObject *t = PyTuple_GET_ITEM(g->obj3, k);
            PyObject *x = got_vals[PyLong_AsLong(PyTuple_GET_ITEM(t, 0))];
            PyObject *p = PyUnicode_FromFormat("%U=%R", PyTuple_GET_ITEM(t, 1), x ? x : Py_None);
            if (p == NULL || PyList_Append(parts, p) < 0)
                Py_CLEAR(parts);
            Py_XDECREF(p);
        }
        return comma_join(parts);
    }
    case KN_G_ALIAS: return PyUnicode_FromString("tensor inputs that overlap in memory otherwise");
    default: break;
    }
    if (v == NULL)
        return PyUnicode_FromString("nothing (unbound, or the attribute or key is missing)");
    if (PyObject_TypeCheck(v, (PyTypeObject *)kn_cenv.torch_tensor)) {
        PyObject *dt = PyObject_GetAttr(v, kn_cenv.s_dtype), *dev = PyObject_GetAttr(v, kn_cenv.s_device);
        PyObject *shape = PyObject_GetAttr(v, kn_cenv.s_shape), *st = PyObject_CallMethod(v, "stride", NULL);
        PyObject *size = shape ? PySequence_Tuple(shape) : NULL;
        PyObject *rg = PyObject_GetAttr(v, kn_cenv.s_requires_grad);
        PyObject *d = dt && dev && size && st && rg
                          ? PyUnicode_FromFormat("%s %S %S size=%S stride=%S requires_grad=%S", Py_TYPE(v)->tp_name,
                                                 dt, dev, size, st, rg)
                          : NULL;
        Py_XDECREF(dt);
        Py_XDECREF(dev);
        Py_XDECREF(shape);
        Py_XDECREF(size);
        Py_XDECREF(st);
        Py_XDECREF(rg);
        return d;
    }
    PyObject *r = PyObject_Repr(v);
    if (r && PyUnicode_GET_LENGTH(r) > 200) {
        PyObject *cut = PyUnicode_Substring(r, 0, 200);
        Py_SETREF(r, cut ? PyUnicode_FromFormat("%U...", cut) : NULL);
        Py_XDECREF(cut);
    }
    PyObject *d = r ? PyUnicode_FromFormat("%s %U", Py_TYPE(v)->tp_name, r) : NULL;
    Py_XDECREF(r);
    return d;
}

/* For a failed KN_G_SIZES: [the relation that fails] (kn_guard_describe's
 * form); guard_got says the sizes it saw. */
static PyObject *
sizes_failure(kn_guard *g, PyObject **vals, Py_ssize_t nvals)
{
    int failed;
    kn_sizes_eval((const int64_t *)PyBytes_AS_STRING(g->obj), PyBytes_GET_SIZE(g->obj) / (Py_ssize_t)sizeof(int64_t),
                  vals, nvals, &failed);
    PyObject *rel = failed >= 0 && failed < PyList_GET_SIZE(g->obj2) ? PyList_GET_ITEM(g->obj2, failed) : NULL;
    return rel ? Py_BuildValue("[O]", rel) : Py_BuildValue("[s]", "the relations between symbolic sizes");
}

PyObject *
kn_guard_failure(kn_seg *segs, int off, PyObject **locals, int nlocals, PyObject **stack, int nstack,
                 PyObject *globals, PyObject *builtins, PyCodeObject *code)
{
    kn_seg *seg = segs;
    while (seg && seg->offset != off)
        seg = seg->next;
    if (seg == NULL || seg->nguard == 0)
        return NULL;
    PyObject **vals = PyMem_Calloc(seg->nsrc + 1, sizeof(PyObject *)), *out = NULL;
    if (vals == NULL)
        return NULL;
    /* guards run in order and stop at the first that fails: a prefix of
     * them passes exactly when it ends before that one (binary search) */
    kn_seg part = *seg;
    int lo = 0, hi = seg->nguard, r = 0;
    for (int first = 1; first || hi - lo > 1; first = 0) {
        part.nguard = first ? hi : (lo + hi) / 2;
        r = kn_guard_check(&part, locals, nlocals, stack, nstack, globals, builtins, vals);
        for (int i = 0; i < seg->nsrc; i++)
            Py_CLEAR(vals[i]);
        if (r < 0 || (first && r == 1))
            goto done;   /* an error, or they pass now */
        if (!first && r == 1)
            lo = part.nguard;
        else
            hi = part.nguard;
    }
    part.nguard = 0;   /* the values of every source, for what the failed guard saw */
    kn_guard_check(&part, locals, nlocals, stack, nstack, globals, builtins, vals);
    part.guards = seg->guards + hi - 1;
    part.nguard = 1;
    PyObject *want = part.guards->kind == KN_G_SIZES ? sizes_failure(part.guards, vals, seg->nsrc)
                                                      : kn_guard_describe(&part, code);
    got_vals = vals;
    PyObject *got = want ? guard_got(part.guards, part.guards->src >= 0 ? vals[part.guards->src] : NULL) : NULL;
    got_vals = NULL;
    if (got)
        out = PyUnicode_FromFormat("%U (got %U)", PyList_GET_ITEM(want, 0), got);
    Py_XDECREF(want);
    Py_XDECREF(got);
    for (int i = 0; i < seg->nsrc; i++)
        Py_CLEAR(vals[i]);
done:
    PyMem_Free(vals);
    PyErr_Clear();
    return out;
}

void
kn_seg_free(kn_seg *seg)
{
    for (int i = 0; i < seg->nsrc; i++)
        Py_XDECREF(seg->srcs[i].key);
    for (int i = 0; i < seg->nguard; i++) {
        Py_XDECREF(seg->guards[i].obj);
        Py_XDECREF(seg->guards[i].obj2);
        Py_XDECREF(seg->guards[i].obj3);
        Py_XDECREF(seg->guards[i].obj4);
    }
    Py_XDECREF(seg->consts);
    Py_XDECREF(seg->graph);
    Py_XDECREF(seg->kwnames);
    PyMem_Free(seg->srcs);
    PyMem_Free(seg->guards);
    PyMem_Free(seg->inputs);
    PyMem_Free(seg->ops);
    PyMem_Free(seg);
}

/* ------------------------------------------------------------------ opcode numbers */

const char *const kn_opcode_names[KN_NOPCODES] = {
#define OPC(name, how) #name,
#include "capture/opcodes.def"
#undef OPC
};

PyTypeObject *kn_method_wrapper_type;

int
kn_opcodes_bind(void)
{
    if (kn_method_wrapper_type == NULL) {
        PyObject *mw = PyObject_GetAttrString(Py_None, "__repr__");
        if (mw == NULL)
            return -1;
        kn_method_wrapper_type = Py_TYPE(mw);   /* a static type: no reference kept */
        Py_DECREF(mw);
    }
    if (s_is_contiguous == NULL && (s_is_contiguous = PyUnicode_InternFromString("is_contiguous")) == NULL)
        return -1;
    if (s_is_cpu == NULL && (s_is_cpu = PyUnicode_InternFromString("is_cpu")) == NULL)
        return -1;
    for (int i = 0; i < 512; i++) {
        kn_opmap[i] = -1;
        kn_opcaches[i] = 0;
    }
    PyObject *dis = PyImport_ImportModule("opcode");
    if (dis == NULL)
        return -1;
    PyObject *opmap = PyObject_GetAttrString(dis, "opmap");
    PyObject *caches = PyObject_GetAttrString(dis, "_inline_cache_entries");
    Py_DECREF(dis);
    if (opmap == NULL || caches == NULL) {
        Py_XDECREF(opmap);
        Py_XDECREF(caches);
        return -1;
    }
    for (int k = 0; k < KN_NOPCODES; k++) {
        PyObject *num = PyDict_GetItemString(opmap, kn_opcode_names[k]);
        if (num == NULL)
            continue;
        long n = PyLong_AsLong(num);
        if (n >= 0 && n < 512)
            kn_opmap[n] = (int16_t)k;
    }
    if (PyList_Check(caches)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(caches) && i < 512; i++)
            kn_opcaches[i] = (uint8_t)PyLong_AsLong(PyList_GET_ITEM(caches, i));
    } else if (PyDict_Check(caches)) {      /* keyed by name in later versions */
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(caches, &pos, &k, &v)) {
            PyObject *num = PyDict_GetItem(opmap, k);
            if (num)
                kn_opcaches[PyLong_AsLong(num) & 511] = (uint8_t)PyLong_AsLong(v);
        }
    }
    Py_DECREF(opmap);
    Py_DECREF(caches);
    PyErr_Clear();
    return 0;
}

/* ------------------------------------------------------------------ exception table */

static int
read_varint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i)
{
    int v = p[*i] & 63;
    while (p[(*i)++] & 64 && *i < n)
        v = (v << 6) | (p[*i] & 63);
    return v;
}

int
kn_exc_region(PyCodeObject *code, int offset)
{
    PyObject *tab = code->co_exceptiontable;
    if (tab == NULL || !PyBytes_Check(tab) || PyBytes_GET_SIZE(tab) == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(tab);
    Py_ssize_t n = PyBytes_GET_SIZE(tab), i = 0;
    int found = 0;
    while (i < n) {
        int start = read_varint(p, n, &i);
        int len = read_varint(p, n, &i);
        int target = read_varint(p, n, &i);
        read_varint(p, n, &i);   /* depth and lasti */
        if (offset < start || offset >= start + len)
            continue;
        /* What kind of handler is it?  Read its first instructions. */
        PyObject *bytes = PyCode_GetCode(code);
        if (bytes == NULL) {
            PyErr_Clear();
            return 1;
        }
        const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(bytes);
        Py_ssize_t nc = PyBytes_GET_SIZE(bytes) / 2;
        int op0 = target < nc ? kn_opmap[c[2 * target]] : -1;
        int op1 = target + 1 < nc ? kn_opmap[c[2 * target + 2]] : -1;
        Py_DECREF(bytes);
        if (op0 == KN_OP_PUSH_EXC_INFO && op1 == KN_OP_WITH_EXCEPT_START)
            found = found ? found : 2;
        else if (op0 == KN_OP_PUSH_EXC_INFO)
            return 1;
        /* otherwise compiler cleanup (3.12 inlined comprehensions): harmless */
    }
    return found;
}
