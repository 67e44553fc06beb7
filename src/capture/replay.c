/* replay.c — the replay interpreter: what a segment does after its graph.
 *
 * Consumes: a cached segment (its graph, replay program kn_pop[] and
 * constants, capture.h) and a frame whose guards passed, with the value of
 * each of the segment's sources (vals).  Produces: the graph's outputs
 * written back into the frame: values rebuilt (containers, views, objects
 * made while recording), side effects replayed in program order (attribute,
 * item, global and cell stores, grad mode), locals and stack entries
 * written, and the frame's return value for KN_T_RETURN.  The terminal
 * action that follows (a call or branch done for real, a fallback) is
 * hook.c's.
 *
 * kn_replay is the replay program's one interpreter switch: a stack machine
 * whose ops each take a few lines (capture.h, kn_popkind, lists them).
 */
#include "capture/capture.h"
#include "error.h"

#include "capture/frame.h"

int
kn_frame_push(_PyInterpreterFrame *f, PyObject *v)
{
    int cap = KN_FRAME_CODE(f)->co_nlocalsplus + KN_FRAME_CODE(f)->co_stacksize;
    if (f->stacktop >= cap) {
        Py_XDECREF(v);
        KN_INTERNAL("frame stack overflow while resuming");
        return -1;
    }
    f->localsplus[f->stacktop++] = v;
    return 0;
}

/* Runs seg's compiled graph on its inputs (from vals): *out is its outputs
 * (a tuple or list; NULL when the segment has no graph).  0 ok, -1 error,
 * -2 the graph raised (nothing of the frame was touched yet). */
static int
run_graph(kn_seg *seg, PyObject **vals, PyObject **out)
{
    *out = NULL;
    if (seg->graph == NULL)
        return 0;
    PyObject *args_small[32] = {NULL};   /* (zeroed: gcc cannot see ninput bound it) */
    PyObject **args = seg->ninput <= 32 ? args_small : PyMem_Malloc(sizeof(PyObject *) * seg->ninput);
    if (args == NULL)
        return -1;
    for (int i = 0; i < seg->ninput; i++)
        args[i] = vals[seg->inputs[i]];
    kn_hook_off++;
    PyObject *res = PyObject_Vectorcall(seg->graph, args, seg->ninput, NULL);
    kn_hook_off--;
    if (args != args_small)
        PyMem_Free(args);
    if (res == NULL)
        return -2;
    if (!PyTuple_Check(res) && !PyList_Check(res)) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_SystemError, "kiln: a compiled graph must return a tuple or list");
        return -1;
    }
    *out = res;
    return 0;
}

/* The effect ops: how many values each pops (the deepest first in in[]). */
static int
effect_pops(kn_popkind k)
{
    switch (k) {
    case KN_P_SETITEM: return 3;
    case KN_P_DELATTR:
    case KN_P_GLOBAL: return 1;
    default: return 2;   /* SETATTR, DELITEM, REPLACE, CELLSET */
    }
}

/* One effect op on its popped values in[] (references the caller drops):
 * 0 ok, -1 error set. */
static int
replay_effect(kn_seg *seg, _PyInterpreterFrame *f, kn_pop op, PyObject **in)
{
    PyObject *name = op.a < PyList_GET_SIZE(seg->consts) ? PyList_GET_ITEM(seg->consts, op.a) : NULL;
    switch (op.kind) {
    case KN_P_SETATTR: return PyObject_SetAttr(in[0], name, in[1]);      /* obj, value */
    case KN_P_DELATTR: return PyObject_DelAttr(in[0], name);             /* obj */
    case KN_P_SETITEM: return PyObject_SetItem(in[0], in[1], in[2]);     /* obj, key, value */
    case KN_P_DELITEM: return PyObject_DelItem(in[0], in[1]);            /* obj, key */
    case KN_P_GLOBAL: return PyDict_SetItem(f->f_globals, name, in[0]);  /* value */
    case KN_P_CELLSET: return PyCell_Set(in[0], in[1]);                  /* cell, value */
    case KN_P_REPLACE:                                                   /* old, new */
        if (PyList_Check(in[0]))
            return PyList_SetSlice(in[0], 0, PyList_GET_SIZE(in[0]), in[1]);
        if (PyDict_Check(in[0])) {
            PyDict_Clear(in[0]);
            return PyDict_Update(in[0], in[1]);
        }
        return KN_INTERNAL("replace on a non-container");
    default:
        return KN_INTERNAL("not an effect op");
    }
}

/* Runs seg's graph and replay program against frame f, whose sources are
 * already in vals.  On KN_T_RETURN sets *ret.  0 ok, -1 error, -2 the graph
 * raised (nothing of the frame was touched yet).  The switch below is the
 * replay program's one interpreter loop. */
int
kn_replay(kn_seg *seg, _PyInterpreterFrame *f, PyObject **vals, PyObject **ret)
{
    PyObject *out;
    PyObject *small[64];
    PyObject **st = small, **tmp = NULL;
    int sp = 0, rc = -1, cap = 64, replaying = 0;
    int g = run_graph(seg, vals, &out);
    if (g < 0)
        return g;
    if (seg->ntmp) {
        tmp = PyMem_Calloc(seg->ntmp, sizeof(PyObject *));
        if (tmp == NULL)
            goto done;
    }
    kn_hook_off++;   /* code the replay calls (constructors, setattr) runs as plain Python */
    replaying = 1;
    for (int pc = 0; pc < seg->nops; pc++) {
        kn_pop op = seg->ops[pc];
        if (sp + 2 >= cap) {
            int ncap = cap * 2;
            PyObject **ns = PyMem_Malloc(sizeof(PyObject *) * ncap);
            if (ns == NULL)
                goto done;
            memcpy(ns, st, sizeof(PyObject *) * sp);
            if (st != small)
                PyMem_Free(st);
            st = ns;
            cap = ncap;
        }
        PyObject *v, *w;
        int e = 0;   /* status of the effect ops below */
        switch (op.kind) {
        case KN_P_SRC:
            st[sp++] = Py_XNewRef(vals[op.a]);
            break;
        case KN_P_CONST:
            st[sp++] = Py_NewRef(PyList_GET_ITEM(seg->consts, op.a));
            break;
        case KN_P_SIZE: {
            PyObject *p = PyList_GET_ITEM(seg->consts, op.a);
            int64_t x;
            if (kn_sizes_value((const int64_t *)PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p) / 8, vals, seg->nsrc,
                               &x) != 1) {   /* the guards passed on these sizes: a kiln bug */
                KN_INTERNAL("a symbolic size of the replay could not be computed");
                goto done;
            }
            if ((st[sp] = PyLong_FromLongLong(x)) == NULL)
                goto done;
            sp++;
            break;
        }
        case KN_P_OUT:
            if (op.a >= PySequence_Fast_GET_SIZE(out)) {   /* a backend's callable returned too few */
                PyErr_Format(PyExc_RuntimeError,
                             "kiln: a compiled graph returned %zd outputs where the graph has more; a backend "
                             "must return a callable that returns every output of the graph it was given",
                             PySequence_Fast_GET_SIZE(out));
                goto done;
            }
            st[sp++] = Py_NewRef(PySequence_Fast_ITEMS(out)[op.a]);
            break;
        case KN_P_NULL:
            st[sp++] = NULL;
            break;
        case KN_P_TUPLE:
        case KN_P_LIST:
        case KN_P_SET: {
            v = op.kind == KN_P_TUPLE ? PyTuple_New(op.a) : PyList_New(op.a);
            if (v == NULL)
                goto done;
            for (int i = 0; i < op.a; i++) {
                PyObject *it = st[sp - op.a + i];
                if (op.kind == KN_P_TUPLE)
                    PyTuple_SET_ITEM(v, i, it);
                else
                    PyList_SET_ITEM(v, i, it);
            }
            sp -= op.a;
            if (op.kind == KN_P_SET) {
                w = PySet_New(v);
                Py_DECREF(v);
                if (w == NULL)
                    goto done;
                v = w;
            }
            st[sp++] = v;
            break;
        }
        case KN_P_DICT:
            v = PyDict_New();
            if (v == NULL)
                goto done;
            for (int i = 0; i < op.a; i++) {
                if (PyDict_SetItem(v, st[sp - 2 * op.a + 2 * i], st[sp - 2 * op.a + 2 * i + 1]) < 0) {
                    Py_DECREF(v);
                    goto done;
                }
            }
            for (int i = 0; i < 2 * op.a; i++)
                Py_DECREF(st[sp - 1 - i]);
            sp -= 2 * op.a;
            st[sp++] = v;
            break;
        case KN_P_SLICE:
            v = PySlice_New(st[sp - 3], st[sp - 2], st[sp - 1]);
            Py_DECREF(st[sp - 3]);
            Py_DECREF(st[sp - 2]);
            Py_DECREF(st[sp - 1]);
            sp -= 3;
            if (v == NULL)
                goto done;
            st[sp++] = v;
            break;
        case KN_P_ITER:
            v = PyObject_GetIter(st[sp - 1]);
            if (v == NULL)
                goto done;
            Py_SETREF(st[sp - 1], v);
            break;
        case KN_P_GETATTR:
        case KN_P_GETITEM:
            v = op.kind == KN_P_GETATTR ? PyObject_GetAttr(st[sp - 1], PyList_GET_ITEM(seg->consts, op.a))
                                        : PyObject_GetItem(st[sp - 1], PyList_GET_ITEM(seg->consts, op.a));
            if (v == NULL)
                goto done;
            Py_SETREF(st[sp - 1], v);
            break;
        case KN_P_WRAP:
            v = PyObject_CallOneArg(PyList_GET_ITEM(seg->consts, op.a), st[sp - 1]);
            if (v == NULL)
                goto done;
            Py_SETREF(st[sp - 1], v);
            break;
        case KN_P_CALL:
        case KN_P_CALLKW: {
            /* fn, a args; CALLKW: then kwnames (the last len(kwnames) args by keyword) */
            PyObject *kw = op.kind == KN_P_CALLKW ? st[--sp] : NULL;
            Py_ssize_t npos = op.a - (kw ? PyTuple_GET_SIZE(kw) : 0);
            v = PyObject_Vectorcall(st[sp - op.a - 1], st + sp - op.a, npos, kw);
            Py_XDECREF(kw);
            for (int i = 0; i <= op.a; i++)
                Py_DECREF(st[sp - 1 - i]);
            sp -= op.a + 1;
            if (v == NULL)
                goto done;
            st[sp++] = v;
            break;
        }
        case KN_P_TMP_SET:
            Py_XSETREF(tmp[op.a], Py_XNewRef(st[sp - 1]));
            break;
        case KN_P_TMP_GET:
            st[sp++] = Py_XNewRef(tmp[op.a]);
            break;
        case KN_P_SETATTR:
        case KN_P_DELATTR:
        case KN_P_SETITEM:
        case KN_P_DELITEM:
        case KN_P_REPLACE:
        case KN_P_GLOBAL:
        case KN_P_CELLSET: {
            int n = effect_pops(op.kind);
            sp -= n;
            e = replay_effect(seg, f, op, st + sp);
            for (int i = 0; i < n; i++)
                Py_XDECREF(st[sp + i]);
            break;
        }
        case KN_P_LOCAL:
            v = st[--sp];
            Py_XSETREF(f->localsplus[op.a], v);
            break;
        case KN_P_PUSH:
            v = st[--sp];
            if (kn_frame_push(f, v) < 0)
                goto done;
            break;
        case KN_P_RET:
            *ret = st[--sp];
            break;
        case KN_P_CLEARSTACK:
            for (int i = 0; i < op.a && f->stacktop > KN_FRAME_CODE(f)->co_nlocalsplus; i++) {
                f->stacktop--;
                Py_CLEAR(f->localsplus[f->stacktop]);
            }
            break;
        case KN_P_GRAD:
            v = PyObject_CallOneArg(kn_cenv.set_grad, op.a ? Py_True : Py_False);
            if (v == NULL)
                goto done;
            Py_DECREF(v);
            break;
        }
        if (e < 0)
            goto done;
    }
    rc = 0;
done:
    if (replaying)
        kn_hook_off--;
    while (sp > 0)
        Py_XDECREF(st[--sp]);
    if (st != small)
        PyMem_Free(st);
    if (tmp) {
        for (int i = 0; i < seg->ntmp; i++)
            Py_XDECREF(tmp[i]);
        PyMem_Free(tmp);
    }
    Py_XDECREF(out);
    return rc;
}

