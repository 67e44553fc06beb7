/* record.c — the symbolic interpreter over CPython bytecode.
 *
 * Consumes: a code object, an offset and the real frame's locals and stack.
 * Produces: a kn_seg — guards on everything the recording read, a torch.fx
 * graph of the tensor operations (compiled by the chosen backend), a replay
 * program that rebuilds the frame's values and side effects, and a terminal
 * action (return, a call or branch done for real, or CPython from an offset).
 *
 * One case per opcode (opcodes.def is the list; its BREAK rows become the
 * cases that break, naming the opcode); the larger opcode families are in
 * record_ops.c.  User functions are inlined; a graph break inside an inlined
 * call makes the recording start again with that call site left to run for
 * real, so the callee is recorded as its own frame.  Calls are in
 * record_call.c, builtins in builtins.c, attributes and tensor ops in
 * record_value.c.  A break is raised by its code (kn_brk, breaks.def).
 */
#include "capture/record.h"

#include <stdarg.h>

#if KN_PY313   /* _PySet_NextEntry moved to the internal headers */
#define Py_BUILD_CORE 1
#include "internal/pycore_setobject.h"
#undef Py_BUILD_CORE
#endif

kn_val kn_lazy;

/* ------------------------------------------------------------------ values */

kn_val *
kn_v_new(kn_rec *r, int kind)
{
    kn_val *v = kn_alloc(&r->arena, sizeof *v);
    if (v == NULL)
        return NULL;
    v->kind = kind;
    v->src = -1;
    return v;
}

kn_val *
kn_v_method(kn_rec *r, kn_val *fn, kn_val *self)
{
    if (fn == NULL || self == NULL)
        return NULL;
    kn_val *m = kn_v_new(r, V_METHOD);
    if (m) {
        m->fn = fn;
        m->self = self;
    }
    return m;
}

PyObject *
kn_pin(kn_rec *r, PyObject *o)            /* borrows o; returns it, kept alive by the recording */
{
    if (o && PyList_Append(r->pins, o) < 0)
        return NULL;
    return o;
}

kn_val *
kn_v_const(kn_rec *r, PyObject *obj)
{
    kn_val *v = kn_v_new(r, V_CONST);
    if (v == NULL || kn_pin(r, obj) == NULL)
        return NULL;
    v->obj = obj;
    return v;
}

kn_val *
kn_v_const_steal(kn_rec *r, PyObject *obj)
{
    if (obj == NULL)
        return NULL;
    kn_val *v = kn_v_const(r, obj);
    Py_DECREF(obj);
    return v;
}

int
kn_v_add(kn_rec *r, kn_val *c, kn_val *item)
{
    if (c->n == c->cap) {
        int ncap = c->cap ? c->cap * 2 : 4;
        kn_val **ni = kn_alloc(&r->arena, sizeof(kn_val *) * ncap);
        PyObject **nk = c->kind == V_DICT ? kn_alloc(&r->arena, sizeof(PyObject *) * ncap) : NULL;
        if (ni == NULL || (c->kind == V_DICT && nk == NULL))
            return -1;
        if (c->n) {
            memcpy(ni, c->items, sizeof(kn_val *) * c->n);
            if (nk)
                memcpy(nk, c->keys, sizeof(PyObject *) * c->n);
        }
        c->items = ni;
        if (nk)
            c->keys = nk;
        c->cap = ncap;
    }
    c->items[c->n++] = item;
    return 0;
}

const char *const kn_break_names[KN_NBREAKS] = {
#define BREAK(name, fmt) #name,
#include "capture/breaks.def"
#undef BREAK
};

const char *const kn_break_formats[KN_NBREAKS] = {
#define BREAK(name, fmt) fmt,
#include "capture/breaks.def"
#undef BREAK
};

/* Record a break by its code; the message is its breaks.def format filled
 * with the arguments (formats are checked by tests/capture/test_breaks.py
 * against each call's argument count). */
int
kn_brk(kn_rec *r, kn_break why, ...)
{
    KN_ASSERT((unsigned)why < KN_NBREAKS);
    va_list ap;
    va_start(ap, why);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    vsnprintf(r->reason, sizeof r->reason, kn_break_formats[why], ap);
#pragma GCC diagnostic pop
    va_end(ap);
    r->brk = why;
    return KN_BREAK;
}

void
kn_brk_clear(kn_rec *r)
{
    r->reason[0] = 0;
    r->brk = -1;
}

int
kn_v_is_const(kn_val *v)
{
    if (v->kind == V_CONST)
        return 1;
    if (v->kind == V_TUPLE) {
        for (int i = 0; i < v->n; i++)
            if (!kn_v_is_const(v->items[i]))
                return 0;
        return 1;
    }
    return 0;
}

PyObject *
kn_const_of(kn_rec *r, kn_val *v)
{
    if (v->kind == V_CONST)
        return Py_NewRef(v->obj);
    if (v->kind == V_TUPLE && kn_v_is_const(v)) {
        PyObject *t = PyTuple_New(v->n);
        if (t == NULL)
            return NULL;
        for (int i = 0; i < v->n; i++)
            PyTuple_SET_ITEM(t, i, kn_const_of(r, v->items[i]));
        return t;
    }
    return NULL;
}

/* A size of a symbolic recording about to meet real Python (a call, a
 * format, a hash, an identity test): the value itself, its int value
 * guarded; other objects as they are.  New reference or NULL (error). */
PyObject *
kn_concrete_obj(kn_rec *r, PyObject *o)
{
    if (!r->symbolic || o == NULL)
        return o;
    PyObject *c = PyObject_CallOneArg(kn_cenv.concrete, o);
    Py_DECREF(o);
    return c;
}

/* kn_const_of for real Python: with sizes concrete (kn_concrete_obj). */
PyObject *
kn_const_real(kn_rec *r, kn_val *v)
{
    PyObject *o = kn_const_of(r, v);
    return o ? kn_concrete_obj(r, o) : NULL;
}

/* 1 when o is a number the ShapeEnv's symbols combine with (int, float,
 * bool or their symbolic forms): arithmetic and comparisons stay symbolic
 * only between these */
int
kn_numeric(PyObject *o)
{
    return PyLong_Check(o) || PyFloat_Check(o) || PyObject_TypeCheck(o, (PyTypeObject *)kn_cenv.sym_int) ||
           PyObject_TypeCheck(o, (PyTypeObject *)kn_cenv.sym_float) ||
           PyObject_TypeCheck(o, (PyTypeObject *)kn_cenv.sym_bool);
}

/* 1 when o is a number (kn_numeric) or a tuple or list of numbers */
int
kn_numeric_items(PyObject *o)
{
    if (PyTuple_Check(o)) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(o); j++)
            if (!kn_numeric(PyTuple_GET_ITEM(o, j)))
                return 0;
        return 1;
    }
    if (PyList_Check(o)) {
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(o); j++)
            if (!kn_numeric(PyList_GET_ITEM(o, j)))
                return 0;
        return 1;
    }
    return kn_numeric(o);
}

int
kn_rebuildable(kn_val *v)
{
    for (int depth = 0; v && depth < 32; depth++) {
        if (v->src >= 0 || v->ctor || v->newobj)
            return 1;
        v = v->rparent;
    }
    return 0;
}

void
kn_set_rpath(kn_val *v, kn_val *parent, int kind, PyObject *key)
{
    if (v == NULL || v->src >= 0 || v->ctor || v->newobj || v->rparent || v == parent)
        return;
    if (v->kind != V_OBJ && v->kind != V_LIST && v->kind != V_DICT)
        return;
    v->rparent = parent;
    v->rkind = kind;
    v->rkey = key;
    if (v->kind == V_LIST) {
        for (int i = 0; i < v->n; i++) {
            PyObject *k = PyLong_FromLong(i);
            if (k == NULL || PyList_Append(kn_cenv.rpath_keys, k) < 0) {
                Py_XDECREF(k);
                PyErr_Clear();
                return;
            }
            Py_DECREF(k);
            kn_set_rpath(v->items[i], v, 2, k);
        }
    } else if (v->kind == V_DICT) {
        for (int i = 0; i < v->n; i++)
            kn_set_rpath(v->items[i], v, 2, v->keys[i]);
    }
}

/* Make room for one more element in a PyMem array of *cap elements holding n. */
static int
grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 16;
    void *na = PyMem_Realloc(*arr, elem * (size_t)ncap);
    if (na == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = na;
    *cap = ncap;
    return 0;
}

/* ------------------------------------------------------------------ sources and guards */

int
kn_src_add(kn_rec *r, int kind, int parent, PyObject *key, Py_ssize_t idx)
{
    PyObject *kk = kind == KN_SRC_CONST ? PyLong_FromVoidPtr(key) : Py_XNewRef(key ? key : Py_None);
    PyObject *mk = kk ? Py_BuildValue("(iinN)", kind, parent, idx, kk) : NULL;
    if (mk == NULL)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(r->srcmemo, mk);
    if (hit) {
        Py_DECREF(mk);
        return (int)PyLong_AsLong(hit);
    }
    if (PyErr_Occurred()) {   /* unhashable key: no memo */
        PyErr_Clear();
    }
    if (r->nsrc == r->capsrc) {
        int ncap = r->capsrc ? r->capsrc * 2 : 16;
        kn_src *ns = PyMem_Realloc(r->srcs, sizeof(kn_src) * ncap);
        kn_val **nb = PyMem_Realloc(r->bysrc, sizeof(kn_val *) * ncap);
        if (ns)
            r->srcs = ns;
        if (nb)
            r->bysrc = nb;
        if (ns == NULL || nb == NULL) {
            Py_DECREF(mk);
            PyErr_NoMemory();
            return -1;
        }
        r->capsrc = ncap;
    }
    int i = r->nsrc++;
    r->srcs[i] = (kn_src){kind, parent, idx, Py_XNewRef(key)};
    r->bysrc[i] = NULL;
    PyObject *iv = PyLong_FromLong(i);
    if (iv == NULL || PyDict_SetItem(r->srcmemo, mk, iv) < 0)
        PyErr_Clear();
    Py_XDECREF(iv);
    Py_DECREF(mk);
    return i;
}

int
kn_guard_add(kn_rec *r, int kind, int src, PyObject *obj, PyObject *obj2, PyObject *obj3, PyObject *obj4,
             Py_ssize_t n)
{
    /* the same fact twice is checked once */
    for (int i = r->nguard - 1; i >= 0 && i >= r->nguard - 64; i--) {
        kn_guard *g = &r->guards[i];
        if (g->kind == kind && g->src == src && g->obj == obj && g->n == n && kind != KN_G_TENSOR)
            return 0;
    }
    if (src >= 0 && kind != KN_G_SAME) {
        PyObject *gk = Py_BuildValue("(iiNn)", kind, src, PyLong_FromVoidPtr(obj), n);
        if (gk == NULL)
            return -1;
        int seen = PyDict_Contains(r->srcmemo, gk);
        if (seen == 0)
            seen = PyDict_SetItem(r->srcmemo, gk, Py_None) < 0 ? -1 : 0;
        Py_DECREF(gk);
        if (seen)
            return seen < 0 ? -1 : 0;
    }
    if (grow((void **)&r->guards, &r->capguard, r->nguard, sizeof(kn_guard)) < 0)
        return -1;
    if (kind == KN_G_ID && obj && !PyType_Check(obj) && !PyModule_Check(obj) && !PyCode_Check(obj) &&
        !PyFunction_Check(obj) && Py_TYPE(obj)->tp_weaklistoffset != 0) {   /* < 0: managed (3.12) */
        /* an identity guard on a user object (a module, say) must not keep it
         * alive: hold a weak reference; a dead referent fails the guard */
        PyObject *ref = PyWeakref_NewRef(obj, NULL);
        if (ref == NULL)
            return -1;
        r->guards[r->nguard++] = (kn_guard){KN_G_WEAKID, src, n, NULL, ref, NULL, NULL};
        return 0;
    }
    r->guards[r->nguard++] =
        (kn_guard){kind, src, n, Py_XNewRef(obj), Py_XNewRef(obj2), Py_XNewRef(obj3), Py_XNewRef(obj4)};
    return 0;
}

int
kn_effect_add(kn_rec *r, int kind, kn_val *a, kn_val *b, PyObject *name)
{
    if (grow((void **)&r->effects, &r->capeff, r->neff, sizeof(kn_effect)) < 0)
        return -1;
    r->effects[r->neff++] = (kn_effect){kind, a, b, name};
    return 0;
}

int
kn_memo_obj(kn_rec *r, PyObject *obj, kn_val *v)
{
    if (grow((void **)&r->vtab, &r->capvtab, r->nvtab, sizeof(kn_val *)) < 0)
        return -1;
    PyObject *k = PyLong_FromVoidPtr(obj), *iv = PyLong_FromLong(r->nvtab);
    int rc = (k && iv) ? PyDict_SetItem(r->objmemo, k, iv) : -1;
    Py_XDECREF(k);
    Py_XDECREF(iv);
    if (rc < 0)
        return -1;
    r->vtab[r->nvtab++] = v;
    return 0;
}

kn_val *
kn_memo_get(kn_rec *r, PyObject *obj)
{
    PyObject *k = PyLong_FromVoidPtr(obj);
    if (k == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *iv = PyDict_GetItem(r->objmemo, k);
    Py_DECREF(k);
    return iv ? r->vtab[PyLong_AsLong(iv)] : NULL;
}

int
kn_is_simple_const(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return o == Py_None || o == Py_Ellipsis || o == Py_NotImplemented || t == &PyBool_Type || t == &PyLong_Type ||
           t == &PyFloat_Type || t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyComplex_Type ||
           (PyObject *)t == kn_cenv.torch_dtype || (PyObject *)t == kn_cenv.torch_device ||
           (PyObject *)t == kn_cenv.torch_size || t == &PySlice_Type || t == &PyRange_Type;
}

static int
is_identity_const(PyObject *o)
{
    return PyFunction_Check(o) || PyCFunction_Check(o) || PyType_Check(o) || PyModule_Check(o) ||
           PyCode_Check(o) || Py_TYPE(o) == &PyMethodDescr_Type || Py_TYPE(o) == &PyWrapperDescr_Type ||
           Py_TYPE(o) == &PyClassMethodDescr_Type || Py_TYPE(o) == kn_method_wrapper_type;
}

/* a member of an enum.Enum class (timm's Format.NCHW, a str Enum):
 * a singleton, kept as a constant guarded by identity */
static int
is_enum_member(PyObject *o)
{
    static PyObject *enum_cls;
    if (enum_cls == NULL) {
        PyObject *m = PyImport_ImportModule("enum");
        enum_cls = m ? PyObject_GetAttrString(m, "Enum") : NULL;
        Py_XDECREF(m);
        if (enum_cls == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    int r = PyObject_IsInstance(o, enum_cls);
    if (r < 0)
        PyErr_Clear();
    return r == 1;
}

static int
const_items_set(PyObject *o)
{
    if (PySet_GET_SIZE(o) > 256)
        return 0;
    Py_ssize_t pos = 0;
    PyObject *key;
    Py_hash_t h;
    while (_PySet_NextEntry(o, &pos, &key, &h))
        if (!kn_is_simple_const(key))
            return 0;
    return 1;
}

/* A functools.partial (the exact type) whose function, arguments and
 * keyword values are constants: read from a source (a global, an attribute)
 * it is a constant, guarded on its identity and on its keywords (the one
 * mutable part). */
static int
is_const_partial(PyObject *o)
{
    if (strcmp(Py_TYPE(o)->tp_name, "functools.partial") != 0)
        return 0;
    PyObject *f = PyObject_GetAttrString(o, "func"), *a = PyObject_GetAttrString(o, "args"),
             *k = PyObject_GetAttrString(o, "keywords");
    int ok = f && a && k && PyTuple_Check(a) && PyDict_Check(k) && (is_identity_const(f) || kn_is_simple_const(f));
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(a); i++)
        ok = kn_is_simple_const(PyTuple_GET_ITEM(a, i)) || is_identity_const(PyTuple_GET_ITEM(a, i));
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (ok && PyDict_Next(k, &pos, &key, &val))
        ok = kn_is_simple_const(val) || is_identity_const(val);
    Py_XDECREF(f);
    Py_XDECREF(a);
    Py_XDECREF(k);
    PyErr_Clear();
    return ok;
}

/* The size placeholder of SymInt sym (its value `example`, read from
 * KN_SRC_SIZE (src, idx)), unless its symbol has one already. */
static int
add_size_input(kn_rec *r, PyObject *sym, PyObject *example, int src, Py_ssize_t idx)
{
    PyObject *nd = PyObject_GetAttrString(sym, "node"), *expr = nd ? PyObject_GetAttrString(nd, "expr") : NULL;
    Py_XDECREF(nd);
    if (expr == NULL)
        return -1;
    int rc = 0, have = PyDict_Contains(r->symnodes, expr);
    if (have == 0) {
        char name[32];
        snprintf(name, sizeof name, "size%d", r->ninputs);
        PyObject *node = PyObject_CallMethod(r->graph, "placeholder", "s", name);
        PyObject *m = node ? PyObject_GetAttrString(node, "meta") : NULL;
        int s = node ? kn_src_add(r, KN_SRC_SIZE, src, NULL, idx) : -1;
        PyObject *sl = s >= 0 ? PyLong_FromLong(s) : NULL;
        if (m == NULL || sl == NULL || PyDict_SetItemString(m, "example_value", sym) < 0 ||
            PyList_Append(r->examples, example) < 0 || !kn_pin(r, node) ||
            PyDict_SetItem(r->symnodes, expr, node) < 0 || PyDict_SetItem(r->symslots, expr, sl) < 0 ||
            grow((void **)&r->inputs, &r->capinputs, r->ninputs, sizeof(int)) < 0)
            rc = -1;
        else
            r->inputs[r->ninputs++] = s;
        Py_XDECREF(node);
        Py_XDECREF(m);
        Py_XDECREF(sl);
    } else if (have < 0) {
        rc = -1;
    }
    Py_DECREF(expr);
    return rc;
}

/* The size placeholders of a symbolic input: one per new symbol among syms
 * ([(dim, SymInt)]), an int argument read from t's shape (KN_SRC_SIZE). */
static int
add_size_inputs(kn_rec *r, PyObject *t, int src, PyObject *syms)
{
    PyObject *shape = PyObject_GetAttr(t, kn_cenv.s_shape);
    int rc = shape ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(syms); i++) {
        PyObject *pair = PyList_GET_ITEM(syms, i);
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
        rc = add_size_input(r, PyTuple_GET_ITEM(pair, 1), PyTuple_GET_ITEM(shape, d), src, d);
    }
    Py_XDECREF(shape);
    return rc;
}

/* An int argument (a frame local) that is a symbol in this recording
 * (kiln/symbolic.py int_dynamic: automatic dynamic, dynamic=True): *out its
 * SymInt, a size input of the graph, guarded to be an int (its relations by
 * KN_G_SIZES).  Returns 1 when it is one, 0 when it stays a constant, -1 on
 * an error or a break (a symbolic recording is needed first). */
static int
wrap_int(kn_rec *r, PyObject *obj, int src, kn_val **out)
{
    PyObject *key = kn_src_describe(r->srcs, src, r->root->code);
    if (key == NULL)
        return -1;
    PyObject *dyn = PyObject_CallFunction(kn_cenv.int_dynamic, "OOOi", r->info->dynstate, key, obj, r->ctx->dynamic);
    int is = dyn ? PyObject_IsTrue(dyn) : -1;
    Py_XDECREF(dyn);
    if (is <= 0) {
        Py_DECREF(key);
        return is;
    }
    if (!r->symbolic) {
        /* it became dynamic: this recording has no ShapeEnv */
        Py_DECREF(key);
        r->restart_symbolic = 1;
        kn_brk(r, KN_BRK_SIZES_BECAME_DYNAMIC);
        return -1;
    }
    PyObject *sym = PyObject_CallFunction(kn_cenv.int_symbol, "OOO", r->fake_mode, obj, key);
    Py_DECREF(key);
    if (sym == NULL || kn_guard_add(r, KN_G_TYPE, src, (PyObject *)&PyLong_Type, NULL, NULL, NULL, 0) < 0 ||
        add_size_input(r, sym, obj, src, -1) < 0) {
        Py_XDECREF(sym);
        return -1;
    }
    *out = kn_v_const(r, sym);
    Py_DECREF(sym);
    return *out ? 1 : -1;
}

static kn_val *
wrap_tensor(kn_rec *r, PyObject *t, int src)
{
    kn_val *prev = kn_memo_get(r, t);
    if (prev && prev->kind == V_TENSOR) {
        if (src >= 0 && prev->src >= 0 && prev->src != src &&
            kn_guard_add(r, KN_G_SAME, src, NULL, NULL, NULL, NULL, prev->src) < 0)
            return NULL;
        return prev;
    }
    /* nested, sparse, quantized, functorch-wrapped: the code runs as Python */
    PyObject *why = PyObject_CallOneArg(kn_cenv.tensor_unsupported, t);
    if (why == NULL)
        return NULL;
    if (why != Py_None) {
        kn_brk(r, KN_BRK_INPUT_UNSUPPORTED, PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : "an unsupported tensor");
        Py_DECREF(why);
        return NULL;
    }
    Py_DECREF(why);
    PyObject *dtype = PyObject_GetAttr(t, kn_cenv.s_dtype);
    PyObject *shape = PyObject_GetAttr(t, kn_cenv.s_shape);
    PyObject *stride = PyObject_CallMethodNoArgs(t, kn_cenv.s_stride);
    PyObject *dev = PyObject_GetAttr(t, kn_cenv.s_device);
    PyObject *rg = PyObject_GetAttr(t, kn_cenv.s_requires_grad);
    PyObject *shp = shape ? PySequence_Tuple(shape) : NULL;
    PyObject *contig = PyObject_CallMethod(t, "is_contiguous", NULL);
    PyObject *oncpu = PyObject_GetAttrString(t, "is_cpu");
    /* symbolic sizes (kiln/symbolic.py dims_for): which dims of this input
     * are symbols in this recording; their guard entries are wildcards */
    PyObject *dims = NULL, *key = NULL;
    int ask = shp && r->info && r->info->dynstate && src >= 0 && (PyObject *)Py_TYPE(t) != kn_cenv.torch_param;
    if (ask && r->ctx->dynamic == -2 && PyDict_GET_SIZE(r->info->dynstate) == 0) {
        /* mark_dynamic's marks alone: only a marked tensor asks */
        ask = PyObject_HasAttrString(t, "_dynamo_dynamic_indices") ||
              PyObject_HasAttrString(t, "_dynamo_weak_dynamic_indices");
    }
    if (ask) {
        key = kn_src_describe(r->srcs, src, r->root->code);
        const char *k8 = key ? PyUnicode_AsUTF8(key) : NULL;
        int is_param = (PyObject *)Py_TYPE(t) == kn_cenv.torch_param ||
                       (k8 && (strstr(k8, "_buffers[") || strstr(k8, "_parameters[")));
        dims = k8 ? PyObject_CallFunction(kn_cenv.dims_for, "OOOii", r->info->dynstate, key, t, r->ctx->dynamic,
                                          is_param)
                  : NULL;
        if (dims == NULL || !PyTuple_Check(dims)) {
            Py_CLEAR(shp);   /* (an error: fails below) */
        } else if (PyTuple_GET_SIZE(dims) == 0) {
            Py_CLEAR(dims);
        } else if (!r->symbolic) {
            /* a size became dynamic: this recording has no ShapeEnv */
            r->restart_symbolic = 1;
            Py_CLEAR(shp);
            kn_brk(r, KN_BRK_SIZES_BECAME_DYNAMIC);
        } else {
            PyObject *l = PySequence_List(shp);   /* None at each symbolic dim */
            for (Py_ssize_t i = 0; l && i < PyTuple_GET_SIZE(dims); i++) {
                Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(dims, i));
                if (d >= 0 && d < PyList_GET_SIZE(l))
                    PyList_SetItem(l, d, Py_NewRef(Py_None));
            }
            Py_XSETREF(shp, l ? PyList_AsTuple(l) : NULL);
            Py_XDECREF(l);
        }
    }
    PyObject *meta = shp && stride && contig && oncpu ? PyTuple_Pack(4, shp, stride, contig, oncpu) : NULL;
    Py_XDECREF(contig);
    Py_XDECREF(oncpu);
    kn_val *v = NULL;
    PyObject *syms = NULL;
    if (dtype && meta && dev && rg &&
        kn_guard_add(r, KN_G_TENSOR, src, (PyObject *)Py_TYPE(t), dtype, meta, dev, rg == Py_True) == 0) {
        char name[32];
        snprintf(name, sizeof name, "arg%d", r->ninputs);
        PyObject *node = PyObject_CallMethod(r->graph, "placeholder", "s", name);
        PyObject *fake = NULL;
        if (node && dims) {   /* a fresh symbol per symbolic dim */
            PyObject *fs = PyObject_CallFunction(kn_cenv.symbolic_fake, "OOOO", r->fake_mode, t, key, dims);
            if (fs && PyTuple_Check(fs) && PyTuple_GET_SIZE(fs) == 2) {
                fake = Py_NewRef(PyTuple_GET_ITEM(fs, 0));
                syms = Py_NewRef(PyTuple_GET_ITEM(fs, 1));
            }
            Py_XDECREF(fs);
        } else if (node && r->symbolic) {   /* static in a symbolic recording */
            PyObject *kw = Py_BuildValue("{s:O}", "static_shapes", Py_True);
            PyObject *fn = kw ? PyObject_GetAttr(r->fake_mode, kn_cenv.s_from_tensor) : NULL;
            PyObject *a = fn ? PyTuple_Pack(1, t) : NULL;
            fake = a ? PyObject_Call(fn, a, kw) : NULL;
            Py_XDECREF(a);
            Py_XDECREF(fn);
            Py_XDECREF(kw);
        } else if (node) {
            fake = PyObject_CallMethodOneArg(r->fake_mode, kn_cenv.s_from_tensor, t);
        }
        if (node && fake == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
            /* torch's converter rejects it where eager runs on: a view whose
               base the recording wrote a value requiring grad into (through
               another view) makes a fake that requires grad, which its check
               against the real tensor refuses.  The code from here runs as
               Python; the placeholder goes. */
            PyErr_Clear();
            PyObject *gone = PyObject_CallMethod(r->graph, "erase_node", "O", node);
            if (gone != NULL) {
                Py_DECREF(gone);
                kn_brk(r, KN_BRK_INPUT_FAKE_REJECTED);
            }
        }
        if (fake && PyList_Append(r->examples, t) == 0 && kn_pin(r, node) && kn_pin(r, fake)) {
            PyObject *m = PyObject_GetAttrString(node, "meta");
            if (m == NULL || PyDict_SetItemString(m, "example_value", fake) < 0)
                PyErr_Clear();
            Py_XDECREF(m);
            if (grow((void **)&r->inputs, &r->capinputs, r->ninputs, sizeof(int)) == 0) {
                r->inputs[r->ninputs++] = src;
                v = kn_v_new(r, V_TENSOR);
                if (v) {
                    v->node = node;
                    v->obj = fake;
                    v->src = src;
                    /* by the real tensor (read again from the frame) and by its fake
                       (read back from an object built at record time) */
                    if (kn_memo_obj(r, t, v) < 0 || kn_memo_obj(r, fake, v) < 0)
                        v = NULL;
                }
            }
        }
        if (v && syms && add_size_inputs(r, t, src, syms) < 0)
            v = NULL;
        Py_XDECREF(node);
        Py_XDECREF(fake);
    }
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(dev);
    Py_XDECREF(rg);
    Py_XDECREF(shp);
    Py_XDECREF(meta);
    Py_XDECREF(dims);
    Py_XDECREF(key);
    Py_XDECREF(syms);
    return v;
}

/* Is source src a value the frame was given: a local (an argument), a stack
 * entry at a resume point, or an item of a list, tuple or dict, or a cell's
 * content, under one?  Its ints may become symbols (automatic dynamic), as
 * TorchDynamo's do; an int read from a module's attribute or a global stays
 * a constant (configuration, not data). */
static int
frame_value(kn_rec *r, int src)
{
    while (src >= 0 && (r->srcs[src].kind == KN_SRC_ITEM || r->srcs[src].kind == KN_SRC_DICT ||
                        r->srcs[src].kind == KN_SRC_CELL))
        src = r->srcs[src].parent;
    return src >= 0 && (r->srcs[src].kind == KN_SRC_LOCAL || r->srcs[src].kind == KN_SRC_STACK);
}

/* Turn a real object read from source src (or -1: no source, unguarded)
 * into a symbolic value, adding the guards that make the recording valid. */
kn_val *
kn_wrap(kn_rec *r, PyObject *obj, int src)
{
    if (src >= 0 && r->bysrc[src])
        return r->bysrc[src];
    if (kn_c_stack_low()) {   /* containers nested very deeply: wrapping recurses in C */
        kn_brk(r, KN_BRK_VALUE_NESTED_TOO_DEEPLY);
        return NULL;
    }
    kn_val *v = NULL;
    PyTypeObject *t = Py_TYPE(obj);
    if (src < 0 && PyObject_TypeCheck(obj, (PyTypeObject *)kn_cenv.torch_tensor)) {
        /* a fake tensor inside an object built while recording */
        kn_val *m = kn_memo_get(r, obj);
        if (m && m->kind == V_TENSOR)
            return m;
    }
    if (src >= 0 && (PyObject *)t != kn_cenv.torch_tensor && (PyObject *)t != kn_cenv.torch_param &&
        PyObject_TypeCheck(obj, (PyTypeObject *)kn_cenv.torch_tensor)) {
        /* a tensor subclass from the frame (__torch_function__, __torch_dispatch__
         * wrappers): the code from here runs as Python */
        kn_brk(r, KN_BRK_INPUT_TENSOR_SUBCLASS, t->tp_name);
        return NULL;
    }
    if ((PyObject *)t == kn_cenv.torch_tensor || (PyObject *)t == kn_cenv.torch_param) {
        if (src < 0) {
            /* a tensor with no way to fetch it again: not capturable */
            kn_brk(r, KN_BRK_INPUT_UNREACHABLE);
            return NULL;
        }
        v = wrap_tensor(r, obj, src);
    } else if (kn_is_simple_const(obj)) {
        int sym = 0;
        if (src >= 0 && PyLong_CheckExact(obj) && frame_value(r, src) && r->info &&
            r->info->dynstate && (sym = wrap_int(r, obj, src, &v)) < 0)
            return NULL;
        if (!sym) {
            if (src >= 0 && kn_guard_add(r, KN_G_EQ, src, obj, NULL, NULL, NULL, 0) < 0)
                return NULL;
            v = kn_v_const(r, obj);
        }
    } else if (PyFunction_Check(obj) && src >= 0 && PyFunction_GET_CLOSURE(obj) != NULL) {
        /* a closure made anew on each call: same code, cells read through the function */
        int cs = kn_src_add(r, KN_SRC_ATTR, src, PyUnicode_FromString("__code__"), 0);
        if (cs < 0)
            return NULL;
        Py_DECREF(r->srcs[cs].key);
        if (kn_guard_add(r, KN_G_TYPE, src, (PyObject *)t, NULL, NULL, NULL, 0) < 0 ||
            kn_guard_add(r, KN_G_ID, cs, PyFunction_GET_CODE(obj), NULL, NULL, NULL, 0) < 0)
            return NULL;
        PyObject *defs = PyFunction_GET_DEFAULTS(obj);
        if (defs) {
            int ds = kn_src_add(r, KN_SRC_DEFAULTS, src, NULL, 0);
            if (ds < 0 || kn_guard_add(r, KN_G_EQ, ds, defs, NULL, NULL, NULL, 0) < 0)
                return NULL;
        }
        v = kn_v_const(r, obj);
    } else if (src >= 0 && is_const_partial(obj)) {
        PyObject *kw = PyObject_GetAttrString(obj, "keywords"), *copy = kw ? PyDict_Copy(kw) : NULL;
        int ks = kn_src_add(r, KN_SRC_ATTR, src, PyUnicode_FromString("keywords"), 0);
        if (ks >= 0)
            Py_DECREF(r->srcs[ks].key);
        int bad = copy == NULL || ks < 0 || kn_guard_add(r, KN_G_ID, src, obj, NULL, NULL, NULL, 0) < 0 ||
                  kn_guard_add(r, KN_G_EQ, ks, copy, NULL, NULL, NULL, 0) < 0;
        Py_XDECREF(kw);
        Py_XDECREF(copy);
        if (bad)
            return NULL;
        v = kn_v_const(r, obj);
    } else if (is_identity_const(obj) || PyObject_TypeCheck(obj, &PyType_Type) ||
               strcmp(t->tp_name, "ScriptFunction") == 0 || is_enum_member(obj)) {
        /* (a TorchScript function, pybind's tp_name: kiln inlines its Python source, kiln/_calls.py class 9) */
        if (src >= 0 && kn_guard_add(r, KN_G_ID, src, obj, NULL, NULL, NULL, 0) < 0)
            return NULL;
        /* the same function may be given another __code__ or defaults */
        if (src >= 0 && PyFunction_Check(obj) &&
            kn_guard_add(r, KN_G_CODE, src, PyFunction_GET_CODE(obj), PyFunction_GET_DEFAULTS(obj),
                         PyFunction_GET_KW_DEFAULTS(obj), NULL, 0) < 0)
            return NULL;
        v = kn_v_const(r, obj);
    } else if (t == &PyTuple_Type || t == &PyList_Type) {
        kn_val *prev = t == &PyList_Type ? kn_memo_get(r, obj) : NULL;
        if (prev)
            return prev;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        if (src >= 0 && (kn_guard_add(r, KN_G_TYPE, src, (PyObject *)t, NULL, NULL, NULL, 0) < 0 ||
                         kn_guard_add(r, KN_G_LEN, src, NULL, NULL, NULL, NULL, n) < 0))
            return NULL;
        v = kn_v_new(r, t == &PyTuple_Type ? V_TUPLE : V_LIST);
        if (v == NULL || kn_pin(r, obj) == NULL)
            return NULL;
        v->obj = obj;
        v->src = src;
        if (t == &PyList_Type && kn_memo_obj(r, obj, v) < 0)
            return NULL;
        if (src >= 0)
            r->bysrc[src] = v;
        for (Py_ssize_t i = 0; i < n; i++) {
            int s = src >= 0 ? kn_src_add(r, KN_SRC_ITEM, src, NULL, i) : -1;
            if (src >= 0 && s < 0)
                return NULL;
            kn_val *it = kn_wrap(r, PySequence_Fast_ITEMS(obj)[i], s);
            if (it == NULL || kn_v_add(r, v, it) < 0)
                return NULL;
        }
        return v;
    } else if (t == &PyDict_Type) {
        kn_val *prev = kn_memo_get(r, obj);
        if (prev)
            return prev;
        PyObject *keys = PyDict_Keys(obj), *kt = keys ? PyList_AsTuple(keys) : NULL;
        Py_XDECREF(keys);
        if (kt == NULL)
            return NULL;
        int bad = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kt); i++)
            if (!kn_is_simple_const(PyTuple_GET_ITEM(kt, i)))
                bad = 1;
        if (bad) {
            Py_DECREF(kt);
            goto as_obj;
        }
        if (src >= 0 && (kn_guard_add(r, KN_G_TYPE, src, (PyObject *)t, NULL, NULL, NULL, 0) < 0 ||
                         kn_guard_add(r, KN_G_KEYS, src, kt, NULL, NULL, NULL, 0) < 0)) {
            Py_DECREF(kt);
            return NULL;
        }
        v = kn_v_new(r, V_DICT);
        if (v == NULL || kn_pin(r, obj) == NULL || kn_pin(r, kt) == NULL) {
            Py_DECREF(kt);
            return NULL;
        }
        Py_DECREF(kt);
        v->obj = obj;
        v->src = src;
        if (kn_memo_obj(r, obj, v) < 0)
            return NULL;
        if (src >= 0)
            r->bysrc[src] = v;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kt); i++) {
            PyObject *k = PyTuple_GET_ITEM(kt, i);
            int s = src >= 0 ? kn_src_add(r, KN_SRC_DICT, src, k, 0) : -1;
            PyObject *val = PyDict_GetItem(obj, k);
            kn_val *it = val ? kn_wrap(r, val, s) : NULL;
            if (it == NULL || kn_v_add(r, v, it) < 0)
                return NULL;
            v->keys[v->n - 1] = k;
        }
        return v;
    } else if (PyMethod_Check(obj)) {
        int s1 = src >= 0 ? kn_src_add(r, KN_SRC_ATTR, src, PyUnicode_FromString("__func__"), 0) : -1;
        int s2 = src >= 0 ? kn_src_add(r, KN_SRC_ATTR, src, PyUnicode_FromString("__self__"), 0) : -1;
        /* kn_src_add took its own reference to the key */
        if (src >= 0) {
            Py_DECREF(r->srcs[s1].key);
            Py_DECREF(r->srcs[s2].key);
        }
        kn_val *fn = kn_wrap(r, PyMethod_GET_FUNCTION(obj), s1);
        kn_val *self = fn ? kn_wrap(r, PyMethod_GET_SELF(obj), s2) : NULL;
        v = kn_v_method(r, fn, self);
        if (v == NULL)
            return NULL;
    } else if (t == &PyCell_Type) {
        /* a cell read from a source (a stack entry: 3.12's inlined
         * comprehension saved a cell variable's cell there) is guarded as one */
        if (src >= 0 && kn_guard_add(r, KN_G_TYPE, src, (PyObject *)t, NULL, NULL, NULL, 0) < 0)
            return NULL;
        v = kn_v_new(r, V_CELL);
        if (v == NULL || kn_pin(r, obj) == NULL)
            return NULL;
        v->obj = obj;
        v->content = LAZY;
    } else {
    as_obj:;
        kn_val *prev = kn_memo_get(r, obj);
        if (prev) {
            if (src >= 0 && prev->src >= 0 && prev->src != src &&
                kn_guard_add(r, KN_G_SAME, src, NULL, NULL, NULL, NULL, prev->src) < 0)
                return NULL;
            return prev;
        }
        int is_module = PyObject_IsInstance(obj, kn_cenv.nn_module);
        if (is_module < 0)
            return NULL;
        if (src >= 0 && kn_guard_add(r, is_module ? KN_G_ID : KN_G_TYPE, src,
                                     is_module ? obj : (PyObject *)t, NULL, NULL, NULL, 0) < 0)
            return NULL;
        v = kn_v_new(r, V_OBJ);
        if (v == NULL || kn_pin(r, obj) == NULL)
            return NULL;
        v->obj = obj;
        v->src = src;
        if (kn_memo_obj(r, obj, v) < 0)
            return NULL;
    }
    if (v == NULL)
        return NULL;
    if (v->src < 0)
        v->src = src;
    if (src >= 0)
        r->bysrc[src] = v;
    return v;
}

/* ------------------------------------------------------------------ to Python */

PyObject *
kn_to_py(kn_rec *r, kn_val *v, int fake)
{
    switch (v->kind) {
    case V_CONST:
        if (r->symbolic && !fake) {   /* sizes in a graph argument: fx nodes over the size placeholders */
            PyObject *sym = PyObject_CallOneArg(kn_cenv.is_symbolic, v->obj);
            int is = sym == Py_True;
            Py_XDECREF(sym);
            if (sym == NULL)
                return NULL;
            if (is)
                return PyObject_CallFunctionObjArgs(kn_cenv.fx_arg, r->graph, v->obj, r->symnodes, NULL);
        }
        return Py_NewRef(v->obj);
    case V_TENSOR:
        return Py_NewRef(fake ? v->obj : v->node);
    case V_TUPLE:
    case V_LIST: {
        PyObject *o = v->kind == V_TUPLE ? PyTuple_New(v->n) : PyList_New(v->n);
        if (o == NULL)
            return NULL;
        for (int i = 0; i < v->n; i++) {
            PyObject *it = kn_to_py(r, v->items[i], fake);
            if (it == NULL) {
                Py_DECREF(o);
                return NULL;
            }
            if (v->kind == V_TUPLE)
                PyTuple_SET_ITEM(o, i, it);
            else
                PyList_SET_ITEM(o, i, it);
        }
        return o;
    }
    case V_DICT: {
        PyObject *o = PyDict_New();
        if (o == NULL)
            return NULL;
        for (int i = 0; i < v->n; i++) {
            PyObject *it = kn_to_py(r, v->items[i], fake);
            if (it == NULL || PyDict_SetItem(o, v->keys[i], it) < 0) {
                Py_XDECREF(it);
                Py_DECREF(o);
                return NULL;
            }
            Py_DECREF(it);
        }
        return o;
    }
    case V_SLICE: {
        PyObject *a = kn_to_py(r, v->items[0], fake), *b = a ? kn_to_py(r, v->items[1], fake) : NULL;
        PyObject *c = b ? kn_to_py(r, v->items[2], fake) : NULL;
        PyObject *s = c ? PySlice_New(a, b, c) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return s;
    }
    case V_OBJ:
        if (PyFloat_Check(v->obj) && v->attrs == NULL)   /* numpy.float64: a float to torch */
            return PyFloat_FromDouble(PyFloat_AS_DOUBLE(v->obj));
        /* fall through */
    default:
        kn_brk(r, KN_BRK_TENSOR_OP_ARGUMENT,
               v->kind == V_OBJ ? Py_TYPE(v->obj)->tp_name : "Python");
        return NULL;
    }
}

int
kn_set_grad(kn_rec *r, int mode)
{
    if (mode == r->grad_cur)
        return 0;
    PyObject *args = Py_BuildValue("(O)", mode ? Py_True : Py_False);
    PyObject *n = args ? PyObject_CallMethodObjArgs(r->graph, kn_cenv.s_call_function, kn_cenv.set_grad, args,
                                                    NULL)
                       : NULL;
    Py_XDECREF(args);
    if (n == NULL)
        return -1;
    Py_DECREF(n);
    PyObject *x = PyObject_CallOneArg(kn_cenv.set_grad, mode ? Py_True : Py_False);
    if (x == NULL)
        return -1;
    Py_DECREF(x);
    r->grad_cur = mode;
    return 0;
}

/* ------------------------------------------------------------------ the interpreter */

static const char *const binop_names[] = {
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow", "rshift", "sub", "truediv", "xor",
    "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod", "ior", "ipow", "irshift", "isub", "itruediv",
    "ixor",
};
static const char *const cmp_names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
static PyObject *op_mod;

PyObject *
kn_opfn(const char *name)
{
    if (op_mod == NULL && (op_mod = PyImport_ImportModule("operator")) == NULL)
        return NULL;
    return PyObject_GetAttrString(op_mod, name);
}

/* -a, ~a, +a on a tensor (a graph node) or a known Python value */
static int
unary(kn_rec *r, const char *name, kn_val *a, kn_val **out)
{
    if (a->kind != V_TENSOR && a->kind != V_CONST)
        return kn_brk(r, KN_BRK_UNARY_OPERATOR_PYTHON_VALUE);
    PyObject *f = kn_opfn(name);
    if (f == NULL)
        return KN_FAIL;
    int rc;
    if (a->kind == V_TENSOR) {
        rc = kn_torch_op(r, f, 0, &a, 1, NULL, out);
    } else {
        PyObject *x = PyObject_CallOneArg(f, a->obj);
        if (x == NULL) {
            PyErr_Clear();
            rc = kn_brk(r, KN_BRK_UNARY_OPERATOR_RAISES);
        } else {
            *out = kn_v_const_steal(r, x);
            rc = *out ? 0 : KN_FAIL;
        }
    }
    Py_DECREF(f);
    return rc;
}

/* tuple(a) for a list built while recording (LIST_TO_TUPLE, its 3.12 intrinsic) */
kn_val *
kn_as_tuple(kn_rec *r, kn_val *a)
{
    kn_val *t = kn_v_new(r, V_TUPLE);
    for (int i = 0; t && i < a->n; i++)
        if (kn_v_add(r, t, a->items[i]) < 0)
            return NULL;
    return t;
}

static int
opname_is(int kop, int a)
{
    return kop == a;
}

/* Root locals are read from the frame lazily, so unused ones add no guards. */
static kn_val *
local_get(rframe *fr, int i)
{
    kn_val *v = fr->locals[i];
    if (v != LAZY)
        return v;
    return NULL;   /* resolved by the caller with the frame's real value */
}

_Thread_local PyObject **kn_root_locals;   /* the frame being recorded, per thread */

static kn_val *
load_local(kn_rec *r, rframe *fr, int i)
{
    kn_val *v = local_get(fr, i);
    if (v)
        return v;
    PyObject *real = kn_root_locals[i];
    int s = kn_src_add(r, KN_SRC_LOCAL, -1, NULL, i);
    if (s < 0)
        return NULL;
    if (real == NULL) {
        if (kn_guard_add(r, KN_G_NULL, s, NULL, NULL, NULL, NULL, 0) < 0)
            return NULL;
        v = kn_v_new(r, V_NULL);
    } else if (PyCell_Check(real)) {
        v = kn_v_new(r, V_CELL);
        if (v) {
            v->obj = real;
            kn_pin(r, real);
            v->src = s;
            v->content = LAZY;
        }
    } else {
        v = kn_wrap(r, real, s);
    }
    if (v) {
        fr->locals[i] = v;
        fr->initial[i] = v;
    }
    return v;
}

static int
cell_load(kn_rec *r, kn_val *cell, kn_val **out)
{
    if (cell->kind != V_CELL)
        return kn_brk(r, KN_BRK_CLOSURE_VARIABLE_CELL);
    if (cell->content == LAZY) {
        PyObject *c = PyCell_GET(cell->obj);
        if (c == NULL)
            return kn_brk(r, KN_BRK_FREE_VARIABLE_REFERENCED_BEFORE);
        int s = cell->src >= 0 ? kn_src_add(r, KN_SRC_CELL, cell->src, NULL, 0) : -1;
        kn_val *v = kn_wrap(r, c, s);
        if (v == NULL)
            return KN_FAIL;
        cell->content = v;
    }
    if (cell->content == NULL)
        return kn_brk(r, KN_BRK_FREE_VARIABLE_REFERENCED_BEFORE);
    *out = cell->content;
    return 0;
}

/* for record_call.c (zero-argument super() in the recorded frame itself) */
kn_val *
kn_load_local(kn_rec *r, rframe *fr, int i)
{
    return fr->locals[i] == LAZY ? load_local(r, fr, i) : fr->locals[i];
}

int
kn_cell_load(kn_rec *r, kn_val *cell, kn_val **out)
{
    return cell_load(r, cell, out);
}

static int
cell_store(kn_rec *r, kn_val *cell, kn_val *v)
{
    if (cell->kind != V_CELL)
        return kn_brk(r, KN_BRK_CLOSURE_VARIABLE_CELL);
    if (cell->obj) {   /* a real cell: the store is a side effect */
        if (cell->src < 0)
            return kn_brk(r, KN_BRK_STORE_CLOSURE_CELL_REACH);
        if (kn_effect_add(r, E_CELL, cell, v, NULL) < 0)
            return KN_FAIL;
    }
    cell->content = v;
    return 0;
}

int
kn_decode(rframe *fr, int pc, int *op, int *arg, int *next)
{
    int a = 0;
    for (;;) {
        if (pc >= fr->nins)
            return -1;
        int raw = fr->ins[2 * pc], oa = fr->ins[2 * pc + 1];
        int k = kn_opmap[raw];
        a = (a << 8) | oa;
        if (k == KN_OP_EXTENDED_ARG) {
            pc += 1 + kn_opcaches[raw];
            continue;
        }
        *op = k;
        *arg = a;
        *next = pc + 1 + kn_opcaches[raw];
        return pc;
    }
}

static int
global_load(kn_rec *r, rframe *fr, PyObject *name, kn_val **out)
{
    PyObject *v = PyDict_GetItemWithError(fr->globals, name);
    if (v == NULL && PyErr_Occurred())
        return KN_FAIL;
    int s;
    if (fr->globals == r->root_globals) {
        s = kn_src_add(r, KN_SRC_GLOBAL, -1, name, 0);
    } else {
        PyObject *d = v ? fr->globals : fr->builtins;
        s = -1;
        if (d && PyDict_Check(d)) {
            int ds = kn_src_add(r, KN_SRC_CONST, -1, d, 0);
            s = ds >= 0 ? kn_src_add(r, KN_SRC_DICT, ds, name, 0) : -1;
        }
    }
    if (v == NULL && PyDict_Check(fr->builtins))
        v = PyDict_GetItemWithError(fr->builtins, name);
    if (v == NULL) {
        if (PyErr_Occurred())
            return KN_FAIL;
        return kn_brk(r, KN_BRK_NAME_NOT_DEFINED, PyUnicode_AsUTF8(name));
    }
    *out = kn_wrap(r, v, s);
    return *out ? 0 : KN_ERR;
}

static int
unpack(kn_rec *r, rframe *fr, kn_val *seq, int n, int before, int after)
{
    kn_val *it;
    CHECK(kn_iter_items(r, seq, &it));
    int total = it->n;
    if (before < 0) {             /* UNPACK_SEQUENCE */
        if (total != n)
            return kn_brk(r, KN_BRK_UNPACK_MISMATCH, total, n);
        for (int i = n - 1; i >= 0; i--)
            PUSH(it->items[i]);
        return 0;
    }
    if (total < before + after)
        return kn_brk(r, KN_BRK_UNPACK_TOO_FEW);
    for (int i = total - 1; i >= total - after; i--)
        PUSH(it->items[i]);
    kn_val *mid = kn_v_new(r, V_LIST);
    if (mid == NULL)
        return KN_FAIL;
    for (int i = before; i < total - after; i++)
        if (kn_v_add(r, mid, it->items[i]) < 0)
            return KN_FAIL;
    PUSH(mid);
    for (int i = before - 1; i >= 0; i--)
        PUSH(it->items[i]);
    return 0;
}

PyObject *
kn_input_real(kn_rec *r, int src)
{
    for (int i = 0; i < r->ninputs; i++)
        if (r->inputs[i] == src)
            return PyList_GET_ITEM(r->examples, i);
    return NULL;
}

/* d[t], d a dict read from a source and t an input tensor (an optimizer's
 * state, keyed by its parameters): the tensor guarded by identity, the item
 * read from the source d[t]; a key not there yet (a defaultdict's first use,
 * which inserts) breaks, guarded absent so that a later call records again.
 * 0 done, 2 not this case, or KN_BREAK / KN_ERR. */
static int
dict_item_by_tensor(kn_rec *r, kn_val *c, kn_val *k, kn_val **out)
{
    PyObject *key = kn_input_real(r, k->src);
    if (key == NULL)
        return 2;
    if (kn_guard_add(r, KN_G_ID, k->src, key, NULL, NULL, NULL, 0) < 0)
        return KN_FAIL;
    PyObject *val = PyDict_GetItemWithError(c->obj, key);
    if (val == NULL) {
        if (PyErr_Occurred())
            return KN_ERR;
        if (kn_guard_add(r, KN_G_HASKEY, c->src, key, NULL, NULL, NULL, 0) < 0)
            return KN_FAIL;
        return kn_brk(r, KN_BRK_KEY_ERROR, "in a dict keyed by tensors (an optimizer's first step fills its state)");
    }
    Py_INCREF(val);
    int s = kn_src_add(r, KN_SRC_DICT, c->src, key, 0);
    *out = s < 0 ? NULL : kn_wrap(r, val, s);
    Py_DECREF(val);
    return *out ? 0 : KN_FAIL;
}

static int
subscr(kn_rec *r, rframe *fr, kn_val *c, kn_val *k, kn_val **out)
{
    if (c->kind == V_OBJ && c->src >= 0 && !c->attrs && PyDict_Check(c->obj) && k->kind == V_TENSOR && k->src >= 0 &&
        Py_TYPE(c->obj)->tp_as_mapping->mp_subscript == PyDict_Type.tp_as_mapping->mp_subscript) {
        int rc = dict_item_by_tensor(r, c, k, out);
        if (rc != 2)
            return rc;
    }
    if (c->kind == V_TENSOR || (k->kind == V_TENSOR && c->kind != V_CONST)) {
        PyObject *gi = kn_opfn("getitem");
        kn_val *args[2] = {c, k};
        int rc = kn_torch_op(r, gi, 0, args, 2, NULL, out);
        Py_XDECREF(gi);
        return rc;
    }
    if ((c->kind == V_TUPLE || c->kind == V_LIST) && k->kind == V_CONST) {
        if (PyLong_Check(k->obj)) {
            long i = PyLong_AsLong(k->obj);
            if (i < 0)
                i += c->n;
            if (i < 0 || i >= c->n)
                return kn_brk(r, KN_BRK_INDEX_OUT_RANGE);
            *out = c->items[i];
            return 0;
        }
        if (PySlice_Check(k->obj)) {
            Py_ssize_t start, stop, step, len;
            if (PySlice_GetIndicesEx(k->obj, c->n, &start, &stop, &step, &len) < 0)
                return KN_FAIL;
            kn_val *res = kn_v_new(r, c->kind);
            if (res == NULL)
                return KN_FAIL;
            for (Py_ssize_t i = 0, j = start; i < len; i++, j += step)
                if (kn_v_add(r, res, c->items[j]) < 0)
                    return KN_FAIL;
            *out = res;
            return 0;
        }
    }
    if (c->kind == V_DICT && k->kind == V_CONST) {
        for (int i = 0; i < c->n; i++) {
            int e = PyObject_RichCompareBool(c->keys[i], k->obj, Py_EQ);
            if (e < 0)
                return KN_FAIL;
            if (e) {
                *out = c->items[i];
                return 0;
            }
        }
        return kn_brk(r, KN_BRK_KEY_ERROR, "in a dict subscript");
    }
    if (c->kind == V_CONST && k->kind == V_TUPLE && kn_v_is_const(k)) {
        /* tuple[float, float], Dict[str, int]: a subscript by a tuple of constants */
        PyObject *kt = kn_const_real(r, k);
        kn_val *kc = kt ? kn_v_const_steal(r, kt) : NULL;
        if (kc == NULL)
            return KN_FAIL;
        k = kc;
    }
    if (c->kind == V_CONST && k->kind == V_CONST) {
        PyObject *res = PyObject_GetItem(c->obj, k->obj);
        if (res == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_SUBSCRIPT_RAISES);
        }
        if ((PyObject *)Py_TYPE(res) == kn_cenv.torch_tensor) {
            Py_DECREF(res);
            return kn_brk(r, KN_BRK_TENSOR_INSIDE_CONSTANT_CONTAINER);
        }
        *out = kn_v_const_steal(r, res);
        return *out ? 0 : KN_ERR;
    }
    if (c->kind == V_OBJ && k->kind == V_CONST && (PySlice_Check(k->obj) || PyLong_Check(k->obj)) &&
        kn_is_module_seq(c->obj)) {
        /* ModuleList / Sequential: children in order; a slice is a plain list of them */
        kn_val *it;
        int rc = kn_iter_items(r, c, &it);
        if (rc)
            return rc;
        kn_val *lst = kn_v_new(r, V_LIST);
        if (lst == NULL)
            return KN_FAIL;
        for (int i = it->pos; i < it->n; i++)
            if (kn_v_add(r, lst, it->items[i]) < 0)
                return KN_FAIL;
        return subscr(r, fr, lst, k, out);
    }
    if (c->kind == V_OBJ) {
        kn_val *fn;
        PyObject *name = PyUnicode_FromString("__getitem__");
        int rc = name ? kn_getattr(r, fr, c, name, &fn) : KN_ERR;
        Py_XDECREF(name);
        if (rc)
            return rc;
        return kn_call(r, fr, fn, &k, 1, NULL, out);
    }
    return kn_brk(r, KN_BRK_SUBSCRIPT_KIND_VALUE);
}

int
kn_store_subscr(kn_rec *r, kn_val *c, kn_val *k, kn_val *v)
{
    if (c->kind == V_TENSOR) {
        PyObject *si = kn_opfn("setitem");
        kn_val *args[3] = {c, k, v}, *out;
        int rc = kn_torch_op(r, si, 0, args, 3, NULL, &out);
        Py_XDECREF(si);
        return rc;
    }
    if (c->kind == V_LIST && k->kind == V_CONST && PyLong_Check(k->obj)) {
        long i = PyLong_AsLong(k->obj);
        if (i < 0)
            i += c->n;
        if (i < 0 || i >= c->n)
            return kn_brk(r, KN_BRK_LIST_ASSIGNMENT_INDEX_OUT);
        c->items[i] = v;
        c->mutated = 1;
        return 0;
    }
    if (c->kind == V_DICT && k->kind == V_CONST && (PyUnicode_Check(k->obj) || PyLong_Check(k->obj))) {
        for (int i = 0; i < c->n; i++) {
            int e = PyObject_RichCompareBool(c->keys[i], k->obj, Py_EQ);
            if (e < 0)
                return KN_FAIL;
            if (e) {
                c->items[i] = v;
                c->mutated = 1;
                return 0;
            }
        }
        if (kn_v_add(r, c, v) < 0)
            return KN_FAIL;
        c->keys[c->n - 1] = k->obj;
        c->mutated = 1;
        return 0;
    }
    return kn_brk(r, KN_BRK_ITEM_ASSIGNMENT_KIND_VALUE);
}

/* A store the recording may read back as the value stored: no data
 * descriptor (a property's setter) and no __setattr__ of the class's own in
 * the way (nn.Module's keeps plain values and sets buffers: read back alike). */
int
kn_plain_store(kn_rec *r, kn_val *o, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(o->obj);
    PyObject *d = _PyType_Lookup(tp, name);
    if (d && Py_TYPE(d)->tp_descr_set)
        return kn_brk(r, KN_BRK_ATTRIBUTE_STORE_THROUGH_DESCRIPTOR, PyUnicode_AsUTF8(name));
    if (tp->tp_setattro != PyObject_GenericSetAttr && PyObject_IsInstance(o->obj, kn_cenv.nn_module) != 1) {
        PyErr_Clear();
        return kn_brk(r, KN_BRK_ATTRIBUTE_STORE_HAS_OWN, tp->tp_name);
    }
    return 0;
}

static int
compare(kn_rec *r, int which, kn_val *a, kn_val *b, kn_val **out)
{
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        PyObject *f = kn_opfn(cmp_names[which]);
        kn_val *args[2] = {a, b};
        int rc = f ? kn_torch_op(r, f, 0, args, 2, NULL, out) : KN_ERR;
        Py_XDECREF(f);
        return rc;
    }
    PyObject *x = kn_const_of(r, a), *y = x ? kn_const_of(r, b) : NULL;
    /* two tuples (a Size against the shape a model expects) compare item
     * by item: symbolic items give relations, guarded as such, not values */
    if (x && y && r->symbolic && !(kn_numeric(x) && kn_numeric(y)) && !(PyTuple_Check(x) && PyTuple_Check(y))) {
        x = kn_concrete_obj(r, x);
        y = x ? kn_concrete_obj(r, y) : (Py_DECREF(y), NULL);
        if (x == NULL || y == NULL) {
            Py_XDECREF(x);
            return KN_ERR;
        }
    }
    if (x && y) {
        static const int ops[] = {Py_LT, Py_LE, Py_EQ, Py_NE, Py_GT, Py_GE};
        PyObject *res = PyObject_RichCompare(x, y, ops[which]);
        Py_DECREF(x);
        Py_DECREF(y);
        if (res == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_COMPARISON_RAISES);
        }
        *out = kn_v_const_steal(r, res);
        return *out ? 0 : KN_ERR;
    }
    Py_XDECREF(x);
    Py_XDECREF(y);
    if ((which == 2 || which == 3) && (a->kind == V_OBJ || b->kind == V_OBJ) && a->kind != V_TENSOR) {
        /* objects without __eq__ compare by identity */
        kn_val *o = a->kind == V_OBJ ? a : b;
        if (Py_TYPE(o->obj)->tp_richcompare == PyBaseObject_Type.tp_richcompare) {
            int same = a == b;
            *out = kn_v_const(r, (same == (which == 2)) ? Py_True : Py_False);
            return *out ? 0 : KN_ERR;
        }
    }
    if ((a->kind == V_TUPLE || a->kind == V_LIST) && (b->kind == V_TUPLE || b->kind == V_LIST) && which >= 2 &&
        which <= 3 && a->n != b->n) {
        *out = kn_v_const(r, which == 3 ? Py_True : Py_False);
        return *out ? 0 : KN_ERR;
    }
    if (which >= 2 && which <= 3) {
        /* a dict or list (holding anything) == a str, number, None or bytes: never equal */
        kn_val *c = a->kind == V_CONST ? a : b->kind == V_CONST ? b : NULL, *o = c == a ? b : a;
        if (c && ((o->kind == V_DICT) || (o->kind == V_LIST) || (o->kind == V_TUPLE && !o->ttype)) &&
            (PyUnicode_CheckExact(c->obj) || PyLong_CheckExact(c->obj) || PyFloat_CheckExact(c->obj) ||
             PyBool_Check(c->obj) || c->obj == Py_None || PyBytes_CheckExact(c->obj))) {
            *out = kn_v_const(r, which == 3 ? Py_True : Py_False);
            return *out ? 0 : KN_ERR;
        }
    }
    return kn_brk(r, KN_BRK_COMPARISON_NON_CONSTANT_PYTHON);
}

static int
is_op(kn_rec *r, kn_val *a, kn_val *b, int *out)
{
    if (a == b) {
        *out = 1;
        return 0;
    }
    if (r->symbolic) {   /* `n is 3` of a size: the identity of its int value */
        kn_val *ab[2] = {a, b};
        for (int i = 0; i < 2; i++) {
            if (ab[i]->kind != V_CONST)
                continue;
            PyObject *c = kn_const_real(r, ab[i]);
            if (c == NULL)
                return KN_ERR;
            if (c != ab[i]->obj) {
                kn_val *nv = kn_v_const_steal(r, c);
                if (nv == NULL)
                    return KN_ERR;
                ab[i] = nv;
            } else {
                Py_DECREF(c);
            }
        }
        a = ab[0];
        b = ab[1];
    }
    if ((a->kind == V_CONST || a->kind == V_OBJ) && (b->kind == V_CONST || b->kind == V_OBJ)) {
        /* identity of real objects: pin the identity of the ones read from the frame */
        kn_val *ab[2] = {a, b};
        for (int i = 0; i < 2; i++)
            if (ab[i]->kind == V_OBJ && ab[i]->src >= 0 &&
                kn_guard_add(r, KN_G_ID, ab[i]->src, ab[i]->obj, NULL, NULL, NULL, 0) < 0)
                return KN_ERR;
        *out = a->obj == b->obj;
        return 0;
    }
    kn_val *c = a->kind == V_CONST ? a : b->kind == V_CONST ? b : NULL;
    kn_val *o = c == a ? b : a;
    if (c && (c->obj == Py_None || PyBool_Check(c->obj))) {
        if (o->kind == V_OBJ) {
            *out = o->obj == c->obj;
            return 0;
        }
        if (o->kind != V_NULL) {
            *out = 0;
            return 0;
        }
    }
    if (a->kind == V_OBJ && b->kind == V_OBJ) {
        *out = a->obj == b->obj;
        return 0;
    }
    if (a->kind == V_TENSOR && b->kind == V_TENSOR) {
        *out = a->node == b->node;
        return 0;
    }
    if ((a->kind == V_OBJ && b->kind == V_TENSOR) || (a->kind == V_TENSOR && b->kind == V_OBJ)) {
        *out = 0;
        return 0;
    }
    if (c && PyType_Check(c->obj) && o->kind == V_CONST) {
        *out = 0;
        return 0;
    }
    return kn_brk(r, KN_BRK_IDENTITY_TEST_VALUES_COMPARE);
}

static int
contains(kn_rec *r, rframe *fr, kn_val *item, kn_val *c, int *out)
{
    if (item->kind == V_CONST && c->kind == V_OBJ && c->src >= 0 && c->obj &&
        (Py_IS_TYPE(c->obj, &PySet_Type) || Py_IS_TYPE(c->obj, &PyFrozenSet_Type)) && const_items_set(c->obj)) {
        /* `k in s`, s a set of constants read from a source (a module's names): the
           set stays the object it is (it may be written later); its contents are
           guarded equal to a copy */
        PyObject *copy = Py_IS_TYPE(c->obj, &PySet_Type) ? PySet_New(c->obj) : PyFrozenSet_New(c->obj);
        int bad = copy == NULL || kn_guard_add(r, KN_G_EQ, c->src, copy, NULL, NULL, NULL, 0) < 0;
        Py_XDECREF(copy);
        int e = bad ? -1 : PySet_Contains(c->obj, item->obj);
        if (e < 0) {
            if (bad)
                return KN_FAIL;
            PyErr_Clear();
            return kn_brk(r, KN_BRK_IN_RAISES);
        }
        *out = e;
        return 0;
    }
    if (item->kind == V_CONST && c->kind == V_OBJ && c->src >= 0 && PyDict_Check(c->obj) && !c->attrs &&
        Py_TYPE(c->obj)->tp_as_sequence && Py_TYPE(c->obj)->tp_as_sequence->sq_contains ==
                                                PyDict_Type.tp_as_sequence->sq_contains) {
        /* `k in d`, d a dict read from a source (torch's pytree SUPPORTED_NODES, keyed by
           types): the answer guarded, present or absent */
        int e = PyDict_Contains(c->obj, item->obj);
        if (e < 0) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_IN_RAISES);
        }
        if (kn_guard_add(r, KN_G_HASKEY, c->src, item->obj, NULL, NULL, NULL, e) < 0)
            return KN_FAIL;
        *out = e;
        return 0;
    }
    if (item->kind == V_CONST && kn_record_time_c_method(c, "__contains__")) {
        int e = PySequence_Contains(c->obj, item->obj);   /* a container built at record time */
        if (e < 0) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_IN_RAISES);
        }
        *out = e;
        return 0;
    }
    if (c->kind == V_DICT && item->kind == V_CONST) {
        *out = 0;
        for (int i = 0; i < c->n; i++) {
            int e = PyObject_RichCompareBool(c->keys[i], item->obj, Py_EQ);
            if (e < 0)
                return KN_FAIL;
            if (e)
                *out = 1;
        }
        return 0;
    }
    /* `n in shape`, `0 in sizes`: numbers against numbers compare as
     * relations of the sizes (the ShapeEnv decides each from the ranges,
     * or guards it), not their values */
    PyObject *x = NULL, *y = NULL;
    if (r->symbolic && (x = kn_const_of(r, item)) != NULL && (y = kn_const_of(r, c)) != NULL &&
        (PyTuple_Check(y) || PyList_Check(y)) && kn_numeric(x) && kn_numeric_items(y)) {
        /* (x, y as they are) */
    } else {
        Py_XDECREF(x);
        Py_XDECREF(y);
        x = kn_const_real(r, item);
        y = x ? kn_const_real(r, c) : NULL;
    }
    if (x && y) {
        int e = PySequence_Contains(y, x);
        Py_DECREF(x);
        Py_DECREF(y);
        if (e < 0) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_IN_RAISES);
        }
        *out = e;
        return 0;
    }
    Py_XDECREF(x);
    Py_XDECREF(y);
    if ((c->kind == V_LIST || c->kind == V_TUPLE) && item->kind == V_CONST) {
        *out = 0;
        for (int i = 0; i < c->n; i++) {
            if (c->items[i]->kind != V_CONST)
                return kn_brk(r, KN_BRK_IN_NONCONST_ITEMS);
            int e = PyObject_RichCompareBool(c->items[i]->obj, item->obj, Py_EQ);
            if (e < 0)
                return KN_FAIL;
            if (e)
                *out = 1;
        }
        return 0;
    }
    if (c->kind == V_OBJ && item->kind == V_CONST && PyObject_IsInstance(c->obj, kn_cenv.nn_module) == 1) {
        /* `name in module_dict` (ModuleDict) */
        PyObject *mods = PyObject_GetAttr(c->obj, kn_cenv.s_modules);
        if (mods && PyDict_Check(mods)) {
            int e = PyDict_Contains(mods, item->obj);
            Py_DECREF(mods);
            if (e < 0)
                return KN_FAIL;
            int ms = kn_src_add(r, KN_SRC_INSTDICT, c->src, NULL, 0);
            ms = ms >= 0 ? kn_src_add(r, KN_SRC_DICT, ms, kn_cenv.s_modules, 0) : -1;
            PyObject *keys = PyObject_CallMethod(c->obj, "keys", NULL);
            PyObject *kt = keys ? PySequence_Tuple(keys) : NULL;
            Py_XDECREF(keys);
            if (kt == NULL || ms < 0 || kn_guard_add(r, KN_G_KEYS, ms, kt, NULL, NULL, NULL, 0) < 0) {
                Py_XDECREF(kt);
                return KN_FAIL;
            }
            Py_DECREF(kt);
            *out = e;
            return 0;
        }
        Py_XDECREF(mods);
        PyErr_Clear();
    }
    if (c->kind == V_OBJ) {
        PyObject *name = PyUnicode_FromString("__contains__");
        PyObject *d = name ? _PyType_Lookup(Py_TYPE(c->obj), name) : NULL;
        if (d && PyFunction_Check(d)) {
            kn_val *fn, *res;
            int rc = kn_getattr(r, fr, c, name, &fn);
            Py_DECREF(name);
            if (rc)
                return rc;
            CHECK(kn_call(r, fr, fn, &item, 1, NULL, &res));
            return kn_truth(r, res, out);
        }
        Py_XDECREF(name);
    }
    return kn_brk(r, KN_BRK_IN_NONCONST);
}

int
kn_jump_target(int op, int arg, int next)
{
    switch (op) {
    case KN_OP_JUMP_BACKWARD:
    case KN_OP_JUMP_BACKWARD_NO_INTERRUPT:
    case KN_OP_POP_JUMP_BACKWARD_IF_FALSE:
    case KN_OP_POP_JUMP_BACKWARD_IF_TRUE:
    case KN_OP_POP_JUMP_BACKWARD_IF_NONE:
    case KN_OP_POP_JUMP_BACKWARD_IF_NOT_NONE:
        return next - arg;
    default:
        return next + arg;
    }
}

/* 3.12 (PEP 709): the instructions an inlined comprehension starts with
 * after GET_ITER, from pc: (LOAD_FAST_AND_CLEAR x [MAKE_CELL x])... SWAP,
 * BUILD_LIST/BUILD_SET/BUILD_MAP 0, SWAP 2, then its FOR_ITER.  Returns that
 * FOR_ITER's pc, or -1 when the code at pc is not this sequence. */
int
kn_inlined_comp_loop(rframe *fr, int pc)
{
    int op, arg, next, saved = 0;
    for (;;) {
        if (kn_decode(fr, pc, &op, &arg, &next) < 0)
            return -1;
        if (op != KN_OP_LOAD_FAST_AND_CLEAR)
            break;
        saved++;
        pc = next;
        if (kn_decode(fr, pc, &op, &arg, &next) >= 0 && op == KN_OP_MAKE_CELL)
            pc = next;
    }
    if (saved == 0 || op != KN_OP_SWAP)
        return -1;
    pc = next;
    if (kn_decode(fr, pc, &op, &arg, &next) < 0 ||
        (op != KN_OP_BUILD_LIST && op != KN_OP_BUILD_SET && op != KN_OP_BUILD_MAP) || arg != 0)
        return -1;
    pc = next;
    if (kn_decode(fr, pc, &op, &arg, &next) < 0 || op != KN_OP_SWAP || arg != 2)
        return -1;
    pc = next;
    return kn_decode(fr, pc, &op, &arg, &next) >= 0 && op == KN_OP_FOR_ITER ? pc : -1;
}

static int
with_enter(kn_rec *r, kn_val *a)
{
    if (a->entered)   /* torch.set_grad_enabled(m): set (and prev taken) by the call */
        return 0;
    a->prev = r->grad_cur;
    a->entered = 1;
    if (a->ctxkind == 0)
        return a->mode >= 0 && kn_set_grad(r, a->mode) < 0 ? KN_ERR : 0;
    if (a->ctxkind != 2)
        return 0;
    /* autocast: a node enters it in the graph; the recording runs under it too */
    PyObject *node = PyObject_CallMethodObjArgs(r->graph, kn_cenv.s_call_function, kn_cenv.enter_autocast,
                                                a->ctxargs, NULL);
    PyObject *real = node ? PyObject_Call(kn_cenv.enter_autocast, a->ctxargs, NULL) : NULL;
    if (real == NULL || PyList_Append(r->pins, node) < 0 || PyList_Append(r->live_autocast, real) < 0) {
        Py_XDECREF(node);
        Py_XDECREF(real);
        return KN_ERR;
    }
    a->ctxnode = node;
    a->ctxreal = real;
    Py_DECREF(node);
    Py_DECREF(real);
    return 0;
}

/* `with a:` where a's class defines __enter__ and __exit__ in Python: the
 * enter call is inlined now (*res its value); *exit a V_CTX (ctxkind 3)
 * whose call at the block's end inlines the bound __exit__ */
static int
user_with_enter(kn_rec *r, rframe *fr, kn_val *a, kn_val **exit, kn_val **res)
{
    if ((a->kind != V_OBJ && a->kind != V_CONST) || a->obj == NULL)
        return kn_brk(r, KN_BRK_WITH_UNKNOWN_CONTEXT);
    static PyObject *s_enter, *s_exit;
    if ((s_enter == NULL && (s_enter = PyUnicode_InternFromString("__enter__")) == NULL) ||
        (s_exit == NULL && (s_exit = PyUnicode_InternFromString("__exit__")) == NULL))
        return KN_FAIL;
    PyObject *en = _PyType_Lookup(Py_TYPE(a->obj), s_enter), *ex = _PyType_Lookup(Py_TYPE(a->obj), s_exit);
    if (en == NULL || ex == NULL || !PyFunction_Check(en) || !PyFunction_Check(ex))
        return kn_brk(r, KN_BRK_WITH_UNKNOWN_CONTEXT);
    kn_val *env = kn_v_const(r, en), *exv = kn_v_const(r, ex);
    kn_val *c = env && exv ? kn_v_new(r, V_CTX) : NULL;
    kn_val *m = c ? kn_v_method(r, exv, a) : NULL;
    if (m == NULL)
        return KN_FAIL;
    c->ctxkind = 3;
    c->entered = 1;
    c->fn = m;
    kn_val *argv[1] = {a};
    CHECK(kn_inline(r, fr, en, env, argv, 1, NULL, res));
    *exit = c;
    return 0;
}

static int
with_exit(kn_rec *r, kn_val *ctx)
{
    if (!ctx->entered)
        return 0;
    ctx->entered = 0;
    if (ctx->ctxkind == 0)
        return kn_set_grad(r, ctx->prev) < 0 ? KN_ERR : 0;
    if (ctx->ctxkind != 2)
        return 0;
    PyObject *args = PyTuple_Pack(1, ctx->ctxnode);
    PyObject *node = args ? PyObject_CallMethodObjArgs(r->graph, kn_cenv.s_call_function, kn_cenv.exit_autocast,
                                                       args, NULL)
                          : NULL;
    Py_XDECREF(args);
    if (node == NULL)
        return KN_ERR;
    Py_DECREF(node);
    PyObject *x = PyObject_CallOneArg(kn_cenv.exit_autocast, ctx->ctxreal);
    if (x == NULL)
        return KN_ERR;
    Py_DECREF(x);
    Py_ssize_t n = PyList_GET_SIZE(r->live_autocast);
    if (n > 0 && PyList_SetSlice(r->live_autocast, n - 1, n, NULL) < 0)
        return KN_ERR;
    return 0;
}

#define KN_NEXT 2
static int run_one(kn_rec *r, rframe *fr);

/* LOAD_FAST (and its 3.13 superinstructions' halves): push local i; clear:
 * LOAD_FAST_AND_CLEAR, which also reads an unbound local and unbinds it */
static int
load_fast(kn_rec *r, rframe *fr, int i, int clear)
{
    kn_val *a = fr->locals[i] == LAZY ? load_local(r, fr, i) : fr->locals[i];
    if (a == NULL)
        return KN_FAIL;
    if (a->kind == V_NULL && !clear)
        return kn_brk(r, KN_BRK_LOCAL_VARIABLE_REFERENCED_BEFORE);
    PUSH(a);
    if (clear && (fr->locals[i] = kn_v_new(r, V_NULL)) == NULL)
        return KN_FAIL;
    return 0;
}

/* The frame being recorded, innermost (NULL outside a recording): where a
 * size was made concrete is read from it (kn_record_where).  Recording
 * holds the GIL, so one pointer serves. */
static rframe *recording_top;

/* Runs fr until it returns (0) or breaks (KN_BREAK: the frame's pc is the
 * instruction that could not be recorded and its stack is as it was before
 * that instruction, so CPython or the segment's terminal can run it). */
int
kn_run_frame(kn_rec *r, rframe *fr)
{
    rframe *outer = recording_top;
    recording_top = fr;
    for (;;) {
        int sp0 = fr->sp;
        int rc = run_one(r, fr);
        if (rc == KN_NEXT) {  /* the instruction completed */
            KN_ASSERT(fr->sp >= 0 && fr->sp <= fr->stackcap);
            continue;
        }
        if (rc == KN_BREAK)
            fr->sp = sp0;
        recording_top = outer;
        return rc;
    }
}

/* The source lines of the instruction being recorded, innermost first: a
 * list of (filename, line, function name); empty outside a recording. */
PyObject *
kn_record_where(void)
{
    PyObject *out = PyList_New(0);
    for (rframe *fr = recording_top; out != NULL && fr != NULL; fr = fr->parent) {
        PyObject *item = Py_BuildValue("(OiO)", fr->code->co_filename, PyCode_Addr2Line(fr->code, fr->lastpc * 2),
                                       fr->code->co_qualname);
        if (item == NULL || PyList_Append(out, item) < 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

/* One instruction: KN_NEXT done, 0 the frame returned, KN_BREAK, KN_ERR.
 * This is the recorder's one interpreter switch (a case per HANDLED opcode of
 * opcodes.def, the BREAK rows generated from the table); the larger opcode
 * families live in record_ops.c, one function each, so that a case here
 * stays a few lines. */
static int
run_one(kn_rec *r, rframe *fr)
{
    PyCodeObject *co = fr->code;
    {
        if (++r->steps > 400000)
            return kn_brk(r, KN_BRK_RECORDING_RAN_TOO_LONG);
        int op, arg, next;
        int pc = kn_decode(fr, fr->pc, &op, &arg, &next);
        if (pc < 0)
            return kn_brk(r, KN_BRK_RAN_OFF_END_CODE);
        fr->lastpc = pc;
        fr->pc = pc;
        if (op < 0)
            return kn_brk(r, KN_BRK_UNKNOWN_OPCODE, fr->ins[2 * pc]);
        /* try blocks are recorded on their no-exception path: a graph that
         * raises sends the frame back to CPython at the segment's start (see
         * hook.c), where the user's handlers run */
        kn_val *a = NULL, *b = NULL, *c = NULL, *res = NULL;
        PyObject *name;
        int t;
        switch (op) {
        case KN_OP_NOP:
        case KN_OP_RESUME:
        case KN_OP_CACHE:
        case KN_OP_PRECALL:
        case KN_OP_COPY_FREE_VARS:   /* prologue only: done for real (hook.c) or by kn_inline */
            break;
        case KN_OP_MAKE_CELL:
            /* in the prologue (before _co_firsttraceable) it was done for real
             * or by kn_inline.  After it (3.12, PEP 709: a comprehension whose
             * variable a closure captures, inlined) it replaces the slot by a
             * fresh cell holding the slot's value, as CPython does: the
             * comprehension's LOAD_FAST_AND_CLEAR saved the outer cell on the
             * stack and its STORE_FAST puts that back afterwards */
            if (pc < co->_co_firsttraceable)
                break;
            a = fr->locals[arg] == LAZY ? load_local(r, fr, arg) : fr->locals[arg];
            c = a ? kn_v_new(r, V_CELL) : NULL;
            if (c == NULL)
                return KN_FAIL;
            c->content = a->kind == V_NULL ? NULL : a;   /* NULL: an empty cell */
            fr->locals[arg] = c;
            break;
        case KN_OP_POP_TOP:
            (void)POP();
            break;
        case KN_OP_PUSH_NULL:
            PUSH(kn_v_new(r, V_NULL));
            break;
        case KN_OP_COPY:
            PUSH(PEEK(arg));
            break;
        case KN_OP_SWAP:
            a = TOP();
            TOP() = PEEK(arg);
            PEEK(arg) = a;
            break;
        case KN_OP_LOAD_FAST:
        case KN_OP_LOAD_FAST_CHECK:
        case KN_OP_LOAD_FAST_AND_CLEAR:
            /* (3.13 loads a cell for a closure with LOAD_FAST: the cell is the value) */
            CHECK(load_fast(r, fr, arg, op == KN_OP_LOAD_FAST_AND_CLEAR));
            break;
        case KN_OP_LOAD_FAST_LOAD_FAST:   /* 3.13: two locals, the argument's high and low nibbles */
            CHECK(load_fast(r, fr, arg >> 4, 0));
            CHECK(load_fast(r, fr, arg & 15, 0));
            break;
        case KN_OP_STORE_FAST:
            fr->locals[arg] = POP();
            break;
        case KN_OP_STORE_FAST_LOAD_FAST:   /* 3.13 */
            fr->locals[arg >> 4] = POP();
            CHECK(load_fast(r, fr, arg & 15, 0));
            break;
        case KN_OP_STORE_FAST_STORE_FAST:   /* 3.13: the top into the high nibble's local */
            fr->locals[arg >> 4] = POP();
            fr->locals[arg & 15] = POP();
            break;
        case KN_OP_DELETE_FAST:   /* of an unbound local raises: CPython does it */
            a = fr->locals[arg] == LAZY ? load_local(r, fr, arg) : fr->locals[arg];
            if (a == NULL)
                return KN_FAIL;
            if (a->kind == V_NULL)
                return kn_brk(r, KN_BRK_LOCAL_VARIABLE_REFERENCED_BEFORE);
            fr->locals[arg] = kn_v_new(r, V_NULL);
            break;
        case KN_OP_LOAD_CONST:
            PUSH(kn_v_const(r, PyTuple_GET_ITEM(co->co_consts, arg)));
            break;
        case KN_OP_RETURN_CONST:
            fr->ret = kn_v_const(r, PyTuple_GET_ITEM(co->co_consts, arg));
            return fr->ret ? 0 : KN_ERR;
        case KN_OP_RETURN_VALUE:
            fr->ret = POP();
            return 0;
        case KN_OP_LOAD_GLOBAL:
            name = PyTuple_GET_ITEM(co->co_names, arg >> 1);
            CHECK(global_load(r, fr, name, &a));
            if (!KN_PY313 && (arg & 1))
                PUSH(kn_v_new(r, V_NULL));   /* the call form: NULL below the callable */
            PUSH(a);
            if (KN_PY313 && (arg & 1))
                PUSH(kn_v_new(r, V_NULL));   /* 3.13: above it */
            break;
        case KN_OP_STORE_GLOBAL:
            if (fr->globals != r->root_globals)
                return kn_brk(r, KN_BRK_GLOBAL_STORE_INLINED_FUNCTION);
            name = PyTuple_GET_ITEM(co->co_names, arg);
            a = POP();
            if (kn_effect_add(r, E_GLOBAL, a, NULL, name) < 0)
                return KN_FAIL;
            {
                /* later loads of the name see the new value */
                int s = kn_src_add(r, KN_SRC_GLOBAL, -1, name, 0);
                if (s < 0)
                    return KN_FAIL;
                r->bysrc[s] = a;
            }
            break;
        case KN_OP_LOAD_ATTR:
        case KN_OP_LOAD_METHOD:
        case KN_OP_LOAD_SUPER_ATTR:
        case KN_OP_STORE_ATTR:
            CHECK(kn_op_attr(r, fr, op, arg));
            break;
        case KN_OP_LOAD_DEREF:
        case KN_OP_LOAD_CLOSURE:
            c = fr->locals[arg] == LAZY ? load_local(r, fr, arg) : fr->locals[arg];
            if (c == NULL)
                return KN_FAIL;
            if (op == KN_OP_LOAD_CLOSURE) {
                PUSH(c);
                break;
            }
            CHECK(cell_load(r, c, &a));
            PUSH(a);
            break;
        case KN_OP_STORE_DEREF:
            c = fr->locals[arg] == LAZY ? load_local(r, fr, arg) : fr->locals[arg];
            if (c == NULL)
                return KN_FAIL;
            a = POP();
            CHECK(cell_store(r, c, a));
            break;
        case KN_OP_BINARY_OP: {
            if (arg < 0 || arg > 25)
                return kn_brk(r, KN_BRK_UNKNOWN_BINARY_OPERATOR, arg);
            b = PEEK(1);
            a = PEEK(2);
            /* `a op= b` on an immutable or non-tensor left side is `a = a op b` */
            int which = (arg >= 13 && a->kind != V_TENSOR && a->kind != V_LIST) ? arg - 13 : arg;
            PyObject *f = kn_opfn(binop_names[which]);
            if (f == NULL)
                return KN_FAIL;
            fr->sp -= 2;
            int rc = kn_binop(r, f, a, b, &res);
            Py_DECREF(f);
            if (rc)
                return rc;
            PUSH(res);
            break;
        }
        case KN_OP_UNARY_NEGATIVE:
        case KN_OP_UNARY_INVERT:
        case KN_OP_UNARY_POSITIVE:
            a = POP();
            CHECK(unary(r, op == KN_OP_UNARY_NEGATIVE ? "neg" : op == KN_OP_UNARY_INVERT ? "invert" : "pos", a, &res));
            PUSH(res);
            break;
        case KN_OP_UNARY_NOT:
            a = POP();
            CHECK(kn_truth(r, a, &t));
            PUSH(kn_v_const(r, t ? Py_False : Py_True));
            break;
        case KN_OP_BINARY_SUBSCR:
            b = POP();
            a = POP();
            CHECK(subscr(r, fr, a, b, &res));
            PUSH(res);
            break;
        case KN_OP_STORE_SUBSCR:
            b = POP();   /* key */
            a = POP();   /* container */
            c = POP();   /* value */
            CHECK(kn_store_subscr(r, a, b, c));
            break;
        case KN_OP_BINARY_SLICE:
        case KN_OP_STORE_SLICE: {
            kn_val *stop = POP(), *start = POP(), *cont = POP();
            kn_val *sl = kn_v_new(r, V_SLICE);
            if (sl == NULL)
                return KN_FAIL;
            kn_val *none = kn_v_const(r, Py_None);
            if (kn_v_add(r, sl, start) < 0 || kn_v_add(r, sl, stop) < 0 || kn_v_add(r, sl, none) < 0)
                return KN_FAIL;
            if (start->kind == V_CONST && stop->kind == V_CONST) {
                PyObject *s = PySlice_New(start->obj, stop->obj, NULL);
                sl = kn_v_const_steal(r, s);
                if (sl == NULL)
                    return KN_FAIL;
            }
            if (op == KN_OP_BINARY_SLICE) {
                CHECK(subscr(r, fr, cont, sl, &res));
                PUSH(res);
            } else {
                c = POP();
                CHECK(kn_store_subscr(r, cont, sl, c));
            }
            break;
        }
        case KN_OP_COMPARE_OP: {
            /* 3.13: the low 5 bits are the cache's and "bool() the result"
             * (16), set only where a conditional jump consumes it: the jump
             * takes the truth of what is recorded here */
            int which = KN_PY313 ? arg >> 5 : KN_PY312 ? arg >> 4 : arg;
            if (which < 0 || which > 5)
                return kn_brk(r, KN_BRK_UNKNOWN_COMPARISON);
            b = POP();
            a = POP();
            CHECK(compare(r, which, a, b, &res));
            PUSH(res);
            break;
        }
        case KN_OP_IS_OP:
            b = POP();
            a = POP();
            CHECK(is_op(r, a, b, &t));
            PUSH(kn_v_const(r, (t ^ arg) ? Py_True : Py_False));
            break;
        case KN_OP_CONTAINS_OP:
            b = POP();
            a = POP();
            CHECK(contains(r, fr, a, b, &t));
            PUSH(kn_v_const(r, (t ^ arg) ? Py_True : Py_False));
            break;
        case KN_OP_BUILD_TUPLE:
        case KN_OP_BUILD_LIST:
        case KN_OP_BUILD_SET:
        case KN_OP_LIST_TO_TUPLE:
        case KN_OP_BUILD_MAP:
        case KN_OP_BUILD_CONST_KEY_MAP:
        case KN_OP_BUILD_SLICE:
        case KN_OP_BUILD_STRING:
        case KN_OP_FORMAT_VALUE:
        case KN_OP_FORMAT_SIMPLE:
        case KN_OP_FORMAT_WITH_SPEC:
        case KN_OP_CONVERT_VALUE:
        case KN_OP_LIST_APPEND:
        case KN_OP_SET_ADD:
        case KN_OP_LIST_EXTEND:
        case KN_OP_SET_UPDATE:
        case KN_OP_MAP_ADD:
        case KN_OP_DICT_UPDATE:
        case KN_OP_DICT_MERGE:
            CHECK(kn_op_build(r, fr, op, arg));
            break;
        case KN_OP_UNPACK_SEQUENCE:
            a = POP();
            CHECK(unpack(r, fr, a, arg, -1, 0));
            break;
        case KN_OP_UNPACK_EX:
            a = POP();
            CHECK(unpack(r, fr, a, 0, arg & 0xff, arg >> 8));
            break;
        case KN_OP_GET_ITER:
            a = POP();
            CHECK(kn_iter_items(r, a, &res));
            PUSH(res);
            break;
        case KN_OP_FOR_ITER:
            a = TOP();
            if (a->kind != V_ITER)
                return kn_brk(r, KN_BRK_LOOP_OVER_ITERATOR_SEE);
            if (a->pos < a->n) {
                PUSH(a->items[a->pos++]);
                break;
            }
            (void)POP();
            /* past END_FOR (3.12), END_FOR and POP_TOP (3.13) */
            fr->pc = next + arg + (KN_PY313 ? 2 : KN_PY312 ? 1 : 0);
            return KN_NEXT;
        case KN_OP_END_FOR:   /* pops the iterator and its value; 3.13 only the value */
            (void)POP();
            if (!KN_PY313)
                (void)POP();
            break;
        case KN_OP_TO_BOOL:
            /* 3.13 converts a condition to bool before POP_JUMP_IF_TRUE/FALSE
             * and UNARY_NOT, its only consumers, which the recorder lets take
             * the truth of any value themselves.  CPython's own jump reads
             * only bools: a frame handed to it at one gets its condition
             * converted (hook.c, kn_frame_condition) */
            break;
        case KN_OP_JUMP_FORWARD:
        case KN_OP_JUMP_BACKWARD:
        case KN_OP_JUMP_BACKWARD_NO_INTERRUPT:
            fr->pc = kn_jump_target(op, arg, next);
            return KN_NEXT;
        case KN_OP_POP_JUMP_IF_FALSE:
        case KN_OP_POP_JUMP_IF_TRUE:
        case KN_OP_POP_JUMP_FORWARD_IF_FALSE:
        case KN_OP_POP_JUMP_FORWARD_IF_TRUE:
        case KN_OP_POP_JUMP_BACKWARD_IF_FALSE:
        case KN_OP_POP_JUMP_BACKWARD_IF_TRUE: {
            a = TOP();
            int rc = kn_truth(r, a, &t);
            if (rc)
                return rc;   /* break: the branch is left for real with the value on the stack */
            (void)POP();
            int want = opname_is(op, KN_OP_POP_JUMP_IF_TRUE) || opname_is(op, KN_OP_POP_JUMP_FORWARD_IF_TRUE) ||
                       opname_is(op, KN_OP_POP_JUMP_BACKWARD_IF_TRUE);
            fr->pc = (t == want) ? kn_jump_target(op, arg, next) : next;
            return KN_NEXT;
        }
        case KN_OP_POP_JUMP_IF_NONE:
        case KN_OP_POP_JUMP_IF_NOT_NONE:
        case KN_OP_POP_JUMP_FORWARD_IF_NONE:
        case KN_OP_POP_JUMP_FORWARD_IF_NOT_NONE:
        case KN_OP_POP_JUMP_BACKWARD_IF_NONE:
        case KN_OP_POP_JUMP_BACKWARD_IF_NOT_NONE: {
            a = POP();
            int isnone = a->kind == V_CONST && a->obj == Py_None;
            if (a->kind == V_NULL)
                return kn_brk(r, KN_BRK_NONE_TEST_NULL);
            int want_none = op == KN_OP_POP_JUMP_IF_NONE || op == KN_OP_POP_JUMP_FORWARD_IF_NONE ||
                            op == KN_OP_POP_JUMP_BACKWARD_IF_NONE;
            fr->pc = (isnone == want_none) ? kn_jump_target(op, arg, next) : next;
            return KN_NEXT;
        }
        case KN_OP_JUMP_IF_FALSE_OR_POP:
        case KN_OP_JUMP_IF_TRUE_OR_POP: {
            a = TOP();
            CHECK(kn_truth(r, a, &t));
            int want = op == KN_OP_JUMP_IF_TRUE_OR_POP;
            if (t == want) {
                fr->pc = next + arg;
                return KN_NEXT;
            }
            (void)POP();
            break;
        }
        case KN_OP_KW_NAMES:
            fr->kwnames = PyTuple_GET_ITEM(co->co_consts, arg);
            break;
        case KN_OP_CALL:
        case KN_OP_CALL_KW:
        case KN_OP_CALL_FUNCTION_EX:
        case KN_OP_MAKE_FUNCTION:
        case KN_OP_SET_FUNCTION_ATTRIBUTE:
            CHECK(kn_op_call(r, fr, op, arg));
            break;
        case KN_OP_CALL_INTRINSIC_1:
            if (arg == 5) {          /* unary + */
                a = POP();
                CHECK(unary(r, "pos", a, &res));
                PUSH(res);
            } else if (arg == 6) {   /* list -> tuple */
                a = POP();
            PUSH(kn_as_tuple(r, a));
            } else {
                return kn_brk(r, KN_BRK_INTRINSIC, arg);
            }
            break;
        case KN_OP_BEFORE_WITH:
            a = POP();
            if (a->kind != V_CTX) {
                /* a class whose __enter__ and __exit__ are Python: both inlined */
                CHECK(user_with_enter(r, fr, a, &b, &res));
                fr->nwith++;   /* a break inside runs the whole segment as Python */
                PUSH(b);
                PUSH(res);
                break;
            }
            if (with_enter(r, a) < 0)
                return KN_FAIL;
            fr->nwith++;
            PUSH(a);
            PUSH(kn_v_const(r, Py_None));
            break;
        case KN_OP_GET_LEN:
            a = TOP();
            CHECK(kn_iter_items(r, a, &b));
            PUSH(kn_v_const_steal(r, PyLong_FromLong(b->n)));
            break;
        case KN_OP_LOAD_ASSERTION_ERROR:
            PUSH(kn_v_const(r, PyExc_AssertionError));
            break;
        case KN_OP_YIELD_VALUE:
            if (fr->yields == NULL)
                return kn_brk(r, KN_BRK_YIELD_OUTSIDE_GENERATOR_RUNS);
            a = POP();
            if (kn_v_add(r, fr->yields, a) < 0)
                return KN_FAIL;
            PUSH(kn_v_const(r, Py_None));   /* the value send() would deliver */
            break;
        case KN_OP_RETURN_GENERATOR:
            if (fr->yields == NULL)
                return kn_brk(r, KN_BRK_GENERATOR);
            PUSH(kn_v_const(r, Py_None));
            break;
        case KN_OP_IMPORT_NAME:
        case KN_OP_IMPORT_FROM:
            CHECK(kn_op_import(r, fr, op, arg));
            break;
        case KN_OP_RAISE_VARARGS:
            return kn_brk(r, KN_BRK_RAISE);
        /* the opcodes opcodes.def marks BREAK: recording stops there */
#define OPC_HANDLED(name)
#define OPC_BREAK(name) case KN_OP_##name:
#define OPC(name, how) OPC_##how(name)
#include "capture/opcodes.def"
#undef OPC
#undef OPC_BREAK
#undef OPC_HANDLED
            return kn_brk(r, KN_BRK_OPCODE_NOT_RECORDED, kn_opcode_names[op]);
        default:   /* HANDLED in opcodes.def but no case here (EXTENDED_ARG is decoded away) */
            return KN_INTERNAL("opcode %s is HANDLED in opcodes.def but run_one has no case", kn_opcode_names[op]);
        }
        fr->pc = next;
        return KN_NEXT;
    }
}

/* with blocks are exited through their __exit__ call: see kn_call in record_call.c */
int kn_with_exit(kn_rec *r, kn_val *ctx);
int
kn_with_exit(kn_rec *r, kn_val *ctx)
{
    return with_exit(r, ctx);
}
