/* record_call.c — calls, attribute loads and builtins while recording.
 *
 * Consumes: symbolic values from record.c.  Produces: graph nodes for tensor
 * operations (their metadata from running the same op on fake tensors),
 * inlined frames for Python functions and module forwards, constants for
 * Python work whose inputs are known, and graph breaks for everything else.
 */
#include "capture/record.h"

#include <structmember.h>

int kn_with_exit(kn_rec *r, kn_val *ctx);
int kn_rec_noinline(kn_rec *r, rframe *fr);

#define CHECK(call)                   \
    do {                              \
        int _rc = (call);             \
        if (_rc != 0)                 \
            return _rc;               \
    } while (0)

static PyObject *
builtin(const char *name)
{
    return PyDict_GetItemString(PyEval_GetBuiltins(), name);   /* borrowed */
}

static PyObject *
helper(const char *name)   /* borrowed-ish: new ref */
{
    return PyObject_GetAttrString(kn_cenv.mod, name);
}

static int
is_tensor_obj(PyObject *o)
{
    return PyObject_TypeCheck(o, (PyTypeObject *)kn_cenv.torch_tensor);
}

static int
has_tensor(PyObject *o)
{
    if (is_tensor_obj(o))
        return 1;
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        for (Py_ssize_t i = 0; i < n; i++)
            if (has_tensor(PySequence_Fast_ITEMS(o)[i]))
                return 1;
    }
    return 0;
}

static int
any_tensor_arg(kn_val **args, int n)
{
    for (int i = 0; i < n; i++) {
        kn_val *v = args[i];
        if (v->kind == V_TENSOR)
            return 1;
        if ((v->kind == V_TUPLE || v->kind == V_LIST) && any_tensor_arg(v->items, v->n))
            return 1;
    }
    return 0;
}

static void
set_meta(PyObject *node, PyObject *fake)
{
    PyObject *m = PyObject_GetAttrString(node, "meta");
    if (m == NULL || PyDict_SetItemString(m, "example_value", fake) < 0)
        PyErr_Clear();
    Py_XDECREF(m);
}

/* Wrap an op's fake result: tensors become nodes (tuples through getitem). */
static kn_val *
wrap_result(kn_rec *r, PyObject *node, PyObject *res)
{
    if (is_tensor_obj(res)) {
        kn_val *v = kn_v_new(r, V_TENSOR);
        if (v == NULL || PyList_Append(r->pins, res) < 0 || PyList_Append(r->pins, node) < 0)
            return NULL;
        v->obj = res;
        v->node = node;
        set_meta(node, res);
        if (kn_memo_get(r, res) == NULL && kn_memo_obj(r, res, v) < 0)
            return NULL;
        return v;
    }
    if ((PyTuple_Check(res) || PyList_Check(res)) && !PyObject_TypeCheck(res, (PyTypeObject *)kn_cenv.torch_size)) {
        kn_val *v = kn_v_new(r, PyList_Check(res) ? V_LIST : V_TUPLE);
        if (v == NULL)
            return NULL;
        if (PyTuple_Check(res) && !PyTuple_CheckExact(res)) {
            v->ttype = (PyObject *)Py_TYPE(res);   /* torch.return_types.max and friends */
            if (PyList_Append(r->pins, v->ttype) < 0)
                return NULL;
        }
        Py_ssize_t n = PySequence_Fast_GET_SIZE(res);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PySequence_Fast_ITEMS(res)[i];
            kn_val *iv;
            if (has_tensor(it)) {
                PyObject *args = Py_BuildValue("(On)", node, i);
                PyObject *sub = args ? PyObject_CallMethodObjArgs(r->graph, kn_cenv.s_call_function, kn_cenv.getitem,
                                                                  args, NULL)
                                     : NULL;
                Py_XDECREF(args);
                if (sub == NULL)
                    return NULL;
                iv = wrap_result(r, sub, it);
                Py_DECREF(sub);
            } else {
                iv = kn_v_const(r, it);
            }
            if (iv == NULL || kn_v_add(r, v, iv) < 0)
                return NULL;
        }
        return v;
    }
    return kn_v_const(r, res);
}

static const char *const denied_methods[] = {
    "backward", "register_hook", "retain_grad", "numpy", "tolist", "item", "data_ptr", "storage", "untyped_storage",
    "set_", "resize_", "__setstate__", "record_stream", "share_memory_", "pin_memory", NULL,
};

int
kn_torch_op(kn_rec *r, PyObject *target, int method, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (method) {
        const char *nm = PyUnicode_AsUTF8(target);
        for (int i = 0; nm && denied_methods[i]; i++)
            if (strcmp(nm, denied_methods[i]) == 0)
                return kn_brk(r, "Tensor.%s() leaves the graph", nm);
    }
    PyObject *fa = PyTuple_New(npos), *na = PyTuple_New(npos), *fk = PyDict_New(), *nk = PyDict_New();
    PyObject *res = NULL, *node = NULL;
    int rc = KN_ERR;
    if (!fa || !na || !fk || !nk)
        goto done;
    for (int i = 0; i < npos; i++) {
        PyObject *f = kn_to_py(r, args[i], 1), *n = f ? kn_to_py(r, args[i], 0) : NULL;
        if (n == NULL) {
            Py_XDECREF(f);
            rc = KN_FAIL;
            goto done;
        }
        PyTuple_SET_ITEM(fa, i, f);
        PyTuple_SET_ITEM(na, i, n);
    }
    for (int i = 0; i < nkw; i++) {
        PyObject *f = kn_to_py(r, args[npos + i], 1), *n = f ? kn_to_py(r, args[npos + i], 0) : NULL;
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (n == NULL || PyDict_SetItem(fk, k, f) < 0 || PyDict_SetItem(nk, k, n) < 0) {
            Py_XDECREF(f);
            Py_XDECREF(n);
            rc = KN_FAIL;
            goto done;
        }
        Py_DECREF(f);
        Py_DECREF(n);
    }
    if (method) {
        if (npos < 1)
            goto done;
        PyObject *bound = PyObject_GetAttr(PyTuple_GET_ITEM(fa, 0), target);
        PyObject *rest = PyTuple_GetSlice(fa, 1, npos);
        res = bound && rest ? PyObject_Call(bound, rest, fk) : NULL;
        Py_XDECREF(bound);
        Py_XDECREF(rest);
    } else {
        res = PyObject_Call(target, fa, fk);
    }
    if (res == NULL) {
        PyObject *ev = kn_err_take();
        PyObject *et = ev ? Py_NewRef((PyObject *)Py_TYPE(ev)) : NULL;
        int dd = ev && PyObject_IsInstance(ev, kn_cenv.fake_exc) == 1;
        PyObject *msg = ev ? PyObject_Str(ev) : NULL;
        const char *m = msg ? PyUnicode_AsUTF8(msg) : "?";
        PyObject *tn = method ? Py_NewRef(target) : PyObject_GetAttrString(target, "__name__");
        if (tn == NULL) {
            PyErr_Clear();
            tn = PyObject_Repr(target);
        }
        const char *tname = tn ? PyUnicode_AsUTF8(tn) : "?";
        if (dd)
            kn_brk(r, "%s depends on tensor data", tname ? tname : "?");
        else
            kn_brk(r, "%s raised on fake tensors (%s: %.160s)", tname ? tname : "?",
                   et ? ((PyTypeObject *)et)->tp_name : "?", m ? m : "?");
        PyErr_Clear();
        Py_XDECREF(tn);
        Py_XDECREF(msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        rc = KN_BREAK;
        goto done;
    }
    if (res == Py_None && any_tensor_arg(args, nargs)) {
        /* called for its effect on a tensor (x[i] = v, an in-place helper): keep it */
        node = PyObject_CallMethodObjArgs(r->graph, method ? kn_cenv.s_call_method : kn_cenv.s_call_function,
                                          target, na, nk, NULL);
        if (node == NULL)
            goto done;
        r->nops++;
        *out = kn_v_const(r, Py_None);
        rc = *out ? 0 : KN_FAIL;
        goto done;
    }
    if (!has_tensor(res)) {
        /* shape queries and other Python results: constants under the tensor guards */
        if (method || any_tensor_arg(args, nargs)) {
            *out = kn_v_const(r, res);
            rc = *out ? 0 : KN_FAIL;
            goto done;
        }
        if (!PyFunction_Check(target)) {
            /* a query of torch's global state: ask it outside the fake mode */
            PyObject *x = PyObject_CallMethod(r->fake_mode, "__exit__", "OOO", Py_None, Py_None, Py_None);
            Py_XDECREF(x);
            PyObject *real = x ? PyObject_Call(target, fa, fk) : NULL;
            PyObject *y = PyObject_CallMethod(r->fake_mode, "__enter__", NULL);
            Py_XDECREF(y);
            if (real == NULL || y == NULL) {
                Py_XDECREF(real);
                PyErr_Clear();
                rc = kn_brk(r, "a torch query raises");
                goto done;
            }
            *out = kn_v_const(r, real);
            Py_DECREF(real);
            rc = *out ? 0 : KN_FAIL;
            goto done;
        }
        rc = kn_brk(r, "a torch function returning Python values");
        goto done;
    }
    node = PyObject_CallMethodObjArgs(r->graph, method ? kn_cenv.s_call_method : kn_cenv.s_call_function, target, na,
                                      nk, NULL);
    if (node == NULL)
        goto done;
    r->nops++;
    *out = wrap_result(r, node, res);
    rc = *out ? 0 : KN_FAIL;
done:
    Py_XDECREF(fa);
    Py_XDECREF(na);
    Py_XDECREF(fk);
    Py_XDECREF(nk);
    Py_XDECREF(res);
    Py_XDECREF(node);
    return rc;
}

/* ------------------------------------------------------------------ truth, iteration, binops */

static PyObject *
module_dict(kn_rec *r, kn_val *m, PyObject *which, int *dsrc)
{
    /* m._modules / _parameters / _buffers, with its source */
    PyObject *idict = PyObject_GenericGetDict(m->obj, NULL);
    if (idict == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *d = PyDict_GetItemWithError(idict, which);
    Py_XINCREF(d);
    Py_DECREF(idict);
    if (d == NULL || !PyDict_Check(d)) {
        Py_XDECREF(d);
        PyErr_Clear();
        return NULL;
    }
    *dsrc = -1;
    if (m->src >= 0) {
        int is = kn_src_add(r, KN_SRC_INSTDICT, m->src, NULL, 0);
        *dsrc = is >= 0 ? kn_src_add(r, KN_SRC_DICT, is, which, 0) : -1;
    }
    return d;
}

static int
module_children(kn_rec *r, kn_val *m, int values, kn_val **out)
{
    int ds;
    PyObject *d = module_dict(r, m, kn_cenv.s_modules, &ds);
    if (d == NULL)
        return kn_brk(r, "module without _modules");
    PyObject *keys = PyDict_Keys(d), *kt = keys ? PyList_AsTuple(keys) : NULL;
    Py_XDECREF(keys);
    kn_val *it = kn_v_new(r, V_ITER);
    int rc = (kt && it) ? 0 : KN_FAIL;
    if (rc == 0 && ds >= 0 && kn_guard_add(r, KN_G_KEYS, ds, kt, NULL, NULL, NULL, 0) < 0)
        rc = KN_FAIL;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(kt); i++) {
        PyObject *k = PyTuple_GET_ITEM(kt, i);
        kn_val *v;
        if (values) {
            int s = ds >= 0 ? kn_src_add(r, KN_SRC_DICT, ds, k, 0) : -1;
            PyObject *val = PyDict_GetItem(d, k);
            v = val ? kn_wrap(r, val, s) : NULL;
        } else {
            v = kn_v_const(r, k);
        }
        if (v == NULL || kn_v_add(r, it, v) < 0)
            rc = KN_FAIL;
    }
    Py_XDECREF(kt);
    Py_DECREF(d);
    if (rc == 0)
        *out = it;
    return rc;
}

static int
isinstance_of(PyObject *o, const char *cls)
{
    PyObject *c = helper(cls);
    if (c == NULL) {
        PyErr_Clear();
        return 0;
    }
    int r = PyObject_IsInstance(o, c);
    Py_DECREF(c);
    if (r < 0)
        PyErr_Clear();
    return r == 1;
}

/* A V_ITER over a real iterable's items: constants (no tensors allowed), or,
 * with wrap set, values wrapped without a source (fake tensors map back to
 * their graph values). */
static int
iter_real(kn_rec *r, PyObject *o, int wrap, kn_val **out)
{
    PyObject *iter = PyObject_GetIter(o), *x;
    kn_val *it = iter ? kn_v_new(r, V_ITER) : NULL;
    if (it == NULL) {
        Py_XDECREF(iter);
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            return kn_brk(r, "iteration over a %s", Py_TYPE(o)->tp_name);
        }
        return KN_FAIL;
    }
    while ((x = PyIter_Next(iter))) {
        if (!wrap && is_tensor_obj(x)) {
            Py_DECREF(x);
            Py_DECREF(iter);
            return kn_brk(r, "tensor inside a constant container");
        }
        kn_val *xv = wrap ? kn_wrap(r, x, -1) : kn_v_const(r, x);
        Py_DECREF(x);
        if (xv == NULL || kn_v_add(r, it, xv) < 0) {
            Py_DECREF(iter);
            return KN_FAIL;
        }
    }
    Py_DECREF(iter);
    if (PyErr_Occurred())
        return KN_ERR;
    *out = it;
    return 0;
}

int
kn_is_module_seq(PyObject *o)
{
    return isinstance_of(o, "ModuleList") || isinstance_of(o, "Sequential");
}

int
kn_iter_items(kn_rec *r, kn_val *v, kn_val **out)
{
    kn_val *it;
    switch (v->kind) {
    case V_ITER:
        *out = v;
        return 0;
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        it = kn_v_new(r, V_ITER);
        if (it == NULL)
            return KN_FAIL;
        for (int i = 0; i < v->n; i++) {
            kn_val *x = v->kind == V_DICT ? kn_v_const(r, v->keys[i]) : v->items[i];
            if (x == NULL || kn_v_add(r, it, x) < 0)
                return KN_FAIL;
        }
        *out = it;
        return 0;
    case V_CONST: {
        PyObject *o = v->obj;
        if (!(PyTuple_Check(o) || PyList_Check(o) || PyRange_Check(o) || PyUnicode_Check(o) || PyDict_Check(o) ||
              PyAnySet_Check(o) || PyDictKeys_Check(o) || PyDictValues_Check(o) || PyDictItems_Check(o)))
            return kn_brk(r, "iteration over a %s", Py_TYPE(o)->tp_name);
        Py_ssize_t n = PyObject_Length(o);
        if (n < 0 || n > 100000) {
            PyErr_Clear();
            return kn_brk(r, "iteration over a very long constant");
        }
        return iter_real(r, o, 0, out);
    }
    case V_TENSOR: {
        PyObject *shape = PyObject_GetAttr(v->obj, kn_cenv.s_shape);
        if (shape == NULL)
            return KN_ERR;
        Py_ssize_t nd = PyTuple_GET_SIZE(shape);
        long n = nd ? PyLong_AsLong(PyTuple_GET_ITEM(shape, 0)) : -1;
        Py_DECREF(shape);
        if (nd == 0)
            return kn_brk(r, "iteration over a 0-d tensor");
        it = kn_v_new(r, V_ITER);
        if (it == NULL)
            return KN_FAIL;
        for (long i = 0; i < n; i++) {
            kn_val *idx = kn_v_const_steal(r, PyLong_FromLong(i)), *x;
            kn_val *a[2] = {v, idx};
            if (idx == NULL)
                return KN_FAIL;
            CHECK(kn_torch_op(r, kn_cenv.getitem, 0, a, 2, NULL, &x));
            if (kn_v_add(r, it, x) < 0)
                return KN_FAIL;
        }
        *out = it;
        return 0;
    }
    case V_OBJ:
        if (v->src < 0 && !(Py_TYPE(v->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE) && v->attrs == NULL)
            return iter_real(r, v->obj, 1, out);   /* a builtin container made at record time */
        if (isinstance_of(v->obj, "ModuleList") || isinstance_of(v->obj, "Sequential"))
            return module_children(r, v, 1, out);
        if (isinstance_of(v->obj, "ModuleDict"))
            return module_children(r, v, 0, out);
        return kn_brk(r, "iteration over a %s", Py_TYPE(v->obj)->tp_name);
    default:
        return kn_brk(r, "iteration over a value kiln does not model");
    }
}

int
kn_truth(kn_rec *r, kn_val *v, int *out)
{
    switch (v->kind) {
    case V_CONST: {
        int t = PyObject_IsTrue(v->obj);
        if (t < 0) {
            PyErr_Clear();
            return kn_brk(r, "truth value raises");
        }
        *out = t;
        return 0;
    }
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        *out = v->n > 0;
        return 0;
    case V_TENSOR:
        return kn_brk(r, "a branch on tensor data");
    case V_NULL:
        return kn_brk(r, "truth of NULL");
    case V_OBJ: {
        PyTypeObject *t = Py_TYPE(v->obj);
        if (isinstance_of(v->obj, "ModuleList") || isinstance_of(v->obj, "Sequential") ||
            isinstance_of(v->obj, "ModuleDict")) {
            kn_val *it;
            CHECK(module_children(r, v, 0, &it));
            *out = it->n > 0;
            return 0;
        }
        if ((t->tp_as_number && t->tp_as_number->nb_bool) || (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
            (t->tp_as_sequence && t->tp_as_sequence->sq_length))
            return kn_brk(r, "truth of a %s", t->tp_name);
        *out = 1;
        return 0;
    }
    case V_ITER:
    default:
        *out = 1;
        return 0;
    }
}

static int
fn_named(PyObject *f, const char *name)
{
    PyObject *n = PyObject_GetAttrString(f, "__name__");
    if (n == NULL) {
        PyErr_Clear();
        return 0;
    }
    int eq = PyUnicode_CompareWithASCIIString(n, name) == 0;
    Py_DECREF(n);
    return eq;
}

int
kn_binop(kn_rec *r, PyObject *opfn, kn_val *a, kn_val *b, kn_val **out)
{
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        kn_val *args[2] = {a, b};
        return kn_torch_op(r, opfn, 0, args, 2, NULL, out);
    }
    PyObject *x = kn_const_of(r, a), *y = x ? kn_const_of(r, b) : NULL;
    if (x && y) {
        PyObject *res = PyObject_CallFunctionObjArgs(opfn, x, y, NULL);
        Py_DECREF(x);
        Py_DECREF(y);
        if (res == NULL) {
            PyErr_Clear();
            return kn_brk(r, "a Python operator raises");
        }
        *out = kn_v_const_steal(r, res);
        return *out ? 0 : KN_FAIL;
    }
    Py_XDECREF(x);
    Py_XDECREF(y);
    int add = fn_named(opfn, "add"), iadd = fn_named(opfn, "iadd"), mul = fn_named(opfn, "mul");
    if ((add || iadd) && (a->kind == V_TUPLE || a->kind == V_LIST) &&
        (b->kind == V_TUPLE || b->kind == V_LIST || b->kind == V_CONST)) {
        kn_val *bi;
        CHECK(kn_iter_items(r, b, &bi));
        if (iadd && a->kind == V_LIST) {
            for (int i = 0; i < bi->n; i++)
                if (kn_v_add(r, a, bi->items[i]) < 0)
                    return KN_FAIL;
            a->mutated = 1;
            *out = a;
            return 0;
        }
        if (a->kind != b->kind && b->kind != V_CONST)
            return kn_brk(r, "concatenating a list and a tuple");
        kn_val *res = kn_v_new(r, a->kind);
        if (res == NULL)
            return KN_FAIL;
        for (int i = 0; i < a->n; i++)
            if (kn_v_add(r, res, a->items[i]) < 0)
                return KN_FAIL;
        for (int i = 0; i < bi->n; i++)
            if (kn_v_add(r, res, bi->items[i]) < 0)
                return KN_FAIL;
        *out = res;
        return 0;
    }
    if (add && a->kind == V_CONST && PyTuple_Check(a->obj) && b->kind == V_TUPLE) {
        kn_val *ai;
        CHECK(kn_iter_items(r, a, &ai));
        kn_val *res = kn_v_new(r, V_TUPLE);
        if (res == NULL)
            return KN_FAIL;
        for (int i = 0; i < ai->n; i++)
            if (kn_v_add(r, res, ai->items[i]) < 0)
                return KN_FAIL;
        for (int i = 0; i < b->n; i++)
            if (kn_v_add(r, res, b->items[i]) < 0)
                return KN_FAIL;
        *out = res;
        return 0;
    }
    if (mul && (a->kind == V_TUPLE || a->kind == V_LIST) && b->kind == V_CONST && PyLong_Check(b->obj)) {
        long k = PyLong_AsLong(b->obj);
        kn_val *res = kn_v_new(r, a->kind);
        if (res == NULL)
            return KN_FAIL;
        for (long j = 0; j < k; j++)
            for (int i = 0; i < a->n; i++)
                if (kn_v_add(r, res, a->items[i]) < 0)
                    return KN_FAIL;
        *out = res;
        return 0;
    }
    return kn_brk(r, "a Python operator on values kiln does not model");
}

/* ------------------------------------------------------------------ attributes */

/* A source for cls.name when cls is a user class (its attributes may be
 * rebound between calls); -1 for classes of torch and builtins. */
static int
class_attr_src(kn_rec *r, PyObject *cls, PyObject *name)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return -1;
    PyObject *mod = PyObject_GetAttrString(cls, "__module__");
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    int skip = m == NULL || strncmp(m, "torch", 5) == 0 || strncmp(m, "transformers", 12) == 0;
    Py_XDECREF(mod);
    PyErr_Clear();
    if (skip)
        return -1;
    int cs = kn_src_add(r, KN_SRC_CONST, -1, cls, 0);
    return cs >= 0 ? kn_src_add(r, KN_SRC_ATTR, cs, name, 0) : -1;
}

static int
obj_getattr(kn_rec *r, rframe *fr, kn_val *v, PyObject *name, kn_val **out)
{
    PyObject *o = v->obj;
    PyTypeObject *tp = Py_TYPE(o);
    for (kn_attr *at = v->attrs; at; at = at->next) {
        if (PyUnicode_Compare(at->name, name) == 0) {
            if (at->val == NULL)
                return kn_brk(r, "attribute deleted while recording");
            *out = at->val;
            return 0;
        }
    }
    PyObject *d = _PyType_Lookup(tp, name);   /* borrowed */
    if (d && Py_TYPE(d)->tp_descr_set) {
        if (PyObject_TypeCheck(d, &PyProperty_Type)) {
            PyObject *fget = PyObject_GetAttrString(d, "fget");
            if (fget == NULL)
                return KN_ERR;
            if (fget == Py_None) {
                Py_DECREF(fget);
                return kn_brk(r, "write-only property");
            }
            kn_val *fv = kn_v_const(r, fget);
            Py_DECREF(fget);
            if (fv == NULL)
                return KN_FAIL;
            return kn_call(r, fr, fv, &v, 1, NULL, out);
        }
        if (Py_TYPE(d) == &PyMemberDescr_Type || Py_TYPE(d) == &PyGetSetDescr_Type) {
            PyObject *val = PyObject_GetAttr(o, name);
            if (val == NULL) {
                PyErr_Clear();
                return kn_brk(r, "attribute raises");
            }
            int s = v->src >= 0 ? kn_src_add(r, KN_SRC_ATTR, v->src, name, 0) : -1;
            *out = kn_wrap(r, val, s);
            Py_DECREF(val);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, "data descriptor %s.%s", tp->tp_name, PyUnicode_AsUTF8(name));
    }
    /* the instance dict */
    if (tp->tp_dictoffset != 0 || (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
        PyObject *idict = PyObject_GenericGetDict(o, NULL);
        if (idict == NULL)
            PyErr_Clear();
        PyObject *val = idict ? PyDict_GetItemWithError(idict, name) : NULL;
        if (val) {
            Py_INCREF(val);
            int is = v->src >= 0 ? kn_src_add(r, KN_SRC_INSTDICT, v->src, NULL, 0) : -1;
            int s = is >= 0 ? kn_src_add(r, KN_SRC_DICT, is, name, 0) : -1;
            *out = kn_wrap(r, val, s);
            Py_DECREF(val);
            Py_DECREF(idict);
            if (*out && v->src < 0 && kn_rebuildable(v) && PyList_Append(r->pins, name) == 0)
                kn_set_rpath(*out, v, 1, name);
            return *out ? 0 : KN_FAIL;
        }
        Py_XDECREF(idict);
        PyErr_Clear();
    }
    if (d) {
        kn_val *m;
        if (PyFunction_Check(d)) {
            m = kn_v_new(r, V_METHOD);
            if (m == NULL || (m->fn = kn_v_const(r, d)) == NULL)
                return KN_FAIL;
            m->self = v;
            *out = m;
            return 0;
        }
        if (Py_IS_TYPE(d, &PyClassMethod_Type) || Py_IS_TYPE(d, &PyStaticMethod_Type)) {
            PyObject *f = PyObject_GetAttrString(d, "__func__");
            if (f == NULL)
                return KN_ERR;
            kn_val *fv = kn_v_const(r, f);
            Py_DECREF(f);
            if (fv == NULL)
                return KN_FAIL;
            if (Py_IS_TYPE(d, &PyStaticMethod_Type)) {
                *out = fv;
                return 0;
            }
            m = kn_v_new(r, V_METHOD);
            if (m == NULL || (m->self = kn_v_const(r, (PyObject *)tp)) == NULL)
                return KN_FAIL;
            m->fn = fv;
            *out = m;
            return 0;
        }
        if (Py_TYPE(d) == &PyMethodDescr_Type || Py_TYPE(d) == &PyWrapperDescr_Type) {
            /* a C method: bound to the value, not to the object seen while recording */
            m = kn_v_new(r, V_METHOD);
            if (m == NULL || (m->fn = kn_v_const(r, d)) == NULL)
                return KN_FAIL;
            m->self = v;
            *out = m;
            return 0;
        }
        if (Py_TYPE(d)->tp_descr_get)
            return kn_brk(r, "descriptor %s on %s", Py_TYPE(d)->tp_name, tp->tp_name);
        /* a plain class attribute */
        if (is_tensor_obj(d))
            return kn_brk(r, "tensor class attribute");
        *out = kn_wrap(r, d, class_attr_src(r, (PyObject *)tp, name));
        return *out ? 0 : KN_FAIL;
    }
    if (PyObject_IsInstance(o, kn_cenv.nn_module) == 1) {
        PyObject *which[3] = {kn_cenv.s_parameters, kn_cenv.s_buffers, kn_cenv.s_modules};
        for (int k = 0; k < 3; k++) {
            int ds;
            PyObject *dd = module_dict(r, v, which[k], &ds);
            if (dd == NULL)
                continue;
            PyObject *val = PyDict_GetItemWithError(dd, name);
            if (val) {
                Py_INCREF(val);
                int s = ds >= 0 ? kn_src_add(r, KN_SRC_DICT, ds, name, 0) : -1;
                *out = kn_wrap(r, val, s);
                Py_DECREF(val);
                Py_DECREF(dd);
                return *out ? 0 : KN_FAIL;
            }
            Py_DECREF(dd);
        }
    }
    return kn_brk(r, "%s has no attribute %s kiln can see", tp->tp_name, PyUnicode_AsUTF8(name));
}

static const char *const list_methods[] = {"append", "extend", "pop", "insert", "index", "count", "copy",
                                           "clear", "reverse", "remove", NULL};
static const char *const dict_methods[] = {"get", "keys", "values", "items", "update", "pop", "setdefault",
                                           "copy", "clear", NULL};

static int
in_list(const char *s, const char *const *l)
{
    for (int i = 0; l[i]; i++)
        if (strcmp(s, l[i]) == 0)
            return 1;
    return 0;
}

int
kn_getattr(kn_rec *r, rframe *fr, kn_val *v, PyObject *name, kn_val **out)
{
    const char *nm = PyUnicode_AsUTF8(name);
    if (nm == NULL)
        return KN_ERR;
    switch (v->kind) {
    case V_TENSOR: {
        if (!strcmp(nm, "grad") || !strcmp(nm, "data") || !strcmp(nm, "_version") || !strcmp(nm, "grad_fn") ||
            !strcmp(nm, "_base"))
            return kn_brk(r, "Tensor.%s", nm);
        PyObject *d = _PyType_Lookup((PyTypeObject *)kn_cenv.torch_tensor, name);
        if (d && (Py_TYPE(d) == &PyMethodDescr_Type || PyFunction_Check(d) || PyCFunction_Check(d) ||
                  Py_TYPE(d) == &PyWrapperDescr_Type)) {
            kn_val *m = kn_v_new(r, V_TMETHOD);
            if (m == NULL || (m->obj = name, PyList_Append(r->pins, name)) < 0)
                return KN_FAIL;
            m->self = v;
            *out = m;
            return 0;
        }
        PyObject *val = PyObject_GetAttr(v->obj, name);
        if (val == NULL) {
            PyErr_Clear();
            return kn_brk(r, "Tensor attribute %s raises on a fake tensor", nm);
        }
        if (is_tensor_obj(val)) {
            PyObject *ga = builtin("getattr");
            PyObject *args = Py_BuildValue("(OO)", v->node, name);
            PyObject *node = args ? PyObject_CallMethodObjArgs(r->graph, kn_cenv.s_call_function, ga, args, NULL)
                                  : NULL;
            Py_XDECREF(args);
            if (node == NULL) {
                Py_DECREF(val);
                return KN_ERR;
            }
            r->nops++;
            *out = wrap_result(r, node, val);
            Py_DECREF(node);
        } else {
            *out = kn_v_const(r, val);
        }
        Py_DECREF(val);
        return *out ? 0 : KN_FAIL;
    }
    case V_OBJ:
        return obj_getattr(r, fr, v, name, out);
    case V_CONST: {
        PyObject *o = v->obj;
        PyObject *val = PyObject_GetAttr(o, name);
        if (val == NULL) {
            PyErr_Clear();
            return kn_brk(r, "attribute %s raises", nm);
        }
        if (PyModule_Check(o)) {
            const char *mn = PyModule_GetName(o);
            if (mn == NULL)
                PyErr_Clear();
            int trusted = mn && (!strncmp(mn, "torch", 5) || !strcmp(mn, "math") || !strcmp(mn, "operator") ||
                                 !strcmp(mn, "functools") || !strcmp(mn, "builtins") || !strcmp(mn, "itertools") ||
                                 !strcmp(mn, "collections") || !strcmp(mn, "typing") || !strcmp(mn, "numbers"));
            if (!trusted || is_tensor_obj(val)) {
                int s = v->src >= 0 ? kn_src_add(r, KN_SRC_ATTR, v->src, name, 0) : -1;
                *out = kn_wrap(r, val, s);
                Py_DECREF(val);
                return *out ? 0 : KN_FAIL;
            }
        }
        if (PyType_Check(o) && !PyFunction_Check(val) && !PyType_Check(val)) {
            int s = class_attr_src(r, o, name);
            if (s >= 0) {
                *out = kn_wrap(r, val, s);
                Py_DECREF(val);
                return *out ? 0 : KN_FAIL;
            }
        }
        if (is_tensor_obj(val)) {
            Py_DECREF(val);
            return kn_brk(r, "tensor attribute of a constant");
        }
        *out = kn_v_const_steal(r, val);
        return *out ? 0 : KN_FAIL;
    }
    case V_SUPER: {
        kn_val *self = v->self;
        PyObject *obj = self->kind == V_OBJ || self->kind == V_CONST ? self->obj : NULL;
        if (obj == NULL)
            return kn_brk(r, "super() of a value kiln does not model");
        PyObject *tp = PyType_Check(obj) && self->kind == V_CONST ? obj : (PyObject *)Py_TYPE(obj);
        PyObject *mro = ((PyTypeObject *)tp)->tp_mro;
        Py_ssize_t i = 0, n = PyTuple_GET_SIZE(mro);
        while (i < n && PyTuple_GET_ITEM(mro, i) != v->obj)
            i++;
        for (i++; i < n; i++) {
            PyObject *cd = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_dict;
            PyObject *d = PyDict_GetItemWithError(cd, name);
            if (d == NULL)
                continue;
            if (PyFunction_Check(d)) {
                kn_val *m = kn_v_new(r, V_METHOD);
                if (m == NULL || (m->fn = kn_v_const(r, d)) == NULL)
                    return KN_FAIL;
                m->self = self;
                *out = m;
                return 0;
            }
            if (PyObject_TypeCheck(d, &PyProperty_Type)) {
                PyObject *fget = PyObject_GetAttrString(d, "fget");
                kn_val *fv = fget ? kn_v_const(r, fget) : NULL;
                Py_XDECREF(fget);
                if (fv == NULL)
                    return KN_FAIL;
                return kn_call(r, fr, fv, &self, 1, NULL, out);
            }
            if (Py_IS_TYPE(d, &PyStaticMethod_Type) || Py_IS_TYPE(d, &PyClassMethod_Type)) {
                PyObject *f = PyObject_GetAttrString(d, "__func__");
                kn_val *fv = f ? kn_v_const(r, f) : NULL;
                Py_XDECREF(f);
                if (fv == NULL)
                    return KN_FAIL;
                if (Py_IS_TYPE(d, &PyStaticMethod_Type)) {
                    *out = fv;
                    return 0;
                }
                kn_val *m = kn_v_new(r, V_METHOD);
                if (m == NULL || (m->self = kn_v_const(r, tp)) == NULL)
                    return KN_FAIL;
                m->fn = fv;
                *out = m;
                return 0;
            }
            if (Py_TYPE(d) == &PyMethodDescr_Type || Py_TYPE(d) == &PyWrapperDescr_Type) {
                /* object.__init__ and friends: bound for real */
                PyObject *sup = PyObject_CallFunctionObjArgs((PyObject *)&PySuper_Type, v->obj, obj, NULL);
                PyObject *b = sup ? PyObject_GetAttr(sup, name) : NULL;
                Py_XDECREF(sup);
                if (b == NULL) {
                    PyErr_Clear();
                    return kn_brk(r, "super attribute raises");
                }
                *out = kn_v_const_steal(r, b);
                return *out ? 0 : KN_FAIL;
            }
            *out = kn_v_const(r, d);
            return *out ? 0 : KN_FAIL;
        }
        if (PyErr_Occurred())
            return KN_ERR;
        return kn_brk(r, "super() has no attribute %s", nm);
    }
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        if (v->kind == V_TUPLE && v->ttype) {
            PyObject *fields = PyObject_GetAttrString(v->ttype, "__match_args__");
            if (fields && PyTuple_Check(fields)) {
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields) && i < v->n; i++) {
                    if (PyUnicode_Compare(PyTuple_GET_ITEM(fields, i), name) == 0) {
                        Py_DECREF(fields);
                        *out = v->items[i];
                        return 0;
                    }
                }
            }
            Py_XDECREF(fields);
            PyErr_Clear();
        }
        if ((v->kind == V_DICT && in_list(nm, dict_methods)) ||
            (v->kind == V_LIST && in_list(nm, list_methods)) ||
            (v->kind == V_TUPLE && (!strcmp(nm, "index") || !strcmp(nm, "count")))) {
            kn_val *m = kn_v_new(r, V_BMETHOD);
            if (m == NULL || PyList_Append(r->pins, name) < 0)
                return KN_FAIL;
            m->obj = name;
            m->self = v;
            *out = m;
            return 0;
        }
        return kn_brk(r, "method %s of a container", nm);
    case V_FUNC:
        if (!strcmp(nm, "__name__") || !strcmp(nm, "__qualname__")) {
            *out = kn_v_const(r, ((PyCodeObject *)v->obj)->co_name);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, "attribute of a nested function");
    default:
        return kn_brk(r, "attribute %s of a value kiln does not model", nm);
    }
}

/* ------------------------------------------------------------------ inlining */

static int
depth_of(rframe *fr)
{
    int d = 0;
    while (fr && fr->parent) {
        d++;
        fr = fr->parent;
    }
    return d;
}

static void
note_inline_break(kn_rec *r, rframe *fr)
{
    PyObject *res = PyObject_CallFunction(kn_cenv.note_break, "sOi", r->reason, fr->code->co_filename,
                                          PyCode_Addr2Line(fr->code, fr->lastpc * 2));
    Py_XDECREF(res);
    PyErr_Clear();
}

int
kn_inline(kn_rec *r, rframe *caller, PyObject *func, kn_val *funcv, kn_val **args, int nargs, PyObject *kwnames,
          kn_val **out)
{
    PyCodeObject *co = (PyCodeObject *)(func ? PyFunction_GET_CODE(func) : funcv->obj);
    if (caller && kn_rec_noinline(r, caller))
        return kn_brk(r, "a call kiln leaves to run for real (it breaks inside)");
    if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE))
        return kn_brk(r, "coroutine");
    if (depth_of(caller) > 40)
        return kn_brk(r, "call depth");
    int argc = co->co_argcount, kwonly = co->co_kwonlyargcount, posonly = co->co_posonlyargcount;
    int hasva = (co->co_flags & CO_VARARGS) != 0, haskw = (co->co_flags & CO_VARKEYWORDS) != 0;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int nlp = co->co_nlocalsplus;
    rframe F = {0}, *fr = &F;
    fr->code = co;
    PyObject *bytes = PyCode_GetCode(co);
    if (bytes == NULL || PyList_Append(r->pins, bytes) < 0) {
        Py_XDECREF(bytes);
        return KN_ERR;
    }
    Py_DECREF(bytes);
    fr->ins = (const uint8_t *)PyBytes_AS_STRING(bytes);
    fr->nins = (int)(PyBytes_GET_SIZE(bytes) / 2);
    fr->globals = func ? PyFunction_GET_GLOBALS(func) : funcv->globals;
    fr->builtins = func ? ((PyFunctionObject *)func)->func_builtins : (caller ? caller->builtins : NULL);
    fr->nlocals = nlp;
    fr->locals = kn_alloc(&r->arena, sizeof(kn_val *) * (nlp + 1));
    fr->initial = kn_alloc(&r->arena, sizeof(kn_val *) * (nlp + 1));
    fr->stackcap = co->co_stacksize + 8;
    fr->stack = kn_alloc(&r->arena, sizeof(kn_val *) * fr->stackcap);
    fr->parent = caller;
    fr->call_off = caller ? (caller->parent ? caller->call_off : caller->lastpc) : -1;
    fr->funcv = funcv;
    if (!fr->locals || !fr->initial || !fr->stack)
        return KN_FAIL;
    PyObject *varnames = PyObject_GetAttrString((PyObject *)co, "co_varnames");
    if (varnames == NULL)
        return KN_ERR;
    int rc = 0;
    /* positional */
    if (npos > argc && !hasva) {
        rc = kn_brk(r, "too many positional arguments");
        goto done;
    }
    for (int i = 0; i < npos && i < argc; i++)
        fr->locals[i] = args[i];
    if (hasva) {
        kn_val *t = kn_v_new(r, V_TUPLE);
        if (t == NULL) {
            rc = KN_FAIL;
            goto done;
        }
        for (int i = argc; i < npos; i++)
            if (kn_v_add(r, t, args[i]) < 0) {
                rc = KN_FAIL;
                goto done;
            }
        fr->locals[argc + kwonly] = t;
    }
    kn_val *kwd = NULL;
    if (haskw) {
        kwd = kn_v_new(r, V_DICT);
        if (kwd == NULL) {
            rc = KN_FAIL;
            goto done;
        }
        fr->locals[argc + kwonly + hasva] = kwd;
    }
    for (int k = 0; k < nkw; k++) {
        PyObject *kn = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = posonly; i < argc + kwonly; i++) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(varnames, i), kn) == 0) {
                found = i;
                break;
            }
        }
        if (found >= 0) {
            if (fr->locals[found]) {
                rc = kn_brk(r, "argument given twice");
                goto done;
            }
            fr->locals[found] = args[npos + k];
        } else if (kwd) {
            if (kn_v_add(r, kwd, args[npos + k]) < 0) {
                rc = KN_FAIL;
                goto done;
            }
            kwd->keys[kwd->n - 1] = kn;
        } else {
            rc = kn_brk(r, "unexpected keyword argument %s", PyUnicode_AsUTF8(kn));
            goto done;
        }
    }
    /* defaults */
    {
        kn_val *defs = NULL;
        if (func && PyFunction_GET_DEFAULTS(func)) {
            defs = kn_v_const(r, PyFunction_GET_DEFAULTS(func));
        } else if (funcv && funcv->fn) {
            defs = funcv->fn;
        }
        kn_val *di = NULL;
        if (defs && (rc = kn_iter_items(r, defs, &di)) != 0)
            goto done;
        int nd = di ? di->n : 0;
        for (int i = 0; i < argc; i++) {
            if (fr->locals[i])
                continue;
            int j = i - (argc - nd);
            if (j >= 0 && j < nd)
                fr->locals[i] = di->items[j];
        }
        PyObject *kwdefs = func ? PyFunction_GET_KW_DEFAULTS(func) : NULL;
        for (int i = argc; i < argc + kwonly; i++) {
            if (fr->locals[i])
                continue;
            PyObject *nmo = PyTuple_GET_ITEM(varnames, i);
            if (kwdefs && PyDict_GetItem(kwdefs, nmo)) {
                fr->locals[i] = kn_v_const(r, PyDict_GetItem(kwdefs, nmo));
            } else if (funcv && funcv->self && funcv->self->kind == V_DICT) {
                for (int k = 0; k < funcv->self->n; k++)
                    if (PyUnicode_Compare(funcv->self->keys[k], nmo) == 0)
                        fr->locals[i] = funcv->self->items[k];
            }
        }
        for (int i = 0; i < argc + kwonly; i++) {
            if (fr->locals[i] == NULL) {
                rc = kn_brk(r, "missing argument %s", PyUnicode_AsUTF8(PyTuple_GET_ITEM(varnames, i)));
                goto done;
            }
        }
    }
    /* cells and free variables */
    {
        const unsigned char *kinds = (const unsigned char *)PyBytes_AS_STRING(co->co_localspluskinds);
        int nfree = co->co_nfreevars;
        for (int i = 0; i < nlp; i++) {
            if (kinds[i] & 0x80) {   /* free */
                int j = i - (nlp - nfree);
                if (func) {
                    PyObject *cl = PyFunction_GET_CLOSURE(func);
                    if (cl == NULL || j >= PyTuple_GET_SIZE(cl)) {
                        rc = kn_brk(r, "closure mismatch");
                        goto done;
                    }
                    kn_val *c = kn_v_new(r, V_CELL);
                    if (c == NULL || PyList_Append(r->pins, PyTuple_GET_ITEM(cl, j)) < 0) {
                        rc = KN_FAIL;
                        goto done;
                    }
                    c->obj = PyTuple_GET_ITEM(cl, j);
                    c->content = LAZY;
                    /* reach the cell through the function, when the function has a source */
                    kn_val *fsrc = funcv;
                    if (fsrc && fsrc->src >= 0)
                        c->src = kn_src_add(r, KN_SRC_CLOSURE, fsrc->src, NULL, j);
                    fr->locals[i] = c;
                } else {
                    if (j >= funcv->n) {
                        rc = kn_brk(r, "closure mismatch");
                        goto done;
                    }
                    fr->locals[i] = funcv->items[j];
                }
            } else if (kinds[i] & 0x40) {   /* cell */
                kn_val *c = kn_v_new(r, V_CELL);
                if (c == NULL) {
                    rc = KN_FAIL;
                    goto done;
                }
                c->content = fr->locals[i];   /* an argument captured by a closure, or NULL */
                fr->locals[i] = c;
            }
        }
        for (int i = 0; i < nlp; i++)
            if (fr->locals[i] == NULL && (fr->locals[i] = kn_v_new(r, V_NULL)) == NULL) {
                rc = KN_FAIL;
                goto done;
            }
    }
    if (co->co_flags & CO_GENERATOR) {
        fr->yields = kn_v_new(r, V_LIST);
        if (fr->yields == NULL) {
            rc = KN_FAIL;
            goto done;
        }
    }
    fr->pc = co->_co_firsttraceable;
    rc = kn_run_frame(r, fr);
    if (rc == KN_BREAK) {
        if (r->break_code == NULL) {
            note_inline_break(r, fr);
            r->break_code = r->root->code;
            r->break_pc = fr->call_off;
        }
        goto done;
    }
    if (rc)
        goto done;
    if (fr->yields) {
        kn_val *it;
        rc = kn_iter_items(r, fr->yields, &it);
        if (rc == 0)
            *out = it;
    } else {
        *out = fr->ret;
    }
done:
    Py_DECREF(varnames);
    return rc;
}

/* ------------------------------------------------------------------ calls */

static int
const_items(kn_rec *r, kn_val **args, int n)
{
    (void)r;
    for (int i = 0; i < n; i++)
        if (!kn_v_is_const(args[i]))
            return 0;
    return 1;
}

static int
call_real(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    PyObject *small[16] = {0};
    if (nargs > 16)
        return kn_brk(r, "call with too many arguments");
    for (int i = 0; i < nargs; i++) {
        small[i] = kn_const_of(r, args[i]);
        if (small[i] == NULL) {
            for (int j = 0; j < i; j++)
                Py_DECREF(small[j]);
            return kn_brk(r, "non-constant argument");
        }
    }
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *res = PyObject_Vectorcall(f, small, nargs - nkw, kwnames);
    for (int i = 0; i < nargs; i++)
        Py_DECREF(small[i]);
    if (res == NULL) {
        PyErr_Clear();
        return kn_brk(r, "a Python call raises");
    }
    if (PyDictKeys_Check(res) || PyDictValues_Check(res) || PyDictItems_Check(res) ||
        Py_TYPE(res)->tp_name[0] == 'o') {   /* dict views (and OrderedDict's) -> a list */
        if (PyDictKeys_Check(res) || PyDictValues_Check(res) || PyDictItems_Check(res) ||
            strncmp(Py_TYPE(res)->tp_name, "odict_", 6) == 0) {
            PyObject *l = PySequence_List(res);
            Py_DECREF(res);
            if (l == NULL)
                return KN_ERR;
            res = l;
        }
    }
    *out = kn_wrap(r, res, -1);
    Py_DECREF(res);
    return *out ? 0 : KN_FAIL;
}

static PyObject *real_of(kn_rec *r, kn_val *v);

/* An instance of a plain Python class, built at record time over fake
 * tensors; the replay builds it again over the real ones. */
static int
construct(kn_rec *r, kn_val *cls, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *fa = PyTuple_New(npos), *fk = PyDict_New(), *obj = NULL;
    if (fa == NULL || fk == NULL)
        goto fail;
    for (int i = 0; i < npos; i++) {
        PyObject *x = args[i]->kind == V_OBJ ? real_of(r, args[i]) : kn_to_py(r, args[i], 1);
        if (x == NULL)
            goto fail;
        PyTuple_SET_ITEM(fa, i, x);
    }
    for (int i = 0; i < nkw; i++) {
        PyObject *x = args[npos + i]->kind == V_OBJ ? real_of(r, args[npos + i]) : kn_to_py(r, args[npos + i], 1);
        if (x == NULL || PyDict_SetItem(fk, PyTuple_GET_ITEM(kwnames, i), x) < 0) {
            Py_XDECREF(x);
            goto fail;
        }
        Py_DECREF(x);
    }
    obj = PyObject_Call(cls->obj, fa, fk);
    Py_CLEAR(fa);
    Py_CLEAR(fk);
    if (obj == NULL) {
        PyErr_Clear();
        return kn_brk(r, "constructing a %s raises at record time", ((PyTypeObject *)cls->obj)->tp_name);
    }
    kn_val *v = kn_v_new(r, V_OBJ), *ct = kn_v_new(r, V_TUPLE);
    if (v == NULL || ct == NULL || PyList_Append(r->pins, obj) < 0 || kn_v_add(r, ct, cls) < 0) {
        Py_DECREF(obj);
        return KN_FAIL;
    }
    for (int i = 0; i < nargs; i++)
        if (kn_v_add(r, ct, args[i]) < 0) {
            Py_DECREF(obj);
            return KN_FAIL;
        }
    v->obj = obj;
    v->ctor = ct;
    v->ctor_kw = kwnames;
    if (kwnames && PyList_Append(r->pins, kwnames) < 0) {
        Py_DECREF(obj);
        return KN_FAIL;
    }
    Py_DECREF(obj);
    if (kn_memo_obj(r, obj, v) < 0)
        return KN_FAIL;
    *out = v;
    return 0;
fail:
    Py_XDECREF(fa);
    Py_XDECREF(fk);
    return KN_FAIL;
}

/* The real object behind a value that has one (no tensors), new ref or NULL. */
static PyObject *
real_of(kn_rec *r, kn_val *v)
{
    switch (v->kind) {
    case V_CONST:
    case V_OBJ:
        if (v->attrs)
            return NULL;
        return Py_NewRef(v->obj);
    case V_METHOD: {
        PyObject *f = real_of(r, v->fn), *s = f ? real_of(r, v->self) : NULL;
        PyObject *m = s ? PyMethod_New(f, s) : NULL;
        Py_XDECREF(f);
        Py_XDECREF(s);
        return m;
    }
    case V_TUPLE: {
        PyObject *t = PyTuple_New(v->n);
        for (int i = 0; t && i < v->n; i++) {
            PyObject *x = real_of(r, v->items[i]);
            if (x == NULL) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, i, x);
        }
        return t;
    }
    default:
        return NULL;
    }
}

/* Call f for real when every argument is a real object; 1 done, 0 not possible. */
static int
call_on_real(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out, int *rc)
{
    PyObject *a[16];
    if (nargs > 16)
        return 0;
    for (int i = 0; i < nargs; i++) {
        a[i] = real_of(r, args[i]);
        if (a[i] == NULL || has_tensor(a[i])) {
            Py_XDECREF(a[i]);
            for (int j = 0; j < i; j++)
                Py_DECREF(a[j]);
            PyErr_Clear();
            return 0;
        }
    }
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *res = PyObject_Vectorcall(f, a, nargs - nkw, kwnames);
    for (int i = 0; i < nargs; i++)
        Py_DECREF(a[i]);
    if (res == NULL) {
        PyErr_Clear();
        *rc = kn_brk(r, "a standard-library call raises");
        return 1;
    }
    *out = kn_wrap(r, res, -1);
    Py_DECREF(res);
    *rc = *out ? 0 : KN_FAIL;
    return 1;
}

static int
make_ctx(kn_rec *r, int mode, int immediate, kn_val **out)
{
    kn_val *c = kn_v_new(r, V_CTX);
    if (c == NULL)
        return KN_FAIL;
    c->mode = mode;
    if (immediate) {   /* torch.set_grad_enabled(x) as a call changes the mode now */
        c->prev = r->grad_cur;
        c->entered = 1;
        c->mode = -1;
        if (kn_set_grad(r, mode) < 0)
            return KN_ERR;
    }
    *out = c;
    return 0;
}

static int
tensor_type_of(kn_rec *r, kn_val *v, PyObject **tp)
{
    (void)r;
    *tp = kn_cenv.torch_tensor;
    if (v->src >= 0) {
        for (int i = 0; i < r->nguard; i++)
            if (r->guards[i].kind == KN_G_TENSOR && r->guards[i].src == v->src)
                *tp = r->guards[i].obj;
    }
    return 0;
}

static int
value_type(kn_rec *r, kn_val *v, PyObject **tp)
{
    switch (v->kind) {
    case V_CONST: *tp = (PyObject *)Py_TYPE(v->obj); return 0;
    case V_OBJ: *tp = (PyObject *)Py_TYPE(v->obj); return 0;
    case V_TENSOR: return tensor_type_of(r, v, tp);
    case V_TUPLE: *tp = (PyObject *)&PyTuple_Type; return 0;
    case V_LIST: *tp = (PyObject *)&PyList_Type; return 0;
    case V_DICT: *tp = (PyObject *)&PyDict_Type; return 0;
    case V_FUNC: *tp = (PyObject *)&PyFunction_Type; return 0;
    case V_METHOD: *tp = (PyObject *)&PyMethod_Type; return 0;
    default: return kn_brk(r, "type of a value kiln does not model");
    }
}

static int
builtin_call(kn_rec *r, rframe *fr, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out,
             int *handled)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    *handled = 1;
    if (f == builtin("len") && npos == 1) {
        kn_val *a = args[0], *it;
        if (a->kind == V_TENSOR) {
            PyObject *n = PyObject_CallMethod(a->obj, "__len__", NULL);
            if (n == NULL) {
                PyErr_Clear();
                return kn_brk(r, "len() of a 0-d tensor");
            }
            *out = kn_v_const_steal(r, n);
            return *out ? 0 : KN_FAIL;
        }
        if (a->kind == V_CONST)
            return call_real(r, f, args, nargs, kwnames, out);
        CHECK(kn_iter_items(r, a, &it));
        *out = kn_v_const_steal(r, PyLong_FromLong(it->n - it->pos));
        return *out ? 0 : KN_FAIL;
    }
    if ((f == builtin("isinstance") || f == builtin("issubclass")) && npos == 2 && kn_v_is_const(args[1])) {
        if (f == builtin("issubclass"))
            return call_real(r, f, args, nargs, kwnames, out);
        PyObject *tp, *cls = kn_const_of(r, args[1]);
        if (cls == NULL)
            return KN_ERR;
        int rc0 = value_type(r, args[0], &tp);
        if (rc0) {
            Py_DECREF(cls);
            return rc0;
        }
        int res = PyObject_IsSubclass(tp, cls);
        Py_DECREF(cls);
        if (res < 0) {
            PyErr_Clear();
            return kn_brk(r, "isinstance raises");
        }
        *out = kn_v_const(r, res ? Py_True : Py_False);
        return *out ? 0 : KN_FAIL;
    }
    if (f == builtin("getattr") && (npos == 2 || npos == 3) && args[1]->kind == V_CONST &&
        PyUnicode_Check(args[1]->obj)) {
        int rc = kn_getattr(r, fr, args[0], args[1]->obj, out);
        if (rc == KN_BREAK && npos == 3 && (args[0]->kind == V_OBJ || args[0]->kind == V_CONST) &&
            !PyObject_HasAttr(args[0]->obj, args[1]->obj)) {
            *out = args[2];
            return 0;
        }
        return rc;
    }
    if (f == builtin("hasattr") && npos == 2 && args[1]->kind == V_CONST && PyUnicode_Check(args[1]->obj)) {
        kn_val *a = args[0];
        PyObject *o = a->kind == V_TENSOR || a->kind == V_CONST || a->kind == V_OBJ ? a->obj : NULL;
        if (o == NULL)
            return kn_brk(r, "hasattr on a value kiln does not model");
        int h = PyObject_HasAttr(o, args[1]->obj);
        if (h && a->kind == V_OBJ) {   /* guard it through a load */
            kn_val *tmp;
            int rc = kn_getattr(r, fr, a, args[1]->obj, &tmp);
            if (rc == KN_ERR)
                return rc;
            if (rc == KN_BREAK)
                r->reason[0] = 0;
        }
        *out = kn_v_const(r, h ? Py_True : Py_False);
        return *out ? 0 : KN_FAIL;
    }
    if (f == builtin("setattr") && npos == 3 && args[1]->kind == V_CONST) {
        kn_val *o = args[0];
        if (o->kind != V_OBJ || o->src < 0)
            return kn_brk(r, "setattr on a value kiln does not track");
        kn_attr *at = kn_alloc(&r->arena, sizeof *at);
        if (at == NULL)
            return KN_FAIL;
        at->name = args[1]->obj;
        at->val = args[2];
        at->next = o->attrs;
        o->attrs = at;
        if (kn_effect_add(r, E_SETATTR, o, args[2], args[1]->obj) < 0)
            return KN_FAIL;
        *out = kn_v_const(r, Py_None);
        return *out ? 0 : KN_FAIL;
    }
    if (f == (PyObject *)&PyRange_Type || f == builtin("abs") || f == builtin("round") || f == builtin("divmod") ||
        f == builtin("pow") || f == builtin("chr") || f == builtin("ord") || f == builtin("repr") ||
        f == builtin("format") || f == builtin("hash") || f == builtin("sorted") || f == builtin("callable")) {
        if (f == builtin("abs") && npos == 1 && args[0]->kind == V_TENSOR) {
            PyObject *opm = PyImport_ImportModule("operator");
            PyObject *absf = opm ? PyObject_GetAttrString(opm, "abs") : NULL;
            Py_XDECREF(opm);
            int rc = absf ? kn_torch_op(r, absf, 0, args, 1, NULL, out) : KN_ERR;
            Py_XDECREF(absf);
            return rc;
        }
        if (f == builtin("callable") && npos == 1 && !kn_v_is_const(args[0])) {
            int c = args[0]->kind == V_FUNC || args[0]->kind == V_METHOD ||
                    (args[0]->kind == V_OBJ && PyCallable_Check(args[0]->obj));
            *out = kn_v_const(r, c ? Py_True : Py_False);
            return *out ? 0 : KN_FAIL;
        }
        if (f == builtin("sorted") && npos == 1 && nkw == 0 && !kn_v_is_const(args[0])) {
            kn_val *it;
            CHECK(kn_iter_items(r, args[0], &it));
            kn_val *t = kn_v_new(r, V_TUPLE);
            if (t == NULL)
                return KN_FAIL;
            for (int i = it->pos; i < it->n; i++)
                if (kn_v_add(r, t, it->items[i]) < 0)
                    return KN_FAIL;
            kn_val *tv[1] = {t};
            return call_real(r, f, tv, 1, NULL, out);
        }
        return call_real(r, f, args, nargs, kwnames, out);
    }
    if ((f == builtin("min") || f == builtin("max") || f == builtin("all") || f == builtin("any") ||
         f == builtin("sum")) &&
        nkw == 0) {
        kn_val *items;
        if (npos == 1) {
            CHECK(kn_iter_items(r, args[0], &items));
        } else {
            items = kn_v_new(r, V_ITER);
            if (items == NULL)
                return KN_FAIL;
            for (int i = 0; i < npos; i++)
                if (kn_v_add(r, items, args[i]) < 0)
                    return KN_FAIL;
        }
        if (f == builtin("sum")) {
            kn_val *acc = npos == 2 ? args[1] : kn_v_const_steal(r, PyLong_FromLong(0));
            if (acc == NULL)
                return KN_FAIL;
            if (npos == 2) {
                CHECK(kn_iter_items(r, args[0], &items));
            }
            PyObject *add = PyObject_GetAttrString(PyImport_AddModule("operator"), "add");
            if (add == NULL)
                return KN_ERR;
            for (int i = items->pos; i < items->n; i++) {
                int rc = kn_binop(r, add, acc, items->items[i], &acc);
                if (rc) {
                    Py_DECREF(add);
                    return rc;
                }
            }
            Py_DECREF(add);
            *out = acc;
            return 0;
        }
        kn_val *t = kn_v_new(r, V_TUPLE);
        if (t == NULL)
            return KN_FAIL;
        for (int i = items->pos; i < items->n; i++) {
            if (!kn_v_is_const(items->items[i])) {
                if (f == builtin("all") || f == builtin("any")) {
                    int tv;
                    CHECK(kn_truth(r, items->items[i], &tv));
                    items->items[i] = kn_v_const(r, tv ? Py_True : Py_False);
                } else {
                    return kn_brk(r, "min/max over non-constant values");
                }
            }
            if (kn_v_add(r, t, items->items[i]) < 0)
                return KN_FAIL;
        }
        kn_val *tv[1] = {t};
        return call_real(r, f, tv, 1, NULL, out);
    }
    if (f == (PyObject *)&PyEnum_Type || f == (PyObject *)&PyZip_Type || f == (PyObject *)&PyReversed_Type) {
        if (nkw && f != (PyObject *)&PyEnum_Type)
            return kn_brk(r, "keyword arguments to zip/reversed");
        kn_val *res = kn_v_new(r, V_ITER);
        if (res == NULL)
            return KN_FAIL;
        if (f == (PyObject *)&PyEnum_Type) {
            kn_val *it;
            long start = 0;
            if (nargs == 2 && args[1]->kind == V_CONST)
                start = PyLong_AsLong(args[1]->obj);
            CHECK(kn_iter_items(r, args[0], &it));
            for (int i = it->pos; i < it->n; i++) {
                kn_val *t = kn_v_new(r, V_TUPLE), *idx = kn_v_const_steal(r, PyLong_FromLong(start + i - it->pos));
                if (t == NULL || idx == NULL || kn_v_add(r, t, idx) < 0 || kn_v_add(r, t, it->items[i]) < 0 ||
                    kn_v_add(r, res, t) < 0)
                    return KN_FAIL;
            }
        } else if (f == (PyObject *)&PyZip_Type) {
            kn_val *its[16];
            if (npos > 16)
                return kn_brk(r, "zip of many iterables");
            int n = INT32_MAX;
            for (int k = 0; k < npos; k++) {
                CHECK(kn_iter_items(r, args[k], &its[k]));
                if (its[k]->n - its[k]->pos < n)
                    n = its[k]->n - its[k]->pos;
            }
            if (npos == 0)
                n = 0;
            for (int i = 0; i < n; i++) {
                kn_val *t = kn_v_new(r, V_TUPLE);
                if (t == NULL)
                    return KN_FAIL;
                for (int k = 0; k < npos; k++)
                    if (kn_v_add(r, t, its[k]->items[its[k]->pos + i]) < 0)
                        return KN_FAIL;
                if (kn_v_add(r, res, t) < 0)
                    return KN_FAIL;
            }
        } else {
            kn_val *it;
            CHECK(kn_iter_items(r, args[0], &it));
            for (int i = it->n - 1; i >= it->pos; i--)
                if (kn_v_add(r, res, it->items[i]) < 0)
                    return KN_FAIL;
        }
        *out = res;
        return 0;
    }
    if (f == (PyObject *)&PyList_Type || f == (PyObject *)&PyTuple_Type) {
        kn_val *res = kn_v_new(r, f == (PyObject *)&PyList_Type ? V_LIST : V_TUPLE);
        if (res == NULL)
            return KN_FAIL;
        if (npos == 1) {
            kn_val *it;
            CHECK(kn_iter_items(r, args[0], &it));
            for (int i = it->pos; i < it->n; i++)
                if (kn_v_add(r, res, it->items[i]) < 0)
                    return KN_FAIL;
            if (it == args[0])
                it->pos = it->n;   /* consumed */
        }
        *out = res;
        return 0;
    }
    if (f == (PyObject *)&PyDict_Type) {
        kn_val *res = kn_v_new(r, V_DICT);
        if (res == NULL)
            return KN_FAIL;
        if (npos == 1) {
            kn_val *src = args[0];
            if (src->kind != V_DICT)
                return kn_brk(r, "dict() of a non-dict");
            for (int i = 0; i < src->n; i++) {
                if (kn_v_add(r, res, src->items[i]) < 0)
                    return KN_FAIL;
                res->keys[res->n - 1] = src->keys[i];
            }
        }
        for (int k = 0; k < nkw; k++) {
            if (kn_v_add(r, res, args[npos + k]) < 0)
                return KN_FAIL;
            res->keys[res->n - 1] = PyTuple_GET_ITEM(kwnames, k);
        }
        *out = res;
        return 0;
    }
    if (f == builtin("iter") && npos == 1) {
        kn_val *it;
        CHECK(kn_iter_items(r, args[0], &it));
        *out = it;
        return 0;
    }
    if (f == builtin("next") && (npos == 1 || npos == 2) && args[0]->kind == V_ITER) {
        kn_val *it = args[0];
        if (it->pos < it->n) {
            *out = it->items[it->pos++];
            return 0;
        }
        if (npos == 2) {
            *out = args[1];
            return 0;
        }
        return kn_brk(r, "StopIteration");
    }
    if (f == (PyObject *)&PyType_Type && npos == 1) {
        PyObject *tp;
        CHECK(value_type(r, args[0], &tp));
        *out = kn_v_const(r, tp);
        return *out ? 0 : KN_FAIL;
    }
    if (f == (PyObject *)&PySuper_Type) {
        kn_val *s = kn_v_new(r, V_SUPER);
        if (s == NULL)
            return KN_FAIL;
        if (npos == 2 && args[0]->kind == V_CONST) {
            s->obj = args[0]->obj;
            s->self = args[1];
        } else if (npos == 0 && fr) {
            /* zero-argument super(): __class__ cell and the first argument */
            PyCodeObject *co = fr->code;
            PyObject *fv = PyObject_GetAttrString((PyObject *)co, "co_freevars");
            Py_ssize_t j = -1;
            for (Py_ssize_t i = 0; fv && i < PyTuple_GET_SIZE(fv); i++)
                if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(fv, i), "__class__") == 0)
                    j = i;
            Py_XDECREF(fv);
            if (j < 0 || co->co_argcount < 1)
                return kn_brk(r, "super() outside a method");
            kn_val *cell = fr->locals[co->co_nlocalsplus - co->co_nfreevars + j], *cls;
            if (cell == LAZY)
                return kn_brk(r, "super() in the compiled function itself");
            if (cell->kind != V_CELL)
                return kn_brk(r, "super() without a __class__ cell");
            if (cell->content == LAZY) {
                PyObject *c = PyCell_GET(cell->obj);
                if (c == NULL)
                    return kn_brk(r, "empty __class__ cell");
                cell->content = kn_v_const(r, c);
            }
            cls = cell->content;
            kn_val *self = fr->locals[0];
            if (self == LAZY)
                return kn_brk(r, "super() in the compiled function itself");
            if (self->kind == V_CELL)
                self = self->content;
            if (cls == NULL || cls->kind != V_CONST || self == NULL)
                return kn_brk(r, "super() arguments");
            s->obj = cls->obj;
            s->self = self;
        } else {
            return kn_brk(r, "super() form");
        }
        *out = s;
        return 0;
    }
    if ((f == (PyObject *)&PyLong_Type || f == (PyObject *)&PyFloat_Type || f == (PyObject *)&PyBool_Type ||
         f == (PyObject *)&PyUnicode_Type) &&
        npos <= 1) {
        if (npos == 1 && args[0]->kind == V_TENSOR)
            return kn_brk(r, "%s() of a tensor depends on tensor data", ((PyTypeObject *)f)->tp_name);
        if (npos == 1 && f == (PyObject *)&PyBool_Type) {
            int t;
            CHECK(kn_truth(r, args[0], &t));
            *out = kn_v_const(r, t ? Py_True : Py_False);
            return *out ? 0 : KN_FAIL;
        }
        return call_real(r, f, args, nargs, kwnames, out);
    }
    if (f == builtin("print"))
        return kn_brk(r, "print()");
    *handled = 0;
    return 0;
}

static int
bmethod_call(kn_rec *r, kn_val *m, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    kn_val *c = m->self;
    const char *nm = PyUnicode_AsUTF8(m->obj);
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw)
        return kn_brk(r, "keyword arguments to %s", nm);
    kn_val *none = kn_v_const(r, Py_None);
    if (none == NULL)
        return KN_FAIL;
    if (c->kind == V_LIST || c->kind == V_TUPLE) {
        if (!strcmp(nm, "append") && nargs == 1) {
            if (kn_v_add(r, c, args[0]) < 0)
                return KN_FAIL;
            c->mutated = 1;
            *out = none;
            return 0;
        }
        if (!strcmp(nm, "extend") && nargs == 1) {
            kn_val *it;
            CHECK(kn_iter_items(r, args[0], &it));
            for (int i = it->pos; i < it->n; i++)
                if (kn_v_add(r, c, it->items[i]) < 0)
                    return KN_FAIL;
            c->mutated = 1;
            *out = none;
            return 0;
        }
        if (!strcmp(nm, "pop") && nargs <= 1) {
            long i = c->n - 1;
            if (nargs == 1) {
                if (args[0]->kind != V_CONST)
                    return kn_brk(r, "pop with a non-constant index");
                i = PyLong_AsLong(args[0]->obj);
                if (i < 0)
                    i += c->n;
            }
            if (i < 0 || i >= c->n)
                return kn_brk(r, "pop from an empty list");
            *out = c->items[i];
            memmove(c->items + i, c->items + i + 1, sizeof(kn_val *) * (c->n - i - 1));
            c->n--;
            c->mutated = 1;
            return 0;
        }
        if (!strcmp(nm, "insert") && nargs == 2 && args[0]->kind == V_CONST) {
            long i = PyLong_AsLong(args[0]->obj);
            if (i < 0)
                i += c->n;
            if (i < 0)
                i = 0;
            if (i > c->n)
                i = c->n;
            if (kn_v_add(r, c, args[1]) < 0)
                return KN_FAIL;
            memmove(c->items + i + 1, c->items + i, sizeof(kn_val *) * (c->n - 1 - i));
            c->items[i] = args[1];
            c->mutated = 1;
            *out = none;
            return 0;
        }
        if (!strcmp(nm, "copy") && nargs == 0) {
            kn_val *res = kn_v_new(r, V_LIST);
            if (res == NULL)
                return KN_FAIL;
            for (int i = 0; i < c->n; i++)
                if (kn_v_add(r, res, c->items[i]) < 0)
                    return KN_FAIL;
            *out = res;
            return 0;
        }
        if (!strcmp(nm, "clear") && nargs == 0) {
            c->n = 0;
            c->mutated = 1;
            *out = none;
            return 0;
        }
        if (!strcmp(nm, "reverse") && nargs == 0) {
            for (int i = 0; i < c->n / 2; i++) {
                kn_val *t = c->items[i];
                c->items[i] = c->items[c->n - 1 - i];
                c->items[c->n - 1 - i] = t;
            }
            c->mutated = 1;
            *out = none;
            return 0;
        }
        int allc = 1;
        for (int i = 0; i < c->n; i++)
            allc &= kn_v_is_const(c->items[i]);
        if ((!strcmp(nm, "index") || !strcmp(nm, "count")) && allc) {
            PyObject *co = PyTuple_New(c->n);
            for (int i = 0; co && i < c->n; i++)
                PyTuple_SET_ITEM(co, i, kn_const_of(r, c->items[i]));
            PyObject *meth = co ? PyObject_GetAttr(co, m->obj) : NULL;
            Py_XDECREF(co);
            if (meth == NULL)
                return KN_ERR;
            int rc = call_real(r, meth, args, nargs, NULL, out);
            Py_DECREF(meth);
            return rc;
        }
        return kn_brk(r, "list.%s", nm);
    }
    if (c->kind == V_DICT) {
        if ((!strcmp(nm, "keys") || !strcmp(nm, "values") || !strcmp(nm, "items")) && nargs == 0) {
            kn_val *res = kn_v_new(r, V_LIST);
            if (res == NULL)
                return KN_FAIL;
            for (int i = 0; i < c->n; i++) {
                kn_val *x;
                if (nm[0] == 'k') {
                    x = kn_v_const(r, c->keys[i]);
                } else if (nm[0] == 'v') {
                    x = c->items[i];
                } else {
                    x = kn_v_new(r, V_TUPLE);
                    kn_val *k = kn_v_const(r, c->keys[i]);
                    if (x == NULL || k == NULL || kn_v_add(r, x, k) < 0 || kn_v_add(r, x, c->items[i]) < 0)
                        return KN_FAIL;
                }
                if (x == NULL || kn_v_add(r, res, x) < 0)
                    return KN_FAIL;
            }
            *out = res;
            return 0;
        }
        if ((!strcmp(nm, "get") || !strcmp(nm, "pop") || !strcmp(nm, "setdefault")) && nargs >= 1 &&
            args[0]->kind == V_CONST) {
            for (int i = 0; i < c->n; i++) {
                int e = PyObject_RichCompareBool(c->keys[i], args[0]->obj, Py_EQ);
                if (e < 0)
                    return KN_ERR;
                if (e) {
                    *out = c->items[i];
                    if (nm[0] == 'p') {
                        memmove(c->items + i, c->items + i + 1, sizeof(kn_val *) * (c->n - i - 1));
                        memmove(c->keys + i, c->keys + i + 1, sizeof(PyObject *) * (c->n - i - 1));
                        c->n--;
                        c->mutated = 1;
                    }
                    return 0;
                }
            }
            kn_val *dflt = nargs >= 2 ? args[1] : none;
            if (nm[0] == 'p' && nargs < 2)
                return kn_brk(r, "dict.pop of a missing key");
            if (nm[0] == 's') {
                if (kn_v_add(r, c, dflt) < 0)
                    return KN_FAIL;
                c->keys[c->n - 1] = args[0]->obj;
                c->mutated = 1;
            }
            *out = dflt;
            return 0;
        }
        if (!strcmp(nm, "update") && nargs == 1 && args[0]->kind == V_DICT) {
            kn_val *o = args[0];
            for (int j = 0; j < o->n; j++) {
                int found = 0;
                for (int i = 0; i < c->n; i++) {
                    int e = PyObject_RichCompareBool(c->keys[i], o->keys[j], Py_EQ);
                    if (e < 0)
                        return KN_ERR;
                    if (e) {
                        c->items[i] = o->items[j];
                        found = 1;
                    }
                }
                if (!found) {
                    if (kn_v_add(r, c, o->items[j]) < 0)
                        return KN_FAIL;
                    c->keys[c->n - 1] = o->keys[j];
                }
            }
            c->mutated = 1;
            *out = none;
            return 0;
        }
        if (!strcmp(nm, "copy") && nargs == 0) {
            kn_val *res = kn_v_new(r, V_DICT);
            if (res == NULL)
                return KN_FAIL;
            for (int i = 0; i < c->n; i++) {
                if (kn_v_add(r, res, c->items[i]) < 0)
                    return KN_FAIL;
                res->keys[i] = c->keys[i];
            }
            *out = res;
            return 0;
        }
        if (!strcmp(nm, "clear") && nargs == 0) {
            c->n = 0;
            c->mutated = 1;
            *out = none;
            return 0;
        }
        return kn_brk(r, "dict.%s", nm);
    }
    return kn_brk(r, "method %s", nm);
}

static int
module_call(kn_rec *r, rframe *fr, kn_val *m, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    static const char *const hooknames[] = {"_forward_pre_hooks", "_forward_hooks", "_backward_hooks",
                                            "_backward_pre_hooks", NULL};
    kn_val *pre = NULL, *post = NULL;
    PyObject *idict = PyObject_GenericGetDict(m->obj, NULL);
    if (idict == NULL)
        return KN_ERR;
    int is = m->src >= 0 ? kn_src_add(r, KN_SRC_INSTDICT, m->src, NULL, 0) : -1;
    PyObject *empty = PyList_New(0);   /* hook dicts found empty: one guard checks them all */
    if (empty == NULL) {
        Py_DECREF(idict);
        return KN_ERR;
    }
    for (int k = 0; hooknames[k]; k++) {
        PyObject *hn = PyUnicode_FromString(hooknames[k]);
        PyObject *d = hn ? PyDict_GetItemWithError(idict, hn) : NULL;
        if (d == NULL || !PyDict_Check(d)) {
            Py_XDECREF(hn);
            PyErr_Clear();
            continue;
        }
        if (PyDict_GET_SIZE(d) == 0) {
            int rc0 = PyList_Append(empty, hn);
            Py_DECREF(hn);
            if (rc0 < 0) {
                Py_DECREF(empty);
                Py_DECREF(idict);
                return KN_ERR;
            }
            continue;
        }
        int s = is >= 0 ? kn_src_add(r, KN_SRC_DICT, is, hn, 0) : -1;
        Py_DECREF(hn);
        if (k >= 2) {
            Py_DECREF(empty);
            Py_DECREF(idict);
            return kn_brk(r, "module with backward hooks");
        }
        kn_val *hv = kn_wrap(r, d, s);
        if (hv == NULL || hv->kind != V_DICT) {
            Py_DECREF(empty);
            Py_DECREF(idict);
            return hv ? kn_brk(r, "hooks dict") : KN_FAIL;
        }
        if (k == 0)
            pre = hv;
        else
            post = hv;
    }
    if (is >= 0 && PyList_GET_SIZE(empty) > 0) {
        PyObject *t = PyList_AsTuple(empty);
        int rc0 = t ? kn_guard_add(r, KN_G_EMPTY, is, t, NULL, NULL, NULL, 0) : -1;
        Py_XDECREF(t);
        if (rc0 < 0) {
            Py_DECREF(empty);
            Py_DECREF(idict);
            return KN_ERR;
        }
    }
    Py_DECREF(empty);
    /* kwargs-taking hooks and always-called hooks are flagged in side dicts */
    static const char *const flagnames[] = {"_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
                                            "_forward_hooks_always_called", NULL};
    for (int k = 0; flagnames[k]; k++) {
        PyObject *d = PyDict_GetItemString(idict, flagnames[k]);
        if (d && PyDict_Check(d) && PyDict_GET_SIZE(d) > 0) {
            Py_DECREF(idict);
            return kn_brk(r, "module hooks with kwargs");
        }
    }
    PyObject *fwd = PyDict_GetItemWithError(idict, kn_cenv.s_forward);
    Py_DECREF(idict);
    if (fwd)
        return kn_brk(r, "instance-level forward override");
    /* global hooks */
    PyObject *gh = kn_cenv.s_global_hooks;
    for (Py_ssize_t i = 0; gh && i < PyTuple_GET_SIZE(gh); i++) {
        PyObject *d = PyTuple_GET_ITEM(gh, i);
        if (PyDict_GET_SIZE(d) > 0)
            return kn_brk(r, "global module hooks");
        int cs = kn_src_add(r, KN_SRC_CONST, -1, d, 0);
        if (cs < 0 || kn_guard_add(r, KN_G_LEN, cs, NULL, NULL, NULL, NULL, 0) < 0)
            return KN_ERR;
    }
    kn_val *argt = NULL;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (pre || post) {
        if (nkw)
            return kn_brk(r, "module hooks and keyword arguments");
        argt = kn_v_new(r, V_TUPLE);
        if (argt == NULL)
            return KN_FAIL;
        for (int i = 0; i < nargs; i++)
            if (kn_v_add(r, argt, args[i]) < 0)
                return KN_FAIL;
    }
    if (pre) {
        for (int i = 0; i < pre->n; i++) {
            kn_val *hargs[2] = {m, argt}, *res;
            CHECK(kn_call(r, fr, pre->items[i], hargs, 2, NULL, &res));
            if (!(res->kind == V_CONST && res->obj == Py_None)) {
                if (res->kind == V_TUPLE) {
                    argt = res;
                } else {
                    argt = kn_v_new(r, V_TUPLE);
                    if (argt == NULL || kn_v_add(r, argt, res) < 0)
                        return KN_FAIL;
                }
            }
        }
        args = argt->items;
        nargs = argt->n;
    }
    PyObject *f = _PyType_Lookup(Py_TYPE(m->obj), kn_cenv.s_forward);
    if (f == NULL || !PyFunction_Check(f))
        return kn_brk(r, "module without a Python forward");
    kn_val *fv = kn_v_const(r, f);
    if (fv == NULL)
        return KN_FAIL;
    kn_val *argv[64];
    if (nargs + 1 > 64)
        return kn_brk(r, "call with too many arguments");
    argv[0] = m;
    memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
    kn_val *res;
    CHECK(kn_inline(r, fr, f, fv, argv, nargs + 1, kwnames, &res));
    if (post) {
        for (int i = 0; i < post->n; i++) {
            kn_val *hargs[3] = {m, argt, res}, *h;
            CHECK(kn_call(r, fr, post->items[i], hargs, 3, NULL, &h));
            if (!(h->kind == V_CONST && h->obj == Py_None))
                res = h;
        }
    }
    *out = res;
    return 0;
}

int
kn_call(kn_rec *r, rframe *fr, kn_val *fn, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    kn_val *argv[65];
    switch (fn->kind) {
    case V_METHOD:
        if (nargs + 1 > 64)
            return kn_brk(r, "call with too many arguments");
        argv[0] = fn->self;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        return kn_call(r, fr, fn->fn, argv, nargs + 1, kwnames, out);
    case V_TMETHOD:
        if (nargs + 1 > 64)
            return kn_brk(r, "call with too many arguments");
        argv[0] = fn->self;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        return kn_torch_op(r, fn->obj, 1, argv, nargs + 1, kwnames, out);
    case V_BMETHOD:
        return bmethod_call(r, fn, args, nargs, kwnames, out);
    case V_FUNC:
        return kn_inline(r, fr, NULL, fn, args, nargs, kwnames, out);
    case V_CTX:
        if (fn->entered) {   /* __exit__(None, None, None) */
            if (fr)
                fr->nwith--;
            CHECK(kn_with_exit(r, fn));
            *out = kn_v_const(r, Py_None);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, "calling a context manager");
    case V_OBJ:
        if (PyObject_IsInstance(fn->obj, kn_cenv.nn_module) == 1)
            return module_call(r, fr, fn, args, nargs, kwnames, out);
        {
            PyObject *c = _PyType_Lookup(Py_TYPE(fn->obj), PyUnicode_FromString("__call__"));
            PyErr_Clear();
            if (c && PyFunction_Check(c)) {
                kn_val *cv = kn_v_const(r, c);
                if (cv == NULL || nargs + 1 > 64)
                    return KN_FAIL;
                argv[0] = fn;
                memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
                return kn_inline(r, fr, c, cv, argv, nargs + 1, kwnames, out);
            }
        }
        return kn_brk(r, "calling a %s", Py_TYPE(fn->obj)->tp_name);
    case V_CONST:
        break;
    default:
        return kn_brk(r, "calling a value kiln does not model");
    }
    PyObject *f = fn->obj;
    int handled;
    CHECK(builtin_call(r, fr, f, args, nargs, kwnames, out, &handled));
    if (handled)
        return 0;
    if (f == kn_cenv.is_grad) {
        *out = kn_v_const(r, r->grad_cur ? Py_True : Py_False);   /* the grad guard covers it */
        return *out ? 0 : KN_FAIL;
    }
    if (f == kn_cenv.no_grad || f == kn_cenv.enable_grad) {
        if (nargs)
            return kn_brk(r, "no_grad used as a decorator");
        return make_ctx(r, f == kn_cenv.enable_grad, 0, out);
    }
    if (f == kn_cenv.nullcontext && nargs == 0) {
        kn_val *c = kn_v_new(r, V_CTX);
        if (c == NULL)
            return KN_FAIL;
        c->ctxkind = 1;
        c->mode = -1;
        *out = c;
        return 0;
    }
    if (f == kn_cenv.autocast_cls) {
        /* torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None) */
        static const char *const names[] = {"device_type", "dtype", "enabled", "cache_enabled"};
        PyObject *vals[4] = {NULL, Py_None, Py_True, Py_None};
        int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
        for (int i = 0; i < nargs; i++) {
            if (args[i]->kind != V_CONST)
                return kn_brk(r, "autocast with non-constant arguments");
            int slot = i;
            if (i >= npos) {
                slot = -1;
                for (int k = 0; k < 4; k++)
                    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - npos), names[k]) == 0)
                        slot = k;
            }
            if (slot < 0 || slot > 3)
                return kn_brk(r, "autocast argument");
            vals[slot] = args[i]->obj;
        }
        if (vals[0] == NULL)
            return kn_brk(r, "autocast without a device type");
        kn_val *c = kn_v_new(r, V_CTX);
        PyObject *t = c ? PyTuple_Pack(4, vals[0], vals[1], vals[2], vals[3]) : NULL;
        if (t == NULL || PyList_Append(r->pins, t) < 0) {
            Py_XDECREF(t);
            return KN_FAIL;
        }
        Py_DECREF(t);
        c->ctxkind = 2;
        c->mode = -1;
        c->ctxargs = t;
        *out = c;
        return 0;
    }
    if (f == kn_cenv.set_grad_enabled_cls) {
        if (nargs != 1 || args[0]->kind != V_CONST)
            return kn_brk(r, "set_grad_enabled with a non-constant mode");
        int mode = PyObject_IsTrue(args[0]->obj);
        return make_ctx(r, mode, 1, out);
    }
    PyObject *cls = PyObject_CallOneArg(kn_cenv.classify, f);
    if (cls == NULL)
        return KN_ERR;
    long how = PyLong_AsLong(cls);
    Py_DECREF(cls);
    switch (how) {
    case 1:   /* a torch operation: a graph node */
        if (PyFunction_Check(f) && !any_tensor_arg(args, nargs))
            return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);   /* a Python helper of constants */
        return kn_torch_op(r, f, 0, args, nargs, kwnames, out);
    case 7: { /* the standard library: run it for real on real objects */
        int rc;
        if (call_on_real(r, f, args, nargs, kwnames, out, &rc))
            return rc;
        return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);
    }
    case 5:   /* "is torch compiling?" under kiln: yes */
        *out = kn_v_const(r, Py_True);
        return *out ? 0 : KN_FAIL;
    case 2:   /* Python code: inline */
        if (PyFunction_Check(f))
            return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);
        if (Py_TYPE(f) == &PyMethod_Type) {
            kn_val *m;
            kn_val *self = kn_wrap(r, PyMethod_GET_SELF(f), -1);
            kn_val *fun = self ? kn_v_const(r, PyMethod_GET_FUNCTION(f)) : NULL;
            if (fun == NULL)
                return KN_FAIL;
            m = kn_v_new(r, V_METHOD);
            if (m == NULL)
                return KN_FAIL;
            m->self = self;
            m->fn = fun;
            return kn_call(r, fr, m, args, nargs, kwnames, out);
        }
        return kn_brk(r, "inline of a non-function");
    case 3:   /* pure Python function of constants */
        if (const_items(r, args, nargs))
            return call_real(r, f, args, nargs, kwnames, out);
        return kn_brk(r, "a Python builtin with non-constant arguments");
    case 4: { /* functools.partial */
        PyObject *pf = PyObject_GetAttrString(f, "func"), *pa = PyObject_GetAttrString(f, "args"),
                 *pk = PyObject_GetAttrString(f, "keywords");
        int rc = KN_ERR;
        if (pf && pa && pk && PyDict_Check(pk)) {
            Py_ssize_t na = PyTuple_GET_SIZE(pa), nk = PyDict_GET_SIZE(pk);
            int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
            if (na + nargs + nk > 64) {
                rc = kn_brk(r, "partial with many arguments");
            } else {
                kn_val *av[64];
                int k = 0;
                rc = 0;
                for (Py_ssize_t i = 0; i < na && rc == 0; i++)
                    if ((av[k++] = kn_wrap(r, PyTuple_GET_ITEM(pa, i), -1)) == NULL)
                        rc = KN_FAIL;
                for (int i = 0; i < npos; i++)
                    av[k++] = args[i];
                PyObject *names = PyList_New(0), *key, *val;
                Py_ssize_t pos = 0;
                while (rc == 0 && names && PyDict_Next(pk, &pos, &key, &val)) {
                    int dup = 0;
                    for (int i = 0; i < nkw; i++)
                        if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), key) == 0)
                            dup = 1;
                    if (dup)
                        continue;
                    if ((av[k++] = kn_wrap(r, val, -1)) == NULL || PyList_Append(names, key) < 0)
                        rc = KN_FAIL;
                }
                for (int i = 0; rc == 0 && names && i < nkw; i++) {
                    av[k++] = args[npos + i];
                    if (PyList_Append(names, PyTuple_GET_ITEM(kwnames, i)) < 0)
                        rc = KN_FAIL;
                }
                PyObject *kt = names ? PyList_AsTuple(names) : NULL;
                Py_XDECREF(names);
                kn_val *fv = kt && rc == 0 ? kn_v_const(r, pf) : NULL;
                if (rc == 0 && fv && PyList_Append(r->pins, kt) == 0)
                    rc = kn_call(r, fr, fv, av, k, PyTuple_GET_SIZE(kt) ? kt : NULL, out);
                else if (rc == 0)
                    rc = KN_FAIL;
                Py_XDECREF(kt);
            }
        }
        Py_XDECREF(pf);
        Py_XDECREF(pa);
        Py_XDECREF(pk);
        return rc;
    }
    default:
        break;
    }
    if (PyType_Check(f) && PyObject_IsSubclass(f, kn_cenv.nn_module) == 0 &&
        (((PyTypeObject *)f)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_Clear();
        return construct(r, fn, args, nargs, kwnames, out);
    }
    PyErr_Clear();
    PyObject *nmo = PyObject_GetAttrString(f, "__qualname__");
    if (nmo == NULL) {
        PyErr_Clear();
        nmo = PyObject_Repr(f);
    }
    int rc = kn_brk(r, "call to %s, which kiln does not record", nmo ? PyUnicode_AsUTF8(nmo) : "?");
    Py_XDECREF(nmo);
    PyErr_Clear();
    return rc;
}
