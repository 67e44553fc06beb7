/* record_call.c — calls and inlining while recording.
 *
 * Consumes: a callable value and argument values.  Produces: inlined frames
 * for Python functions, methods and module forwards (with their hooks),
 * graph nodes for torch functions (record_value.c), modelled builtins
 * (builtins.c),
 * objects made while recording (plain classes modelled with their __init__
 * inlined, namedtuples, torch/transformers containers built at record time),
 * generators run to the end where they are made (only when the caller's next
 * instructions consume them there), and graph breaks for unknown callables,
 * constructors and generators consumed later.
 */
#include "capture/record.h"

#include <structmember.h>

int kn_with_exit(kn_rec *r, kn_val *ctx);
int kn_rec_noinline(kn_rec *r, rframe *fr);

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

/* The break in inlined frame fr, with the frames that called it (innermost
 * first): kiln._capture.note_break reports it at the innermost one that is
 * the user's code, not torch's or the standard library's. */
static void
note_inline_break(kn_rec *r, rframe *fr)
{
    PyObject *outer = PyList_New(0);
    for (rframe *p = fr->parent; outer && p; p = p->parent) {
        PyObject *t = Py_BuildValue("(OiO)", p->code->co_filename, PyCode_Addr2Line(p->code, p->lastpc * 2),
                                    p->code->co_qualname);
        if (t == NULL || PyList_Append(outer, t) < 0)
            Py_CLEAR(outer);
        Py_XDECREF(t);
    }
    PyObject *res = outer ? PyObject_CallFunction(kn_cenv.note_break, "sOisOO", r->reason, fr->code->co_filename,
                                                  PyCode_Addr2Line(fr->code, fr->lastpc * 2), kn_break_name(r), outer,
                                                  fr->code->co_qualname)
                          : NULL;
    Py_XDECREF(outer);
    Py_XDECREF(res);
    PyErr_Clear();
}

/* ------------------------------------------------------------------ generators
 *
 * A generator is recorded by running it to the end where it is created (its
 * yields become a list iterator).  That is only the order eager runs it in
 * when the caller consumes it at once: the next instructions hand it to a
 * consumer that exhausts it (sum, list, torch.stack, ..., possibly through
 * enumerate/zip), unpack it, `yield from` it, or loop over it with a body that
 * stores to no cell, global, attribute or item.  Anything else — the
 * generator kept in a local and consumed later, passed to a user function,
 * advanced with next() — breaks the graph at its creation: a store or an
 * in-place op between creation and consumption would otherwise be seen in the
 * wrong order. */

enum { GEN_LATER = 0, GEN_NOW = 1, GEN_LOOP = 2 };

/* a consumer that runs the iterator at its argument to the end (1), a lazy
 * wrapper whose result is consumed in turn (2), else 0 */
static int
gen_consumer(PyObject *o)
{
    if (o == (PyObject *)&PyList_Type || o == (PyObject *)&PyTuple_Type || o == (PyObject *)&PySet_Type ||
        o == (PyObject *)&PyFrozenSet_Type || o == (PyObject *)&PyDict_Type)
        return 1;
    if (o == (PyObject *)&PyEnum_Type || o == (PyObject *)&PyZip_Type)
        return 2;
    const char *nm = NULL;
    PyObject *self = NULL;
    if (PyCFunction_Check(o)) {
        nm = ((PyCFunctionObject *)o)->m_ml->ml_name;
        self = PyCFunction_GET_SELF(o);
    } else if (Py_IS_TYPE(o, &PyMethodDescr_Type) && PyDescr_TYPE(o) == &PyUnicode_Type) {
        return strcmp(((PyMethodDescrObject *)o)->d_method->ml_name, "join") == 0;
    }
    if (nm == NULL)
        return 0;
    if (self && PyUnicode_Check(self))
        return strcmp(nm, "join") == 0;
    if (self && PyModule_Check(self) && strcmp(PyModule_GetName(self) ? PyModule_GetName(self) : "", "builtins") == 0) {
        static const char *const b[] = {"sum", "any", "all", "min", "max", "sorted", NULL};
        for (int i = 0; b[i]; i++)
            if (strcmp(nm, b[i]) == 0)
                return 1;
        PyErr_Clear();
        return strcmp(nm, "iter") == 0 ? 2 : 0;
    }
    PyErr_Clear();
    static const char *const t[] = {"stack", "cat", "concat", "concatenate", "hstack", "vstack", NULL};
    PyObject *mod = PyObject_GetAttrString(o, "__module__");
    int istorch = mod && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "torch") == 0;
    Py_XDECREF(mod);
    PyErr_Clear();
    for (int i = 0; istorch && t[i]; i++)
        if (strcmp(nm, t[i]) == 0)
            return 1;
    return 0;
}

static int
gen_callable_kind(kn_val *v)
{
    if (v->kind == V_METHOD && v->fn)
        v = v->fn;
    if ((v->kind == V_CONST || v->kind == V_OBJ) && v->obj)
        return gen_consumer(v->obj);
    return 0;
}

static int
mutating_method(PyObject *name)
{
    static const char *const m[] = {"append", "extend", "insert", "pop",     "remove", "clear", "update",
                                    "setdefault", "add", "discard", "popitem", "sort", "reverse", NULL};
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL) {
        PyErr_Clear();
        return 1;
    }
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '_' && !(n > 4 && s[0] == '_' && s[1] == '_' && s[n - 2] == '_'))
        return 1;   /* a tensor's in-place method (not a dunder) */
    for (int i = 0; m[i]; i++)
        if (strcmp(s, m[i]) == 0)
            return 1;
    return 0;
}

/* where the generator's consumer runs code between its items: a `for` body
 * in the caller, or a comprehension's whole code */
typedef struct {
    rframe f;      /* the code scanned (code, ins, nins, globals, builtins; locals for a `for`) */
    int body, end;
    kn_val **free; /* a comprehension: its closure cells, from localsplus index freebase */
    int freebase, nfree;
} gen_loop;

/* a value the loop body may call that can run arbitrary code: a Python
 * function or method, a callable object (a module), or one kiln cannot see */
static int
risky_callee(kn_val *v)
{
    if (v == NULL || v == LAZY)
        return 1;
    switch (v->kind) {
    case V_FUNC:
    case V_METHOD:
    case V_TMETHOD:
    case V_BMETHOD:
    case V_SUPER:
        return 1;
    case V_CONST:
    case V_OBJ:
        return v->obj && PyCallable_Check(v->obj) && !PyType_Check(v->obj) && !PyCFunction_Check(v->obj) &&
               !PyModule_Check(v->obj);
    default:
        return 0;
    }
}

static int
risky_cell(kn_val *c)
{
    if (c == NULL || c == LAZY || c->kind != V_CELL)
        return 1;
    if (c->content != LAZY)
        return c->content != NULL && risky_callee(c->content);
    PyObject *o = c->obj ? PyCell_GET(c->obj) : NULL;
    return o && PyCallable_Check(o) && !PyType_Check(o) && !PyCFunction_Check(o) && !PyModule_Check(o);
}

/* the body [pc, end) of a `for` over the generator: 0 when it may change what
 * the generator reads.  strict: the generator computed tensors or had effects,
 * so in-place ops and calls that may mutate are refused too. */
static int
gen_loop_body_ok(gen_loop *lp, int strict)
{
    rframe *fr = &lp->f;
    PyCodeObject *co = fr->code;
    int pc = lp->body, end = lp->end, prev = -1;
    while (pc < end) {
        int op, arg, next;
        if (kn_decode(fr, pc, &op, &arg, &next) < 0)
            return 0;
        /* a callable kiln cannot see statically (self.layers[0](x), f(x)(y)):
         * PUSH_NULL comes before the callable's load up to 3.12, after it in 3.13 */
        if (strict && !KN_PY313 && prev == KN_OP_PUSH_NULL && op != KN_OP_LOAD_FAST && op != KN_OP_LOAD_FAST_CHECK &&
            op != KN_OP_LOAD_DEREF && op != KN_OP_LOAD_GLOBAL)
            return 0;
        if (strict && KN_PY313 && op == KN_OP_PUSH_NULL && prev != KN_OP_LOAD_FAST && prev != KN_OP_LOAD_FAST_CHECK &&
            prev != KN_OP_LOAD_DEREF && prev != KN_OP_LOAD_FAST_LOAD_FAST && prev != KN_OP_STORE_FAST_LOAD_FAST)
            return 0;
        switch (op) {
        case KN_OP_STORE_DEREF:
        case KN_OP_DELETE_DEREF:
        case KN_OP_STORE_GLOBAL:
        case KN_OP_DELETE_GLOBAL:
        case KN_OP_STORE_NAME:
        case KN_OP_DELETE_NAME:
        case KN_OP_STORE_ATTR:
        case KN_OP_DELETE_ATTR:
        case KN_OP_STORE_SUBSCR:
        case KN_OP_DELETE_SUBSCR:
        case KN_OP_STORE_SLICE:
        case KN_OP_CALL_FUNCTION_EX:
            return 0;
        case KN_OP_BINARY_OP:
            if (strict && arg >= 13)   /* NB_INPLACE_* */
                return 0;
            break;
        case KN_OP_KW_NAMES:
        case KN_OP_LOAD_CONST:   /* 3.13: CALL_KW's names are a constant on the stack */
            if (strict) {   /* out= writes into a tensor */
                PyObject *kw = PyTuple_GET_ITEM(co->co_consts, arg);
                for (Py_ssize_t i = 0; PyTuple_CheckExact(kw) && i < PyTuple_GET_SIZE(kw); i++)
                    if (PyUnicode_Check(PyTuple_GET_ITEM(kw, i)) &&
                        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw, i), "out") == 0)
                        return 0;
            }
            break;
        case KN_OP_LOAD_ATTR:
        case KN_OP_LOAD_METHOD:
            if (strict && mutating_method(PyTuple_GET_ITEM(co->co_names,
                                                           KN_PY312 && op == KN_OP_LOAD_ATTR ? arg >> 1 : arg)))
                return 0;
            break;
        case KN_OP_LOAD_FAST:
        case KN_OP_LOAD_FAST_CHECK:
        case KN_OP_LOAD_DEREF:
        case KN_OP_LOAD_CLASSDEREF:
        case KN_OP_LOAD_FAST_LOAD_FAST:    /* 3.13: the second local is the one a call may use */
        case KN_OP_STORE_FAST_LOAD_FAST: {
            /* a local called (PUSH_NULL before its load; 3.13: after) or whose method is called */
            int op2 = -1, arg2, next2, deref = op == KN_OP_LOAD_DEREF || op == KN_OP_LOAD_CLASSDEREF;
            if (op == KN_OP_LOAD_FAST_LOAD_FAST || op == KN_OP_STORE_FAST_LOAD_FAST)
                arg &= 15;
            if (kn_decode(fr, next, &op2, &arg2, &next2) < 0)
                op2 = -1;
            int called = KN_PY313 ? op2 == KN_OP_PUSH_NULL : prev == KN_OP_PUSH_NULL;
            /* (3.12 loads a method with LOAD_ATTR, its oparg's low bit set) */
            if (!strict || (!called && op2 != KN_OP_LOAD_METHOD && !(KN_PY312 && op2 == KN_OP_LOAD_ATTR && (arg2 & 1))))
                break;
            kn_val *v = fr->locals ? (arg < fr->nlocals ? fr->locals[arg] : NULL)
                                   : (deref && arg >= lp->freebase && arg - lp->freebase < lp->nfree
                                          ? lp->free[arg - lp->freebase]
                                          : NULL);
            if (called ? (deref ? risky_cell(v) : risky_callee(v)) : (v && v != LAZY && v->kind == V_OBJ))
                return 0;   /* a user function, a module or an object's method */
            break;
        }
        case KN_OP_LOAD_GLOBAL:
            if (strict) {   /* a user function called in the body may do anything */
                PyObject *nm = PyTuple_GET_ITEM(co->co_names, arg >> 1);
                PyObject *g = PyDict_GetItemWithError(fr->globals, nm);
                if (g == NULL && !PyErr_Occurred() && fr->builtins)
                    g = PyDict_GetItemWithError(fr->builtins, nm);
                PyErr_Clear();
                if (g == NULL ||
                    (PyCallable_Check(g) && !PyModule_Check(g) && !PyType_Check(g) && !PyCFunction_Check(g)))
                    return 0;
            }
            break;
        default:
            break;
        }
        prev = op;
        pc = next;
    }
    return 1;
}

static int
comp_kind(kn_val *v)   /* 1 a list/set/dict comprehension, 2 a generator expression, 0 other */
{
    if (v->kind != V_FUNC || v->obj == NULL || !PyCode_Check(v->obj))
        return 0;
    PyObject *nm = ((PyCodeObject *)v->obj)->co_name;
    if (PyUnicode_CompareWithASCIIString(nm, "<genexpr>") == 0)
        return 2;
    return PyUnicode_CompareWithASCIIString(nm, "<listcomp>") == 0 ||
           PyUnicode_CompareWithASCIIString(nm, "<setcomp>") == 0 ||
           PyUnicode_CompareWithASCIIString(nm, "<dictcomp>") == 0;
}

/* the real object a local holds now (a cell's contents for LOAD_DEREF): a
 * module or other object read from the frame, or a constant; else NULL */
static PyObject *
window_local(rframe *fr, int op, int arg)
{
    kn_val *v = arg < fr->nlocals ? fr->locals[arg] : NULL;
    if (v && v != LAZY && op == KN_OP_LOAD_DEREF)
        v = v->kind == V_CELL && v->content != LAZY ? v->content : NULL;
    if (v == NULL || v == LAZY || (v->kind != V_OBJ && v->kind != V_CONST) || v->attrs || v->newobj)
        return NULL;
    return v->obj;
}

/* reading attribute `name` of o runs no code that could write: a Python
 * module's global, or a torch module's parameter, submodule, plain attribute
 * or method (no property) */
static int
pure_attr(PyObject *o, PyObject *name)
{
    if (o == NULL)
        return 0;
    if (PyModule_CheckExact(o))
        return 1;
    if (PyObject_IsInstance(o, kn_cenv.nn_module) != 1) {
        PyErr_Clear();
        return 0;
    }
    PyObject *d = _PyType_Lookup(Py_TYPE(o), name);
    return d == NULL || PyFunction_Check(d);
}

/* The instructions from pc on, up to a load of local `kept`, only read
 * locals, constants, globals, module attributes and module-container items
 * (nothing a generator made before them could see written): the offset of
 * that load (*next: after it; *h: the stack height with the window's pushes),
 * or -1. */
static int
gen_pure_window(rframe *fr, int pc, int kept, int *h, int *next)
{
    PyObject *vals[16];   /* what the window pushed, where known (NULL: unknown), borrowed */
    int n = 0;
    for (int steps = 0; steps < 16; steps++) {
        int op, arg, nx, at = kn_decode(fr, pc, &op, &arg, &nx);
        if (at < 0)
            return -1;
        switch (op) {
        case KN_OP_LOAD_FAST:
        case KN_OP_LOAD_FAST_CHECK:
            if (arg == kept) {
                *next = nx;
                return at;
            }
            /* fall through */
        case KN_OP_LOAD_DEREF:
            if (n == 16)
                return -1;
            vals[n++] = window_local(fr, op, arg);
            ++*h;
            break;
        case KN_OP_LOAD_CONST:
        case KN_OP_PUSH_NULL:
            if (n == 16)
                return -1;
            vals[n++] = NULL;
            ++*h;
            break;
        case KN_OP_LOAD_GLOBAL: {
            int pushes = 1 + (arg & 1);   /* and a NULL (the call form) */
            if (n + pushes > 16)
                return -1;
            PyObject *nm = PyTuple_GET_ITEM(fr->code->co_names, arg >> 1);
            PyObject *g = PyDict_GetItemWithError(fr->globals, nm);
            if (g == NULL && !PyErr_Occurred() && fr->builtins)
                g = PyDict_GetItemWithError(fr->builtins, nm);
            PyErr_Clear();
            if (pushes == 2 && !KN_PY313)
                vals[n++] = NULL;
            vals[n++] = g;
            if (pushes == 2 && KN_PY313)
                vals[n++] = NULL;   /* 3.13: the NULL above the callable */
            *h += pushes;
            break;
        }
        case KN_OP_LOAD_ATTR: {
            int method = KN_PY312 && (arg & 1);
            PyObject *name = PyTuple_GET_ITEM(fr->code->co_names, KN_PY312 ? arg >> 1 : arg);
            if (n == 0 || method || !pure_attr(vals[n - 1], name))
                return -1;
            vals[n - 1] = NULL;
            break;
        }
        case KN_OP_BINARY_SUBSCR:   /* a ModuleList / Sequential item */
            if (n < 2 || vals[n - 2] == NULL || !kn_is_module_seq(vals[n - 2]))
                return -1;
            n--;
            vals[n - 1] = NULL;
            --*h;
            break;
        case KN_OP_PRECALL:
        case KN_OP_NOP:
            break;
        default:
            return -1;
        }
        pc = nx;
    }
    return -1;
}

/* gen_use's walk; *kept: a local the generator passes through (`g = gen();
 * for x in g`), read back at *keptpc */
static int
gen_use_walk(kn_rec *r, rframe *fr, gen_loop *lp, int *kept, int *keptpc)
{
    int op, arg, next;
    int pc = fr->pc;
    PyObject *kw = NULL;
    if (kn_decode(fr, pc, &op, &arg, &next) < 0 || op != KN_OP_CALL)
        return GEN_LATER;
    int base = fr->sp - (arg + 2);   /* stack height below the call's operands */
    int h = base + 1, t = base;      /* height after the call; the generator's slot */
    if (base < 0)
        return GEN_LATER;
    for (int steps = 0; steps < 64; steps++) {
        pc = next;
        if (kn_decode(fr, pc, &op, &arg, &next) < 0)
            return GEN_LATER;
        switch (op) {
        case KN_OP_PRECALL:
        case KN_OP_NOP:
            break;
        case KN_OP_KW_NAMES:
            kw = PyTuple_GET_ITEM(fr->code->co_consts, arg);
            break;
        case KN_OP_JUMP_FORWARD:
            next = kn_jump_target(op, arg, next);
            break;
        case KN_OP_LOAD_FAST:
        case KN_OP_LOAD_CONST:
        case KN_OP_LOAD_DEREF:   /* more arguments: loads with no effect */
            h++;
            break;
        case KN_OP_LOAD_FAST_LOAD_FAST:   /* 3.13 */
            h += 2;
            break;
        case KN_OP_STORE_FAST: {   /* `g = gen(); <reads>; <use of g>` */
            int at, next2, hh = h - 1;
            if (t != h - 1 || *kept >= 0 || (at = gen_pure_window(fr, next, arg, &hh, &next2)) < 0)
                return GEN_LATER;
            *kept = arg;
            *keptpc = at;
            next = next2;
            t = hh;   /* the generator, loaded again above what the window pushed */
            h = hh + 1;
            break;
        }
        case KN_OP_CALL: {
            int a = h - arg - 2;   /* the callable's slot (or NULL) */
            if (a < 0 || a >= base)
                return GEN_LATER;
            kn_val *A = fr->stack[a], *B = fr->stack[a + 1];
            if (arg == 0 && t == a + 1 && A->kind == V_FUNC) {   /* a comprehension over it */
                int ck = comp_kind(A);
                if (ck == 2) {   /* a generator expression: its own use decides */
                    t = a;
                    h = a + 1;
                    break;
                }
                if (ck != 1)
                    return GEN_LATER;
                PyObject *bytes = PyCode_GetCode((PyCodeObject *)A->obj);
                if (bytes == NULL || PyList_Append(r->pins, bytes) < 0) {
                    Py_XDECREF(bytes);
                    PyErr_Clear();
                    return GEN_LATER;
                }
                Py_DECREF(bytes);
                memset(lp, 0, sizeof *lp);
                lp->f.code = (PyCodeObject *)A->obj;
                lp->free = A->items;
                lp->nfree = A->n;
                lp->freebase = lp->f.code->co_nlocalsplus - lp->f.code->co_nfreevars;
                lp->f.ins = (const uint8_t *)PyBytes_AS_STRING(bytes);
                lp->f.nins = (int)(PyBytes_GET_SIZE(bytes) / 2);
                lp->f.globals = A->globals ? A->globals : fr->globals;
                lp->f.builtins = fr->builtins;
                lp->body = 0;
                lp->end = lp->f.nins;
                return GEN_LOOP;
            }
            if (t < h - arg)
                return GEN_LATER;   /* the generator is no argument of this call */
            for (Py_ssize_t i = 0; kw && i < PyTuple_GET_SIZE(kw); i++)
                if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw, i), "key") == 0)
                    return GEN_LATER;   /* a key function runs between the items */
            kw = NULL;
            int k = gen_callable_kind(A->kind == V_NULL ? B : A);
            if (k == 1)
                return GEN_NOW;
            if (k != 2)
                return GEN_LATER;
            t = a;   /* enumerate/zip/iter: follow its result */
            h = a + 1;
            break;
        }
        case KN_OP_UNPACK_SEQUENCE:
        case KN_OP_UNPACK_EX:
        case KN_OP_LIST_EXTEND:   /* f(a, *gen): the items into the argument list at once */
            return t == h - 1 ? GEN_NOW : GEN_LATER;
        case KN_OP_CALL_FUNCTION_EX:   /* f(*gen): made a tuple before f runs */
            return t == h - 1 && !(arg & 1) ? GEN_NOW : GEN_LATER;
        case KN_OP_GET_YIELD_FROM_ITER:   /* inside a generator kiln runs to the end itself */
            return t == h - 1 && fr->yields ? GEN_NOW : GEN_LATER;
        case KN_OP_GET_ITER: {
            int op2, arg2, next2;
            if (t != h - 1 || kn_decode(fr, next, &op2, &arg2, &next2) < 0)
                return GEN_LATER;
            int loop = KN_PY312 ? kn_inlined_comp_loop(fr, next) : -1;   /* an inlined comprehension */
            if (loop >= 0 && kn_decode(fr, loop, &op2, &arg2, &next2) < 0)
                return GEN_LATER;
            if (op2 != KN_OP_FOR_ITER)
                break;   /* iter(gen) is gen: a comprehension's call may follow */
            memset(lp, 0, sizeof *lp);
            lp->f = *fr;
            lp->body = next2;
            lp->end = next2 + arg2;
            return GEN_LOOP;
        }
        default:
            return GEN_LATER;
        }
    }
    return GEN_LATER;
}

/* how the caller uses the generator its CALL at fr->pc makes: GEN_NOW
 * (exhausted at once), GEN_LOOP (run item by item by the code in *lp), or
 * GEN_LATER.  A local it passes through must be read nowhere else: a
 * consumer that stops early (break, any) would leave the rest to it. */
static int
gen_use(kn_rec *r, rframe *fr, gen_loop *lp)
{
    int kept = -1, keptpc = -1;
    int use = gen_use_walk(r, fr, lp, &kept, &keptpc);
    for (int pc = 0, at, op, arg, next; use != GEN_LATER && kept >= 0 && pc < fr->nins; pc = next) {
        if ((at = kn_decode(fr, pc, &op, &arg, &next)) < 0)
            return GEN_LATER;
        if ((op == KN_OP_LOAD_FAST || op == KN_OP_LOAD_FAST_CHECK || op == KN_OP_LOAD_FAST_AND_CLEAR ||
             op == KN_OP_LOAD_CLOSURE || op == KN_OP_LOAD_DEREF) && arg == kept && at != keptpc)
            return GEN_LATER;
        if ((op == KN_OP_LOAD_FAST_LOAD_FAST && ((arg >> 4) == kept || (arg & 15) == kept)) ||
            (op == KN_OP_STORE_FAST_LOAD_FAST && (arg & 15) == kept))
            return GEN_LATER;   /* 3.13's superinstructions */
    }
    return use;
}

int
kn_inline(kn_rec *r, rframe *caller, PyObject *func, kn_val *funcv, kn_val **args, int nargs, PyObject *kwnames,
          kn_val **out)
{
    PyCodeObject *co = (PyCodeObject *)(func ? PyFunction_GET_CODE(func) : funcv->obj);
    if (caller && kn_rec_noinline(r, caller))
        return kn_brk(r, KN_BRK_CALL_LEFT_TO_RUN);
    if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE))
        return kn_brk(r, KN_BRK_COROUTINE);
    if (depth_of(caller) > 40)
        return kn_brk(r, KN_BRK_CALL_DEPTH);
    gen_loop loop;
    int use = GEN_NOW, nops0 = r->nops, neff0 = r->neff;
    if (co->co_flags & CO_GENERATOR) {
        use = caller ? gen_use(r, caller, &loop) : GEN_LATER;
        if (use == GEN_LATER)
            return kn_brk(r, KN_BRK_GENERATOR_CONSUMED_WHERE_MADE);
        if (use == GEN_LOOP && !gen_loop_body_ok(&loop, 0))
            return kn_brk(r, KN_BRK_LOOP_OVER_GENERATOR_STORES);
    }
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
        rc = kn_brk(r, KN_BRK_TOO_MANY_POSITIONAL_ARGUMENTS);
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
                rc = kn_brk(r, KN_BRK_ARGUMENT_GIVEN_TWICE);
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
            rc = kn_brk(r, KN_BRK_UNEXPECTED_KEYWORD_ARGUMENT, PyUnicode_AsUTF8(kn));
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
                rc = kn_brk(r, KN_BRK_MISSING_ARGUMENT, PyUnicode_AsUTF8(PyTuple_GET_ITEM(varnames, i)));
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
                        rc = kn_brk(r, KN_BRK_CLOSURE_MISMATCH);
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
                        rc = kn_brk(r, KN_BRK_CLOSURE_MISMATCH);
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
    if (use == GEN_LOOP && (r->nops != nops0 || r->neff != neff0) &&
        !gen_loop_body_ok(&loop, 1)) {
        /* the generator computed tensors or had effects, and the loop over it may
         * mutate what it reads: leave the call to run for real */
        rc = kn_brk(r, KN_BRK_LOOP_OVER_GENERATOR_COMPUTES);
        note_inline_break(r, fr);
        if (r->break_code == NULL) {
            r->break_code = r->root->code;
            r->break_pc = fr->call_off;
        }
        goto done;
    }
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
    for (int i = 0; i < n; i++)
        if (!kn_v_is_const(args[i]))
            return 0;
    return 1;
}

/* every argument a constant, or a list, tuple or dict of constants (at most
 * 16 arguments): a pure function may be called on real copies */
static int
const_containers(kn_val **args, int n)
{
    if (n > 16)
        return 0;
    for (int i = 0; i < n; i++) {
        kn_val *v = args[i];
        if (v->kind == V_LIST || v->kind == V_TUPLE || v->kind == V_DICT) {
            for (int j = 0; j < v->n; j++)
                if (v->items[j]->kind != V_CONST)
                    return 0;
        } else if (!kn_v_is_const(v)) {
            return 0;
        }
    }
    return 1;
}

/* Builtins that take sizes as they are: len (a torch.Size of symbols has
 * its length), and over numbers (or tuples and lists of numbers) max / min
 * (their comparisons of symbols are relations, guarded as such, and the
 * answer is one of the symbols), all / any (a size's truth is a relation
 * the ShapeEnv decides from its range, >= 2), sum and abs (symbolic
 * arithmetic), slice (a slice of sizes, as BUILD_SLICE makes).  Any other
 * real call sees concrete sizes (their values guarded).  A row per builtin:
 * its name, and the arguments it takes as they are: 1 any, 0 numbers (or
 * tuples and lists of them), 2 numbers or None. */
static const struct { const char *name; int any_args; } blind_builtins[] = {
    {"len", 1}, {"max", 0}, {"min", 0}, {"all", 0}, {"any", 0}, {"sum", 0}, {"abs", 0}, {"slice", 2},
};
#define KN_NBLIND ((int)(sizeof blind_builtins / sizeof blind_builtins[0]))

static int
size_blind(PyObject *f, PyObject **consts, int n)
{
    static PyObject *fns[KN_NBLIND];
    static int bound = 0;   /* 1 bound, -1 failed */
    if (bound == 0) {
        PyObject *b = PyImport_ImportModule("builtins");
        bound = b ? 1 : -1;
        for (int i = 0; b && i < KN_NBLIND; i++)
            if ((fns[i] = PyObject_GetAttrString(b, blind_builtins[i].name)) == NULL)   /* (kept for the process) */
                bound = -1;
        Py_XDECREF(b);
        if (bound < 0)
            PyErr_Clear();
    }
    if (bound < 0)
        return 0;
    for (int k = 0; k < KN_NBLIND; k++) {
        if (f != fns[k])
            continue;
        if (blind_builtins[k].any_args == 1)
            return 1;
        for (int i = 0; i < n; i++)
            if (blind_builtins[k].any_args == 2 ? !(consts[i] == Py_None || kn_numeric(consts[i]))
                                                : !kn_numeric_items(consts[i]))
                return 0;
        return 1;
    }
    return 0;
}

int
kn_call_real(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    PyObject *small[16] = {0};
    if (nargs > 16)
        return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
    for (int i = 0; i < nargs; i++) {
        small[i] = kn_const_of(r, args[i]);
        if (small[i] == NULL) {
            for (int j = 0; j < i; j++)
                Py_DECREF(small[j]);
            return kn_brk(r, KN_BRK_NON_CONSTANT_ARGUMENT);
        }
    }
    if (r->symbolic && !(kwnames == NULL && size_blind(f, small, nargs))) {
        for (int i = 0; i < nargs; i++) {
            if ((small[i] = kn_concrete_obj(r, small[i])) == NULL) {
                for (int j = 0; j < nargs; j++)
                    if (j != i)
                        Py_XDECREF(small[j]);
                PyErr_Clear();
                return kn_brk(r, KN_BRK_NON_CONSTANT_ARGUMENT);
            }
        }
    }
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *res = PyObject_Vectorcall(f, small, nargs - nkw, kwnames);
    for (int i = 0; i < nargs; i++)
        Py_DECREF(small[i]);
    if (res == NULL) {
        PyErr_Clear();
        return kn_brk(r, KN_BRK_PYTHON_CALL_RAISES);
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
    /* (a number of symbols, max or min's answer: a size like any other; a
     * slice, as BUILD_SLICE's) */
    int sym = PySlice_Check(res) || PyObject_TypeCheck(res, (PyTypeObject *)kn_cenv.sym_int) ||
              PyObject_TypeCheck(res, (PyTypeObject *)kn_cenv.sym_float) ||
              PyObject_TypeCheck(res, (PyTypeObject *)kn_cenv.sym_bool);
    *out = sym ? kn_v_const(r, res) : kn_wrap(r, res, -1);
    Py_DECREF(res);
    return *out ? 0 : KN_FAIL;
}

static PyObject *real_of(kn_rec *r, kn_val *v);

/* ------------------------------------------------------------------ objects built while recording
 *
 * The rule: a constructor runs exactly once per call, on real values.
 *  - a plain Python class (type's own __call__, object.__new__, generic
 *    attribute access, an instance __dict__, no __slots__, no __del__): the
 *    object is modelled — an empty shell from object.__new__ stands for its
 *    type, its __dict__ is a symbolic dict, and __init__ is inlined like any
 *    function (its side effects are recorded and replayed once; a break in it
 *    runs the construction for real).  The replay makes the object with
 *    object.__new__ and fills its __dict__ (kiln._capture.new_object).
 *  - a namedtuple: its generated __new__ is inlined; tuple.__new__ makes a
 *    tuple of that type.
 *  - container classes of torch and transformers (ModelOutput, caches) are
 *    built at record time over fake tensors and again by the replay (their
 *    constructors only store their arguments and build their own state);
 *    checked first, so they keep one graph.
 *  - anything else breaks the graph: the constructor runs for real. */

static int
modelled_class(PyTypeObject *tp)
{
    if (Py_TYPE(tp)->tp_call != PyType_Type.tp_call || tp->tp_new != PyBaseObject_Type.tp_new ||
        tp->tp_setattro != PyObject_GenericSetAttr || tp->tp_getattro != PyObject_GenericGetAttr ||
        tp->tp_finalize != NULL || tp->tp_del != NULL ||
        (tp->tp_dictoffset == 0 && !(tp->tp_flags & Py_TPFLAGS_MANAGED_DICT)))
        return 0;
    PyObject *mro = tp->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (b == &PyBaseObject_Type)
            continue;
        if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE) || PyDict_GetItemString(b->tp_dict, "__slots__"))
            return 0;
    }
    return 1;
}

/* the generated __new__ of a collections.namedtuple class (a function), or NULL */
static PyObject *
namedtuple_new(PyTypeObject *tp)
{
    if (!PyType_IsSubtype(tp, &PyTuple_Type) || tp->tp_init != PyBaseObject_Type.tp_init ||
        Py_TYPE(tp)->tp_call != PyType_Type.tp_call)
        return NULL;
    PyObject *nm = PyUnicode_FromString("__new__");
    PyObject *d = nm ? _PyType_Lookup(tp, nm) : NULL;
    Py_XDECREF(nm);
    if (d == NULL || !Py_IS_TYPE(d, &PyStaticMethod_Type))
        return NULL;
    PyObject *f = PyObject_GetAttrString(d, "__func__");
    if (f == NULL || !PyFunction_Check(f)) {
        Py_XDECREF(f);
        PyErr_Clear();
        return NULL;
    }
    PyObject *g = PyDict_GetItemString(PyFunction_GET_GLOBALS(f), "__name__");
    const char *gs = g && PyUnicode_Check(g) ? PyUnicode_AsUTF8(g) : NULL;
    if (gs == NULL || strncmp(gs, "namedtuple_", 11) != 0) {
        PyErr_Clear();
        Py_DECREF(f);
        return NULL;
    }
    Py_DECREF(f);   /* alive in the class dict */
    return f;
}

/* a dict subclass (an OrderedDict's, say) that adds only methods: no Python
 * code runs while it is built (its __new__, __init__, __setitem__, update
 * and __setattr__ are C's) */
static int
plain_dict_class(PyTypeObject *tp)
{
    if (!PyType_IsSubtype(tp, &PyDict_Type) || Py_TYPE(tp)->tp_call != PyType_Type.tp_call)
        return 0;
    static const char *const names[] = {"__new__", "__init__", "__setitem__", "update", "__setattr__",
                                        "__post_init__", NULL};
    for (int i = 0; names[i]; i++) {
        PyObject *nm = PyUnicode_FromString(names[i]), *d = nm ? _PyType_Lookup(tp, nm) : NULL;
        Py_XDECREF(nm);
        if (d && (PyFunction_Check(d) || Py_IS_TYPE(d, &PyStaticMethod_Type) || Py_IS_TYPE(d, &PyClassMethod_Type)))
            return 0;
    }
    PyErr_Clear();
    return 1;
}

static int
library_class(PyTypeObject *tp)
{
    PyObject *mod = PyObject_GetAttrString((PyObject *)tp, "__module__");
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    int lib = m && (strncmp(m, "torch.", 6) == 0 || strncmp(m, "transformers.", 13) == 0);
    Py_XDECREF(mod);
    PyErr_Clear();
    return lib || plain_dict_class(tp);
}

/* o.name = v on an object made while recording: its __dict__ */
int
kn_newobj_setattr(kn_rec *r, kn_val *o, PyObject *name, kn_val *v)
{
    PyObject *d = _PyType_Lookup(Py_TYPE(o->obj), name);
    if (d && Py_TYPE(d)->tp_descr_set)
        return kn_brk(r, KN_BRK_ATTRIBUTE_STORE_THROUGH_DESCRIPTOR, PyUnicode_AsUTF8(name));
    kn_val *dict = o->idict;
    for (int i = 0; i < dict->n; i++) {
        if (PyUnicode_Compare(dict->keys[i], name) == 0) {
            dict->items[i] = v;
            return 0;
        }
    }
    if (PyErr_Occurred() || PyList_Append(r->pins, name) < 0 || kn_v_add(r, dict, v) < 0)
        return KN_ERR;
    dict->keys[dict->n - 1] = name;
    return 0;
}

static int
construct_modelled(kn_rec *r, rframe *fr, kn_val *cls, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    PyTypeObject *tp = (PyTypeObject *)cls->obj;
    PyObject *empty = PyTuple_New(0);
    PyObject *shell = empty ? PyBaseObject_Type.tp_new(tp, empty, NULL) : NULL;   /* no code of the class runs */
    Py_XDECREF(empty);
    if (shell == NULL) {   /* an abstract class, say: the constructor raises for real */
        PyErr_Clear();
        return kn_brk(r, KN_BRK_OBJECT_NEW_RAISES, tp->tp_name);
    }
    kn_val *v = kn_v_new(r, V_OBJ), *d = kn_v_new(r, V_DICT);
    int rc = v && d && PyList_Append(r->pins, shell) == 0 ? 0 : KN_FAIL;
    Py_DECREF(shell);
    if (rc)
        return rc;
    v->obj = shell;
    v->newobj = 1;
    v->idict = d;
    d->rparent = v;   /* reached again as obj.__dict__ */
    d->rkind = 1;
    d->rkey = kn_cenv.s_dict;
    if (kn_memo_obj(r, shell, v) < 0)
        return KN_FAIL;
    if (tp->tp_init == PyBaseObject_Type.tp_init) {
        if (nargs)
            return kn_brk(r, KN_BRK_TAKES_NO_ARGUMENTS, tp->tp_name);
    } else {
        PyObject *nm = PyUnicode_FromString("__init__");
        PyObject *init = nm ? _PyType_Lookup(tp, nm) : NULL;
        Py_XDECREF(nm);
        if (init == NULL || !PyFunction_Check(init) || nargs + 1 > 64)
            return kn_brk(r, KN_BRK_CONSTRUCTING_INIT_PYTHON_FUNCTION, tp->tp_name);
        kn_val *argv[65], *res, *iv = kn_v_const(r, init);
        if (iv == NULL)
            return KN_FAIL;
        argv[0] = v;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        CHECK(kn_inline(r, fr, init, iv, argv, nargs + 1, kwnames, &res));
        if (res->kind != V_CONST || res->obj != Py_None)
            return kn_brk(r, KN_BRK_INIT_RETURNS_VALUE, tp->tp_name);
    }
    *out = v;
    return 0;
}

/* An instance of a Python class built while recording (see the rule above). */
static int
construct(kn_rec *r, rframe *fr, kn_val *cls, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    PyTypeObject *tp = (PyTypeObject *)cls->obj;
    if (library_class(tp))
        return kn_construct_at_record_time(r, fr, cls, args, nargs, kwnames, out);
    if (modelled_class(tp))
        return construct_modelled(r, fr, cls, args, nargs, kwnames, out);
    PyObject *nt = namedtuple_new(tp);
    if (nt) {
        kn_val *argv[65], *fv = kn_v_const(r, nt);
        if (fv == NULL || nargs + 1 > 64)
            return KN_FAIL;
        argv[0] = cls;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        return kn_inline(r, fr, nt, fv, argv, nargs + 1, kwnames, out);
    }
    return kn_brk(r, KN_BRK_CONSTRUCTING_WHOSE_CONSTRUCTOR_MODEL, tp->tp_name);
}

/* A library container (library_class), built at record time over fake
 * tensors; the replay builds it again over the real ones. */
/* Tensors a record-time constructor made (a sliding-window cache's
 * torch.tensor(window)) are fakes the graph does not know.  Each is made
 * again as a graph node (kiln._capture.constructor_tensors: the constructor
 * run for real once, its tensors by value) and stored on the object in its
 * place, as `obj.path = node` would be: the replay's own object gets the
 * graph's tensor too.  0, KN_BREAK (random, large, from tensor arguments, or
 * not reached by attributes) or KN_ERR. */
static int
rebind_constructor_tensors(kn_rec *r, rframe *fr, kn_val *v, PyObject *cls, PyObject *fa, PyObject *fk)
{
    int is_module = PyObject_IsInstance(v->obj, kn_cenv.nn_module);
    PyErr_Clear();
    if (is_module)
        return 0;   /* its parameters stay fakes: used, they break */
    PyObject *found = PyObject_CallOneArg(kn_cenv.constructor_fakes, v->obj);
    if (found == NULL)
        return KN_ERR;
    PyObject *paths = PyList_New(0), *makers = NULL;
    int rc = paths ? 0 : KN_ERR;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(found); i++) {
        PyObject *pf = PyList_GET_ITEM(found, i);
        kn_val *m = kn_memo_get(r, PyTuple_GET_ITEM(pf, 1));
        if (!(m && m->kind == V_TENSOR) && PyList_Append(paths, PyTuple_GET_ITEM(pf, 0)) < 0)
            rc = KN_ERR;
    }
    if (rc || PyList_GET_SIZE(paths) == 0)
        goto done;
    const char *tn = ((PyTypeObject *)cls)->tp_name;
    if (kn_has_tensor(fa) || kn_has_tensor(fk)) {
        rc = kn_brk(r, KN_BRK_CONSTRUCTOR_TENSORS, tn);
        goto done;
    }
    makers = PyObject_CallFunctionObjArgs(kn_cenv.constructor_tensors, cls, fa, fk, paths, NULL);
    if (makers == NULL) {
        rc = KN_ERR;
        goto done;
    }
    if (!PyList_Check(makers)) {
        rc = kn_brk(r, KN_BRK_CONSTRUCTOR_TENSORS, tn);
        goto done;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(makers); i++) {
        /* the node: fn(*args, dtype=, device=) */
        PyObject *mk = PyList_GET_ITEM(makers, i), *margs = PyTuple_GET_ITEM(mk, 1), *mkw = PyTuple_GET_ITEM(mk, 2);
        kn_val *av[8], *t;
        int na = 0;
        PyObject *kwn = PyTuple_New(PyDict_GET_SIZE(mkw)), *k, *x;
        if (kwn == NULL || PyList_Append(r->pins, kwn) < 0 || PyList_Append(r->pins, mk) < 0) {
            Py_XDECREF(kwn);
            rc = KN_ERR;
            break;
        }
        Py_DECREF(kwn);   /* pinned */
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(margs); j++)
            av[na++] = kn_v_const(r, PyTuple_GET_ITEM(margs, j));
        Py_ssize_t pos = 0, kj = 0;
        while (PyDict_Next(mkw, &pos, &k, &x)) {
            PyTuple_SET_ITEM(kwn, kj++, Py_NewRef(k));
            av[na++] = kn_v_const(r, x);
        }
        for (int j = 0; j < na; j++)
            if (av[j] == NULL)
                rc = KN_FAIL;
        if (rc || (rc = kn_torch_op(r, PyTuple_GET_ITEM(mk, 0), 0, av, na, kwn, &t)))
            break;
        /* the path: attributes and items down to the last step, an attribute */
        PyObject *path = PyList_GET_ITEM(paths, i);
        Py_ssize_t np = PyTuple_GET_SIZE(path);
        kn_val *cur = v;
        for (Py_ssize_t j = 0; rc == 0 && j < np; j++) {
            PyObject *step = PyTuple_GET_ITEM(path, j), *key = PyTuple_GET_ITEM(step, 1);
            int attr = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(step, 0), "attr") == 0;
            if (j == np - 1) {
                if (!attr || cur->kind != V_OBJ) {
                    rc = kn_brk(r, KN_BRK_CONSTRUCTOR_TENSORS, tn);
                } else if ((rc = kn_store_attr(r, cur, key, t)) == 0 && cur != v &&
                           PyObject_SetAttr(cur->obj, key, t->obj) < 0) {
                    PyErr_Clear();   /* the record-time object keeps its fake: reading it for real breaks */
                }
            } else if (attr) {
                rc = kn_getattr(r, fr, cur, key, &cur);
            } else if ((cur->kind == V_LIST || cur->kind == V_TUPLE) && PyLong_Check(key) &&
                       PyLong_AsLong(key) < cur->n) {
                cur = cur->items[PyLong_AsLong(key)];
            } else {
                rc = kn_brk(r, KN_BRK_CONSTRUCTOR_TENSORS, tn);
            }
        }
    }
done:
    Py_DECREF(found);
    Py_XDECREF(paths);
    Py_XDECREF(makers);
    return rc;
}

/* An argument of a constructor run at record time: objects made or read at
 * record time as themselves (also inside lists and tuples: pytree's
 * TreeSpec(type, context, [LeafSpec, ...])), tensors as their fakes.  New
 * ref, or NULL with a break or an error set. */
static PyObject *
construct_arg(kn_rec *r, kn_val *v)
{
    if (v->kind == V_OBJ) {
        PyObject *x = real_of(r, v);
        if (x == NULL && !PyErr_Occurred())
            kn_brk(r, KN_BRK_TENSOR_OP_ARGUMENT, Py_TYPE(v->obj)->tp_name);
        return x;
    }
    if (v->kind == V_LIST || v->kind == V_TUPLE) {
        PyObject *o = v->kind == V_TUPLE ? PyTuple_New(v->n) : PyList_New(v->n);
        for (int i = 0; o && i < v->n; i++) {
            PyObject *it = construct_arg(r, v->items[i]);
            if (it == NULL) {
                Py_CLEAR(o);
                break;
            }
            if (v->kind == V_TUPLE)
                PyTuple_SET_ITEM(o, i, it);
            else
                PyList_SET_ITEM(o, i, it);
        }
        return o;
    }
    PyObject *x = kn_to_py(r, v, 1);   /* (a size reaches the object as its int value, guarded) */
    return x ? kn_concrete_obj(r, x) : NULL;
}

int
kn_construct_at_record_time(kn_rec *r, rframe *fr, kn_val *cls, kn_val **args, int nargs, PyObject *kwnames,
                            kn_val **out)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    PyObject *fa = PyTuple_New(npos), *fk = PyDict_New(), *obj = NULL;
    if (fa == NULL || fk == NULL)
        goto fail;
    for (int i = 0; i < npos; i++) {
        PyObject *x = construct_arg(r, args[i]);
        if (x == NULL)
            goto fail;
        PyTuple_SET_ITEM(fa, i, x);
    }
    for (int i = 0; i < nkw; i++) {
        PyObject *x = construct_arg(r, args[npos + i]);
        if (x == NULL || PyDict_SetItem(fk, PyTuple_GET_ITEM(kwnames, i), x) < 0) {
            Py_XDECREF(x);
            goto fail;
        }
        Py_DECREF(x);
    }
    obj = PyObject_Call(cls->obj, fa, fk);
    if (obj == NULL) {
        PyErr_Clear();
        Py_CLEAR(fa);
        Py_CLEAR(fk);
        return kn_brk(r, KN_BRK_CONSTRUCTING_RAISES_AT_RECORD, ((PyTypeObject *)cls->obj)->tp_name);
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
    if (kn_memo_obj(r, obj, v) < 0) {
        Py_CLEAR(fa);
        Py_CLEAR(fk);
        return KN_FAIL;
    }
    int rc = rebind_constructor_tensors(r, fr, v, cls->obj, fa, fk);
    Py_CLEAR(fa);
    Py_CLEAR(fk);
    if (rc)
        return rc;
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
        if (v->attrs || v->newobj)   /* a shell stands for an object made only by the replay */
            return NULL;
        return v->kind == V_CONST ? kn_concrete_obj(r, Py_NewRef(v->obj)) : Py_NewRef(v->obj);
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

/* Gathers the real objects of args into a[] (with kn_has_tensor: none
 * may hold a tensor); 0 when one has none (nothing kept). */
static int
real_args(kn_rec *r, kn_val **args, int nargs, int no_tensors, PyObject **a)
{
    for (int i = 0; i < nargs; i++) {
        a[i] = real_of(r, args[i]);
        if (a[i] == NULL || (no_tensors && kn_has_tensor(a[i]))) {
            Py_XDECREF(a[i]);
            for (int j = 0; j < i; j++)
                Py_DECREF(a[j]);
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Calls f on a[] (references it drops) at record time: *out the result
 * wrapped (fakes in it map back to their graph values), or a break when it
 * raises.  Always 1 (done, *rc set). */
static int
call_gathered(kn_rec *r, PyObject *f, PyObject **a, int nargs, PyObject *kwnames, kn_val **out, int *rc)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *res = PyObject_Vectorcall(f, a, nargs - nkw, kwnames);
    for (int i = 0; i < nargs; i++)
        Py_DECREF(a[i]);
    if (res == NULL) {
        PyErr_Clear();
        *rc = kn_brk(r, KN_BRK_STANDARD_LIBRARY_CALL_RAISES);
        return 1;
    }
    *out = kn_wrap(r, res, -1);
    Py_DECREF(res);
    *rc = *out ? 0 : KN_FAIL;
    return 1;
}

/* an object with state that running it changes: a generator, a context manager */
static int
stateful_object(PyObject *o)
{
    if (PyGen_Check(o) || PyCoro_CheckExact(o))
        return 1;
    static PyObject *s_enter;
    if (s_enter == NULL && (s_enter = PyUnicode_InternFromString("__enter__")) == NULL) {
        PyErr_Clear();
        return 1;
    }
    return _PyType_Lookup(Py_TYPE(o), s_enter) != NULL;
}

/* copy.copy or copy.deepcopy */
static int
copy_function(PyObject *f)
{
    static PyObject *cp, *dcp;
    if (cp == NULL) {
        PyObject *m = PyImport_ImportModule("copy");
        cp = m ? PyObject_GetAttrString(m, "copy") : NULL;
        dcp = m ? PyObject_GetAttrString(m, "deepcopy") : NULL;
        Py_XDECREF(m);
        PyErr_Clear();
    }
    return f != NULL && (f == cp || f == dcp);
}

/* Call f for real when every argument is a real object holding no tensor;
 * 1 done, 0 not possible. */
static int
call_on_real(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out, int *rc)
{
    PyObject *a[16] = {NULL};
    if (nargs > 16 || !real_args(r, args, nargs, 1, a))
        return 0;
    return call_gathered(r, f, a, nargs, kwnames, out, rc);
}

/* A pure read-only method (kiln/_calls.py class 3: dict.keys, .items,
 * __getitem__, ...) of an object built at record time over fake tensors
 * (kn_construct_at_record_time: a ModelOutput, a plain dict subclass), the
 * other arguments constants: run for real on it; the fakes in the result map
 * back to their graph values (kn_wrap).  1 done (*rc set), 0 not possible. */
static int
read_record_time_object(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out, int *rc)
{
    PyObject *a[16] = {NULL};
    int built = 0;
    if (nargs > 16)
        return 0;
    for (int i = 0; i < nargs; i++) {
        int rt = args[i]->kind == V_OBJ && args[i]->ctor != NULL && !args[i]->attrs;
        if (!rt && !kn_v_is_const(args[i]))
            return 0;
        built |= rt;
    }
    if (!built || !real_args(r, args, nargs, 0, a))
        return 0;
    return call_gathered(r, f, a, nargs, kwnames, out, rc);
}

/* v cannot change after it is stored (a tensor, a constant of an immutable
 * type, a tuple of these): the value stored now is the value the replay
 * stores; a list or dict could still be written through another name */
static int
hashable(PyObject *o)
{
    if (PyObject_Hash(o) != -1)
        return 1;
    PyErr_Clear();
    return 0;
}

static int
immutable_value(kn_val *v)
{
    switch (v->kind) {
    case V_TENSOR:
        return 1;
    case V_CONST: {
        PyObject *o = v->obj;
        return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
               PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyType_Check(o) ||
               Py_TYPE(o) == (PyTypeObject *)kn_cenv.torch_dtype || Py_TYPE(o) == (PyTypeObject *)kn_cenv.torch_device ||
               (PyTuple_CheckExact(o) && !kn_has_tensor(o) && hashable(o));
    }
    case V_TUPLE:
        if (v->ttype)
            return 0;
        for (int i = 0; i < v->n; i++)
            if (!immutable_value(v->items[i]))
                return 0;
        return 1;
    default:
        return 0;
    }
}

/* o.name = v on an object built at record time (kn_construct_at_record_time:
 * a ModelOutput, a config copy): the store runs now on the record-time object
 * (its class's own __setattr__ included, over fakes) and again in the replay,
 * as an effect, on the object the replay built.  1 done (*rc set), 0 not
 * this case. */
int
kn_record_time_setattr(kn_rec *r, kn_val *o, PyObject *name, kn_val *v, int *rc)
{
    if (o->kind != V_OBJ || o->ctor == NULL || o->src >= 0 || o->attrs || o->newobj || !immutable_value(v))
        return 0;
    PyTypeObject *tp = Py_TYPE(o->obj);
    if (tp->tp_setattro != PyObject_GenericSetAttr && !library_class(tp))
        return 0;   /* a user class's own __setattr__ (a deep copy's) may do more than store: not run twice */
    PyObject *x = kn_to_py(r, v, 1);
    if (x == NULL) {
        PyErr_Clear();
        *rc = kn_brk(r, KN_BRK_ATTRIBUTE_STORE_ON, "record-time object of a value kiln cannot rebuild");
        return 1;
    }
    int bad = PyObject_SetAttr(o->obj, name, x);
    Py_DECREF(x);
    if (bad < 0) {
        PyErr_Clear();
        *rc = kn_brk(r, KN_BRK_ATTRIBUTE_STORE_HAS_OWN, Py_TYPE(o->obj)->tp_name);
        return 1;
    }
    *rc = kn_effect_add(r, E_SETATTR, o, v, name) < 0 ? KN_FAIL : 0;
    return 1;
}

/* dict.__getitem__(d, key) / dict.get(d, key[, default]) on a dict (a
 * subclass: OrderedDict, transformers' ACT2FN) read from a source, the key a
 * present constant: the item, read as the source d[key] (a guard reads it
 * again with the dict's own lookup, not the subclass's __getitem__).  1 done
 * (*rc set), 0 not possible. */
static int
read_source_dict_item(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out, int *rc)
{
    if (kwnames || nargs < 2 || nargs > 3 || args[0]->kind != V_OBJ || args[0]->src < 0 || args[0]->attrs ||
        !PyDict_Check(args[0]->obj) || args[1]->kind != V_CONST)
        return 0;
    PyObject *nm = PyObject_GetAttrString(f, "__name__");
    int which = nm && PyUnicode_Check(nm) ? (PyUnicode_CompareWithASCIIString(nm, "__getitem__") == 0 ? 1
                                             : PyUnicode_CompareWithASCIIString(nm, "get") == 0    ? 2
                                                                                                   : 0)
                                          : 0;
    Py_XDECREF(nm);
    PyErr_Clear();
    if (which == 0 || (which == 1 && nargs != 2))
        return 0;
    PyObject *objclass = PyObject_GetAttrString(f, "__objclass__");
    int dict_method = objclass && PyType_Check(objclass) && PyType_IsSubtype((PyTypeObject *)objclass, &PyDict_Type) &&
                      !(((PyTypeObject *)objclass)->tp_flags & Py_TPFLAGS_HEAPTYPE);
    Py_XDECREF(objclass);
    PyErr_Clear();
    if (!dict_method)
        return 0;   /* not dict's (or OrderedDict's) own C method */
    PyObject *val = PyDict_GetItemWithError(args[0]->obj, args[1]->obj);
    if (val == NULL) {   /* absent (or unhashable): eager raises or returns the default; not modelled */
        PyErr_Clear();
        return 0;
    }
    int s = kn_src_add(r, KN_SRC_DICT, args[0]->src, args[1]->obj, 0);
    *out = s >= 0 ? kn_wrap(r, val, s) : NULL;
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
    if (immediate && mode && !r->grad_start)   /* see kn_torch_op: the call is done for real */
        return kn_brk(r, KN_BRK_GRAD_ENABLED_IN_NO_GRAD);
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
bmethod_call(kn_rec *r, kn_val *m, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    kn_val *c = m->self;
    const char *nm = PyUnicode_AsUTF8(m->obj);
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (nkw)
        return kn_brk(r, KN_BRK_KEYWORD_ARGUMENTS_TO, nm);
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
                    return kn_brk(r, KN_BRK_POP_NON_CONSTANT_INDEX);
                i = PyLong_AsLong(args[0]->obj);
                if (i < 0)
                    i += c->n;
            }
            if (i < 0 || i >= c->n)
                return kn_brk(r, KN_BRK_POP_EMPTY_LIST);
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
            int rc = kn_call_real(r, meth, args, nargs, NULL, out);
            Py_DECREF(meth);
            return rc;
        }
        return kn_brk(r, KN_BRK_LIST_METHOD, nm);
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
                return kn_brk(r, KN_BRK_DICT_POP_MISSING_KEY);
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
        return kn_brk(r, KN_BRK_DICT_METHOD, nm);
    }
    return kn_brk(r, KN_BRK_METHOD_UNMODELLED, nm);
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
            return kn_brk(r, KN_BRK_MODULE_BACKWARD_HOOKS);
        }
        kn_val *hv = kn_wrap(r, d, s);
        if (hv == NULL || hv->kind != V_DICT) {
            Py_DECREF(empty);
            Py_DECREF(idict);
            return hv ? kn_brk(r, KN_BRK_HOOKS_DICT) : KN_FAIL;
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
            return kn_brk(r, KN_BRK_MODULE_HOOKS_KWARGS);
        }
    }
    PyObject *fwd = PyDict_GetItemWithError(idict, kn_cenv.s_forward);
    Py_DECREF(idict);
    if (fwd)
        return kn_brk(r, KN_BRK_INSTANCE_LEVEL_FORWARD_OVERRIDE);
    /* global hooks */
    PyObject *gh = kn_cenv.s_global_hooks;
    for (Py_ssize_t i = 0; gh && i < PyTuple_GET_SIZE(gh); i++) {
        PyObject *d = PyTuple_GET_ITEM(gh, i);
        if (PyDict_GET_SIZE(d) > 0)
            return kn_brk(r, KN_BRK_GLOBAL_MODULE_HOOKS);
        int cs = kn_src_add(r, KN_SRC_CONST, -1, d, 0);
        if (cs < 0 || kn_guard_add(r, KN_G_LEN, cs, NULL, NULL, NULL, NULL, 0) < 0)
            return KN_ERR;
    }
    kn_val *argt = NULL;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (pre || post) {
        if (nkw)
            return kn_brk(r, KN_BRK_MODULE_HOOKS_KEYWORD_ARGUMENTS);
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
        return kn_brk(r, KN_BRK_MODULE_WITHOUT_PYTHON_FORWARD);
    kn_val *fv = kn_v_const(r, f);
    if (fv == NULL)
        return KN_FAIL;
    kn_val *argv[64];
    if (nargs + 1 > 64)
        return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
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

/* The function argument of a higher-order function called whole (class 12)
 * as a constant: a function made while recording (its code a constant of the
 * guarded code) with no closure, no defaults but constants, whose global
 * names are modules, classes or builtins where they are set (read again by
 * every call, as eager reads them); a function read from a source passes
 * as it is where it has no closure and no defaults (a guard on its code then
 * pins all of it) and its globals are as above.  0 (*out set), or a break. */
/* Every global name code (and the code nested in it: comprehensions,
 * lambdas) reads is a module, a class or a builtin where globals sets it:
 * 0, or a break. */
static int
reads_only_modules(kn_rec *r, PyCodeObject *co, PyObject *globals, int depth)
{
    if (depth > 8)
        return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a higher-order function over deeply nested code");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_names); i++) {
        PyObject *g = PyDict_GetItemWithError(globals, PyTuple_GET_ITEM(co->co_names, i));
        if (g == NULL && PyErr_Occurred())
            return KN_ERR;
        if (g != NULL && !PyModule_Check(g) && !PyType_Check(g) && !PyCFunction_Check(g))
            return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a higher-order function over a function that reads globals");
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_consts); i++) {
        PyObject *c = PyTuple_GET_ITEM(co->co_consts, i);
        int rc = PyCode_Check(c) ? reads_only_modules(r, (PyCodeObject *)c, globals, depth + 1) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

static int
pure_function_value(kn_rec *r, kn_val *v, kn_val **out)
{
    int made = v->kind == V_FUNC && v->n == 0 && (v->fn == NULL || v->fn->kind == V_CONST) &&
               (v->self == NULL || v->self->kind == V_CONST);
    int read = v->kind == V_CONST && PyFunction_Check(v->obj) && PyFunction_GET_CLOSURE(v->obj) == NULL &&
               PyFunction_GET_DEFAULTS(v->obj) == NULL && PyFunction_GET_KW_DEFAULTS(v->obj) == NULL;
    if (!made && !read)
        return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a higher-order function over a closure or a computed function");
    PyCodeObject *co = (PyCodeObject *)(made ? v->obj : PyFunction_GET_CODE(v->obj));
    PyObject *globals = made ? v->globals : PyFunction_GET_GLOBALS(v->obj);
    int rc = reads_only_modules(r, co, globals, 0);
    if (rc)
        return rc;
    if (read) {
        *out = v;
        return 0;
    }
    PyObject *f = PyFunction_New((PyObject *)co, v->globals);
    if (f == NULL || (v->fn && PyFunction_SetDefaults(f, v->fn->obj) < 0) ||
        (v->self && PyFunction_SetKwDefaults(f, v->self->obj) < 0)) {
        Py_XDECREF(f);
        return KN_ERR;
    }
    *out = kn_v_const_steal(r, f);
    return *out ? 0 : KN_FAIL;
}

/* self.add(_)(a.div(b).mul(v)) (a.mul(b) for addcmul): addcdiv and addcmul
 * with a tensor value, as eager computes them.  0, KN_BREAK or KN_ERR. */
static int
record_addc(kn_rec *r, kn_val *self, kn_val *a, kn_val *b, kn_val *v, int div, int inplace, kn_val **out)
{
    static PyObject *names[4];   /* div, mul, add, add_: interned, kept for good */
    static const char *const spelled[4] = {"div", "mul", "add", "add_"};
    for (int i = 0; i < 4; i++)
        if (names[i] == NULL && (names[i] = PyUnicode_InternFromString(spelled[i])) == NULL)
            return KN_ERR;
    kn_val *q, *qv, *a1[2] = {a, b};
    int rc = kn_torch_op(r, names[div ? 0 : 1], 1, a1, 2, NULL, &q);
    if (rc == 0) {
        kn_val *a2[2] = {q, v};
        rc = kn_torch_op(r, names[1], 1, a2, 2, NULL, &qv);
    }
    if (rc == 0) {
        kn_val *a3[2] = {self, qv};
        rc = kn_torch_op(r, names[inplace ? 3 : 2], 1, a3, 2, NULL, out);
    }
    return rc;
}

/* t.addcdiv_(a, b, value=v) and addcmul(_) with v a tensor (a 0-d step size
 * under torch.compile: Adam's, Adagrad's), which eager turns into a number
 * by reading its data: recorded by record_addc, as Dynamo does, where eager
 * would take v (else the op is recorded as it is, and breaks).  0 done, 2
 * not this case, or KN_BREAK / KN_ERR. */
static int
tensor_value_addc(kn_rec *r, kn_val *fn, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    const char *nm = PyUnicode_AsUTF8(fn->obj);
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (nm == NULL || nkw != 1 || nargs != 3 || args[2]->kind != V_TENSOR ||
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "value") != 0)
        return PyErr_Occurred() ? KN_ERR : 2;
    int div = !strcmp(nm, "addcdiv_") || !strcmp(nm, "addcdiv"), inplace = nm[strlen(nm) - 1] == '_';
    if (!div && strcmp(nm, "addcmul_") && strcmp(nm, "addcmul"))
        return 2;
    /* only where eager takes the tensor as a number: 0-d, no grad, and
       floating tensors (eager refuses integer addcdiv) */
    kn_val *ts[4] = {fn->self, args[0], args[1], args[2]};
    for (int i = 0; i < 4; i++) {
        if (ts[i]->kind != V_TENSOR)
            return 2;
        PyObject *fp = PyObject_CallMethod(ts[i]->obj, "is_floating_point", NULL);
        PyObject *rg = fp ? PyObject_GetAttrString(ts[i]->obj, "requires_grad") : NULL;
        PyObject *nd = rg ? PyObject_CallMethod(ts[i]->obj, "dim", NULL) : NULL;
        int ok = nd && (i == 3 ? (PyLong_AsLong(nd) == 0 && rg == Py_False) : fp == Py_True);
        Py_XDECREF(fp);
        Py_XDECREF(rg);
        Py_XDECREF(nd);
        if (PyErr_Occurred())
            return KN_ERR;
        if (!ok)
            return 2;
    }
    return record_addc(r, fn->self, args[0], args[1], args[2], div, inplace, out);
}

/* torch._foreach_addcdiv_(xs, as, bs, scalars) and _foreach_addcmul_ with
 * scalars a 1-d tensor (foreach Adam's step sizes under compile): fake
 * tensors cannot run them (torch 2.13's meta check wants the scalars on the
 * CPU), so they are recorded per tensor by record_addc with scalars[i], the
 * values eager's kernel computes.  0 done (*out None), 2 not this case, or
 * KN_BREAK / KN_ERR. */
static int
foreach_tensor_scalars(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    if (nargs != 4 || kwnames != NULL || !PyCFunction_Check(f) || args[3]->kind != V_TENSOR)
        return 2;
    const char *nm = ((PyCFunctionObject *)f)->m_ml->ml_name;
    int div = strcmp(nm, "_foreach_addcdiv_") == 0;
    if (!div && strcmp(nm, "_foreach_addcmul_") != 0)
        return 2;
    int n = args[0]->n;
    for (int k = 0; k < 3; k++) {
        if ((args[k]->kind != V_LIST && args[k]->kind != V_TUPLE) || args[k]->n != n)
            return 2;
        for (int i = 0; i < n; i++)
            if (args[k]->items[i]->kind != V_TENSOR)
                return 2;
    }
    PyObject *shape = PyObject_GetAttrString(args[3]->obj, "shape");
    PyObject *fp = shape ? PyObject_CallMethod(args[3]->obj, "is_floating_point", NULL) : NULL;
    int ok = fp == Py_True && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == 1 &&
             PyLong_AsLong(PyTuple_GET_ITEM(shape, 0)) == n;
    Py_XDECREF(shape);
    Py_XDECREF(fp);
    if (PyErr_Occurred())
        return KN_ERR;
    if (!ok)
        return 2;
    PyObject *gi = kn_opfn("getitem");
    int rc = gi ? 0 : KN_ERR;
    for (int i = 0; i < n && rc == 0; i++) {
        kn_val *idx = kn_v_const_steal(r, PyLong_FromLong(i)), *si, *res;
        kn_val *a0[2] = {args[3], idx};
        rc = idx == NULL ? KN_FAIL : kn_torch_op(r, gi, 0, a0, 2, NULL, &si);
        if (rc == 0)
            rc = record_addc(r, args[0]->items[i], args[1]->items[i], args[2]->items[i], si, div, 1, &res);
    }
    Py_XDECREF(gi);
    if (rc == 0 && (*out = kn_v_const(r, Py_None)) == NULL)
        rc = KN_FAIL;
    return rc;
}

int
kn_call(kn_rec *r, rframe *fr, kn_val *fn, kn_val **args, int nargs, PyObject *kwnames, kn_val **out)
{
    kn_val *argv[65];
    switch (fn->kind) {
    case V_METHOD:
        if (nargs + 1 > 64)
            return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
        argv[0] = fn->self;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        return kn_call(r, fr, fn->fn, argv, nargs + 1, kwnames, out);
    case V_TMETHOD: {
        if (nargs + 1 > 64)
            return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
        int rc = tensor_value_addc(r, fn, args, nargs, kwnames, out);
        if (rc != 2)
            return rc;
        argv[0] = fn->self;
        memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
        return kn_torch_op(r, fn->obj, 1, argv, nargs + 1, kwnames, out);
    }
    case V_BMETHOD:
        return bmethod_call(r, fn, args, nargs, kwnames, out);
    case V_FUNC:
        return kn_inline(r, fr, NULL, fn, args, nargs, kwnames, out);
    case V_CTX:
        if (fn->entered && fn->ctxkind == 3) {   /* a user class's __exit__(None, None, None), inlined */
            if (fr)
                fr->nwith--;
            fn->entered = 0;
            return kn_call(r, fr, fn->fn, args, nargs, kwnames, out);
        }
        if (fn->entered) {   /* __exit__(None, None, None) */
            if (fr)
                fr->nwith--;
            CHECK(kn_with_exit(r, fn));
            *out = kn_v_const(r, Py_None);
            return *out ? 0 : KN_FAIL;
        }
        return kn_brk(r, KN_BRK_CALLING_CONTEXT_MANAGER);
    case V_OBJ:
        if (PyObject_IsInstance(fn->obj, kn_cenv.nn_module) == 1)
            return module_call(r, fr, fn, args, nargs, kwnames, out);
        {
            static PyObject *s_call;   /* interned once; a fresh string per call leaked */
            if (s_call == NULL && (s_call = PyUnicode_InternFromString("__call__")) == NULL)
                return KN_FAIL;
            PyObject *c = _PyType_Lookup(Py_TYPE(fn->obj), s_call);
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
        {   /* a callable object of a pure kind (numpy's ufuncs, an lru_cache wrapper) or marked
               assume_constant_result: as a constant callable, its identity guarded */
            PyObject *cls = PyObject_CallOneArg(kn_cenv.classify, fn->obj);
            long how = cls ? PyLong_AsLong(cls) : -1;
            Py_XDECREF(cls);
            if (how == -1 && PyErr_Occurred())
                return KN_ERR;
            if (how != 3 && how != 10)
                return kn_brk(r, KN_BRK_CALLING_TYPE, Py_TYPE(fn->obj)->tp_name);
            if (fn->src >= 0 && kn_guard_add(r, KN_G_ID, fn->src, fn->obj, NULL, NULL, NULL, 0) < 0)
                return KN_FAIL;
        }
        break;
    case V_CONST:
        break;
    default:
        return kn_brk(r, KN_BRK_CALLING_VALUE_MODEL);
    }
    PyObject *f = fn->obj;
    int handled;
    CHECK(kn_builtin_call(r, fr, f, args, nargs, kwnames, out, &handled));
    if (handled)
        return 0;
    if (f == kn_cenv.is_grad) {
        *out = kn_v_const(r, r->grad_cur ? Py_True : Py_False);   /* the grad guard covers it */
        return *out ? 0 : KN_FAIL;
    }
    if (f == kn_cenv.no_grad || f == kn_cenv.enable_grad) {
        if (nargs)
            return kn_brk(r, KN_BRK_NO_GRAD_USED_DECORATOR);
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
                return kn_brk(r, KN_BRK_AUTOCAST_NON_CONSTANT_ARGUMENTS);
            int slot = i;
            if (i >= npos) {
                slot = -1;
                for (int k = 0; k < 4; k++)
                    if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i - npos), names[k]) == 0)
                        slot = k;
            }
            if (slot < 0 || slot > 3)
                return kn_brk(r, KN_BRK_AUTOCAST_ARGUMENT);
            vals[slot] = args[i]->obj;
        }
        if (vals[0] == NULL)
            return kn_brk(r, KN_BRK_AUTOCAST_WITHOUT_DEVICE_TYPE);
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
    static PyObject *tuple_new;   /* tuple.__new__, looked up once */
    if (tuple_new == NULL) {
        PyObject *td = kn_type_dict(&PyTuple_Type);
        tuple_new = td ? Py_XNewRef(PyDict_GetItemString(td, "__new__")) : NULL;
        Py_XDECREF(td);
        if (tuple_new == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "kiln: internal error: tuple.__new__ not found");
            return KN_ERR;
        }
    }
    if (f == tuple_new && nargs == 2 && !kwnames &&
        args[0]->kind == V_CONST && PyType_Check(args[0]->obj) &&
        PyType_IsSubtype((PyTypeObject *)args[0]->obj, &PyTuple_Type) &&
        (args[1]->kind == V_TUPLE || args[1]->kind == V_LIST)) {
        /* tuple.__new__(cls, items): a namedtuple's generated __new__ */
        kn_val *t = kn_v_new(r, V_TUPLE);
        if (t == NULL)
            return KN_FAIL;
        for (int i = 0; i < args[1]->n; i++)
            if (kn_v_add(r, t, args[1]->items[i]) < 0)
                return KN_FAIL;
        if (args[0]->obj != (PyObject *)&PyTuple_Type)
            t->ttype = args[0]->obj;   /* pinned by its constant */
        *out = t;
        return 0;
    }
    if (f == kn_cenv.set_grad_enabled_cls) {
        if (nargs != 1 || args[0]->kind != V_CONST)
            return kn_brk(r, KN_BRK_SET_GRAD_ENABLED_NONCONST);
        int mode = PyObject_IsTrue(args[0]->obj);
        return make_ctx(r, mode, 1, out);
    }
    if (nargs == 1 && kwnames == NULL) {   /* module.parameters(), .named_modules(), ...: walked */
        int mm = kn_module_members(r, f, args[0], out);
        if (mm <= 0)
            return mm;
    }
    PyObject *cls = PyObject_CallOneArg(kn_cenv.classify, f);
    if (cls == NULL)
        return KN_ERR;
    long how = PyLong_AsLong(cls);
    Py_DECREF(cls);
    switch (how) {
    case 1: { /* a torch operation: a graph node */
        if (PyFunction_Check(f) && !kn_any_tensor_arg(args, nargs))
            return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);   /* a Python helper of constants */
        int rc = foreach_tensor_scalars(r, f, args, nargs, kwnames, out);
        if (rc != 2)
            return rc;
        return kn_torch_op(r, f, 0, args, nargs, kwnames, out);
    }
    case 7: { /* the standard library: run it for real on real objects */
        int rc;
        if (call_on_real(r, f, args, nargs, kwnames, out, &rc)) {
            if (rc == 0 && copy_function(f) && (*out)->kind == V_OBJ && (*out)->src < 0 && !(*out)->ctor &&
                !(*out)->newobj && !kwnames && nargs == 1) {
                /* copy.copy(o) / copy.deepcopy(o): a new object the replay makes again
                   (so that it can be written: a config copied and changed) */
                kn_val *ct = kn_v_new(r, V_TUPLE);
                if (ct == NULL || kn_v_add(r, ct, fn) < 0 || kn_v_add(r, ct, args[0]) < 0)
                    return KN_FAIL;
                (*out)->ctor = ct;
            } else if (rc == 0 && (*out)->kind == V_OBJ && (*out)->src < 0 && !(*out)->ctor && !(*out)->newobj &&
                       stateful_object((*out)->obj)) {
                /* a generator or context manager made now would be the one object every
                   later call gets (contextlib.contextmanager's): it runs for real */
                return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a standard-library call that makes a generator or context manager");
            }
            return rc;
        }
        return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);
    }
    case 9: { /* a TorchScript function: its Python function, inlined (the script is guarded by identity) */
        PyObject *py = PyObject_GetAttrString(f, "_torchdynamo_inline");
        if (py == NULL || !PyFunction_Check(py) || PyList_Append(r->pins, py) < 0) {
            Py_XDECREF(py);
            PyErr_Clear();
            return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a TorchScript function");
        }
        Py_DECREF(py);   /* pinned */
        kn_val *pv = kn_v_const(r, py);
        return pv ? kn_inline(r, fr, py, pv, args, nargs, kwnames, out) : KN_FAIL;
    }
    case 10: { /* assume_constant_result: run for real now, the result a constant */
        int rc;
        if (call_on_real(r, f, args, nargs, kwnames, out, &rc))
            return rc;
        return kn_brk(r, KN_BRK_PYTHON_BUILTIN_NON_CONSTANT);
    }
    case 11: { /* Fn.apply of a torch.autograd.Function: with grad off, forward inlined (eager runs
                  forward without grad too, and no backward can be needed); with grad on, one
                  graph node calling Fn.apply (kiln._capture.function_apply_whole), whose
                  forward and backward autograd runs (AOT autograd traces both) */
        if (nargs + 1 > 64)
            return kn_brk(r, KN_BRK_CALL_TOO_MANY_ARGUMENTS);
        kn_val *argv[65], *hv = kn_v_const(r, kn_cenv.function_apply);
        if (hv == NULL)
            return KN_FAIL;
        if (PyMethod_Check(f) || PyCFunction_Check(f)) {   /* Fn.apply bound: the class first */
            if ((argv[0] = kn_v_const(r, PyMethod_Check(f) ? PyMethod_GET_SELF(f) : PyCFunction_GET_SELF(f))) == NULL)
                return KN_FAIL;
            memcpy(argv + 1, args, sizeof(kn_val *) * nargs);
            nargs++;
        } else {                   /* Function.apply(Fn, ...) */
            if (nargs < 1 || args[0]->kind != V_CONST || !PyType_Check(args[0]->obj))
                return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "torch.autograd.Function.apply");
            memcpy(argv, args, sizeof(kn_val *) * nargs);
        }
        if (r->grad_cur) {
            PyObject *whole = PyObject_CallOneArg(kn_cenv.function_apply_whole, argv[0]->obj);
            if (whole == NULL)
                return KN_ERR;
            if (whole == Py_None || kn_pin(r, whole) == NULL) {
                Py_DECREF(whole);
                return PyErr_Occurred() ? KN_ERR
                                        : kn_brk(r, KN_BRK_CALL_NOT_RECORDED,
                                                 "torch.autograd.Function.apply with grad enabled, whose code "
                                                 "stores to globals or closure cells");
            }
            Py_DECREF(whole);   /* pinned */
            return kn_torch_op(r, whole, 0, argv, nargs, kwnames, out);
        }
        return kn_inline(r, fr, kn_cenv.function_apply, hv, argv, nargs, kwnames, out);
    }
    case 12: { /* associative_scan(fn, xs, ...): one node, fn passed whole where it is pure */
        kn_val *argv[65];
        if (nargs < 1 || nargs > 64)
            return kn_brk(r, KN_BRK_CALL_NOT_RECORDED, "a higher-order function without its function");
        memcpy(argv, args, sizeof(kn_val *) * nargs);
        int rc = pure_function_value(r, args[0], &argv[0]);
        if (rc)
            return rc;
        return kn_torch_op(r, f, 0, argv, nargs, kwnames, out);
    }
    case 13: { /* torch.is_complex(t) and the like: asked of the fakes, the answer a constant */
        PyObject *a[16];
        if (nargs > 16)
            return kn_brk(r, KN_BRK_PYTHON_BUILTIN_NON_CONSTANT);
        for (int i = 0; i < nargs; i++)
            if (!(args[i]->kind == V_CONST || args[i]->kind == V_TENSOR) ||
                (a[i] = kn_to_py(r, args[i], 1)) == NULL) {
                for (int j = 0; j < i; j++)
                    Py_DECREF(a[j]);
                return PyErr_Occurred() ? KN_ERR : kn_brk(r, KN_BRK_PYTHON_BUILTIN_NON_CONSTANT);
            }
        int rc;
        call_gathered(r, f, a, nargs, kwnames, out, &rc);
        return rc;
    }
    case 8: { /* torch.compiler.disable: break, the call runs eagerly */
        PyObject *nm = PyObject_GetAttrString(f, "__qualname__");
        PyErr_Clear();
        int rc = kn_brk(r, KN_BRK_CALL_DISABLED, nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : "?");
        Py_XDECREF(nm);
        return rc;
    }
    case 5:   /* "is torch compiling?" under kiln: yes */
        *out = kn_v_const(r, Py_True);
        return *out ? 0 : KN_FAIL;
    case 2:   /* Python code: inline */
        if (PyFunction_Check(f))
            return kn_inline(r, fr, f, fn, args, nargs, kwnames, out);
        if (Py_TYPE(f) == &PyMethod_Type) {
            kn_val *self = kn_wrap(r, PyMethod_GET_SELF(f), -1);
            kn_val *m = kn_v_method(r, self ? kn_v_const(r, PyMethod_GET_FUNCTION(f)) : NULL, self);
            if (m == NULL)
                return KN_FAIL;
            return kn_call(r, fr, m, args, nargs, kwnames, out);
        }
        return kn_brk(r, KN_BRK_INLINE_NON_FUNCTION);
    case 3: { /* pure Python function of constants */
        if (const_items(r, args, nargs))
            return kn_call_real(r, f, args, nargs, kwnames, out);
        if (const_containers(args, nargs)) {   /* math.prod(self.size), a list of ints: a copy */
            PyObject *a[16];
            for (int i = 0; i < nargs; i++)
                if ((a[i] = kn_to_py(r, args[i], 1)) == NULL) {
                    for (int j = 0; j < i; j++)
                        Py_DECREF(a[j]);
                    return KN_FAIL;
                }
            int rc;
            call_gathered(r, f, a, nargs, kwnames, out, &rc);
            return rc;
        }
        int rc;
        if (read_record_time_object(r, f, args, nargs, kwnames, out, &rc) ||
            read_source_dict_item(r, f, args, nargs, kwnames, out, &rc))
            return rc;
        return kn_brk(r, KN_BRK_PYTHON_BUILTIN_NON_CONSTANT);
    }
    case 4: { /* functools.partial */
        PyObject *pf = PyObject_GetAttrString(f, "func"), *pa = PyObject_GetAttrString(f, "args"),
                 *pk = PyObject_GetAttrString(f, "keywords");
        int rc = KN_ERR;
        if (pf == NULL || pa == NULL || pk == NULL || !PyTuple_Check(pa) || !PyDict_Check(pk)) {
            /* a partial (or subclass) whose parts are not what functools makes */
            PyErr_Clear();
            rc = kn_brk(r, KN_BRK_FUNCTOOLS_PARTIAL_WHOSE_ARGS);
        } else {
            Py_ssize_t na = PyTuple_GET_SIZE(pa), nk = PyDict_GET_SIZE(pk);
            int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
            if (na + nargs + nk > 64) {
                rc = kn_brk(r, KN_BRK_PARTIAL_MANY_ARGUMENTS);
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
    if (PyType_Check(f) && (((PyTypeObject *)f)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        int is_module = PyObject_IsSubclass(f, kn_cenv.nn_module);
        PyErr_Clear();
        if (is_module == 0)
            return construct(r, fr, fn, args, nargs, kwnames, out);
        /* torch.nn.Softmax(dim=-1)(x) in a forward: a module of torch's built at
           record time and again by the replay (one that makes parameters holds
           fakes the graph does not know: using them breaks) */
        if (is_module == 1 && library_class((PyTypeObject *)f))
            return kn_construct_at_record_time(r, fr, fn, args, nargs, kwnames, out);
    }
    PyErr_Clear();
    PyObject *nmo = PyObject_GetAttrString(f, "__qualname__");
    if (nmo == NULL) {
        PyErr_Clear();
        nmo = PyObject_Repr(f);
    }
    int rc = kn_brk(r, KN_BRK_CALL_NOT_RECORDED, nmo ? PyUnicode_AsUTF8(nmo) : "?");
    Py_XDECREF(nmo);
    PyErr_Clear();
    return rc;
}
