/* segment.c — finishing a recording into a cached segment, and the
 * recording driver.
 *
 * Consumes: a recording (record.c) that returned or stopped at a graph
 * break.  Produces: a kn_seg — the fx graph's outputs and the backend's
 * compiled callable, the replay program (kn_pop) that rebuilds values and
 * side effects and writes the frame back (objects made while recording,
 * closures with real cells, views rebuilt from the tensor they view so that
 * aliasing is as in eager; never a fake value), its sources and guards, and
 * the terminal action.  kn_record drives recordings, restarting one when a break
 * inside an inlined call makes that call site run for real; a recording
 * holding a value the replay cannot rebuild becomes a segment that runs the
 * code as Python under the recording's guards (a counted graph break), and
 * so does one whose graph the backend would run as captured while it writes
 * its inputs (finish returns None).
 */
#include "capture/record.h"

#include <string.h>

/* ------------------------------------------------------------------ finishing a segment */

typedef struct {
    kn_pop *ops;
    int n, cap, ntmp;
    PyObject *consts;
    PyObject *outs;   /* list of fx nodes */
} emitter;

static int
emit(emitter *e, int kind, int a)
{
    if (e->n == e->cap) {
        int ncap = e->cap ? e->cap * 2 : 32;
        kn_pop *no = PyMem_Realloc(e->ops, sizeof(kn_pop) * ncap);
        if (no == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        e->ops = no;
        e->cap = ncap;
    }
    e->ops[e->n++] = (kn_pop){kind, a};
    return 0;
}

static int
emit_const(emitter *e, PyObject *o)
{
    Py_ssize_t i = PyList_GET_SIZE(e->consts);
    if (PyList_Append(e->consts, o) < 0)
        return -1;
    return emit(e, KN_P_CONST, (int)i);
}

static int emit_val(kn_rec *r, emitter *e, kn_val *v);

/* A constant of ints (a view's geometry) in a symbolic recording: each
 * symbolic entry computed by the replay from the sizes of this call
 * (KN_P_SIZE), tuples rebuilt around them; an expression kiln cannot
 * compute there becomes its value, guarded.  Elsewhere: emit_const. */
static int
emit_sizes(kn_rec *r, emitter *e, PyObject *o, int depth)
{
    if (!r->symbolic || depth > 8)
        return emit_const(e, o);
    /* a tuple, or a torch.Size (x.shape held in a local across a break):
       its symbolic entries as below, the tuple (and the Size) made around them */
    int size = (PyObject *)Py_TYPE(o) == kn_cenv.torch_size;
    if (PyTuple_CheckExact(o) || size) {
        PyObject *sym = PyObject_CallOneArg(kn_cenv.is_symbolic, o);
        int is = sym == Py_True;
        Py_XDECREF(sym);
        if (sym == NULL)
            return -1;
        if (!is)
            return emit_const(e, o);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
            if (emit_sizes(r, e, PyTuple_GET_ITEM(o, i), depth + 1) < 0)
                return -1;
        if (emit(e, KN_P_TUPLE, (int)PyTuple_GET_SIZE(o)) < 0)
            return -1;
        if (!size)
            return 0;
        Py_ssize_t ci = PyList_GET_SIZE(e->consts);
        if (PyList_Append(e->consts, (PyObject *)Py_TYPE(o)) < 0)
            return -1;
        return emit(e, KN_P_WRAP, (int)ci);
    }
    if (PyObject_TypeCheck(o, (PyTypeObject *)kn_cenv.sym_int)) {
        PyObject *p = PyObject_CallFunctionObjArgs(kn_cenv.size_program, o, r->symslots, NULL);
        if (p == NULL)
            return -1;
        if (p != Py_None) {
            Py_ssize_t i = PyList_GET_SIZE(e->consts);
            int rc = PyList_Append(e->consts, p);
            Py_DECREF(p);
            return rc < 0 ? -1 : emit(e, KN_P_SIZE, (int)i);
        }
        Py_DECREF(p);
    }
    PyObject *c = PyObject_CallOneArg(kn_cenv.concrete, o);
    if (c == NULL)
        return -1;
    int rc = emit_const(e, c);
    Py_DECREF(c);
    return rc;
}

/* parent.key or parent[key], for values inside objects built while recording */
static int
emit_path(kn_rec *r, emitter *e, kn_val *v)
{
    if (emit_val(r, e, v->rparent) < 0)
        return -1;
    Py_ssize_t ci = PyList_GET_SIZE(e->consts);
    if (PyList_Append(e->consts, v->rkey) < 0)
        return -1;
    return emit(e, v->rkind == 1 ? KN_P_GETATTR : KN_P_GETITEM, (int)ci);
}

/* o is a value its guards pin whole (equal, or the same object): an
 * immutable builtin, a type, a module, a code object, a dtype, device or Size */
static int
value_like(PyObject *o)
{
    return kn_is_simple_const(o) || PyTuple_CheckExact(o) || PyFrozenSet_CheckExact(o) || PyType_Check(o) ||
           PyModule_Check(o) || PyCode_Check(o);
}

static int
emit_val(kn_rec *r, emitter *e, kn_val *v)
{
    switch (v->kind) {
    case V_NULL:
        return emit(e, KN_P_NULL, 0);
    case V_CONST:
        /* a value read from the frame whose guard pins less than its identity (a
           function guarded by its code: another call's closure is another
           closure) is read again from its source, not the recording's object */
        if (v->src >= 0 && !value_like(v->obj))
            return emit(e, KN_P_SRC, v->src);
        if (r->symbolic) {
            /* a size that reaches the frame is a Python int there, computed
             * from this call's sizes where kiln can (a SymInt, a tuple or a
             * torch.Size of them: emit_sizes); otherwise its value, guarded
             * (the recording is specialised to it) */
            return emit_sizes(r, e, v->obj, 0);
        }
        return emit_const(e, v->obj);
    case V_TENSOR:
        if (v->src >= 0)
            return emit(e, KN_P_SRC, v->src);
        if (v->tmp)
            return emit(e, KN_P_TMP_GET, v->tmp - 1);
        if (v->vanchor) {
            /* a view: rebuilt from its anchor, so it shares memory with it (and
             * with the anchor's other views) as in eager, whatever the backend
             * returned for it; regen_view(anchor, graph's own output, geometry) */
            if (kn_view_refresh(r, v) < 0)
                return -1;
            kn_val *view = v->vanchor;
            v->vanchor = NULL;
            int rc = emit_const(e, kn_cenv.regen_view) < 0 || emit_val(r, e, view) < 0 || emit_val(r, e, v) < 0 ||
                     emit_sizes(r, e, v->vinfo, 0) < 0 || emit(e, KN_P_CALL, 3) < 0;
            v->vanchor = view;
            if (rc)
                return -1;
            v->tmp = ++e->ntmp;
            return emit(e, KN_P_TMP_SET, v->tmp - 1);
        }
        if (!v->outidx) {
            if (PyList_Append(e->outs, v->node) < 0)
                return -1;
            v->outidx = (int)PyList_GET_SIZE(e->outs);
        }
        return emit(e, KN_P_OUT, v->outidx - 1);
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        if (v->src >= 0 && (v->kind != V_TUPLE || !v->mutated))
            return emit(e, KN_P_SRC, v->src);
        if (v->rparent && !v->tmp && kn_rebuildable(v->rparent))
            return emit_path(r, e, v);
        if (v->tmp)
            return emit(e, KN_P_TMP_GET, v->tmp - 1);
        for (int i = 0; i < v->n; i++) {
            if (v->kind == V_DICT && emit_const(e, v->keys[i]) < 0)
                return -1;
            if (emit_val(r, e, v->items[i]) < 0)
                return -1;
        }
        if (emit(e, v->kind == V_TUPLE ? KN_P_TUPLE : v->kind == V_LIST ? KN_P_LIST : KN_P_DICT, v->n) < 0)
            return -1;
        if (v->kind == V_TUPLE && v->ttype) {
            /* structseq(seq) or namedtuple._make(seq) */
            PyObject *mk = PyObject_HasAttrString(v->ttype, "_make") ? PyObject_GetAttrString(v->ttype, "_make")
                                                                       : Py_NewRef(v->ttype);
            if (mk == NULL)
                return -1;
            Py_ssize_t ci = PyList_GET_SIZE(e->consts);
            int rc = PyList_Append(e->consts, mk);
            Py_DECREF(mk);
            if (rc < 0 || emit(e, KN_P_WRAP, (int)ci) < 0)
                return -1;
        }
        if (v->kind != V_TUPLE) {
            v->tmp = ++e->ntmp;
            return emit(e, KN_P_TMP_SET, v->tmp - 1);
        }
        return 0;
    case V_OBJ:
        if (v->newobj) {
            /* fill_object(object.__new__(cls), {its __dict__}): made once, and
             * reachable (tmp) while its attribute values are built */
            if (v->tmp)
                return emit(e, KN_P_TMP_GET, v->tmp - 1);
            PyObject *onew = PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__new__");
            int rc = onew == NULL || emit_const(e, kn_cenv.fill_object) < 0 || emit_const(e, onew) < 0 ||
                     emit_const(e, (PyObject *)Py_TYPE(v->obj)) < 0 || emit(e, KN_P_CALL, 1) < 0;
            Py_XDECREF(onew);
            if (rc)
                return -1;
            v->tmp = ++e->ntmp;
            if (emit(e, KN_P_TMP_SET, v->tmp - 1) < 0)
                return -1;
            kn_val *d = v->idict, *dp = d->rparent;
            d->rparent = NULL;   /* its contents, not obj.__dict__ */
            rc = emit_val(r, e, d);
            d->rparent = dp;
            d->tmp = 0;          /* later uses: obj.__dict__ itself */
            return rc < 0 ? -1 : emit(e, KN_P_CALL, 2);
        }
        if (v->src >= 0)
            return emit(e, KN_P_SRC, v->src);
        if (v->ctor) {
            if (v->tmp)
                return emit(e, KN_P_TMP_GET, v->tmp - 1);
            for (int i = 0; i < v->ctor->n; i++)
                if (emit_val(r, e, v->ctor->items[i]) < 0)
                    return -1;
            if (v->ctor_kw) {
                if (emit_const(e, v->ctor_kw) < 0 || emit(e, KN_P_CALLKW, v->ctor->n - 1) < 0)
                    return -1;
            } else if (emit(e, KN_P_CALL, v->ctor->n - 1) < 0) {
                return -1;
            }
            v->tmp = ++e->ntmp;
            return emit(e, KN_P_TMP_SET, v->tmp - 1);
        }
        if (v->rparent && kn_rebuildable(v->rparent))
            return emit_path(r, e, v);
        if (v->obj)
            return emit_const(e, v->obj);
        break;
    case V_CELL:
        if (v->src >= 0)
            return emit(e, KN_P_SRC, v->src);
        if (v->obj)   /* a real cell (stores to one without a source break) */
            return emit_const(e, v->obj);
        if (v->tmp)
            return emit(e, KN_P_TMP_GET, v->tmp - 1);
        {
            /* a cell made while recording: one real cell shared by every
             * closure over it, made empty first (a function in it may close
             * over it), then filled */
            if (emit_const(e, (PyObject *)&PyCell_Type) < 0 || emit(e, KN_P_CALL, 0) < 0)
                return -1;
            v->tmp = ++e->ntmp;
            if (emit(e, KN_P_TMP_SET, v->tmp - 1) < 0)
                return -1;
            kn_val *c = v->content;
            if (c == NULL || c == LAZY || c->kind == V_NULL)
                return 0;
            return emit(e, KN_P_TMP_GET, v->tmp - 1) < 0 || emit_val(r, e, c) < 0 || emit(e, KN_P_CELLSET, 0) < 0
                       ? -1
                       : 0;
        }
    case V_ITER: {
        for (int i = v->pos; i < v->n; i++)
            if (emit_val(r, e, v->items[i]) < 0)
                return -1;
        if (emit(e, KN_P_TUPLE, v->n - v->pos) < 0)
            return -1;
        return emit(e, KN_P_ITER, 0);
    }
    case V_SLICE:
        for (int i = 0; i < 3; i++)
            if (emit_val(r, e, v->items[i]) < 0)
                return -1;
        return emit(e, KN_P_SLICE, 0);
    case V_CTX:   /* torch.no_grad() / torch.enable_grad() made, not entered: a fresh one */
        if (v->entered || (v->mode != 0 && v->mode != 1))
            break;
        if (v->tmp)
            return emit(e, KN_P_TMP_GET, v->tmp - 1);
        if (emit_const(e, v->mode ? kn_cenv.enable_grad : kn_cenv.no_grad) < 0 || emit(e, KN_P_CALL, 0) < 0)
            return -1;
        v->tmp = ++e->ntmp;
        return emit(e, KN_P_TMP_SET, v->tmp - 1);
    case V_SUPER:   /* super() kept across a break: super(cls, self) */
        if (v->obj == NULL || v->self == NULL)
            break;
        return (emit_const(e, (PyObject *)&PySuper_Type) < 0 || emit_const(e, v->obj) < 0 ||
                emit_val(r, e, v->self) < 0 || emit(e, KN_P_CALL, 2) < 0)
                   ? -1
                   : 0;
    case V_METHOD:
    case V_TMETHOD:
    case V_BMETHOD: {
        PyObject *types = PyImport_ImportModule("types");
        PyObject *mt = types ? PyObject_GetAttrString(types, "MethodType") : NULL;
        PyObject *ga = PyDict_GetItemString(PyEval_GetBuiltins(), "getattr");
        Py_XDECREF(types);
        if (mt == NULL)
            return -1;
        int rc;
        if (v->kind == V_METHOD)
            rc = (emit_const(e, mt) < 0 || emit_val(r, e, v->fn) < 0 || emit_val(r, e, v->self) < 0 ||
                  emit(e, KN_P_CALL, 2) < 0)
                     ? -1
                     : 0;
        else
            rc = (emit_const(e, ga) < 0 || emit_val(r, e, v->self) < 0 || emit_const(e, v->obj) < 0 ||
                  emit(e, KN_P_CALL, 2) < 0)
                     ? -1
                     : 0;
        Py_DECREF(mt);
        return rc;
    }
    case V_FUNC:
        if (v->tmp)   /* one function object however often it is referenced */
            return emit(e, KN_P_TMP_GET, v->tmp - 1);
        if (v->self == NULL) {
            /* FunctionType(code, globals, name, defaults, closure): the cells must be real */
            PyObject *types = PyImport_ImportModule("types");
            PyObject *ft = types ? PyObject_GetAttrString(types, "FunctionType") : NULL;
            Py_XDECREF(types);
            if (ft == NULL)
                return -1;
            int rc = emit_const(e, ft);
            Py_DECREF(ft);
            if (rc < 0 || emit_const(e, v->obj) < 0 || emit_const(e, v->globals) < 0 ||
                emit_const(e, ((PyCodeObject *)v->obj)->co_name) < 0)
                return -1;
            if ((v->fn ? emit_val(r, e, v->fn) : emit_const(e, Py_None)) < 0)
                return -1;
            if (v->n == 0) {
                if (emit_const(e, Py_None) < 0)
                    return -1;
            } else {
                for (int i = 0; i < v->n; i++) {
                    kn_val *c = v->items[i];
                    if (c->kind != V_CELL)
                        goto unsupported;
                    if (emit_val(r, e, c) < 0)
                        return -1;
                }
                if (emit(e, KN_P_TUPLE, v->n) < 0)
                    return -1;
            }
            if (emit(e, KN_P_CALL, 5) < 0)
                return -1;
            v->tmp = ++e->ntmp;
            return emit(e, KN_P_TMP_SET, v->tmp - 1);
        }
        if (0) {
            PyObject *types = PyImport_ImportModule("types");
            PyObject *ft = types ? PyObject_GetAttrString(types, "FunctionType") : NULL;
            Py_XDECREF(types);
            if (ft == NULL)
                return -1;
            int rc = (emit_const(e, ft) < 0 || emit_const(e, v->obj) < 0 || emit_const(e, v->globals) < 0 ||
                      emit(e, KN_P_CALL, 2) < 0)
                         ? -1
                         : 0;
            Py_DECREF(ft);
            return rc;
        }
        break;
    default:
        break;
    }
unsupported:
    r->unrebuildable = 1 + v->kind;
    PyErr_Format(PyExc_NotImplementedError, "kiln: cannot rebuild a value of kind %d after the graph", v->kind);
    return -1;
}

/* The fake tensor each graph input was recorded with (its placeholder's
 * example_value), in input order; a list, None where unknown. */
static PyObject *
placeholder_fakes(kn_rec *r)
{
    PyObject *out = PyList_New(0), *nodes = PyObject_GetAttrString(r->graph, "nodes");
    PyObject *it = nodes ? PyObject_GetIter(nodes) : NULL, *n;
    while (out && it && (n = PyIter_Next(it))) {
        PyObject *op = PyObject_GetAttrString(n, "op"), *meta = PyObject_GetAttrString(n, "meta");
        int ph = op ? PyObject_RichCompareBool(op, kn_cenv.s_placeholder, Py_EQ) : -1;
        PyObject *f = ph > 0 && meta && PyDict_Check(meta) ? PyDict_GetItemString(meta, "example_value") : NULL;
        if (ph < 0 || (ph > 0 && PyList_Append(out, f ? f : Py_None) < 0))
            Py_CLEAR(out);
        Py_XDECREF(op);
        Py_XDECREF(meta);
        Py_DECREF(n);
    }
    Py_XDECREF(it);
    Py_XDECREF(nodes);
    if (out && PyErr_Occurred())
        Py_CLEAR(out);
    if (out && PyList_GET_SIZE(out) != r->ninputs && PyList_SetSlice(out, 0, PyList_GET_SIZE(out), NULL) < 0)
        Py_CLEAR(out);   /* not one per input: every input counts as written */
    return out;
}

/* 1 when the graph writes one of its tensor inputs: a placeholder's fake
 * tensor whose version moved while recording, or one kiln cannot see (None:
 * counted as written).  Non-tensor inputs are never written. */
static int
inputs_written(PyObject *fakes)
{
    if (fakes == NULL || PyList_GET_SIZE(fakes) == 0)
        return 1;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(fakes); k++) {
        PyObject *f = PyList_GET_ITEM(fakes, k);
        if (f == Py_None)
            return 1;
        PyObject *ver = PyObject_GetAttrString(f, "_version");
        if (ver == NULL) {
            PyErr_Clear();   /* not a tensor */
            continue;
        }
        int moved = !PyLong_Check(ver) || PyLong_AsLong(ver) != 0;
        Py_DECREF(ver);
        PyErr_Clear();
        if (moved)
            return 1;
    }
    return 0;
}

/* The recording's sources and guards move into the segment. */
static void
take_guards(kn_seg *seg, kn_rec *r)
{
    seg->srcs = r->srcs;
    seg->nsrc = r->nsrc;
    r->srcs = NULL;
    r->nsrc = 0;
    seg->guards = r->guards;
    seg->nguard = r->nguard;
    r->guards = NULL;
    r->nguard = 0;
}

/* The local slots a _capture helper names (a tuple of ints), as a
 * PyMem_Calloc'd flag per slot of fr; NULL with an exception on error. */
static char *
slot_flags(rframe *fr, PyObject *helper, PyObject *arg)
{
    PyObject *t = arg ? PyObject_CallFunctionObjArgs(helper, (PyObject *)fr->code, arg, NULL)
                      : PyObject_CallOneArg(helper, (PyObject *)fr->code);
    char *flags = t && PyTuple_Check(t) ? PyMem_Calloc(fr->nlocals + 1, 1) : NULL;
    if (t && !PyTuple_Check(t))
        KN_INTERNAL("a slot helper returned a non-tuple");
    else if (t && flags == NULL)
        PyErr_NoMemory();
    for (Py_ssize_t k = 0; flags && k < PyTuple_GET_SIZE(t); k++) {
        long i = PyLong_AsLong(PyTuple_GET_ITEM(t, k));
        if (i >= 0 && i < fr->nlocals)
            flags[i] = 1;
        else if (PyErr_Occurred()) {
            PyMem_Free(flags);
            flags = NULL;
        }
    }
    Py_XDECREF(t);
    return flags;
}

/* Build the segment: outputs, replay program, compiled graph. */
static kn_seg *
finish(kn_rec *r, rframe *fr, int offset, int nstack_in, int term, int term_off, int term_next, int term_target,
       int term_arg, PyObject *kwnames)
{
    emitter e = {0};
    kn_seg *seg = NULL;
    char *skip = NULL, *cskip = NULL;
    e.consts = PyList_New(0);
    e.outs = PyList_New(0);
    if (e.consts == NULL || e.outs == NULL)
        goto error;
    /* what the frame will never read is not handed back (so it is no graph
     * output): after a return, stores to its own cells that only
     * comprehensions close over; at a break, locals dead from the terminal
     * instruction on */
    if (term == KN_T_RETURN) {
        skip = slot_flags(fr, kn_cenv.private_cells, NULL);
    } else {
        PyObject *at = PyLong_FromLong(term_off);
        skip = at ? slot_flags(fr, kn_cenv.dead_locals, at) : NULL;
        cskip = at && skip ? slot_flags(fr, kn_cenv.dead_cells, at) : NULL;
        Py_XDECREF(at);
        if (cskip == NULL)
            goto error;
    }
    if (skip == NULL)
        goto error;
    /* side effects, in program order */
    for (int i = 0; i < r->neff; i++) {
        kn_effect *ef = &r->effects[i];
        switch (ef->kind) {
        case E_SETATTR:
            if (emit_val(r, &e, ef->a) < 0 || emit_val(r, &e, ef->b) < 0)
                goto error;
            if (emit(&e, KN_P_SETATTR, (int)PyList_GET_SIZE(e.consts)) < 0 || PyList_Append(e.consts, ef->name) < 0)
                goto error;
            break;
        case E_GLOBAL:
            if (emit_val(r, &e, ef->a) < 0)
                goto error;
            if (emit(&e, KN_P_GLOBAL, (int)PyList_GET_SIZE(e.consts)) < 0 || PyList_Append(e.consts, ef->name) < 0)
                goto error;
            break;
        case E_CELL: {
            int own = ef->a->src >= 0 && r->srcs[ef->a->src].kind == KN_SRC_LOCAL &&
                      r->srcs[ef->a->src].idx < fr->nlocals;
            if (own && term == KN_T_RETURN && skip[r->srcs[ef->a->src].idx])
                break;   /* the frame's own cell, unreadable once it returned */
            /* a cell nothing reads from the break on is cleared (were the
             * analysis wrong, a read raises NameError, not a stale value) */
            int dead = own && term != KN_T_RETURN && cskip[r->srcs[ef->a->src].idx];
            if (emit(&e, KN_P_SRC, ef->a->src) < 0 || (dead ? emit(&e, KN_P_NULL, 0) : emit_val(r, &e, ef->b)) < 0 ||
                emit(&e, KN_P_CELLSET, 0) < 0)
                goto error;
            break;
        }
        default:
            break;
        }
    }
    /* containers that came from the frame and were changed: replace their contents */
    for (int i = 0; i < r->nvtab; i++) {
        kn_val *v = r->vtab[i];
        if ((v->kind == V_LIST || v->kind == V_DICT) && v->mutated &&
            (v->src >= 0 || (v->rparent && kn_rebuildable(v->rparent)))) {
            if ((v->src >= 0 ? emit(&e, KN_P_SRC, v->src) : emit_path(r, &e, v)) < 0)
                goto error;
            int src = v->src;
            kn_val *rp = v->rparent;
            v->src = -1;   /* rebuild it fresh */
            v->rparent = NULL;
            int rc = emit_val(r, &e, v);
            v->src = src;
            v->rparent = rp;
            v->tmp = 0;
            if (rc < 0 || emit(&e, KN_P_REPLACE, 0) < 0)
                goto error;
        }
    }
    if (r->grad_cur != r->grad_start && emit(&e, KN_P_GRAD, r->grad_cur) < 0)
        goto error;
    if (term != KN_T_RETURN) {
        const unsigned char *kinds = (const unsigned char *)PyBytes_AS_STRING(fr->code->co_localspluskinds);
        for (int i = 0; i < fr->nlocals; i++) {
            kn_val *v = fr->locals[i];
            if (v == LAZY || v == fr->initial[i])
                continue;
            /* CPython reads a cell or free variable's slot as a cell (NULL only
             * between 3.12's LOAD_FAST_AND_CLEAR and MAKE_CELL): any other
             * value there is a recorder bug, never handed to the frame */
            if ((kinds[i] & (0x40 | 0x80)) && v->kind != V_CELL && v->kind != V_NULL) {
                KN_INTERNAL("a cell variable's slot would get a value that is not a cell");
                goto error;
            }
            /* a dead local is cleared: were the analysis wrong, a read on
             * 3.11 raises UnboundLocalError instead of seeing a stale value
             * (3.12's LOAD_FAST does not check for NULL: there the analysis
             * must be right, as CPython's own choice of LOAD_FAST is) */
            if ((skip[i] ? emit(&e, KN_P_NULL, 0) : emit_val(r, &e, v)) < 0 || emit(&e, KN_P_LOCAL, i) < 0)
                goto error;
        }
        for (int i = 0; i < fr->sp; i++)
            if (emit_val(r, &e, fr->stack[i]) < 0 || emit(&e, KN_P_PUSH, 0) < 0)
                goto error;
    } else {
        if (emit_val(r, &e, fr->ret) < 0 || emit(&e, KN_P_RET, 0) < 0)
            goto error;
    }
    {
        /* no fake value may reach the user or the frame: one among the
         * replay's constants is a kiln bug (an internal error: raised under
         * debug, else this code runs as Python) */
        /* nor a symbolic size: every constant of the replay holds ints (a
         * view's geometry, an object's state), each a guard on its value */
        for (Py_ssize_t k = 0; r->symbolic && k < PyList_GET_SIZE(e.consts); k++) {
            PyObject *c = PyObject_CallOneArg(kn_cenv.concrete, PyList_GET_ITEM(e.consts, k));
            if (c == NULL || PyList_SetItem(e.consts, k, c) < 0)
                goto error;
        }
        PyObject *hf = PyObject_CallOneArg(kn_cenv.has_fake, e.consts);
        int bad = hf == NULL ? -1 : hf == Py_True;
        Py_XDECREF(hf);
        if (bad) {
            if (bad > 0)
                KN_INTERNAL("a fake tensor would reach the frame after the graph");
            goto error;
        }
    }
    seg = PyMem_Calloc(1, sizeof *seg);
    if (seg == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    /* the frame's old stack entries are replaced by the ones pushed above */
    if (nstack_in) {
        /* prepend a stack clear: run_segment's KN_P_LOCAL/PUSH write the frame; an
         * explicit clear keeps the frame's stack exact */
        kn_pop *no = PyMem_Malloc(sizeof(kn_pop) * (e.n + 1));
        if (no == NULL)
            goto error;
        no[0] = (kn_pop){KN_P_CLEARSTACK, nstack_in};
        memcpy(no + 1, e.ops, sizeof(kn_pop) * e.n);
        PyMem_Free(e.ops);
        e.ops = no;
        e.n++;
    }
    seg->offset = offset;
    seg->ops = e.ops;
    e.ops = NULL;
    seg->nops = e.n;
    seg->ntmp = e.ntmp;
    seg->consts = e.consts;
    e.consts = NULL;
    seg->term = term;
    seg->term_off = term_off;
    seg->term_next = term_next;
    seg->term_target = term_target;
    seg->term_arg = term_arg;
    seg->kwnames = Py_XNewRef(kwnames);
    /* the graph */
    if (r->nops > 0) {
        PyObject *outs = PyList_AsTuple(e.outs);
        PyObject *o = outs ? PyObject_CallMethodOneArg(r->graph, kn_cenv.s_output, outs) : NULL;
        Py_XDECREF(outs);
        if (o == NULL)
            goto error;
        Py_DECREF(o);
        PyObject *info = Py_BuildValue("{s:O,s:O,s:i,s:i}", "filename", r->root->code->co_filename, "name",
                                       r->root->code->co_qualname, "line",
                                       PyCode_Addr2Line(r->root->code, offset * 2), "ops", r->nops);
        seg->graph = info ? PyObject_CallFunctionObjArgs(kn_cenv.finish, r->graph, r->fake_mode, r->examples,
                                                         r->ctx->backend, info, NULL)
                          : NULL;
        Py_XDECREF(info);
        if (seg->graph == NULL)
            goto error;
        if (seg->graph == Py_None) {
            /* kiln's backend runs this graph as captured and it writes its
             * inputs (kiln/_capture.py finish): an error would come after
             * some writes, raised outside the user's handlers.  The segment
             * runs as the frame's own Python under its guards instead */
            Py_CLEAR(seg->graph);
            seg->nops = 0;
            seg->term = KN_T_FALLBACK;
            seg->term_off = offset;
        }
    } else if (PyList_GET_SIZE(e.outs) > 0) {
        KN_INTERNAL("graph outputs without graph ops");
        goto error;
    }
    /* distinct tensor inputs must stay distinct (aliasing changes what in-place ops do) */
    int ntensors = 0;   /* (the size inputs of symbolic sizes are ints, not tensors) */
    for (int i = 0; i < r->ninputs; i++)
        ntensors += r->srcs[r->inputs[i]].kind != KN_SRC_SIZE;
    if (ntensors > 1) {
        PyObject *t = PyTuple_New(ntensors);
        if (t == NULL)
            goto error;
        for (int i = 0, k = 0; i < r->ninputs; i++)
            if (r->srcs[r->inputs[i]].kind != KN_SRC_SIZE)
                PyTuple_SET_ITEM(t, k++, PyLong_FromLong(r->inputs[i]));
        int rc = kn_guard_add(r, KN_G_DISTINCT, -1, t, NULL, NULL, NULL, ntensors);
        Py_DECREF(t);
        if (rc < 0)
            goto error;
    }
    /* ... and inputs the graph writes to overlap the same inputs, the same way, as now */
    if (seg->graph) {
        PyObject *fakes = placeholder_fakes(r), *facts = NULL;
        if (fakes == NULL)
            goto error;
        seg->writes = r->ninputs > 0 && inputs_written(fakes);
        if (ntensors > 1 && ntensors < r->ninputs && PyList_GET_SIZE(fakes) == r->ninputs) {
            /* the tensor inputs alone (a symbolic recording's size inputs are ints) */
            int *ts = PyMem_Malloc(sizeof(int) * ntensors);
            PyObject *reals = PyList_New(0), *tf = PyList_New(0);
            int ok = ts && reals && tf;
            for (int i = 0, k = 0; ok && i < r->ninputs; i++) {
                if (r->srcs[r->inputs[i]].kind == KN_SRC_SIZE)
                    continue;
                ts[k++] = r->inputs[i];
                ok = PyList_Append(reals, PyList_GET_ITEM(r->examples, i)) == 0 &&
                     PyList_Append(tf, PyList_GET_ITEM(fakes, i)) == 0;
            }
            facts = ok ? kn_alias_facts(ts, ntensors, reals, tf) : NULL;
            if (!ok && !PyErr_Occurred())
                PyErr_NoMemory();
            PyMem_Free(ts);
            Py_XDECREF(reals);
            Py_XDECREF(tf);
        } else if (ntensors > 1)
            facts = kn_alias_facts(r->inputs, r->ninputs, r->examples, fakes);
        int rc = facts ? kn_guard_add(r, KN_G_ALIAS, -1, facts, NULL, NULL, NULL, 0) : PyErr_Occurred() ? -1 : 0;
        Py_DECREF(fakes);
        Py_XDECREF(facts);
        if (rc < 0)
            goto error;
    }
    /* the relations between symbolic sizes torch recorded, also while the
     * backend lowered the graph: one KN_G_SIZES program, checked after the
     * tensor guards (which read the symbolic dims as wildcards) */
    if (r->symbolic && PyDict_GET_SIZE(r->symslots) > 0) {
        PyObject *gp = PyObject_CallFunctionObjArgs(kn_cenv.guard_program, r->fake_mode, r->symslots, NULL);
        if (gp == NULL)
            goto error;
        int rc = 0;
        if (gp != Py_None)
            rc = kn_guard_add(r, KN_G_SIZES, -1, PyTuple_GET_ITEM(gp, 0), PyTuple_GET_ITEM(gp, 1),
                              PyTuple_GET_ITEM(gp, 2), NULL, 0);
        Py_DECREF(gp);
        if (rc < 0)
            goto error;
    }
    take_guards(seg, r);
    if (seg->graph) {
        seg->inputs = r->inputs;
        seg->ninput = r->ninputs;
        r->inputs = NULL;
        r->ninputs = 0;
    }
    Py_XDECREF(e.outs);
    PyMem_Free(skip);
    PyMem_Free(cskip);
    return seg;
error:
    PyMem_Free(skip);
    PyMem_Free(cskip);
    PyMem_Free(e.ops);
    Py_XDECREF(e.consts);
    Py_XDECREF(e.outs);
    if (seg) {
        seg->srcs = NULL;
        seg->nsrc = 0;
        kn_seg_free(seg);
    }
    return NULL;
}

/* A segment that hands the frame to CPython at offset, under the
 * recording's guards: for a recording whose values kiln cannot rebuild after
 * the graph (unsupported, not a kiln bug: counted as a graph break). */
static void note_break(kn_rec *r, PyCodeObject *code, int pc);

static kn_seg *
python_segment(kn_rec *r, PyCodeObject *code, int offset)
{
    kn_brk(r, KN_BRK_UNREBUILDABLE, r->unrebuildable - 1);
    note_break(r, code, offset);
    kn_seg *seg = PyMem_Calloc(1, sizeof *seg);
    if (seg == NULL)
        return (kn_seg *)PyErr_NoMemory();
    if ((seg->consts = PyList_New(0)) == NULL) {
        PyMem_Free(seg);
        return NULL;
    }
    seg->offset = offset;
    seg->term = KN_T_FALLBACK;
    seg->term_off = offset;
    take_guards(seg, r);
    return seg;
}

/* ------------------------------------------------------------------ entry */

static void
rec_free(kn_rec *r)
{
    if (r->live_autocast) {   /* an aborted recording leaves no autocast entered */
        PyObject *et = kn_err_take();
        for (Py_ssize_t i = PyList_GET_SIZE(r->live_autocast) - 1; i >= 0; i--) {
            PyObject *x = PyObject_CallOneArg(kn_cenv.exit_autocast, PyList_GET_ITEM(r->live_autocast, i));
            Py_XDECREF(x);
            PyErr_Clear();
        }
        Py_CLEAR(r->live_autocast);
        if (et)
            PyErr_SetRaisedException_compat(et);
    }
    if (r->fake_mode && !r->fake_exited) {
        PyObject *et = kn_err_take();
        PyObject *x = PyObject_CallMethod(r->fake_mode, "__exit__", "OOO", Py_None, Py_None, Py_None);
        Py_XDECREF(x);
        PyErr_Clear();
        if (et)
            PyErr_SetRaisedException_compat(et);
    }
    for (int i = 0; i < r->nsrc; i++)
        Py_XDECREF(r->srcs[i].key);
    for (int i = 0; i < r->nguard; i++) {
        Py_XDECREF(r->guards[i].obj);
        Py_XDECREF(r->guards[i].obj2);
        Py_XDECREF(r->guards[i].obj3);
        Py_XDECREF(r->guards[i].obj4);
    }
    PyMem_Free(r->srcs);
    PyMem_Free(r->bysrc);
    PyMem_Free(r->guards);
    PyMem_Free(r->effects);
    PyMem_Free(r->inputs);
    PyMem_Free(r->vtab);
    Py_XDECREF(r->pins);
    Py_XDECREF(r->srcmemo);
    Py_XDECREF(r->objmemo);
    Py_XDECREF(r->graph);
    Py_XDECREF(r->fake_mode);
    Py_XDECREF(r->examples);
    Py_XDECREF(r->symnodes);
    Py_XDECREF(r->symslots);
    kn_arena_free(&r->arena);
}

static int
noinline_has(kn_codeinfo *info, int off)
{
    for (int i = 0; i < info->nnoinline; i++)
        if (info->noinline[i] == off)
            return 1;
    return 0;
}

int kn_rec_noinline(kn_rec *r, rframe *fr);
int
kn_rec_noinline(kn_rec *r, rframe *fr)
{
    return fr == r->root && noinline_has(r->info, fr->lastpc);
}

static void
note_break(kn_rec *r, PyCodeObject *code, int pc)
{
    if (r->brk == KN_BRK_CALL_LEFT_TO_RUN)
        return;   /* the break inside was noted where it happened */
    PyObject *res = PyObject_CallFunction(kn_cenv.note_break, "sOisOO", r->reason, code->co_filename,
                                          PyCode_Addr2Line(code, pc * 2), kn_break_name(r), Py_None,
                                          code->co_qualname);
    Py_XDECREF(res);
    PyErr_Clear();
}

kn_seg *
kn_record(kn_capctx *ctx, kn_codeinfo *info, PyCodeObject *code, PyObject *func, PyObject *globals,
          PyObject *builtins, PyObject **locals, PyObject **stack, int nstack, int offset, int *abort_kind)
{
    *abort_kind = 0;
    PyObject *bytes = PyCode_GetCode(code);
    if (bytes == NULL)
        return NULL;
    PyObject *g0 = PyObject_CallNoArgs(kn_cenv.is_grad);
    if (g0 == NULL) {
        Py_DECREF(bytes);
        return NULL;
    }
    int grad0 = g0 == Py_True;
    Py_DECREF(g0);
    kn_seg *seg = NULL;
    int nlp = code->co_nlocalsplus;
    for (int attempt = 0; attempt < 64; attempt++) {
        kn_rec R = {0}, *r = &R;
        r->ctx = ctx;
        r->info = info;
        r->brk = -1;
        r->grad_start = r->grad_cur = grad0;
        r->root_globals = globals;
        r->root_builtins = builtins;
        r->pins = PyList_New(0);
        r->srcmemo = PyDict_New();
        r->objmemo = PyDict_New();
        r->examples = PyList_New(0);
        r->live_autocast = PyList_New(0);
        if (info->dynstate == NULL && ctx->dynamic != 0 && (info->dynstate = PyDict_New()) == NULL)
            r->pins = NULL;   /* (fails below) */
        if (info->dynstate) {   /* sizes may be symbols: with a ShapeEnv from the start? */
            PyObject *w = PyObject_CallFunction(kn_cenv.wants_symbols, "Oi", info->dynstate, ctx->dynamic);
            r->symbolic = w == Py_True;
            if (w == NULL)
                Py_CLEAR(r->pins);   /* (fails below) */
            Py_XDECREF(w);
            if (r->symbolic && ((r->symnodes = PyDict_New()) == NULL || (r->symslots = PyDict_New()) == NULL))
                Py_CLEAR(r->pins);
        }
        PyObject *gm = (r->pins && r->live_autocast && r->srcmemo && r->objmemo && r->examples)
                           ? PyObject_CallOneArg(kn_cenv.new_graph, r->symbolic ? Py_True : Py_False)
                           : NULL;
        if (gm == NULL) {
            rec_free(r);
            break;
        }
        r->graph = Py_NewRef(PyTuple_GET_ITEM(gm, 0));
        r->fake_mode = Py_NewRef(PyTuple_GET_ITEM(gm, 1));
        Py_DECREF(gm);
        PyObject *ent = PyObject_CallMethod(r->fake_mode, "__enter__", NULL);
        if (ent == NULL) {
            Py_CLEAR(r->fake_mode);
            rec_free(r);
            break;
        }
        Py_DECREF(ent);
        rframe F = {0}, *fr = &F;
        fr->code = code;
        fr->ins = (const uint8_t *)PyBytes_AS_STRING(bytes);
        fr->nins = (int)(PyBytes_GET_SIZE(bytes) / 2);
        fr->globals = globals;
        fr->builtins = builtins;
        fr->nlocals = nlp;
        fr->locals = kn_alloc(&r->arena, sizeof(kn_val *) * (nlp + 1));
        fr->initial = kn_alloc(&r->arena, sizeof(kn_val *) * (nlp + 1));
        fr->stackcap = code->co_stacksize + 8;
        fr->stack = kn_alloc(&r->arena, sizeof(kn_val *) * fr->stackcap);
        fr->pc = offset;
        fr->lastpc = offset;   /* a break before the first instruction is at offset */
        fr->call_off = -1;
        r->root = fr;
        kn_root_locals = locals;
        int rc = (fr->locals && fr->initial && fr->stack) ? 0 : KN_ERR;
        for (int i = 0; rc == 0 && i < nlp; i++)
            fr->locals[i] = fr->initial[i] = LAZY;
        if (rc == 0 && kn_guard_add(r, KN_G_GRAD, -1, NULL, NULL, NULL, NULL, grad0) < 0)
            rc = KN_ERR;
        if (rc == 0) {   /* default dtype, default device, autocast */
            PyObject *st = kn_state_snapshot();
            if (st == NULL || kn_guard_add(r, KN_G_STATE, -1, st, NULL, NULL, NULL, 0) < 0)
                rc = KN_ERR;
            Py_XDECREF(st);
        }
        for (int j = 0; rc == 0 && j < nstack; j++) {
            int s = kn_src_add(r, KN_SRC_STACK, -1, NULL, j);
            kn_val *v = NULL;
            /* a NULL entry is guarded as one: 3.12's inlined comprehensions
             * keep the outer value of their variable on the stack, NULL
             * when it was unbound */
            if (s >= 0 && stack[j] == NULL && kn_guard_add(r, KN_G_NULL, s, NULL, NULL, NULL, NULL, 0) < 0)
                s = -1;
            if (s >= 0)
                v = stack[j] ? kn_wrap(r, stack[j], s) : kn_v_new(r, V_NULL);
            if (v == NULL)
                rc = KN_FAIL;
            else
                fr->stack[fr->sp++] = v;
        }
        int stack_break = rc == KN_BREAK;   /* a stack entry kiln cannot record (an unsupported tensor) */
        if (rc == 0)
            rc = kn_run_frame(r, fr);
        {
            /* no fake op runs after this point; the backend must not see the mode.
             * Never call into Python with an exception pending (the mode
             * would stay half-exited and torch abort the process later). */
            PyObject *pending = kn_err_take();
            PyObject *x = PyObject_CallMethod(r->fake_mode, "__exit__", "OOO", Py_None, Py_None, Py_None);
            if (x == NULL && rc != KN_ERR)
                rc = KN_ERR;
            Py_XDECREF(x);
            if (pending) {
                PyErr_Clear();
                PyErr_SetRaisedException_compat(pending);
            }
            r->fake_exited = 1;
        }
        /* put the real grad mode back; the replay sets what the code left */
        if (r->grad_cur != grad0) {
            PyObject *pending = kn_err_take();
            PyObject *x = PyObject_CallOneArg(kn_cenv.set_grad, grad0 ? Py_True : Py_False);
            Py_XDECREF(x);
            if (pending) {
                PyErr_Clear();
                PyErr_SetRaisedException_compat(pending);
            }
        }
        if (rc == KN_BREAK && r->brk < 0) {   /* a step declined without saying why */
            KN_INTERNAL("a recording step broke without a reason from breaks.def");
            rc = KN_ERR;
        }
        if (r->restart_symbolic && rc != KN_ERR) {
            /* a size of an input changed (automatic dynamic) in a recording
             * without a ShapeEnv: record again, with one (wants_symbols now
             * says so: the code's dynstate has a None) */
            PyErr_Clear();
            rec_free(r);
            continue;
        }
        if (rc == KN_ERR) {
            rec_free(r);
            break;
        }
        if (rc == KN_BREAK && r->break_code != NULL) {
            /* a break inside an inlined call: leave that call to run for real */
            if (noinline_has(info, r->break_pc)) {   /* should not happen */
                rc = KN_BREAK;
            } else {
                if (info->nnoinline == info->capnoinline) {
                    int ncap = info->capnoinline ? info->capnoinline * 2 : 4;
                    int *nn = PyMem_Realloc(info->noinline, sizeof(int) * ncap);
                    if (nn == NULL) {
                        rec_free(r);
                        break;
                    }
                    info->noinline = nn;
                    info->capnoinline = ncap;
                }
                info->noinline[info->nnoinline++] = r->break_pc;
                rec_free(r);
                continue;
            }
        }
        if (rc == KN_BREAK) {
            note_break(r, code, fr->lastpc);
            if (ctx->fullgraph) {
                PyObject *ln = PyObject_CallMethod(kn_cenv.mod, "source_line", "Oi", code->co_filename,
                                                   PyCode_Addr2Line(code, fr->lastpc * 2));
                PyErr_Format(PyExc_RuntimeError,
                             "kiln.compile(fullgraph=True): graph break at %U:%d (%S): %s. Remove the construct or "
                             "use fullgraph=False to let kiln split the graph there.",
                             code->co_filename, PyCode_Addr2Line(code, fr->lastpc * 2), ln ? ln : Py_None, r->reason);
                Py_XDECREF(ln);
                *abort_kind = 1;
                rec_free(r);
                break;
            }
            int pc = fr->lastpc, op, arg, next;
            kn_decode(fr, pc, &op, &arg, &next);
            int region = kn_exc_region(code, pc);
            if (stack_break) {
                /* CPython runs the frame from offset, its stack untouched */
                fr->sp = 0;
                seg = finish(r, fr, offset, 0, KN_T_FALLBACK, offset, 0, 0, 0, NULL);
            } else if (fr->nwith > 0) {
                /* a break inside a with block: the whole segment runs as Python;
                 * nothing recorded (values, effects, grad mode) is replayed */
                r->neff = 0;
                r->nops = 0;
                r->nvtab = 0;
                r->grad_cur = r->grad_start;
                fr->sp = 0;
                for (int i = 0; i < fr->nlocals; i++)
                    fr->locals[i] = fr->initial[i];
                seg = finish(r, fr, offset, 0, KN_T_FALLBACK, offset, 0, 0, 0, NULL);
                if (seg) {
                    seg->nops = 0;
                    seg->term_off = offset;
                }
            } else if ((op == KN_OP_CALL || op == KN_OP_CALL_KW || op == KN_OP_CALL_FUNCTION_EX) && region == 0) {
                int plain = op != KN_OP_CALL_FUNCTION_EX;
                int targ = plain ? arg : ((arg & 1) ? -2 : -1);
                seg = finish(r, fr, offset, nstack, KN_T_CALL, pc, next, 0, targ, plain ? fr->kwnames : NULL);
            } else if ((op == KN_OP_POP_JUMP_IF_FALSE || op == KN_OP_POP_JUMP_IF_TRUE ||
                        op == KN_OP_POP_JUMP_FORWARD_IF_FALSE || op == KN_OP_POP_JUMP_FORWARD_IF_TRUE ||
                        op == KN_OP_POP_JUMP_BACKWARD_IF_FALSE || op == KN_OP_POP_JUMP_BACKWARD_IF_TRUE) &&
                       region == 0) {
                int want = op == KN_OP_POP_JUMP_IF_TRUE || op == KN_OP_POP_JUMP_FORWARD_IF_TRUE ||
                           op == KN_OP_POP_JUMP_BACKWARD_IF_TRUE;
                seg = finish(r, fr, offset, nstack, KN_T_JUMP, pc, next, kn_jump_target(op, arg, next), want, NULL);
            } else {
                seg = finish(r, fr, offset, nstack, KN_T_FALLBACK, pc, 0, 0, 0, NULL);
            }
        } else {
            seg = finish(r, fr, offset, nstack, KN_T_RETURN, 0, 0, 0, 0, NULL);
        }
        {
            /* the backend may have run the graph's grad-mode calls for real
             * (AOT's tracing does): the frame's grad mode is what it was */
            PyObject *et = kn_err_take();
            PyObject *g1 = PyObject_CallNoArgs(kn_cenv.is_grad);
            if (g1 && (g1 == Py_True) != grad0) {
                PyObject *x = PyObject_CallOneArg(kn_cenv.set_grad, grad0 ? Py_True : Py_False);
                Py_XDECREF(x);
            }
            Py_XDECREF(g1);
            PyErr_Clear();
            if (et)
                PyErr_SetRaisedException_compat(et);
        }
        if (seg == NULL && r->unrebuildable && PyErr_ExceptionMatches(PyExc_NotImplementedError)) {
            PyErr_Clear();
            seg = python_segment(r, code, offset);
        }
        rec_free(r);
        break;
    }
    kn_root_locals = NULL;
    Py_DECREF(bytes);
    if (seg) {
        seg->next = info->segs;
        info->segs = seg;
    }
    return seg;
}
