/* builtins.c — the Python builtins the recorder models, one recorder
 * function each, dispatched through one table (like LuaJIT's recff_func[]).
 *
 * Consumes: a call's callee (the object a builtin name or builtin type is)
 * and its symbolic arguments (kwnames: the last len(kwnames) are keywords).
 * Produces: the call's symbolic result, computed at record time on constants
 * or modelled on symbolic values (iterators, containers, super(), type()),
 * or a graph break with a reason (breaks.def).
 *
 * Where to add a builtin: write `static int rec_NAME(RECFF_ARGS)` below (it
 * returns 0 with *out set, KN_BREAK, KN_ERR, or KN_DECLINE when these
 * arguments are not its case: the call is then recorded as for any other
 * callable), and add a row to recff[] at the end of this file: the builtin's
 * name in the frame's builtins, or its type object.
 */
#include "capture/record.h"

/* returned by a recorder function: not my case (the caller goes on) */
#define KN_DECLINE 3

/* the common signature; a recorder function uses what it needs */
#define KN_U __attribute__((unused))
#define RECFF_ARGS                                                                                         \
    KN_U kn_rec *r, KN_U rframe *fr, KN_U PyObject *f, KN_U kn_val **args, KN_U int nargs, KN_U int npos,  \
        KN_U int nkw, KN_U PyObject *kwnames, KN_U kn_val **out
typedef int (*kn_recff)(RECFF_ARGS);

/* ------------------------------------------------------------------ helpers */

static int
tensor_type_of(kn_rec *r, kn_val *v, PyObject **tp)
{
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
    default: return kn_brk(r, KN_BRK_TYPE_VALUE_MODEL);
    }
}

/* the items min/max/all/any/sum reduce over: the one iterable's, or the arguments */
static int
reduce_items(kn_rec *r, kn_val **args, int npos, kn_val **items)
{
    if (npos == 1)
        return kn_iter_items(r, args[0], items);
    *items = kn_v_new(r, V_ITER);
    if (*items == NULL)
        return KN_FAIL;
    for (int i = 0; i < npos; i++)
        if (kn_v_add(r, *items, args[i]) < 0)
            return KN_FAIL;
    return 0;
}

/* ------------------------------------------------------------------ the builtins */

/* o's type is a subclass of dict, list or set that keeps the base's length */
static int
builtin_length(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    if (PyDict_Check(o))
        return t->tp_as_mapping && t->tp_as_mapping->mp_length == PyDict_Type.tp_as_mapping->mp_length;
    if (PyList_Check(o))
        return t->tp_as_sequence && t->tp_as_sequence->sq_length == PyList_Type.tp_as_sequence->sq_length;
    if (PyAnySet_Check(o))
        return t->tp_as_sequence && t->tp_as_sequence->sq_length == PySet_Type.tp_as_sequence->sq_length;
    return 0;
}

static int
rec_len(RECFF_ARGS)
{
    if (npos != 1)
        return KN_DECLINE;
    kn_val *a = args[0], *it;
    if (a->kind == V_TENSOR) {
        PyObject *n = PyObject_CallMethod(a->obj, "__len__", NULL);
        if (n == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_LEN_0D_TENSOR);
        }
        *out = kn_v_const_steal(r, n);
        return *out ? 0 : KN_FAIL;
    }
    if (a->kind == V_CONST)
        return kn_call_real(r, f, args, nargs, kwnames, out);
    if (a->kind == V_OBJ && a->ctor && !a->attrs && builtin_length(a->obj)) {
        /* an object built at record time (a plain dict subclass, a ModelOutput) */
        *out = kn_v_const_steal(r, PyLong_FromSsize_t(PyObject_Length(a->obj)));
        return *out ? 0 : KN_FAIL;
    }
    if (a->kind == V_OBJ && a->src >= 0 && builtin_length(a->obj)) {
        /* a dict/list/set subclass whose length is the builtin one (a module's
           hook dicts): its length, guarded (the exact type is already) */
        Py_ssize_t n = PyObject_Length(a->obj);
        if (n < 0 || kn_guard_add(r, KN_G_LEN, a->src, NULL, NULL, NULL, NULL, n) < 0)
            return KN_FAIL;
        *out = kn_v_const_steal(r, PyLong_FromSsize_t(n));
        return *out ? 0 : KN_FAIL;
    }
    CHECK(kn_iter_items(r, a, &it));
    *out = kn_v_const_steal(r, PyLong_FromLong(it->n - it->pos));
    return *out ? 0 : KN_FAIL;
}

static int
rec_isinstance(RECFF_ARGS)
{
    if (npos != 2 || !kn_v_is_const(args[1]))
        return KN_DECLINE;
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
        return kn_brk(r, KN_BRK_ISINSTANCE_RAISES);
    }
    *out = kn_v_const(r, res ? Py_True : Py_False);
    return *out ? 0 : KN_FAIL;
}

static int
rec_issubclass(RECFF_ARGS)
{
    if (npos != 2 || !kn_v_is_const(args[1]))
        return KN_DECLINE;
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_getattr(RECFF_ARGS)
{
    if (!((npos == 2 || npos == 3) && args[1]->kind == V_CONST && PyUnicode_Check(args[1]->obj)))
        return KN_DECLINE;
    int rc = kn_getattr(r, fr, args[0], args[1]->obj, out);
    if (rc == KN_BREAK && npos == 3 && (args[0]->kind == V_OBJ || args[0]->kind == V_CONST) &&
        !PyObject_HasAttr(args[0]->obj, args[1]->obj)) {
        kn_brk_clear(r);
        *out = args[2];
        return 0;
    }
    return rc;
}

static int
rec_hasattr(RECFF_ARGS)
{
    if (!(npos == 2 && args[1]->kind == V_CONST && PyUnicode_Check(args[1]->obj)))
        return KN_DECLINE;
    kn_val *a = args[0];
    PyObject *o = a->kind == V_TENSOR || a->kind == V_CONST || a->kind == V_OBJ ? a->obj : NULL;
    if (o == NULL)
        return kn_brk(r, KN_BRK_HASATTR_VALUE_MODEL);
    if (a->kind == V_OBJ && a->newobj) {
        kn_val *tmp;
        int rc = kn_getattr(r, fr, a, args[1]->obj, &tmp);
        if (rc == KN_ERR)
            return rc;
        if (rc == KN_BREAK && PyObject_HasAttr(o, args[1]->obj))
            return rc;   /* there, but not readable by kiln */
        kn_brk_clear(r);
        *out = kn_v_const(r, rc == 0 ? Py_True : Py_False);
        return *out ? 0 : KN_FAIL;
    }
    int h = PyObject_HasAttr(o, args[1]->obj);
    if (h && a->kind == V_OBJ) {   /* guard it through a load */
        kn_val *tmp;
        int rc = kn_getattr(r, fr, a, args[1]->obj, &tmp);
        if (rc == KN_ERR)
            return rc;
        if (rc == KN_BREAK)
            kn_brk_clear(r);
    }
    *out = kn_v_const(r, h ? Py_True : Py_False);
    return *out ? 0 : KN_FAIL;
}

static int
rec_setattr(RECFF_ARGS)
{
    if (npos != 3 || args[1]->kind != V_CONST)
        return KN_DECLINE;
    if (args[0]->kind == V_OBJ && args[0]->newobj && PyUnicode_Check(args[1]->obj)) {
        CHECK(kn_newobj_setattr(r, args[0], args[1]->obj, args[2]));
        *out = kn_v_const(r, Py_None);
        return *out ? 0 : KN_FAIL;
    }
    kn_val *o = args[0];
    int rc;
    if (PyUnicode_Check(args[1]->obj) && kn_record_time_setattr(r, o, args[1]->obj, args[2], &rc)) {
        CHECK(rc);
        *out = kn_v_const(r, Py_None);
        return *out ? 0 : KN_FAIL;
    }
    if (o->kind != V_OBJ || o->src < 0 || !PyUnicode_Check(args[1]->obj))
        return kn_brk(r, KN_BRK_SETATTR_VALUE_TRACK);
    CHECK(kn_plain_store(r, o, args[1]->obj));
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

/* range, round, divmod, pow, chr, ord, repr, format, hash: run for real on constants */
static int
rec_on_constants(RECFF_ARGS)
{
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_abs(RECFF_ARGS)
{
    if (npos == 1 && args[0]->kind == V_TENSOR) {
        PyObject *opm = PyImport_ImportModule("operator");
        PyObject *absf = opm ? PyObject_GetAttrString(opm, "abs") : NULL;
        Py_XDECREF(opm);
        int rc = absf ? kn_torch_op(r, absf, 0, args, 1, NULL, out) : KN_ERR;
        Py_XDECREF(absf);
        return rc;
    }
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_callable(RECFF_ARGS)
{
    if (npos == 1 && !kn_v_is_const(args[0])) {
        int c = args[0]->kind == V_FUNC || args[0]->kind == V_METHOD ||
                (args[0]->kind == V_OBJ && PyCallable_Check(args[0]->obj));
        *out = kn_v_const(r, c ? Py_True : Py_False);
        return *out ? 0 : KN_FAIL;
    }
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_sorted(RECFF_ARGS)
{
    if (npos == 1 && nkw == 0 && !kn_v_is_const(args[0])) {
        kn_val *it;
        CHECK(kn_iter_items(r, args[0], &it));
        kn_val *t = kn_v_new(r, V_TUPLE);
        if (t == NULL)
            return KN_FAIL;
        for (int i = it->pos; i < it->n; i++)
            if (kn_v_add(r, t, it->items[i]) < 0)
                return KN_FAIL;
        kn_val *tv[1] = {t};
        return kn_call_real(r, f, tv, 1, NULL, out);
    }
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_sum(RECFF_ARGS)
{
    if (nkw != 0)
        return KN_DECLINE;
    kn_val *items;
    CHECK(reduce_items(r, args, npos, &items));
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

/* min, max, all, any: run for real on the items made constant (all/any: their truth) */
static int
rec_reduce(RECFF_ARGS)
{
    if (nkw != 0)
        return KN_DECLINE;
    kn_val *items;
    CHECK(reduce_items(r, args, npos, &items));
    int truth = f == kn_builtin("all") || f == kn_builtin("any");
    kn_val *t = kn_v_new(r, V_TUPLE);
    if (t == NULL)
        return KN_FAIL;
    for (int i = items->pos; i < items->n; i++) {
        if (!kn_v_is_const(items->items[i])) {
            if (truth) {
                int tv;
                CHECK(kn_truth(r, items->items[i], &tv));
                items->items[i] = kn_v_const(r, tv ? Py_True : Py_False);
            } else {
                return kn_brk(r, KN_BRK_MIN_MAX_NONCONST);
            }
        }
        if (kn_v_add(r, t, items->items[i]) < 0)
            return KN_FAIL;
    }
    kn_val *tv[1] = {t};
    return kn_call_real(r, f, tv, 1, NULL, out);
}

static int
rec_enumerate(RECFF_ARGS)
{
    kn_val *res = kn_v_new(r, V_ITER);
    if (res == NULL)
        return KN_FAIL;
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
    *out = res;
    return 0;
}

static int
rec_zip(RECFF_ARGS)
{
    int strict = 0;   /* zip(..., strict=<constant>): unequal lengths raise (not modelled: a break) */
    if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "strict") == 0 &&
        args[npos]->kind == V_CONST)
        strict = PyObject_IsTrue(args[npos]->obj) == 1;
    else if (nkw)
        return kn_brk(r, KN_BRK_KEYWORD_ARGUMENTS_ZIP_REVERSED);
    kn_val *res = kn_v_new(r, V_ITER);
    if (res == NULL)
        return KN_FAIL;
    kn_val *its[16];
    if (npos > 16)
        return kn_brk(r, KN_BRK_ZIP_MANY_ITERABLES);
    int n = INT32_MAX;
    for (int k = 0; k < npos; k++) {
        CHECK(kn_iter_items(r, args[k], &its[k]));
        if (its[k]->n - its[k]->pos < n)
            n = its[k]->n - its[k]->pos;
    }
    if (npos == 0)
        n = 0;
    for (int k = 0; strict && k < npos; k++)
        if (its[k]->n - its[k]->pos != n)
            return kn_brk(r, KN_BRK_ZIP_STRICT_LENGTHS);
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
    *out = res;
    return 0;
}

static int
rec_reversed(RECFF_ARGS)
{
    if (nkw)
        return kn_brk(r, KN_BRK_KEYWORD_ARGUMENTS_ZIP_REVERSED);
    kn_val *res = kn_v_new(r, V_ITER);
    if (res == NULL)
        return KN_FAIL;
    kn_val *it;
    CHECK(kn_iter_items(r, args[0], &it));
    for (int i = it->n - 1; i >= it->pos; i--)
        if (kn_v_add(r, res, it->items[i]) < 0)
            return KN_FAIL;
    *out = res;
    return 0;
}

/* list(...) and tuple(...) */
static int
rec_sequence(RECFF_ARGS)
{
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

static int
rec_dict(RECFF_ARGS)
{
    kn_val *res = kn_v_new(r, V_DICT);
    if (res == NULL)
        return KN_FAIL;
    if (npos == 1 && args[0]->kind != V_DICT) {
        /* dict(pairs): an iterable of (constant key, value) pairs known now (a
           record-time object's items(), a list of tuples) */
        kn_val *it;
        CHECK(kn_iter_items(r, args[0], &it));
        for (int i = it->pos; i < it->n; i++) {
            kn_val *p = it->items[i];
            if (p->kind != V_TUPLE || p->n != 2 || p->items[0]->kind != V_CONST || PyObject_Hash(p->items[0]->obj) == -1) {
                PyErr_Clear();
                return kn_brk(r, KN_BRK_DICT_NON_DICT);
            }
            int at = -1;
            for (int j = 0; j < res->n && at < 0; j++) {
                int eq = PyObject_RichCompareBool(res->keys[j], p->items[0]->obj, Py_EQ);
                if (eq < 0)
                    return KN_FAIL;
                if (eq)
                    at = j;
            }
            if (at >= 0) {
                res->items[at] = p->items[1];   /* a repeated key: the last value wins */
                continue;
            }
            if (PyList_Append(r->pins, p->items[0]->obj) < 0 || kn_v_add(r, res, p->items[1]) < 0)
                return KN_FAIL;
            res->keys[res->n - 1] = p->items[0]->obj;
        }
    } else if (npos == 1) {
        kn_val *src = args[0];
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

/* set(items) / frozenset(items) of constants (a config's list of names): built
 * now and again by the replay, as a library container is (a record-time
 * object: `in`, len and iteration read it; a method that writes it breaks) */
static int
rec_set(RECFF_ARGS)
{
    if (npos != 1 || nkw != 0 || kn_v_is_const(args[0]))
        return KN_DECLINE;   /* set() and set(constant): called for real */
    kn_val *it;
    CHECK(kn_iter_items(r, args[0], &it));
    kn_val *t = kn_v_new(r, V_TUPLE);
    if (t == NULL)
        return KN_FAIL;
    for (int i = it->pos; i < it->n; i++) {
        if (it->items[i]->kind != V_CONST)
            return kn_brk(r, KN_BRK_SET_NON_CONSTANT_VALUES);
        if (kn_v_add(r, t, it->items[i]) < 0)
            return KN_FAIL;
    }
    if (it == args[0])
        it->pos = it->n;   /* consumed */
    kn_val *cls = kn_v_const(r, f);
    return cls ? kn_construct_at_record_time(r, fr, cls, &t, 1, NULL, out) : KN_FAIL;
}

static int
rec_iter(RECFF_ARGS)
{
    if (npos != 1)
        return KN_DECLINE;
    kn_val *it;
    CHECK(kn_iter_items(r, args[0], &it));
    *out = it;
    return 0;
}

static int
rec_next(RECFF_ARGS)
{
    if (!((npos == 1 || npos == 2) && args[0]->kind == V_ITER))
        return KN_DECLINE;
    kn_val *it = args[0];
    if (it->pos < it->n) {
        *out = it->items[it->pos++];
        return 0;
    }
    if (npos == 2) {
        *out = args[1];
        return 0;
    }
    return kn_brk(r, KN_BRK_STOPITERATION);
}

static int
rec_type(RECFF_ARGS)
{
    if (npos != 1)
        return KN_DECLINE;
    PyObject *tp;
    CHECK(value_type(r, args[0], &tp));
    *out = kn_v_const(r, tp);
    return *out ? 0 : KN_FAIL;
}

/* zero-argument super() in fr: its __class__ cell and its first argument */
static int
super_of_frame(kn_rec *r, rframe *fr, kn_val *s)
{
    PyCodeObject *co = fr->code;
    PyObject *fv = PyObject_GetAttrString((PyObject *)co, "co_freevars");
    Py_ssize_t j = -1;
    for (Py_ssize_t i = 0; fv && i < PyTuple_GET_SIZE(fv); i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(fv, i), "__class__") == 0)
            j = i;
    Py_XDECREF(fv);
    if (j < 0 || co->co_argcount < 1)
        return kn_brk(r, KN_BRK_SUPER_OUTSIDE_METHOD);
    /* in the recorded frame itself the cells are read from the real
     * frame (its prologue made them); the class is guarded through
     * its cell, so one code object shared by several classes (a
     * class made in a function) gets the right one */
    kn_val *cell = kn_load_local(r, fr, co->co_nlocalsplus - co->co_nfreevars + (int)j), *cls = NULL;
    if (cell == NULL)
        return KN_FAIL;
    if (cell->kind != V_CELL)
        return kn_brk(r, KN_BRK_SUPER_WITHOUT_CLASS_CELL);
    if (cell->obj && cell->content == LAZY && PyCell_GET(cell->obj) == NULL)
        return kn_brk(r, KN_BRK_EMPTY_CLASS_CELL);
    CHECK(kn_cell_load(r, cell, &cls));
    kn_val *self = kn_load_local(r, fr, 0);
    if (self == NULL)
        return KN_FAIL;
    if (self->kind == V_CELL)
        CHECK(kn_cell_load(r, self, &self));
    if (cls == NULL || cls->kind != V_CONST || !PyType_Check(cls->obj) || self == NULL)
        return kn_brk(r, KN_BRK_SUPER_ARGUMENTS);
    s->obj = cls->obj;
    s->self = self;
    return 0;
}

static int
rec_super(RECFF_ARGS)
{
    kn_val *s = kn_v_new(r, V_SUPER);
    if (s == NULL)
        return KN_FAIL;
    if (npos == 2 && args[0]->kind == V_CONST) {
        s->obj = args[0]->obj;
        s->self = args[1];
    } else if (npos == 0 && fr) {
        CHECK(super_of_frame(r, fr, s));
    } else {
        return kn_brk(r, KN_BRK_SUPER_FORM);
    }
    *out = s;
    return 0;
}

/* int(...), float(...), bool(...), str(...) */
static int
rec_convert(RECFF_ARGS)
{
    if (npos > 1)
        return KN_DECLINE;
    if (npos == 1 && args[0]->kind == V_TENSOR)
        return kn_brk(r, KN_BRK_CONVERT_DATA_DEPENDENT, ((PyTypeObject *)f)->tp_name);
    if (npos == 1 && f == (PyObject *)&PyBool_Type) {
        int t;
        CHECK(kn_truth(r, args[0], &t));
        *out = kn_v_const(r, t ? Py_True : Py_False);
        return *out ? 0 : KN_FAIL;
    }
    return kn_call_real(r, f, args, nargs, kwnames, out);
}

static int
rec_print(RECFF_ARGS)
{
    return kn_brk(r, KN_BRK_PRINT);
}

/* ------------------------------------------------------------------ the table */

/* One row per modelled builtin: its name in the frame's builtins (looked up
 * at call time, as the frame sees it), or its type object. */
static const struct {
    const char *name;
    PyTypeObject *type;
    kn_recff rec;
} recff[] = {
    {"len", NULL, rec_len},
    {"isinstance", NULL, rec_isinstance},
    {"issubclass", NULL, rec_issubclass},
    {"getattr", NULL, rec_getattr},
    {"hasattr", NULL, rec_hasattr},
    {"setattr", NULL, rec_setattr},
    {NULL, &PyRange_Type, rec_on_constants},
    {"abs", NULL, rec_abs},
    {"round", NULL, rec_on_constants},
    {"divmod", NULL, rec_on_constants},
    {"pow", NULL, rec_on_constants},
    {"chr", NULL, rec_on_constants},
    {"ord", NULL, rec_on_constants},
    {"repr", NULL, rec_on_constants},
    {"format", NULL, rec_on_constants},
    {"hash", NULL, rec_on_constants},
    {"sorted", NULL, rec_sorted},
    {"callable", NULL, rec_callable},
    {"min", NULL, rec_reduce},
    {"max", NULL, rec_reduce},
    {"all", NULL, rec_reduce},
    {"any", NULL, rec_reduce},
    {"sum", NULL, rec_sum},
    {NULL, &PyEnum_Type, rec_enumerate},
    {NULL, &PyZip_Type, rec_zip},
    {NULL, &PyReversed_Type, rec_reversed},
    {NULL, &PyList_Type, rec_sequence},
    {NULL, &PyTuple_Type, rec_sequence},
    {NULL, &PyDict_Type, rec_dict},
    {NULL, &PySet_Type, rec_set},
    {NULL, &PyFrozenSet_Type, rec_set},
    {"iter", NULL, rec_iter},
    {"next", NULL, rec_next},
    {NULL, &PyType_Type, rec_type},
    {NULL, &PySuper_Type, rec_super},
    {NULL, &PyLong_Type, rec_convert},
    {NULL, &PyFloat_Type, rec_convert},
    {NULL, &PyBool_Type, rec_convert},
    {NULL, &PyUnicode_Type, rec_convert},
    {"print", NULL, rec_print},
};

/* A call to f: *handled = 1 when f is a builtin of the table and these
 * arguments its case (the result is 0 with *out set, KN_BREAK or KN_ERR);
 * else *handled = 0 and the caller records the call another way. */
int
kn_builtin_call(kn_rec *r, rframe *fr, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out,
                int *handled)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    *handled = 0;
    for (size_t i = 0; i < sizeof recff / sizeof recff[0]; i++) {
        if (f != (recff[i].type ? (PyObject *)recff[i].type : kn_builtin(recff[i].name)))
            continue;
        int rc = recff[i].rec(r, fr, f, args, nargs, npos, nkw, kwnames, out);
        if (rc == KN_DECLINE)
            return 0;
        *handled = 1;
        return rc;
    }
    return 0;
}
