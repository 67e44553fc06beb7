/* record_ops.c — opcode families the recorder's interpreter (record.c,
 * run_one) hands off whole: attributes, containers and strings, calls, imports.
 *
 * Consumes: the recorded frame (its symbolic stack, code, globals) at one
 * instruction of the family, with its decoded argument.  Produces: the
 * instruction's effect on the symbolic stack (values, graph nodes through
 * kn_call / kn_getattr, effects to replay), or a break (breaks.def) with
 * the stack to be restored by kn_run_frame.  Each kn_op_FAMILY returns 0,
 * KN_BREAK or KN_ERR, like one case of run_one.
 */
#include "capture/record.h"

/* a.name = b (STORE_ATTR, and kiln's own rebinding of a record-time object's
 * tensors): 0, KN_BREAK or KN_ERR */
int
kn_store_attr(kn_rec *r, kn_val *a, PyObject *name, kn_val *b)
{
    if (a->kind == V_OBJ && a->newobj)
        return kn_newobj_setattr(r, a, name, b);
    int rc;
    if (kn_record_time_setattr(r, a, name, b, &rc))
        return rc;
    if (a->kind != V_OBJ || !kn_rebuildable(a))
        return kn_brk(r, KN_BRK_ATTRIBUTE_STORE_ON, a->kind == V_TENSOR ? "tensor" : "value kiln does not track");
    CHECK(kn_plain_store(r, a, name));
    kn_attr *at = kn_alloc(&r->arena, sizeof *at);
    if (at == NULL)
        return KN_FAIL;
    at->name = name;
    at->val = b;
    at->next = a->attrs;
    a->attrs = at;
    return kn_effect_add(r, E_SETATTR, a, b, name) < 0 ? KN_FAIL : 0;
}

/* attributes: LOAD_ATTR, LOAD_METHOD, LOAD_SUPER_ATTR, STORE_ATTR */
int
kn_op_attr(kn_rec *r, rframe *fr, int op, int arg)
{
    kn_val *a = NULL, *b = NULL, *c = NULL, *res = NULL;
    PyObject *name;
    PyCodeObject *co = fr->code;
    switch (op) {
    case KN_OP_LOAD_ATTR:
    case KN_OP_LOAD_METHOD: {
        int method = op == KN_OP_LOAD_METHOD || (KN_PY312 && (arg & 1));
        name = PyTuple_GET_ITEM(co->co_names, KN_PY312 && op == KN_OP_LOAD_ATTR ? arg >> 1 : arg);
        a = POP();
        CHECK(kn_getattr(r, fr, a, name, &res));
        /* the method form records the bound method as the callable, with
         * NULL for "no self": below it up to 3.12, above it in 3.13 */
        if (method && !KN_PY313)
            PUSH(kn_v_new(r, V_NULL));
        PUSH(res);
        if (method && KN_PY313)
            PUSH(kn_v_new(r, V_NULL));
        break;
    }
    case KN_OP_LOAD_SUPER_ATTR: {
        name = PyTuple_GET_ITEM(co->co_names, arg >> 2);
        a = POP();   /* self */
        b = POP();   /* class */
        (void)POP(); /* super */
        if (b->kind != V_CONST || !PyType_Check(b->obj))
            return kn_brk(r, KN_BRK_SUPER_NON_CONSTANT_CLASS);
        c = kn_v_new(r, V_SUPER);
        if (c == NULL)
            return KN_FAIL;
        c->obj = b->obj;
        c->self = a;
        CHECK(kn_getattr(r, fr, c, name, &res));
        if ((arg & 1) && !KN_PY313)
            PUSH(kn_v_new(r, V_NULL));
        PUSH(res);
        if ((arg & 1) && KN_PY313)
            PUSH(kn_v_new(r, V_NULL));
        break;
    }
    case KN_OP_STORE_ATTR:
        name = PyTuple_GET_ITEM(co->co_names, arg);
        a = POP();   /* object */
        b = POP();   /* value */
        CHECK(kn_store_attr(r, a, name, b));
        break;
    default:
        return KN_INTERNAL("opcode %s is not an opcode of kn_op_attr", kn_opcode_names[op]);
    }
    return 0;
}

/* containers and strings: BUILD_*, LIST_TO_TUPLE, FORMAT_VALUE (3.13: FORMAT_SIMPLE,
 * FORMAT_WITH_SPEC, CONVERT_VALUE), LIST_APPEND, SET_ADD,
 * LIST_EXTEND, SET_UPDATE, MAP_ADD, DICT_UPDATE, DICT_MERGE */
int
kn_op_build(kn_rec *r, rframe *fr, int op, int arg)
{
    kn_val *a = NULL, *b = NULL, *c = NULL, *res = NULL;
    switch (op) {
    case KN_OP_BUILD_TUPLE:
    case KN_OP_BUILD_LIST:
    case KN_OP_BUILD_SET:
        res = kn_v_new(r, op == KN_OP_BUILD_TUPLE ? V_TUPLE : V_LIST);
        if (res == NULL)
            return KN_FAIL;
        for (int i = arg; i >= 1; i--)
            if (kn_v_add(r, res, PEEK(i)) < 0)
                return KN_FAIL;
        fr->sp -= arg;
        if (op == KN_OP_BUILD_SET) {
            PyObject *x = kn_const_of(r, res);
            if (x == NULL)
                return kn_brk(r, KN_BRK_SET_NON_CONSTANT_VALUES);
            if ((x = kn_concrete_obj(r, x)) == NULL)
                return KN_FAIL;
            PyObject *s = PySet_New(x);
            Py_DECREF(x);
            if (s == NULL)
                return KN_FAIL;
            res = kn_v_const_steal(r, s);
        }
        PUSH(res);
        break;
    case KN_OP_LIST_TO_TUPLE:
        a = POP();
        PUSH(kn_as_tuple(r, a));
        break;
    case KN_OP_BUILD_MAP:
    case KN_OP_BUILD_CONST_KEY_MAP: {
        res = kn_v_new(r, V_DICT);
        if (res == NULL)
            return KN_FAIL;
        kn_val *keys = op == KN_OP_BUILD_CONST_KEY_MAP ? POP() : NULL;
        for (int i = arg; i >= 1; i--) {
            kn_val *k = keys ? NULL : PEEK(2 * i), *v = keys ? PEEK(i) : PEEK(2 * i - 1);
            PyObject *kobj = keys ? PyTuple_GET_ITEM(keys->obj, arg - i) : (k->kind == V_CONST ? k->obj : NULL);
            if (kobj == NULL)
                return kn_brk(r, KN_BRK_DICT_KEY_CONSTANT);
            if (kn_v_add(r, res, v) < 0)
                return KN_FAIL;
            res->keys[res->n - 1] = kobj;
        }
        fr->sp -= keys ? arg : 2 * arg;
        PUSH(res);
        break;
    }
    case KN_OP_BUILD_SLICE:
        res = kn_v_new(r, V_SLICE);
        if (res == NULL)
            return KN_FAIL;
        c = arg == 3 ? POP() : kn_v_const(r, Py_None);
        b = POP();
        a = POP();
        if (kn_v_add(r, res, a) < 0 || kn_v_add(r, res, b) < 0 || kn_v_add(r, res, c) < 0)
            return KN_FAIL;
        if (kn_v_is_const(a) && kn_v_is_const(b) && kn_v_is_const(c)) {
            PyObject *s = PySlice_New(a->obj, b->obj, c->obj);
            res = kn_v_const_steal(r, s);
        }
        PUSH(res);
        break;
    case KN_OP_BUILD_STRING: {
        PyObject *parts = PyTuple_New(arg);
        if (parts == NULL)
            return KN_FAIL;
        for (int i = 0; i < arg; i++) {
            kn_val *p = PEEK(arg - i);
            if (p->kind != V_CONST || !PyUnicode_Check(p->obj)) {
                Py_DECREF(parts);
                return kn_brk(r, KN_BRK_STRING_BUILT_NON_CONSTANT);
            }
            PyTuple_SET_ITEM(parts, i, Py_NewRef(p->obj));
        }
        fr->sp -= arg;
        PyObject *empty = PyUnicode_New(0, 0);
        PyObject *s = empty ? PyUnicode_Join(empty, parts) : NULL;
        Py_XDECREF(empty);
        Py_DECREF(parts);
        PUSH(kn_v_const_steal(r, s));
        break;
    }
    case KN_OP_FORMAT_VALUE:
    case KN_OP_FORMAT_SIMPLE:      /* 3.13 splits FORMAT_VALUE in three */
    case KN_OP_FORMAT_WITH_SPEC:
    case KN_OP_CONVERT_VALUE: {
        /* as FORMAT_VALUE's argument: conversion (1 str, 2 repr, 3 ascii) | 4 with a spec */
        arg = op == KN_OP_FORMAT_VALUE ? arg : op == KN_OP_FORMAT_WITH_SPEC ? 4 : op == KN_OP_CONVERT_VALUE ? (arg & 3) : 0;
        kn_val *spec = (arg & 4) ? POP() : NULL;
        a = POP();
        if (a->kind != V_CONST || (spec && spec->kind != V_CONST))
            return kn_brk(r, KN_BRK_FSTRING_NONCONST);
        PyObject *v = kn_concrete_obj(r, Py_NewRef(a->obj)), *x;   /* a size formats as its digits */
        if (v == NULL)
            return KN_FAIL;
        if ((arg & 3) == 1)
            x = PyObject_Str(v);
        else if ((arg & 3) == 2)
            x = PyObject_Repr(v);
        else if ((arg & 3) == 3)
            x = PyObject_ASCII(v);
        else
            x = Py_NewRef(v);
        Py_DECREF(v);
        if (x == NULL)
            return KN_FAIL;
        PyObject *s = PyObject_Format(x, spec ? spec->obj : NULL);
        Py_DECREF(x);
        PUSH(kn_v_const_steal(r, s));
        break;
    }
    case KN_OP_LIST_APPEND:
    case KN_OP_SET_ADD:
        a = POP();
        c = PEEK(arg);
        if (c->kind != V_LIST)
            return kn_brk(r, KN_BRK_SET_COMPREHENSION);
        if (kn_v_add(r, c, a) < 0)
            return KN_FAIL;
        c->mutated = 1;   /* a list from the frame (a comprehension resumed after a break) is written back */
        break;
    case KN_OP_LIST_EXTEND:
    case KN_OP_SET_UPDATE:
        a = POP();
        c = PEEK(arg);
        if (c->kind != V_LIST)
            return kn_brk(r, KN_BRK_SET_UPDATE);
        CHECK(kn_iter_items(r, a, &b));
        for (int i = 0; i < b->n; i++)
            if (kn_v_add(r, c, b->items[i]) < 0)
                return KN_FAIL;
        c->mutated = 1;
        break;
    case KN_OP_MAP_ADD:
        b = POP();   /* value */
        a = POP();   /* key */
        c = PEEK(arg);
        if (a->kind != V_CONST || c->kind != V_DICT)
            return kn_brk(r, KN_BRK_DICT_COMPREHENSION_NON_CONSTANT);
        CHECK(kn_store_subscr(r, c, a, b));
        break;
    case KN_OP_DICT_UPDATE:
    case KN_OP_DICT_MERGE:
        a = POP();
        c = PEEK(arg);
        if (a->kind != V_DICT || c->kind != V_DICT)
            return kn_brk(r, KN_BRK_MAPPING_UNPACK);
        for (int i = 0; i < a->n; i++) {
            kn_val *k = kn_v_const(r, a->keys[i]);
            if (k == NULL)
                return KN_FAIL;
            CHECK(kn_store_subscr(r, c, k, a->items[i]));
        }
        break;
    default:
        return KN_INTERNAL("opcode %s is not an opcode of kn_op_build", kn_opcode_names[op]);
    }
    return 0;
}

/* calls and functions: CALL, CALL_KW, CALL_FUNCTION_EX, MAKE_FUNCTION, SET_FUNCTION_ATTRIBUTE */
int
kn_op_call(kn_rec *r, rframe *fr, int op, int arg)
{
    kn_val *a = NULL, *c = NULL, *res = NULL;
    switch (op) {
    case KN_OP_CALL:
    case KN_OP_CALL_KW: {
        /* the two slots under the arguments: [NULL or method, callable or
         * self] up to 3.12, [callable, NULL or self] in 3.13; CALL_KW (3.13)
         * has its keyword names on top, where 3.11/3.12's KW_NAMES left them
         * in fr->kwnames */
        int n = arg, kwtop = op == KN_OP_CALL_KW;
        if (kwtop) {
            kn_val *names = TOP();
            if (names->kind != V_CONST || !PyTuple_CheckExact(names->obj))
                return kn_brk(r, KN_BRK_CALL_KW_NAMES);
            fr->kwnames = names->obj;
        }
        kn_val *A = PEEK(n + 2 + kwtop), *B = PEEK(n + 1 + kwtop);
        kn_val **args = &fr->stack[fr->sp - kwtop - n];
        kn_val *callable = KN_PY313 ? A : (A->kind == V_NULL ? B : A);
        kn_val *self = KN_PY313 ? (B->kind == V_NULL ? NULL : B) : (A->kind == V_NULL ? NULL : B);
        kn_val *argbuf[64];
        int total = n;
        if (self != NULL) {
            if (n + 1 > 64)
                return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
            argbuf[0] = self;
            memcpy(argbuf + 1, args, sizeof(kn_val *) * n);
            args = argbuf;
            total = n + 1;
        }
        PyObject *kw = fr->kwnames;
        fr->kwnames = NULL;
        int rc = kn_call(r, fr, callable, args, total, kw, &res);
        if (rc) {
            fr->kwnames = kw;   /* the break leaves the call for real: keep its names */
            return rc;
        }
        fr->sp -= n + 2 + kwtop;
        PUSH(res);
        break;
    }
    case KN_OP_CALL_FUNCTION_EX: {
        kn_val *kwd = (arg & 1) ? TOP() : NULL;
        /* [NULL, fn, args[, kwargs]] up to 3.12, [fn, NULL, args[, kwargs]] in 3.13 */
        kn_val *pargs = PEEK((arg & 1) + 1), *fn = PEEK((arg & 1) + (KN_PY313 ? 3 : 2));
        kn_val *items;
        CHECK(kn_iter_items(r, pargs, &items));
        int np = items->n, nk = 0;
        kn_val *argv[64];
        PyObject *kwn = NULL;
        if (kwd) {
            if (kwd->kind != V_DICT)
                return kn_brk(r, KN_BRK_MAPPING_UNPACK);
            nk = kwd->n;
        }
        if (np + nk > 64)
            return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
        if (np)   /* (items may be NULL when empty) */
            memcpy(argv, items->items, sizeof(kn_val *) * np);
        if (nk) {
            kwn = PyTuple_New(nk);
            if (kwn == NULL)
                return KN_FAIL;
            for (int i = 0; i < nk; i++) {
                PyTuple_SET_ITEM(kwn, i, Py_NewRef(kwd->keys[i]));
                argv[np + i] = kwd->items[i];
            }
            if (kn_pin(r, kwn) == NULL) {
                Py_DECREF(kwn);
                return KN_FAIL;
            }
            Py_DECREF(kwn);
        }
        CHECK(kn_call(r, fr, fn, argv, np + nk, kwn, &res));
        fr->sp -= (arg & 1) + 3;   /* NULL and fn, args[, kwargs] */
        PUSH(res);
        break;
    }
    case KN_OP_MAKE_FUNCTION:
    case KN_OP_SET_FUNCTION_ATTRIBUTE:
        if (op == KN_OP_MAKE_FUNCTION) {
            a = POP();   /* code */
            res = kn_v_new(r, V_FUNC);
            if (res == NULL)
                return KN_FAIL;
            res->obj = a->obj;
            res->globals = fr->globals;
            if (KN_PY313) {   /* 3.13: its parts come after, one SET_FUNCTION_ATTRIBUTE each */
                PUSH(res);
                break;
            }
        } else {   /* (attribute, function -- function): one flag of MAKE_FUNCTION's 3.12 argument */
            res = POP();
            if (res->kind != V_FUNC)
                return KN_INTERNAL("SET_FUNCTION_ATTRIBUTE on a value MAKE_FUNCTION did not make");
        }
        if (arg & 8) {
            c = POP();
            res->items = c->items;
            res->n = c->n;
        }
        if (arg & 4)
            (void)POP();
        if (arg & 2)
            res->self = POP();   /* kwdefaults */
        if (arg & 1)
            res->fn = POP();     /* defaults */
        PUSH(res);
        break;
    default:
        return KN_INTERNAL("opcode %s is not an opcode of kn_op_call", kn_opcode_names[op]);
    }
    return 0;
}

/* imports: IMPORT_NAME, IMPORT_FROM */
int
kn_op_import(kn_rec *r, rframe *fr, int op, int arg)
{
    kn_val *a = NULL, *b = NULL;
    PyObject *name;
    PyCodeObject *co = fr->code;
    switch (op) {
    case KN_OP_IMPORT_NAME: {
        /* an import of a module already loaded has no effect but the binding */
        name = PyTuple_GET_ITEM(co->co_names, arg);
        b = POP();   /* fromlist */
        a = POP();   /* level */
        if (a->kind != V_CONST || b->kind != V_CONST)
            return kn_brk(r, KN_BRK_IMPORT_COMPUTED_ARGUMENTS);
        long level = PyLong_AsLong(a->obj);
        if (level == 0) {
            PyObject *mods = PyImport_GetModuleDict();
            PyObject *hit = PyDict_GetItemWithError(mods, name);
            if (hit == NULL)
                return PyErr_Occurred() ? KN_ERR : kn_brk(r, KN_BRK_IMPORT_NOT_LOADED);
        }
        PyObject *m = PyImport_ImportModuleLevelObject(name, fr->globals, NULL, b->obj, (int)level);
        if (m == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_IMPORT_RAISES);
        }
        PUSH(kn_v_const_steal(r, m));
        break;
    }
    case KN_OP_IMPORT_FROM: {
        name = PyTuple_GET_ITEM(co->co_names, arg);
        a = TOP();
        if (a->kind != V_CONST || !PyModule_Check(a->obj))
            return kn_brk(r, KN_BRK_FROM_IMPORT_NON_MODULE);
        PyObject *v = PyObject_GetAttr(a->obj, name);
        if (v == NULL) {
            PyErr_Clear();
            return kn_brk(r, KN_BRK_FROM_IMPORT_NOT_LOADED);
        }
        PUSH(kn_v_const_steal(r, v));
        break;
    }
    default:
        return KN_INTERNAL("opcode %s is not an opcode of kn_op_import", kn_opcode_names[op]);
    }
    return 0;
}
