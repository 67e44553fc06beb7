/* record_value.c — what the recorder does with values: tensor operations
 * as graph nodes, truth, iteration, Python operators and attribute loads.
 *
 * Consumes: symbolic values from record.c.  Produces: graph nodes for tensor
 * operations (their metadata from running the same op on fake tensors),
 * constants for Python work whose inputs are known, and graph breaks for
 * everything else.  Calls and inlining are in record_call.c.
 */
#include "capture/record.h"

#include <structmember.h>

int kn_with_exit(kn_rec *r, kn_val *ctx);
int kn_rec_noinline(kn_rec *r, rframe *fr);

PyObject *
kn_builtin(const char *name)
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

int
kn_has_tensor(PyObject *o)
{
    if (is_tensor_obj(o))
        return 1;
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        for (Py_ssize_t i = 0; i < n; i++)
            if (kn_has_tensor(PySequence_Fast_ITEMS(o)[i]))
                return 1;
    }
    return 0;
}

int
kn_any_tensor_arg(kn_val **args, int n)
{
    for (int i = 0; i < n; i++) {
        kn_val *v = args[i];
        if (v->kind == V_TENSOR)
            return 1;
        if ((v->kind == V_TUPLE || v->kind == V_LIST) && kn_any_tensor_arg(v->items, v->n))
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
            if (kn_has_tensor(it)) {
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

/* fake's storage root: its _base, or itself (new ref) */
static PyObject *
view_root(PyObject *fake)
{
    PyObject *b = PyObject_GetAttrString(fake, "_base");
    if (b == NULL || b == Py_None) {
        Py_XDECREF(b);
        PyErr_Clear();
        return Py_NewRef(fake);
    }
    return b;
}

static PyObject *
geometry(PyObject *fake, PyObject **stride, PyObject **off)
{
    PyObject *sz = PyObject_GetAttr(fake, kn_cenv.s_shape);
    PyObject *t = sz ? PySequence_Tuple(sz) : NULL;
    Py_XDECREF(sz);
    PyObject *st = PyObject_CallMethodNoArgs(fake, kn_cenv.s_stride);
    *stride = st ? PySequence_Tuple(st) : NULL;
    Py_XDECREF(st);
    *off = PyObject_CallMethod(fake, "storage_offset", NULL);
    if (t == NULL || *stride == NULL || *off == NULL) {
        Py_XDECREF(t);
        Py_CLEAR(*stride);
        Py_CLEAR(*off);
        return NULL;
    }
    return t;
}

static int
plain_bits(PyObject *fake)   /* no conjugate or negative bit: as_strided rebuilds it */
{
    PyObject *c = PyObject_CallMethod(fake, "is_conj", NULL), *n = PyObject_CallMethod(fake, "is_neg", NULL);
    int ok = c == Py_False && n == Py_False;
    Py_XDECREF(c);
    Py_XDECREF(n);
    PyErr_Clear();
    return ok;
}

/* (size, stride, offset - anchor's, anchor size, anchor stride, grad) of fake
 * view `vf` over fake anchor `af`, pinned in the recording (borrowed); NULL
 * with no error set when the geometry cannot be read, NULL with an error on
 * a failure of kiln's own. */
static PyObject *
view_info(kn_rec *r, PyObject *vf, PyObject *af, PyObject *grad)
{
    PyObject *vst, *voff, *ast, *aoff;
    PyObject *vsz = geometry(vf, &vst, &voff);
    PyObject *asz = vsz ? geometry(af, &ast, &aoff) : NULL;
    if (asz == NULL) {
        Py_XDECREF(vsz);
        Py_XDECREF(vst);
        Py_XDECREF(voff);
        PyErr_Clear();
        return NULL;
    }
    PyObject *rel = PyNumber_Subtract(voff, aoff);
    /* how autograd made it (a view of unbind's or split's, or one made with
       grad off, may not be written in place): the rebuilt view says the same */
    PyObject *how = rel ? PyObject_CallOneArg(kn_cenv.view_creation, vf) : NULL;
    PyObject *info = how ? Py_BuildValue("(OOOOOOO)", vsz, vst, rel, asz, ast, grad, how) : NULL;
    Py_XDECREF(how);
    Py_DECREF(vsz);
    Py_DECREF(vst);
    Py_DECREF(voff);
    Py_DECREF(asz);
    Py_DECREF(ast);
    Py_DECREF(aoff);
    Py_XDECREF(rel);
    if (info == NULL || PyList_Append(r->pins, info) < 0) {
        Py_XDECREF(info);
        return NULL;
    }
    Py_DECREF(info);
    return info;
}

/* A tensor an op returned that views one of its tensor arguments: note the
 * input or non-view graph tensor it views (its anchor) and its geometry
 * relative to it, so that the replay can rebuild it from that anchor and
 * values that share memory in eager share it after a graph break too. */
static int
note_view(kn_rec *r, kn_val *v, kn_val **args, int nargs)
{
    PyObject *isv = PyObject_CallMethod(v->obj, "_is_view", NULL);
    int view = isv == Py_True;
    Py_XDECREF(isv);
    if (!view) {
        PyErr_Clear();
        return 0;
    }
    PyObject *root = view_root(v->obj);
    kn_val *anchor = NULL;
    int ambiguous = 0;
    for (int i = 0; i < nargs; i++) {
        kn_val *a = args[i];
        if (a->kind != V_TENSOR || a == v)
            continue;
        PyObject *ar = view_root(a->obj);
        int same = ar == root;
        Py_DECREF(ar);
        if (!same)
            continue;
        kn_val *an = a->vanchor ? a->vanchor : a;
        if (a->vanchor == NULL && a->src < 0) {
            PyObject *aisv = PyObject_CallMethod(a->obj, "_is_view", NULL);
            if (aisv != Py_False)   /* a view with no known anchor */
                an = NULL;
            Py_XDECREF(aisv);
            PyErr_Clear();
        }
        if (an == NULL || (anchor && anchor != an))
            ambiguous = 1;
        anchor = an;
    }
    Py_DECREF(root);
    if (anchor == NULL || ambiguous)
        return 0;
    PyObject *vdt = PyObject_GetAttr(v->obj, kn_cenv.s_dtype), *adt = PyObject_GetAttr(anchor->obj, kn_cenv.s_dtype);
    int same_dtype = vdt && vdt == adt;
    Py_XDECREF(vdt);
    Py_XDECREF(adt);
    PyErr_Clear();
    if (!same_dtype || !plain_bits(v->obj) || !plain_bits(anchor->obj))
        return 0;
    PyObject *info = view_info(r, v->obj, anchor->obj, r->grad_cur ? Py_True : Py_False);
    if (info == NULL)
        return PyErr_Occurred() ? -1 : 0;
    v->vanchor = anchor;
    v->vinfo = info;
    return 0;
}

/* The geometry of a view as its fake tensor has it now: an in-place
 * metadata op after the view was made (`v.transpose_(0, 1)`, `v.unsqueeze_(0)`
 * on the view or its anchor) changes the fakes, not what note_view recorded,
 * so the replay rebuilds a view from the geometry at the recording's end.
 * Returns 0 and leaves vinfo as it was when the geometry cannot be read. */
int
kn_view_refresh(kn_rec *r, kn_val *v)
{
    if (v->vanchor == NULL || v->vinfo == NULL)
        return 0;
    PyObject *info = view_info(r, v->obj, v->vanchor->obj, PyTuple_GET_ITEM(v->vinfo, 5));
    if (info == NULL)
        return PyErr_Occurred() ? -1 : 0;
    v->vinfo = info;
    return 0;
}

/* note_view for every tensor in an op's (wrapped) result */
int
kn_note_views(kn_rec *r, kn_val *out, kn_val **args, int nargs)
{
    if (out->kind == V_TENSOR)
        return out->src < 0 && out->vanchor == NULL ? note_view(r, out, args, nargs) : 0;
    if (out->kind == V_TUPLE || out->kind == V_LIST)
        for (int i = 0; i < out->n; i++)
            if (kn_note_views(r, out->items[i], args, nargs) < 0)
                return -1;
    return 0;
}

static const char *const denied_methods[] = {
    "backward", "register_hook", "retain_grad", "numpy", "tolist", "item", "data_ptr", "storage", "untyped_storage",
    "set_", "resize_", "__setstate__", "record_stream", "share_memory_", "pin_memory", NULL,
};

int
kn_torch_op(kn_rec *r, PyObject *target, int method, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (r->grad_cur && !r->grad_start)
        /* a compiled graph runs under the grad mode it is entered with (AOT
         * autograd records no backward for a call made without grad): ops
         * under grad enabled inside a graph entered without it run outside */
        return kn_brk(r, KN_BRK_TENSOR_OPERATION_GRAD_ENABLED);
    if (method) {
        const char *nm = PyUnicode_AsUTF8(target);
        for (int i = 0; nm && denied_methods[i]; i++)
            if (strcmp(nm, denied_methods[i]) == 0)
                return kn_brk(r, KN_BRK_TENSOR_METHOD_LEAVES_GRAPH, nm);
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
        /* a function whose fake kiln makes itself where torch's would take
         * another path than the lowered graph, or a slow Python one
         * (kiln/_capture.py fake_overrides, the rules in kiln/fakes.py) */
        PyObject *own = PyCFunction_Check(target) || PyFunction_Check(target)
                            ? PyDict_GetItemWithError(kn_cenv.fake_overrides, target) : NULL;
        if (own != NULL) {
            res = PyObject_Call(own, fa, fk);
            if (res == Py_NotImplemented)
                Py_CLEAR(res);
            else if (res == NULL)
                goto done;   /* kiln's error: the rule checks before it fakes */
        } else if (PyErr_Occurred()) {
            goto done;
        }
        if (res == NULL)
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
            kn_brk(r, KN_BRK_DATA_DEPENDENT, tname ? tname : "?");
        else
            kn_brk(r, KN_BRK_FAKE_RAISES, tname ? tname : "?",
                   et ? ((PyTypeObject *)et)->tp_name : "?", m ? m : "?");
        PyErr_Clear();
        Py_XDECREF(tn);
        Py_XDECREF(msg);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        rc = KN_BREAK;
        goto done;
    }
    if (res == Py_None && kn_any_tensor_arg(args, nargs)) {
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
    if (!kn_has_tensor(res)) {
        /* shape queries and other Python results: constants under the tensor guards */
        if (method || kn_any_tensor_arg(args, nargs)) {
            *out = kn_v_const(r, res);
            rc = *out ? 0 : KN_FAIL;
            goto done;
        }
        if (!PyFunction_Check(target)) {
            /* a query of torch's global state: ask it outside the fake mode */
            PyObject *x = PyObject_CallMethod(r->fake_mode, "__exit__", "OOO", Py_None, Py_None, Py_None);
            if (x == NULL)
                goto done;   /* kiln's error */
            Py_DECREF(x);
            PyObject *real = PyObject_Call(target, fa, fk);
            /* the mode is entered again with no exception pending (else the
             * mode stack is left half-changed and torch aborts later) */
            PyObject *failed = real ? NULL : kn_err_take();
            PyObject *y = PyObject_CallMethod(r->fake_mode, "__enter__", NULL);
            Py_XDECREF(failed);
            if (y == NULL) {
                Py_XDECREF(real);
                goto done;
            }
            Py_DECREF(y);
            if (real == NULL) {
                rc = kn_brk(r, KN_BRK_TORCH_QUERY_RAISES);
                goto done;
            }
            *out = kn_v_const(r, real);
            Py_DECREF(real);
            rc = *out ? 0 : KN_FAIL;
            goto done;
        }
        rc = kn_brk(r, KN_BRK_TORCH_FUNCTION_RETURNING_PYTHON);
        goto done;
    }
    {
        /* a result kiln cannot carry through a graph (a subclass, nested,
         * sparse, quantized): the op runs as Python */
        PyObject *why = PyObject_CallOneArg(kn_cenv.tensor_unsupported, res);
        if (why == NULL)
            goto done;
        if (why != Py_None) {
            PyObject *tn = method ? Py_NewRef(target) : PyObject_GetAttrString(target, "__name__");
            PyErr_Clear();
            rc = kn_brk(r, KN_BRK_TORCH_RETURNS, tn && PyUnicode_Check(tn) ? PyUnicode_AsUTF8(tn) : "a torch function",
                        PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : "an unsupported tensor");
            Py_XDECREF(tn);
            Py_DECREF(why);
            goto done;
        }
        Py_DECREF(why);
    }
    node = PyObject_CallMethodObjArgs(r->graph, method ? kn_cenv.s_call_method : kn_cenv.s_call_function, target, na,
                                      nk, NULL);
    if (node == NULL)
        goto done;
    r->nops++;
    *out = wrap_result(r, node, res);
    rc = *out ? (kn_note_views(r, *out, args, nargs) < 0 ? KN_ERR : 0) : KN_FAIL;
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
        return kn_brk(r, KN_BRK_MODULE_WITHOUT_MODULES);
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

/* kn_module_members' walk of module m (wrapped, prefix its dotted name):
 * appends to `it` the modules (what 0), their parameters (1) or buffers
 * (2), once each (memo: the real objects met), as (name, value) pairs when
 * named; guards the keys of every dict it reads and each entry's identity
 * (kn_wrap: modules by identity, None as None, tensors as inputs). */
static int
walk_members(kn_rec *r, kn_val *m, PyObject *prefix, int what, int named, int recurse, PyObject *memo, kn_val *it)
{
    int rc = 0;
    if (what == 0 && recurse) {   /* the module itself (named_modules yields it first) */
        int seen = PySet_Contains(memo, m->obj);
        if (seen < 0 || (!seen && PySet_Add(memo, m->obj) < 0))
            return KN_FAIL;
        if (!seen)
            rc = named ? 0 : kn_v_add(r, it, m);
        if (!seen && named) {
            kn_val *t = kn_v_new(r, V_TUPLE), *nv = kn_v_const(r, prefix);
            rc = t && nv && kn_v_add(r, t, nv) == 0 && kn_v_add(r, t, m) == 0 ? kn_v_add(r, it, t) : KN_FAIL;
        }
        if (rc < 0 || seen)
            return rc < 0 ? KN_FAIL : 0;
    }
    PyObject *which = what == 1 ? kn_cenv.s_parameters : what == 2 ? kn_cenv.s_buffers : kn_cenv.s_modules;
    for (int pass = what == 0; pass < 1 + (what == 0) && rc == 0; pass++) {
        /* pass 0: this module's own parameters/buffers; pass 1: its children */
        int ds;
        PyObject *d = module_dict(r, m, pass ? kn_cenv.s_modules : which, &ds);
        if (d == NULL || ds < 0) {
            Py_XDECREF(d);
            return kn_brk(r, KN_BRK_MODULE_WITHOUT_MODULES);
        }
        PyObject *keys = PyDict_Keys(d), *kt = keys ? PyList_AsTuple(keys) : NULL;
        Py_XDECREF(keys);
        if (kt == NULL || kn_guard_add(r, KN_G_KEYS, ds, kt, NULL, NULL, NULL, 0) < 0)
            rc = KN_FAIL;
        for (Py_ssize_t i = 0; rc == 0 && kt && i < PyTuple_GET_SIZE(kt); i++) {
            PyObject *k = PyTuple_GET_ITEM(kt, i), *val = PyDict_GetItem(d, k);
            int s = kn_src_add(r, KN_SRC_DICT, ds, k, 0);
            kn_val *v = val && s >= 0 ? kn_wrap(r, val, s) : NULL;
            if (v == NULL) {
                rc = KN_FAIL;
                break;
            }
            if (val == Py_None)
                continue;
            PyObject *name = PyUnicode_GET_LENGTH(prefix) ? PyUnicode_FromFormat("%U.%U", prefix, k) : Py_NewRef(k);
            if (name == NULL) {
                rc = KN_FAIL;
                break;
            }
            if (pass == 1 && recurse) {
                rc = v->kind == V_OBJ ? walk_members(r, v, name, 0, named, 1, memo, it)
                                      : kn_brk(r, KN_BRK_MODULE_WITHOUT_MODULES);
            } else {
                /* a direct child (children()), a parameter or a buffer */
                int seen = PySet_Contains(memo, val);
                if (seen < 0 || (!seen && PySet_Add(memo, val) < 0))
                    rc = KN_FAIL;
                else if (!seen && !named)
                    rc = kn_v_add(r, it, v);
                else if (!seen) {
                    kn_val *t = kn_v_new(r, V_TUPLE), *nv = kn_pin(r, name) ? kn_v_const(r, name) : NULL;
                    rc = t && nv && kn_v_add(r, t, nv) == 0 && kn_v_add(r, t, v) == 0 ? kn_v_add(r, it, t) : KN_FAIL;
                }
            }
            Py_DECREF(name);
        }
        Py_XDECREF(kt);
        Py_DECREF(d);
    }
    return rc;
}

int
kn_module_members(kn_rec *r, PyObject *f, kn_val *m, kn_val **out)
{
    PyObject *all = kn_cenv.module_members;
    int which = -1;
    for (Py_ssize_t i = 0; all && PyTuple_Check(all) && i < PyTuple_GET_SIZE(all); i++)
        if (PyTuple_GET_ITEM(all, i) == f)
            which = (int)i;
    if (which < 0 || m->kind != V_OBJ || m->src < 0 || PyObject_IsInstance(m->obj, kn_cenv.nn_module) != 1) {
        PyErr_Clear();
        return 1;
    }
    /* modules, children: what 0 (children walks one level, no self); parameters 1, buffers 2 */
    int what = which < 4 ? 0 : which < 6 ? 1 : 2, named = which & 1, recurse = which != 2 && which != 3;
    PyObject *memo = PySet_New(NULL), *prefix = PyUnicode_FromString("");
    kn_val *it = memo && prefix ? kn_v_new(r, V_ITER) : NULL;
    int rc = it ? 0 : KN_FAIL;
    if (rc == 0 && what == 0)
        rc = walk_members(r, m, prefix, 0, named, recurse, memo, it);
    else if (rc == 0) {
        /* every module (named_modules' order, each once), then its own tensors */
        kn_val *mods = kn_v_new(r, V_ITER);
        PyObject *mmemo = PySet_New(NULL);
        rc = mods && mmemo ? walk_members(r, m, prefix, 0, 1, 1, mmemo, mods) : KN_FAIL;
        for (int i = 0; rc == 0 && i < mods->n; i++)   /* each item: (name, module) */
            rc = walk_members(r, mods->items[i]->items[1], mods->items[i]->items[0]->obj, what, named, 0, memo, it);
        Py_XDECREF(mmemo);
    }
    Py_XDECREF(memo);
    Py_XDECREF(prefix);
    if (rc == 0)
        *out = it;
    return rc;
}

int
kn_record_time_c_method(kn_val *v, const char *name)
{
    if (v->kind != V_OBJ || v->ctor == NULL || v->attrs ||
        !(PyDict_Check(v->obj) || PyList_Check(v->obj) || PyAnySet_Check(v->obj)))
        return 0;
    PyObject *nm = PyUnicode_FromString(name), *d = nm ? _PyType_Lookup(Py_TYPE(v->obj), nm) : NULL;
    Py_XDECREF(nm);
    PyErr_Clear();
    return d != NULL && !PyFunction_Check(d);
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
            return kn_brk(r, KN_BRK_ITERATION_OVER_TYPE, Py_TYPE(o)->tp_name);
        }
        return KN_FAIL;
    }
    while ((x = PyIter_Next(iter))) {
        if (!wrap && is_tensor_obj(x)) {
            Py_DECREF(x);
            Py_DECREF(iter);
            return kn_brk(r, KN_BRK_TENSOR_INSIDE_CONSTANT_CONTAINER);
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
            return kn_brk(r, KN_BRK_ITERATION_OVER_TYPE, Py_TYPE(o)->tp_name);
        Py_ssize_t n = PyObject_Length(o);
        if (n < 0 || n > 100000) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_ITERATION_OVER_VERY_LONG);
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
            return kn_brk(r, KN_BRK_ITERATION_OVER_0D);
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
        if (kn_record_time_c_method(v, "__iter__"))
            return iter_real(r, v->obj, 1, out);   /* a dict subclass built at record time: its keys */
        if (isinstance_of(v->obj, "ModuleList") || isinstance_of(v->obj, "Sequential"))
            return module_children(r, v, 1, out);
        if (isinstance_of(v->obj, "ModuleDict"))
            return module_children(r, v, 0, out);
        return kn_brk(r, KN_BRK_ITERATION_OVER_TYPE, Py_TYPE(v->obj)->tp_name);
    default:
        return kn_brk(r, KN_BRK_ITERATION_OVER_VALUE_MODEL);
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
            return kn_brk(r, KN_BRK_TRUTH_VALUE_RAISES);
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
        return kn_brk(r, KN_BRK_BRANCH_TENSOR_DATA);
    case V_NULL:
        return kn_brk(r, KN_BRK_TRUTH_NULL);
    case V_OBJ: {
        PyTypeObject *t = Py_TYPE(v->obj);
        if (isinstance_of(v->obj, "ModuleList") || isinstance_of(v->obj, "Sequential") ||
            isinstance_of(v->obj, "ModuleDict")) {
            kn_val *it;
            CHECK(module_children(r, v, 0, &it));
            *out = it->n > 0;
            return 0;
        }
        if (v->ctor && v->src < 0 && !v->attrs && !v->newobj) {
            /* an object built at record time (a cache): its __bool__/__len__ read it now */
            int tv = PyObject_IsTrue(v->obj);
            if (tv < 0) {
                PyErr_Clear();
                return kn_brk(r, KN_BRK_TRUTH_VALUE_RAISES);
            }
            *out = tv;
            return 0;
        }
        if ((t->tp_as_number && t->tp_as_number->nb_bool) || (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
            (t->tp_as_sequence && t->tp_as_sequence->sq_length))
            return kn_brk(r, KN_BRK_TRUTH_OF_TYPE, t->tp_name);
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
    if (x && y && r->symbolic && !(kn_numeric(x) && kn_numeric(y)) &&
        !(PyTuple_Check(x) && PyTuple_Check(y) && opfn == kn_cenv.op_add)) {   /* (tuple + Size: structural) */
        /* `"%d" % n`, `(1,) * n`: the size's value (guarded) */
        x = kn_concrete_obj(r, x);
        y = x ? kn_concrete_obj(r, y) : (Py_DECREF(y), NULL);
        if (x == NULL || y == NULL) {
            Py_XDECREF(x);
            return KN_ERR;
        }
    }
    if (x && y) {
        PyObject *res = PyObject_CallFunctionObjArgs(opfn, x, y, NULL);
        Py_DECREF(x);
        Py_DECREF(y);
        if (res == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_PYTHON_OPERATOR_RAISES);
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
            return kn_brk(r, KN_BRK_CONCATENATING_LIST_TUPLE);
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
    return kn_brk(r, KN_BRK_PYTHON_OPERATOR_VALUES_MODEL);
}

/* ------------------------------------------------------------------ attributes */

/* A source for cls.name when cls is a class defined in Python, the user's
 * or a library's, torch's own included (its attributes may be rebound
 * between calls: a model's flag patched on its class); -1 for builtin and C
 * classes, whose attributes cannot be rebound. */
static int
class_attr_src(kn_rec *r, PyObject *cls, PyObject *name)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return -1;
    int cs = kn_src_add(r, KN_SRC_CONST, -1, cls, 0);
    return cs >= 0 ? kn_src_add(r, KN_SRC_ATTR, cs, name, 0) : -1;
}

/* Guard that module mod's dict still maps name to the object val; nothing
 * when val is not in the dict (given by a module __getattr__). */
static int
module_attr_guard(kn_rec *r, PyObject *mod, PyObject *name, PyObject *val)
{
    PyObject *d = PyModule_GetDict(mod);   /* borrowed */
    if (d == NULL || PyDict_GetItemWithError(d, name) != val) {
        PyErr_Clear();
        return 0;
    }
    int ds = kn_src_add(r, KN_SRC_CONST, -1, d, 0);
    int s = ds >= 0 ? kn_src_add(r, KN_SRC_DICT, ds, name, 0) : -1;
    if (s < 0)
        return -1;
    return kn_guard_add(r, KN_G_ID, s, val, NULL, NULL, NULL, 0);
}

/* Guard a Tensor method looked up by name: torch.Tensor's own dict still
 * holds what it held while recording (torch.Tensor.relu = f replaces it). */
static int
tensor_method_guard(kn_rec *r, PyObject *name)
{
    PyObject *d = ((PyTypeObject *)kn_cenv.torch_tensor)->tp_dict;   /* a heap type's real dict */
    if (d == NULL || !PyDict_Check(d))
        return 0;
    PyObject *val = PyDict_GetItemWithError(d, name);
    if (val == NULL && PyErr_Occurred())
        return -1;
    int ds = kn_src_add(r, KN_SRC_CONST, -1, d, 0);
    int s = ds >= 0 ? kn_src_add(r, KN_SRC_DICT, ds, name, 0) : -1;
    if (s < 0)
        return -1;
    return kn_guard_add(r, val ? KN_G_ID : KN_G_NULL, s, val, NULL, NULL, NULL, 0);
}

/* Is f a function defined in torch's own modules? */
static int
torch_function(PyObject *f)
{
    PyObject *m = PyFunction_GET_MODULE(f);
    const char *mn = m && PyUnicode_Check(m) ? PyUnicode_AsUTF8(m) : NULL;
    if (mn == NULL)
        PyErr_Clear();
    return mn && (!strcmp(mn, "torch") || !strncmp(mn, "torch.", 6));
}

/* A method found on v's class tp: guard that the class still gives function
 * f (Class.method = g, a new __code__) and that v's instance dict does not
 * shadow it (obj.method = g). */
static int
class_method_guard(kn_rec *r, kn_val *v, PyObject *tp, PyObject *name, PyObject *f)
{
    if (!(((PyTypeObject *)tp)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return 0;
    int cs = kn_src_add(r, KN_SRC_CONST, -1, tp, 0);
    int s = cs >= 0 ? kn_src_add(r, KN_SRC_ATTR, cs, name, 0) : -1;
    if (s < 0 || kn_guard_add(r, KN_G_ID, s, f, NULL, NULL, NULL, 0) < 0 ||
        kn_guard_add(r, KN_G_CODE, s, PyFunction_GET_CODE(f), PyFunction_GET_DEFAULTS(f),
                     PyFunction_GET_KW_DEFAULTS(f), NULL, 0) < 0)
        return -1;
    if (v->src < 0 || (((PyTypeObject *)tp)->tp_dictoffset == 0 && !(((PyTypeObject *)tp)->tp_flags & Py_TPFLAGS_MANAGED_DICT)))
        return 0;
    int is = kn_src_add(r, KN_SRC_INSTDICT, v->src, NULL, 0);
    int ds = is >= 0 ? kn_src_add(r, KN_SRC_DICT, is, name, 0) : -1;
    return ds < 0 ? -1 : kn_guard_add(r, KN_G_NULL, ds, NULL, NULL, NULL, NULL, 0);
}

/* A staticmethod's function, or a classmethod's function bound to class tp. */
static int
wrapped_method(kn_rec *r, PyObject *d, PyObject *tp, kn_val **out)
{
    PyObject *f = PyObject_GetAttrString(d, "__func__");
    kn_val *fv = f ? kn_v_const(r, f) : NULL;
    Py_XDECREF(f);
    if (fv == NULL)
        return KN_FAIL;
    *out = Py_IS_TYPE(d, &PyStaticMethod_Type) ? fv : kn_v_method(r, fv, kn_v_const(r, tp));
    return *out ? 0 : KN_FAIL;
}

static int
obj_getattr(kn_rec *r, rframe *fr, kn_val *v, PyObject *name, kn_val **out)
{
    PyObject *o = v->obj;
    PyTypeObject *tp = Py_TYPE(o);
    if (v->newobj) {   /* made while recording: its __dict__ is v->idict (the shell's is empty) */
        if (PyUnicode_Compare(name, kn_cenv.s_dict) == 0) {
            *out = v->idict;
            return 0;
        }
        PyObject *d = _PyType_Lookup(tp, name);
        if (!(d && Py_TYPE(d)->tp_descr_set)) {
            for (int i = 0; i < v->idict->n; i++) {
                if (PyUnicode_Compare(v->idict->keys[i], name) == 0) {
                    *out = v->idict->items[i];
                    return 0;
                }
            }
        }
        if (PyErr_Occurred())
            return KN_ERR;
    } else if (PyUnicode_Compare(name, kn_cenv.s_dict) == 0) {
        /* attribute stores to it are tracked one by one, not through its dict */
        return kn_brk(r, KN_BRK_READING_INSTANCE_DICT, tp->tp_name);
    }
    for (kn_attr *at = v->attrs; at; at = at->next) {
        if (PyUnicode_Compare(at->name, name) == 0) {
            if (at->val == NULL)
                return kn_brk(r, KN_BRK_ATTRIBUTE_DELETED_WHILE_RECORDING);
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
                return kn_brk(r, KN_BRK_WRITE_ONLY_PROPERTY);
            }
            kn_val *fv = kn_v_const(r, fget);
            Py_DECREF(fget);
            if (fv == NULL)
                return KN_FAIL;
            return kn_call(r, fr, fv, &v, 1, NULL, out);
        }
        if (Py_TYPE(d) == &PyMemberDescr_Type || Py_TYPE(d) == &PyGetSetDescr_Type ||
            strcmp(Py_TYPE(d)->tp_name, "_collections._tuplegetter") == 0 ||   /* a namedtuple's field */
            strcmp(Py_TYPE(d)->tp_name, "collections._tuplegetter") == 0) {    /* (so named on 3.12) */
            PyObject *val = PyObject_GetAttr(o, name);
            if (val == NULL) {
                PyErr_Clear();
                return kn_brk(r, KN_BRK_ATTRIBUTE_RAISES);
            }
            int s = v->src >= 0 ? kn_src_add(r, KN_SRC_ATTR, v->src, name, 0) : -1;
            *out = kn_wrap(r, val, s);
            Py_DECREF(val);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, KN_BRK_DATA_DESCRIPTOR, tp->tp_name, PyUnicode_AsUTF8(name));
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
        if (PyFunction_Check(d)) {
            if (class_method_guard(r, v, (PyObject *)tp, name, d) < 0)
                return KN_FAIL;
            *out = kn_v_method(r, kn_v_const(r, d), v);
            return *out ? 0 : KN_FAIL;
        }
        if (Py_IS_TYPE(d, &PyClassMethod_Type) || Py_IS_TYPE(d, &PyStaticMethod_Type))
            return wrapped_method(r, d, (PyObject *)tp, out);
        if (Py_TYPE(d) == &PyMethodDescr_Type || Py_TYPE(d) == &PyWrapperDescr_Type) {
            /* a C method: bound to the value, not to the object seen while recording */
            *out = kn_v_method(r, kn_v_const(r, d), v);
            return *out ? 0 : KN_FAIL;
        }
        if (Py_TYPE(d)->tp_descr_get)
            return kn_brk(r, KN_BRK_DESCRIPTOR_ON, Py_TYPE(d)->tp_name, tp->tp_name);
        /* a plain class attribute */
        if (is_tensor_obj(d))
            return kn_brk(r, KN_BRK_TENSOR_CLASS_ATTRIBUTE);
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
    return kn_brk(r, KN_BRK_NO_VISIBLE_ATTRIBUTE, tp->tp_name, PyUnicode_AsUTF8(name));
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
        PyObject *real = !strcmp(nm, "grad") && v->src >= 0 ? kn_input_real(r, v->src) : NULL;
        if (real) {
            /* an input's gradient (an optimizer's step): an input itself, read from
               its source (None guarded as None); no backward runs inside a graph */
            PyObject *g = PyObject_GetAttr(real, name);
            if (g == NULL)
                return KN_ERR;
            int gs = kn_src_add(r, KN_SRC_ATTR, v->src, name, 0);
            *out = gs < 0 ? NULL : kn_wrap(r, g, gs);
            Py_DECREF(g);
            return *out ? 0 : KN_FAIL;
        }
        if (!strcmp(nm, "grad") || !strcmp(nm, "data") || !strcmp(nm, "_version") || !strcmp(nm, "grad_fn") ||
            !strcmp(nm, "_base"))
            return kn_brk(r, KN_BRK_TENSOR_ATTRIBUTE, nm);
        PyObject *d = _PyType_Lookup((PyTypeObject *)kn_cenv.torch_tensor, name);
        if (d && (Py_TYPE(d) == &PyMethodDescr_Type || PyFunction_Check(d) || PyCFunction_Check(d) ||
                  Py_TYPE(d) == &PyWrapperDescr_Type)) {
            if (tensor_method_guard(r, name) < 0)
                return KN_FAIL;
            if (PyFunction_Check(d) && !torch_function(d)) {
                /* the user's replacement (torch.Tensor.relu = f): inlined like any method */
                *out = kn_v_method(r, kn_v_const(r, d), v);
                return *out ? 0 : KN_FAIL;
            }
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
            return kn_brk(r, KN_BRK_TENSOR_ATTRIBUTE_RAISES_FAKE, nm);
        }
        if (is_tensor_obj(val)) {
            PyObject *ga = kn_builtin("getattr");
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
            if (*out && kn_note_views(r, *out, &v, 1) < 0) {
                Py_DECREF(val);
                return KN_ERR;
            }
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
            return kn_brk(r, KN_BRK_NAMED_ATTRIBUTE_RAISES, nm);
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
            /* a torch function the user may replace (F.gelu = my_gelu): still
             * a constant, but checked in the module's dict on every call */
            if (!PyModule_Check(val) && module_attr_guard(r, o, name, val) < 0) {
                Py_DECREF(val);
                return KN_FAIL;
            }
        }
        if (PyType_Check(o) && !PyFunction_Check(val) && !PyType_Check(val) &&
            !(PyCFunction_Check(val) && PyCFunction_GET_SELF(val) == o)) {
            /* (a C classmethod bound to the class is made anew on each read: the class's
               identity pins it) */
            int s = class_attr_src(r, o, name);
            if (s >= 0) {
                *out = kn_wrap(r, val, s);
                Py_DECREF(val);
                return *out ? 0 : KN_FAIL;
            }
        }
        if (is_tensor_obj(val)) {
            Py_DECREF(val);
            return kn_brk(r, KN_BRK_TENSOR_ATTRIBUTE_CONSTANT);
        }
        *out = kn_v_const_steal(r, val);
        return *out ? 0 : KN_FAIL;
    }
    case V_SUPER: {
        kn_val *self = v->self;
        PyObject *obj = self->kind == V_OBJ || self->kind == V_CONST ? self->obj : NULL;
        if (obj == NULL)
            return kn_brk(r, KN_BRK_SUPER_VALUE_MODEL);
        PyObject *tp = PyType_Check(obj) && self->kind == V_CONST ? obj : (PyObject *)Py_TYPE(obj);
        PyObject *mro = ((PyTypeObject *)tp)->tp_mro;
        Py_ssize_t i = 0, n = PyTuple_GET_SIZE(mro);
        while (i < n && PyTuple_GET_ITEM(mro, i) != v->obj)
            i++;
        for (i++; i < n; i++) {
            PyObject *cd = kn_type_dict((PyTypeObject *)PyTuple_GET_ITEM(mro, i));
            PyObject *d = cd ? PyDict_GetItemWithError(cd, name) : NULL;   /* borrowed */
            Py_XDECREF(cd);   /* the type's dict outlives this lookup: the MRO holds the type */
            if (d == NULL) {
                if (PyErr_Occurred())
                    return KN_FAIL;
                continue;
            }
            if (PyFunction_Check(d)) {
                *out = kn_v_method(r, kn_v_const(r, d), self);
                return *out ? 0 : KN_FAIL;
            }
            if (PyObject_TypeCheck(d, &PyProperty_Type)) {
                PyObject *fget = PyObject_GetAttrString(d, "fget");
                kn_val *fv = fget ? kn_v_const(r, fget) : NULL;
                Py_XDECREF(fget);
                if (fv == NULL)
                    return KN_FAIL;
                return kn_call(r, fr, fv, &self, 1, NULL, out);
            }
            if (Py_IS_TYPE(d, &PyStaticMethod_Type) || Py_IS_TYPE(d, &PyClassMethod_Type))
                return wrapped_method(r, d, tp, out);
            if ((Py_TYPE(d) == &PyMethodDescr_Type || Py_TYPE(d) == &PyWrapperDescr_Type) && self->src >= 0 &&
                !self->newobj) {
                /* a C method of a base (OrderedDict.__setitem__) on an object of the
                   frame: the descriptor bound to the value, so a replay or a call
                   done for real binds this call's object, not the recording's */
                *out = kn_v_method(r, kn_v_const(r, d), self);
                return *out ? 0 : KN_FAIL;
            }
            if (Py_TYPE(d) == &PyMethodDescr_Type || Py_TYPE(d) == &PyWrapperDescr_Type) {
                /* object.__init__ and friends of an object made while recording: bound for real */
                PyObject *sup = PyObject_CallFunctionObjArgs((PyObject *)&PySuper_Type, v->obj, obj, NULL);
                PyObject *b = sup ? PyObject_GetAttr(sup, name) : NULL;
                Py_XDECREF(sup);
                if (b == NULL) {
                    PyErr_Clear();
                    return kn_brk(r, KN_BRK_SUPER_ATTRIBUTE_RAISES);
                }
                *out = kn_v_const_steal(r, b);
                return *out ? 0 : KN_FAIL;
            }
            *out = kn_v_const(r, d);
            return *out ? 0 : KN_FAIL;
        }
        if (PyErr_Occurred())
            return KN_ERR;
        return kn_brk(r, KN_BRK_SUPER_HAS_NO_ATTRIBUTE, nm);
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
        return kn_brk(r, KN_BRK_METHOD_CONTAINER, nm);
    case V_FUNC:
        if (!strcmp(nm, "__name__") || !strcmp(nm, "__qualname__")) {
            *out = kn_v_const(r, ((PyCodeObject *)v->obj)->co_name);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, KN_BRK_ATTRIBUTE_NESTED_FUNCTION);
    default:
        return kn_brk(r, KN_BRK_ATTRIBUTE_VALUE_MODEL, nm);
    }
}
