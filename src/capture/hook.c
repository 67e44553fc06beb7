/* hook.c — the PEP 523 frame hook, the per-code cache and the segment loop.
 *
 * Consumes: frames CPython is about to run while a kiln-compiled callable is
 * active on this thread.  Produces: the frame's return value, computed by
 * running cached segments (guards, graph, replay: replay.c) and, between them, the
 * calls and branches that could not be recorded, done for real.
 *
 * The hook is installed interpreter-wide only while at least one compiled
 * callable runs; other threads see it but find no context and run their frames
 * as usual.  Frames are left to CPython when they belong to generators or
 * coroutines, are re-entered with an exception, are traced, or come from
 * torch, the standard library or kiln (the compiled function's own code is
 * always recorded, wherever it lives); a tensor subclass's __torch_dispatch__
 * or __torch_function__ runs as Python with everything below it.  A frame
 * kiln runs counts against Python's recursion limit while kiln holds it, and
 * calls kiln makes for it see it as the current frame.  kiln.reset() parks
 * the segments it drops until no frame runs any.
 */
#include "capture/capture.h"
#include "error.h"

#include <pthread.h>

#include "capture/frame.h"

kn_capture_env kn_cenv;

static _Thread_local kn_capctx *tls_ctx;   /* the compiled callable running on this thread */
_Thread_local int kn_hook_off;             /* > 0: hook off (recording, running a graph) */
static long installed;                     /* compiled calls in flight, all threads (GIL) */
static Py_ssize_t extra_index = -1;
static PyObject *path_rules;               /* ((prefix, skip), ...): the longest matching prefix decides;
                                              skip a bool, or a tuple of the function names recorded */
static PyObject *capture_stats;            /* dict: counters for tests and explain */

/* Every live code info, so kiln.reset() can drop them all. */
typedef struct infonode {
    struct infonode *prev, *next;
    PyObject *code;                        /* borrowed: the info dies with the code */
    kn_codeinfo info;
} infonode;
static infonode all_infos = {&all_infos, &all_infos, NULL, {0}};

static void
stat_add(const char *name, long n)
{
    if (capture_stats == NULL)
        return;
    PyObject *v = PyDict_GetItemString(capture_stats, name);
    long cur = v ? PyLong_AsLong(v) : 0;
    PyObject *nv = PyLong_FromLong(cur + n);
    if (nv) {
        PyDict_SetItemString(capture_stats, name, nv);
        Py_DECREF(nv);
    }
}

static void
segs_free(kn_seg *s)
{
    while (s) {
        kn_seg *n = s->next;
        kn_seg_free(s);
        s = n;
    }
}

static void
info_clear(kn_codeinfo *info)
{
    segs_free(info->segs);
    PyMem_Free(info->noinline);
    Py_XDECREF(info->dynstate);
    memset(info, 0, sizeof *info);
}

/* kiln.reset() while frames run (on this thread or others: a graph, a call
 * or a recording releases the GIL).  A running frame holds pointers to its
 * code's segments, so reset only detaches each code's segment chain and
 * parks it here; the chains are freed once no frame is inside run_frame.
 * reset_epoch tells a recording that began before a reset to park its
 * segment too, so the caches start empty. */
static long frames_running;                /* run_frame activations, all threads (GIL) */
static long reset_epoch;
static kn_seg **grave;
static Py_ssize_t ngrave, capgrave;

static void
grave_add(kn_seg *chain)
{
    if (chain == NULL)
        return;
    if (ngrave == capgrave) {
        Py_ssize_t ncap = capgrave ? capgrave * 2 : 16;
        kn_seg **ng = PyMem_Realloc(grave, sizeof(kn_seg *) * ncap);
        if (ng == NULL)
            return;   /* out of memory: leak the chain rather than free it under a running frame */
        grave = ng;
        capgrave = ncap;
    }
    grave[ngrave++] = chain;
}

static void
grave_empty(void)
{
    if (frames_running > 0 || ngrave == 0)
        return;
    /* freeing drops references (arbitrary code may run, and reset again):
     * take the parked chains out first */
    kn_seg **g = grave;
    Py_ssize_t n = ngrave;
    grave = NULL;
    ngrave = capgrave = 0;
    PyObject *exc = kn_err_take();
    for (Py_ssize_t i = 0; i < n; i++)
        segs_free(g[i]);
    PyMem_Free(g);
    if (exc)
        PyErr_SetRaisedException_compat(exc);
}

/* ------------------------------------------------------------------ recursion
 * CPython counts a Python frame against the recursion limit while its
 * evaluator runs it.  A frame kiln runs is outside that evaluator until its
 * end, so kiln counts it itself while it holds the frame (py_enter), and gives
 * the count back before CPython takes the frame over (py_leave): unbounded
 * recursion then raises RecursionError in the user's frames, as in eager.
 * Every Python call under the hook also recurses on the C stack (CPython
 * does not inline calls while an eval-frame hook is set), so a raised
 * recursion limit could overflow it: kn_c_stack_low() reports when this
 * thread's C stack is nearly used up, and the call raises RecursionError
 * (the recorder asks it too before recursing into a nested container). */
static int
py_remaining(PyThreadState *ts)
{
#if KN_PY312
    return ts->py_recursion_remaining;
#else
    return ts->recursion_remaining;
#endif
}

static void
py_adjust(PyThreadState *ts, int d)
{
#if KN_PY312
    ts->py_recursion_remaining += d;
#else
    ts->recursion_remaining += d;
#endif
}

/* Python frames a recording may use (FakeTensorMode, torch.fx, the backend):
 * with fewer left, a new segment is not recorded and CPython runs the frame.
 * It exceeds the recorder's inlining depth (40), so calls the recorder
 * inlines could never have hit the recursion limit for real. */
#define KN_RECORD_HEADROOM 160

static _Thread_local char *tls_stack_floor;   /* below this address the C stack is nearly full */

int
kn_c_stack_low(void)
{
    char here;
    if (tls_stack_floor == NULL) {
        char *floor = (char *)1;   /* unknown: never low */
#if defined(__linux__)
        pthread_attr_t a;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
            void *lo = NULL;
            size_t sz = 0;
            if (pthread_attr_getstack(&a, &lo, &sz) == 0 && lo != NULL) {
                size_t margin = sz / 8;
                if (margin < (64u << 10))
                    margin = 64u << 10;
                if (margin > (1u << 20))
                    margin = 1u << 20;
                floor = (char *)lo + margin;
            }
            pthread_attr_destroy(&a);
        }
#endif
        tls_stack_floor = floor;
    }
    return &here < tls_stack_floor;
}

static void
free_extra(void *p)
{
    infonode *n = p;
    if (n == NULL)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    info_clear(&n->info);
    PyMem_Free(n);
}

/* Is code never recorded (torch, kiln, the standard library, a few tools:
   kiln/_capture.py's path rules; the longest prefix of its file that a rule
   names decides, so site-packages inside the standard library's folder is
   recorded while torch inside site-packages is not)? */
static int
path_skipped(PyCodeObject *code)
{
    if (path_rules == NULL || !PyUnicode_Check(code->co_filename))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(path_rules), best = -1;
    int skip = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rule = PyTuple_GET_ITEM(path_rules, i), *prefix = PyTuple_GET_ITEM(rule, 0);
        Py_ssize_t len = PyUnicode_GET_LENGTH(prefix);
        if (len > best && PyUnicode_Tailmatch(code->co_filename, prefix, 0, PY_SSIZE_T_MAX, -1) == 1) {
            PyObject *how = PyTuple_GET_ITEM(rule, 1);
            best = len;
            if (PyTuple_Check(how))   /* the functions of these names are recorded, the rest skipped */
                skip = PySequence_Contains(how, code->co_name) != 1;
            else
                skip = PyObject_IsTrue(how) == 1;
        }
    }
    if (skip)
        return 1;
    /* torch.fx's generated forward methods */
    const char *fn = PyUnicode_AsUTF8(code->co_filename);
    return fn && (strncmp(fn, "<eval_with_key", 14) == 0 || strncmp(fn, "<frozen ", 8) == 0);
}

static kn_codeinfo *
code_info(PyCodeObject *code)
{
    void *p = NULL;
    if (kn_code_get_extra((PyObject *)code, extra_index, &p) < 0)
        return NULL;
    if (p)
        return &((infonode *)p)->info;
    infonode *n = PyMem_Calloc(1, sizeof *n);
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    n->code = (PyObject *)code;
    n->info.state = path_skipped(code) ? 1 : 2;
    if (PyErr_Occurred())
        PyErr_Clear();
    n->info.wrapper = n->info.state == 1 && PyUnicode_Check(code->co_name) &&
                      PyUnicode_CompareWithASCIIString(code->co_name, "_fn") == 0;
    if (PyUnicode_Check(code->co_name) && (PyUnicode_CompareWithASCIIString(code->co_name, "__torch_dispatch__") == 0 ||
                                           PyUnicode_CompareWithASCIIString(code->co_name, "__torch_function__") == 0))
        n->info.state = 3;
    if (kn_code_set_extra((PyObject *)code, extra_index, n) < 0) {
        PyMem_Free(n);
        return NULL;
    }
    n->next = all_infos.next;
    n->prev = &all_infos;
    all_infos.next->prev = n;
    all_infos.next = n;
    return &n->info;
}

/* Run MAKE_CELL / COPY_FREE_VARS for real, so the frame's locals hold the
 * cells every later segment and CPython itself expect. */
static void
prologue(_PyInterpreterFrame *f)
{
    PyCodeObject *co = KN_FRAME_CODE(f);
    const unsigned char *kinds = (const unsigned char *)PyBytes_AS_STRING(co->co_localspluskinds);
    int nlp = co->co_nlocalsplus, nfree = co->co_nfreevars;
    PyObject *closure = FRAME_FUNC(f)->func_closure;
    for (int i = 0; i < nlp; i++) {
        if (kinds[i] & CO_FAST_FREE) {
            int j = i - (nlp - nfree);
            if (closure && j >= 0 && j < PyTuple_GET_SIZE(closure))
                Py_XSETREF(f->localsplus[i], Py_NewRef(PyTuple_GET_ITEM(closure, j)));
        } else if (kinds[i] & CO_FAST_CELL) {
            PyObject *cell = PyCell_New(f->localsplus[i]);   /* NULL content is allowed */
            if (cell == NULL) {
                PyErr_Clear();
                continue;
            }
            Py_XSETREF(f->localsplus[i], cell);
        }
    }
    KN_FRAME_RESUME(f, co->_co_firsttraceable);
}

/* CPython's evaluator on frame f, for a frame that passed kn_c_stack_low.
 * 3.12 charges every entry of the evaluator from C two units (ceval.c's
 * PY_EVAL_C_STACK_UNITS) of the thread's C recursion budget
 * (C_RECURSION_LIMIT, 1500), while a Python-to-Python call runs inline at
 * no charge.  Under an eval-frame hook every call enters from C, so a
 * recursion 750 Python frames deep would raise RecursionError where eager
 * allows the recursion limit (1000).  kiln refunds that charge: the real C
 * stack is what kn_c_stack_low guards, at every frame the hook sees. */
#define KN_EVAL_C_UNITS 2

static PyObject *
eval_default(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag)
{
#if KN_PY312
    ts->c_recursion_remaining += KN_EVAL_C_UNITS;
    PyObject *r = _PyEval_EvalFrameDefault(ts, f, throwflag);
    ts->c_recursion_remaining -= KN_EVAL_C_UNITS;
    return r;
#else
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
#endif
}

/* run_frame's last step, where CPython takes the frame over: the frame
 * holds no segment any more, and CPython counts it against the recursion
 * limit itself from here. */
static void
frame_release(PyThreadState *ts)
{
    py_adjust(ts, 1);
    frames_running--;
}

#if KN_PY313
/* 3.13's POP_JUMP_IF_TRUE/FALSE and UNARY_NOT read only bools (TO_BOOL or
 * COMPARE_OP made them), while the recorder leaves a condition as it is and
 * takes its truth at the jump: a frame handed to CPython at one of them gets
 * the condition on its stack converted.  -1: bool() raised. */
static int
condition_to_bool(_PyInterpreterFrame *f, int off)
{
    PyCodeObject *code = KN_FRAME_CODE(f);
    if (f->stacktop <= code->co_nlocalsplus)
        return 0;
    PyObject **top = &f->localsplus[f->stacktop - 1];
    if (*top == NULL || PyBool_Check(*top))
        return 0;
    PyObject *b = PyCode_GetCode(code);
    if (b == NULL)
        return -1;
    int op = off < PyBytes_GET_SIZE(b) / 2 ? kn_opmap[((const unsigned char *)PyBytes_AS_STRING(b))[2 * off]] : -1;
    Py_DECREF(b);
    if (op != KN_OP_POP_JUMP_IF_TRUE && op != KN_OP_POP_JUMP_IF_FALSE && op != KN_OP_UNARY_NOT)
        return 0;
    int t = PyObject_IsTrue(*top);
    if (t < 0)
        return -1;
    Py_SETREF(*top, Py_NewRef(t ? Py_True : Py_False));
    return 0;
}
#endif

static PyObject *raise_at(PyThreadState *ts, _PyInterpreterFrame *f, int off);

/* CPython takes frame f over at offset off. */
static PyObject *
fallback(PyThreadState *ts, _PyInterpreterFrame *f, int off)
{
#if KN_PY313
    if (condition_to_bool(f, off) < 0)
        return raise_at(ts, f, off);
#endif
    frame_release(ts);
    KN_FRAME_RESUME(f, off);
    return eval_default(ts, f, 0);
}

/* 1 when the graph's pending exception carries attribute `name` set true. */
static int
graph_error_marked(const char *name)
{
    PyObject *exc = kn_err_take();
    int marked = 0;
    if (exc != NULL) {
        PyObject *m = PyObject_GetAttrString(exc, name);
        marked = m != NULL && PyObject_IsTrue(m) == 1;
        Py_XDECREF(m);
        PyErr_Clear();
        PyErr_SetRaisedException_compat(exc);
    }
    return marked;
}

/* Whether the graph's pending exception must be raised where the graph ran
   rather than by re-running the segment as Python: the runtime marks a GPU
   kernel's index error so (eager's kernel would trip a device-side assert,
   and a deferred error belongs to an earlier call's inputs); and a graph
   that writes its inputs raised after it may have written them, unless
   kiln/_capture.py marks the error `_kiln_unwritten` (a compiled graph: AOT
   autograd writes inputs back only after it returns). */
static int
graph_error_stays(kn_seg *seg)
{
    if (graph_error_marked("_kiln_no_replay"))
        return 1;
    return seg->writes && !graph_error_marked("_kiln_unwritten");
}

/* CPython takes frame f over with the pending exception raised by the
 * instruction at off: the frame's own handlers (try/except/with) see it. */
static PyObject *
raise_at(PyThreadState *ts, _PyInterpreterFrame *f, int off)
{
    frame_release(ts);
    KN_FRAME_RAISE(f, off);
    return eval_default(ts, f, 1);
}

/* While kiln itself calls out on behalf of frame f (a call it could not
 * record, the graph, the replay), f is the thread's current Python frame, as
 * under CPython: zero-argument super(), sys._getframe(), locals(), warnings'
 * stacklevel and tracebacks see the user's frame, at instruction `at`. */
static _PyInterpreterFrame *
frame_link(PyThreadState *ts, _PyInterpreterFrame *f, int at)
{
    _PyInterpreterFrame *prev = KN_TS_FRAME(ts);
    KN_FRAME_AT(f, at);
    f->previous = prev;
    KN_TS_FRAME(ts) = f;
    return prev;
}

static void
frame_unlink(PyThreadState *ts, _PyInterpreterFrame *prev)
{
    KN_TS_FRAME(ts) = prev;
}

static void
warn_once(kn_codeinfo *info, PyCodeObject *code, const char *what)
{
    if (info->warned) {
        PyErr_Clear();
        return;
    }
    info->warned = 1;
    PyObject *exc = kn_err_take();
    PyObject *msg = exc ? PyUnicode_FromFormat("kiln: %s in %U (%U:%d); running it as Python: %S", what,
                                               code->co_qualname, code->co_filename, code->co_firstlineno, exc)
                        : PyUnicode_FromFormat("kiln: %s in %U (%U:%d); running it as Python", what,
                                               code->co_qualname, code->co_filename, code->co_firstlineno);
    Py_XDECREF(exc);
    if (msg && kn_cenv.warn) {
        PyObject *r = PyObject_CallOneArg(kn_cenv.warn, msg);
        Py_XDECREF(r);
    }
    Py_XDECREF(msg);
    PyErr_Clear();
}

/* kiln.config.debug: internal errors raise instead of warning (tests run so) */
static int
debug_mode(void)
{
    if (!PyErr_Occurred())
        KN_INTERNAL("capture failed without an exception");
    PyObject *exc = kn_err_take();
    PyObject *cfg = PyImport_ImportModule("kiln.config");
    PyObject *d = cfg ? PyObject_GetAttrString(cfg, "debug") : NULL;
    int on = d ? PyObject_IsTrue(d) == 1 : 0;
    Py_XDECREF(d);
    Py_XDECREF(cfg);
    PyErr_Clear();
    PyErr_SetRaisedException_compat(exc);
    return on;
}

/* The call a segment stopped at, done for real on the frame's stack. */
static int
do_call(PyThreadState *ts, kn_seg *seg, _PyInterpreterFrame *f)
{
    PyObject **sp = f->localsplus + f->stacktop;
    PyObject *res;
    int pop;
    _PyInterpreterFrame *prev = frame_link(ts, f, seg->term_off);
    if (seg->term_arg < 0) {   /* CALL_FUNCTION_EX: NULL, fn (3.13: fn, NULL), args[, kwargs] */
        int haskw = seg->term_arg == -2;
        PyObject *kw = haskw ? sp[-1] : NULL;
        PyObject *args = sp[-1 - haskw], *fn = sp[-(KN_PY313 ? 3 : 2) - haskw];
        PyObject *targs = PyTuple_Check(args) ? Py_NewRef(args) : PySequence_Tuple(args);
        if (targs == NULL) {
            frame_unlink(ts, prev);
            return -1;
        }
        res = PyObject_Call(fn, targs, kw);
        Py_DECREF(targs);
        pop = 3 + haskw;
    } else {
        /* CALL: [NULL or method, callable or self, args] up to 3.12, [callable,
         * NULL or self, args] in 3.13, whose CALL_KW has the names on top */
        int n = seg->term_arg, kwtop = KN_PY313 && seg->kwnames != NULL;
        PyObject **top = sp - kwtop;
        PyObject *a = top[-n - 2], *b = top[-n - 1];
        PyObject **args = top - n;
        PyObject *callable = KN_PY313 ? a : (a != NULL ? a : b);
        if (KN_PY313 ? b != NULL : a != NULL) {   /* a self: the first argument */
            args--;
            n++;
        }
        Py_ssize_t nkw = seg->kwnames ? PyTuple_GET_SIZE(seg->kwnames) : 0;
        res = PyObject_Vectorcall(callable, args, n - nkw, seg->kwnames);
        pop = seg->term_arg + 2 + kwtop;
    }
    frame_unlink(ts, prev);
    for (int i = 0; i < pop; i++) {
        f->stacktop--;
        Py_XDECREF(f->localsplus[f->stacktop]);
        f->localsplus[f->stacktop] = NULL;
    }
    if (res == NULL)
        return -1;
    return kn_frame_push(f, res);
}

static int
do_jump(kn_seg *seg, _PyInterpreterFrame *f)
{
    PyObject *v = f->localsplus[--f->stacktop];
    f->localsplus[f->stacktop] = NULL;
    int t;
    switch (seg->term_arg) {
    case 0: t = PyObject_IsTrue(v); if (t >= 0) t = !t; break;   /* jump if false */
    case 1: t = PyObject_IsTrue(v); break;                       /* jump if true */
    case 2: t = v == Py_None; break;
    default: t = v != Py_None; break;
    }
    Py_DECREF(v);
    if (t < 0)
        return -1;
    return t ? seg->term_target : seg->term_next;
}

/* vals grows to the largest source list; *vals may be replaced */
static int
vals_reserve(PyObject ***vals, int *cap, PyObject **small, int n)
{
    if (n <= *cap)
        return 0;
    PyObject **nv = PyMem_Calloc(n, sizeof(PyObject *));
    if (nv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (*vals != small)
        PyMem_Free(*vals);
    *vals = nv;
    *cap = n;
    return 0;
}

static kn_seg *
lookup(kn_codeinfo *info, _PyInterpreterFrame *f, int off, PyObject ***vals, int *cap, PyObject **small,
       int *count)
{
    int nlp = KN_FRAME_CODE(f)->co_nlocalsplus;
    *count = 0;
    for (kn_seg *s = info->segs; s; s = s->next) {
        if (s->offset != off)
            continue;
        (*count)++;
        if (vals_reserve(vals, cap, small, s->nsrc) < 0)
            return NULL;
        int r = kn_guard_check(s, f->localsplus, nlp, f->localsplus + nlp, f->stacktop - nlp, f->f_globals,
                               f->f_builtins, *vals);
        if (r == 1)
            return s;
        for (int i = 0; i < s->nsrc; i++)
            Py_CLEAR((*vals)[i]);
        if (r < 0)
            return NULL;
    }
    return NULL;
}

static void
release_vals(kn_seg *s, PyObject **vals)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->nsrc; i++)
        Py_CLEAR(vals[i]);
}

/* Index of a RETURN_VALUE instruction in code, or -1. */
static int
find_return(PyCodeObject *code)
{
    PyObject *b = PyCode_GetCode(code);
    if (b == NULL) {
        PyErr_Clear();
        return -1;
    }
    const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(b);
    int n = (int)(PyBytes_GET_SIZE(b) / 2), found = -1;
    for (int i = 0; i < n; i += 1 + kn_opcaches[c[2 * i]]) {
        if (kn_opmap[c[2 * i]] == KN_OP_RETURN_VALUE) {
            found = i;
            break;
        }
    }
    Py_DECREF(b);
    return found;
}

/* Index of a RETURN_CONST whose constant is `value`, or -1 (3.12 only). */
static int
find_return_const(PyCodeObject *code, PyObject *value)
{
#if KN_PY312
    PyObject *b = PyCode_GetCode(code);
    if (b == NULL) {
        PyErr_Clear();
        return -1;
    }
    const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(b);
    int n = (int)(PyBytes_GET_SIZE(b) / 2), found = -1, ext = 0;
    for (int i = 0; i < n; i += 1 + kn_opcaches[c[2 * i]]) {
        int op = kn_opmap[c[2 * i]], arg = (ext << 8) | c[2 * i + 1];
        ext = op == KN_OP_EXTENDED_ARG ? arg : 0;
        if (op == KN_OP_RETURN_CONST && arg < PyTuple_GET_SIZE(code->co_consts) &&
            PyTuple_GET_ITEM(code->co_consts, arg) == value) {
            found = i;
            break;
        }
    }
    Py_DECREF(b);
    return found;
#else
    return -1;
#endif
}

/* The frame ends through CPython's own evaluator, so CPython unlinks and
 * clears it as it does for every frame (3.12 clears entry frames inside the
 * evaluator, 3.11 in its caller): with a result, by running one RETURN_VALUE
 * with the result on the stack; with an exception, by raising it into the
 * frame at instruction `at`, where the user's own handlers see it. */
static PyObject *
end_frame(PyThreadState *ts, _PyInterpreterFrame *f, kn_codeinfo *info, PyObject *result, int at)
{
    PyCodeObject *code = KN_FRAME_CODE(f);
    int nlp = code->co_nlocalsplus;
    frame_release(ts);
    if (result != NULL) {
        while (f->stacktop > nlp) {
            f->stacktop--;
            Py_CLEAR(f->localsplus[f->stacktop]);
        }
        int ret = info->ret_index - 1;
        if (ret < 0) {
            /* 3.12 code with no RETURN_VALUE returns only constants: end with
             * the RETURN_CONST of this very constant (the recording returned
             * the code's own constant object) */
            ret = find_return_const(code, result);
            if (ret < 0) {
                Py_DECREF(result);
                KN_INTERNAL("no instruction to return this frame's value with");
                KN_FRAME_RAISE(f, at);
                return eval_default(ts, f, 1);
            }
            Py_DECREF(result);   /* RETURN_CONST pushes the constant itself */
        } else {
            f->localsplus[f->stacktop++] = result;   /* the frame owns it now */
        }
        KN_FRAME_RESUME(f, ret);
        return eval_default(ts, f, 0);
    }
    if (!PyErr_Occurred())
        KN_INTERNAL("a compiled frame failed without an exception");
    KN_FRAME_RAISE(f, at);
    return eval_default(ts, f, 1);
}

/* What the newest recording at off failed on (kn_guard_failure), or NULL. */
static PyObject *
failed_guard(kn_codeinfo *info, _PyInterpreterFrame *f, int off)
{
    int nlp = KN_FRAME_CODE(f)->co_nlocalsplus;
    return kn_guard_failure(info->segs, off, f->localsplus, nlp, f->localsplus + nlp, f->stacktop - nlp, f->f_globals,
                            f->f_builtins, KN_FRAME_CODE(f));
}

/* Does v hold a tensor or a module (itself, a cell's content, or an item
   of a tuple, list or dict, two levels deep)?  1 yes, 0 no (an error is
   cleared and read as yes). */
static int
holds_torch(PyObject *v, int depth)
{
    if (v != NULL && PyCell_Check(v))
        v = PyCell_GET(v);   /* (once: a cell may hold itself) */
    if (v == NULL || PyCell_Check(v))
        return 0;
    int r = PyObject_IsInstance(v, kn_cenv.torch_tensor);
    if (r == 0)
        r = PyObject_IsInstance(v, kn_cenv.nn_module);
    if (r != 0) {
        if (r < 0)
            PyErr_Clear();
        return 1;
    }
    if (depth <= 0)
        return 0;
    if (PyTuple_Check(v) || PyList_Check(v)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++)
            if (holds_torch(PySequence_Fast_GET_ITEM(v, i), depth - 1))
                return 1;
    } else if (PyDict_Check(v)) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (PyDict_Next(v, &pos, &key, &item))
            if (holds_torch(item, depth - 1))
                return 1;
    }
    return 0;
}

/* A fresh recording that ends the call (it returns) in code where nothing
   of torch happens: no recording of this code has a tensor operation, and
   no tensor or module is among the frame's locals and stack (a dataclass's
   __init__ that torch's code calls, a helper of plain values).  As
   TorchDynamo skips a frame with no ops, such code runs as Python from now
   on: its recordings would only add guards on plain values, and a new
   recording for each new value (a timestamp) until the cache limit.  Not
   the code kiln.compile was given. */
static int
nothing_of_torch(kn_capctx *ctx, _PyInterpreterFrame *f, kn_codeinfo *info, kn_seg *seg)
{
    PyCodeObject *code = KN_FRAME_CODE(f);
    if (seg->term != KN_T_RETURN || (PyObject *)code == ctx->root_code)
        return 0;
    for (kn_seg *s = info->segs; s; s = s->next)
        if (s->graph != NULL)
            return 0;
    int found = 0;
    kn_hook_off++;   /* (an __instancecheck__ in Python is not the user's code to record) */
    for (int i = 0; i < f->stacktop && !found; i++)
        found = holds_torch(f->localsplus[i], 2);
    kn_hook_off--;
    return !found;
}

static PyObject *
run_frame(kn_capctx *ctx, PyThreadState *ts, _PyInterpreterFrame *f, kn_codeinfo *info)
{
    PyCodeObject *code = KN_FRAME_CODE(f);
    frames_running++;
    prologue(f);
    int off = code->_co_firsttraceable, cap = 128, at = off;
    int handed = 0;   /* CPython's evaluator already took the frame over */
    PyObject *small[128] = {0}, **vals = small, *result = NULL;
    for (;;) {
        int count;
        at = off;
        kn_seg *seg = lookup(info, f, off, &vals, &cap, small, &count);
        if (seg == NULL && PyErr_Occurred())
            goto out;
        if (seg == NULL) {
            if (count >= ctx->cache_limit) {
                PyObject *why = NULL, *what = NULL;
                if (!info->warned) {   /* the warning names the guard that failed and the knob (once per code) */
                    why = failed_guard(info, f, off);
                    int line = PyCode_Addr2Line(code, off * 2);
                    what = why ? PyUnicode_FromFormat("cache_size_limit reached (%ld recordings at line %d, the newest "
                                     "failing its guard %U; raise kiln.config.cache_size_limit before kiln.compile)",
                                     ctx->cache_limit, line, why)
                               : PyUnicode_FromFormat("cache_size_limit reached (%ld recordings at line %d; raise "
                                     "kiln.config.cache_size_limit before kiln.compile)", ctx->cache_limit, line);
                }
                const char *w = what ? PyUnicode_AsUTF8(what) : NULL;
                warn_once(info, code, w ? w : "cache_size_limit reached (guards keep failing)");
                Py_XDECREF(what);
                Py_XDECREF(why);
                stat_add("cache_limit_fallbacks", 1);
                result = fallback(ts, f, off);
                handed = 1;
                goto out;
            }
            if (py_remaining(ts) < KN_RECORD_HEADROOM) {
                /* too deep in Python's recursion limit to record: CPython runs
                 * it (and raises RecursionError where eager would) */
                stat_add("recursion_fallbacks", 1);
                result = fallback(ts, f, off);
                handed = 1;
                goto out;
            }
            if (count > 0) {   /* a recompile: the guards of every recording here failed */
                stat_add("recompiles", 1);
                PyObject *log = PyObject_GetAttrString(kn_cenv.mod, "recompiled");   /* None: not logged */
                PyObject *why = log && log != Py_None ? failed_guard(info, f, off) : NULL;
                kn_hook_off++;   /* (the user's logging handlers run as Python) */
                PyObject *x = why ? PyObject_CallFunction(log, "OiiO", code, off, count, why) : NULL;
                kn_hook_off--;
                Py_XDECREF(x);
                Py_XDECREF(why);
                Py_XDECREF(log);
                PyErr_Clear();
            }
            int abort_kind = 0;
            long epoch = reset_epoch;
            kn_hook_off++;
            /* the cyclic collector paused while recording, as while compiling
             * (kiln/pipeline.py no_collection: fake tensors and sympy's
             * expressions by the hundred thousand, each full collection a
             * walk over the whole heap) */
            int gc_was = PyGC_Disable();
            seg = kn_record(ctx, info, code, (PyObject *)FRAME_FUNC(f), f->f_globals, f->f_builtins, f->localsplus,
                            f->localsplus + code->co_nlocalsplus, f->stacktop - code->co_nlocalsplus, off,
                            &abort_kind);
            if (gc_was)
                PyGC_Enable();
            kn_hook_off--;
            if (seg && epoch != reset_epoch) {
                /* kiln.reset() ran meanwhile: this frame uses the segment, the
                 * cache does not keep it */
                for (kn_seg **p = &info->segs; *p; p = &(*p)->next) {
                    if (*p == seg) {
                        *p = seg->next;
                        break;
                    }
                }
                seg->next = NULL;
                grave_add(seg);
            }
            if (seg == NULL) {
                if (abort_kind == 1)          /* fullgraph: the user's error */
                    goto out;
                if (kn_cenv.backend_failed && PyErr_ExceptionMatches(kn_cenv.backend_failed))
                    goto out;                 /* the user's backend raised: their error */
                if (kn_cenv.user_error && PyErr_ExceptionMatches(kn_cenv.user_error))
                    goto out;                 /* what the user asked cannot hold (mark_dynamic) */
                if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
                    /* the recording itself ran out of recursion depth: not a
                     * kiln bug, CPython runs the frame */
                    PyErr_Clear();
                    stat_add("recursion_fallbacks", 1);
                    result = fallback(ts, f, off);
                    handed = 1;
                    goto out;
                }
                if (debug_mode())             /* KILN_DEBUG: an internal error fails loudly */
                    goto out;
                warn_once(info, code, "capture failed");
                stat_add("capture_failures", 1);
                result = fallback(ts, f, off);
                handed = 1;
                goto out;
            }
            stat_add("segments_recorded", 1);
            if (nothing_of_torch(ctx, f, info, seg)) {
                info->eager = 1;   /* (this call still runs its recording) */
                stat_add("frames_without_torch", 1);
            }
            if (kn_cenv.dump_guards) {   /* KILN_DUMP=guards */
                PyObject *gl = kn_guard_describe(seg, code);
                PyObject *x = gl ? PyObject_CallFunction(kn_cenv.dump_guards, "OiO", code, off, gl) : NULL;
                Py_XDECREF(x);
                Py_XDECREF(gl);
                PyErr_Clear();
            }
            int r = vals_reserve(&vals, &cap, small, seg->nsrc);
            if (r == 0)
                r = kn_guard_check(seg, f->localsplus, code->co_nlocalsplus, f->localsplus + code->co_nlocalsplus,
                                   f->stacktop - code->co_nlocalsplus, f->f_globals, f->f_builtins, vals);
            if (r != 1) {
                release_vals(seg, vals);
                if (r == -1)
                    goto out;
                if (debug_mode()) {
                    KN_INTERNAL("a fresh recording fails its own guards");
                    goto out;
                }
                warn_once(info, code, "a fresh recording fails its own guards (kiln bug)");
                seg->offset = -1;   /* never use it */
                result = fallback(ts, f, off);
                handed = 1;
                goto out;
            }
        }
        if (seg->term == KN_T_FALLBACK && seg->nops == 0 && seg->graph == NULL) {
            release_vals(seg, vals);
            result = fallback(ts, f, seg->term_off);
            handed = 1;
            goto out;
        }
        seg->hits++;
        PyObject *ret = NULL;
        _PyInterpreterFrame *prev = frame_link(ts, f, seg->offset);
        int rc = kn_replay(seg, f, vals, &ret);
        frame_unlink(ts, prev);
        release_vals(seg, vals);
        if (rc == -2) {
            handed = 1;
            if (graph_error_stays(seg)) {
                /* the graph raised after it may have written its inputs: running
                 * the segment as Python would write them twice.  Its exception
                 * is raised in the frame, at the segment's first instruction
                 * (a handler inside the segment does not see it) */
                stat_add("graph_errors_raised", 1);
                result = raise_at(ts, f, seg->offset);
                goto out;
            }
            /* the graph raised: run the segment as Python, so the exception
             * comes from the user's own line and reaches their handlers */
            PyErr_Clear();
            stat_add("graph_errors_replayed", 1);
            result = fallback(ts, f, seg->offset);
            goto out;
        }
        if (rc < 0) {
            Py_XDECREF(ret);
            goto out;
        }
        switch (seg->term) {
        case KN_T_RETURN:
            result = ret;
            goto out;
        case KN_T_FALLBACK:
            result = fallback(ts, f, seg->term_off);
            handed = 1;
            goto out;
        case KN_T_CALL:
            at = seg->term_off;   /* an exception from the call is raised there */
            if (do_call(ts, seg, f) < 0)
                goto out;
            off = seg->term_next;
            break;
        case KN_T_JUMP: {
            at = seg->term_off;
            int to = do_jump(seg, f);
            if (to < 0)
                goto out;
            off = to;
            break;
        }
        }
    }
out:
    if (vals != small)
        PyMem_Free(vals);
    if (!handed)
        result = end_frame(ts, f, info, result, at);
    grave_empty();
    return result;
}

/* Is f's function marked torch.compiler.disable (its wrapper carries
   _torchdynamo_disable = True)? */
static int
disabled(_PyInterpreterFrame *f)
{
    PyObject *fn = (PyObject *)FRAME_FUNC(f), *v = NULL;
    if (fn == NULL || kn_lookup_attr(fn, kn_cenv.s_dynamo_disable, &v) < 0) {
        PyErr_Clear();
        return 0;
    }
    int yes = v == Py_True;
    Py_XDECREF(v);
    return yes;
}

static PyObject *
kn_eval(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag)
{
    kn_capctx *ctx = tls_ctx;
    if (ctx == NULL || throwflag)
        return _PyEval_EvalFrameDefault(ts, f, throwflag);
    PyCodeObject *code = KN_FRAME_CODE(f);
    if (kn_c_stack_low()) {
        /* the C stack is nearly full (a raised recursion limit): raise as
         * CPython does when it runs out of C stack, never overflow it */
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded (kiln: the thread's C stack is nearly full)");
        if (f->owner == FRAME_OWNED_BY_THREAD && KN_FRAME_FRESH(f)) {
            prologue(f);   /* a fresh frame: raised at its first line, cells made */
            KN_FRAME_RAISE(f, code->_co_firsttraceable);
        }
        return _PyEval_EvalFrameDefault(ts, f, 1);
    }
    if (kn_hook_off)
        return eval_default(ts, f, throwflag);
    if ((code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) ||
        f->owner != FRAME_OWNED_BY_THREAD || ts->c_tracefunc != NULL || ts->c_profilefunc != NULL ||
        !KN_FRAME_FRESH(f))
        return eval_default(ts, f, throwflag);
    kn_codeinfo *info = code_info(code);
    if (info == NULL) {
        PyErr_Clear();
        return eval_default(ts, f, throwflag);
    }
    if (info->wrapper && disabled(f)) {
        /* torch.compiler.disable: the function and all it calls run eagerly */
        kn_hook_off++;
        PyObject *r = eval_default(ts, f, throwflag);
        kn_hook_off--;
        return r;
    }
    if (info->eager || (info->state == 1 && (PyObject *)code != ctx->root_code))
        return eval_default(ts, f, throwflag);
    if (info->state == 3) {
        /* a tensor subclass's __torch_dispatch__ / __torch_function__: it and
         * everything it calls run as Python (kiln records above tensors) */
        kn_hook_off++;
        PyObject *r = eval_default(ts, f, throwflag);
        kn_hook_off--;
        return r;
    }
    if (py_remaining(ts) <= 0)   /* CPython raises RecursionError in this frame */
        return eval_default(ts, f, throwflag);
    if (info->ret_index == 0) {   /* stored + 1; -1: none */
        int r = find_return(code);
        info->ret_index = r >= 0 ? r + 1 : -1;
        /* 3.12 code returning only constants ends with RETURN_CONST (end_frame);
         * code with no return at all (it always raises) is left to CPython */
        if (r < 0 && !KN_PY312)
            info->eager = 1;
    }
    py_adjust(ts, -1);   /* given back by frame_release */
    return run_frame(ctx, ts, f, info);
}

/* ------------------------------------------------------------------ Compiled: the callable kiln.compile returns */

static void
hook_enter(kn_capctx *ctx, kn_capctx **saved, int *saved_off)
{
    *saved = tls_ctx;
    *saved_off = kn_hook_off;
    tls_ctx = ctx;
    kn_hook_off = 0;
    if (installed++ == 0)
        _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), kn_eval);
}

static void
hook_exit(kn_capctx *saved, int saved_off)
{
    tls_ctx = saved;
    kn_hook_off = saved_off;
    if (--installed == 0)
        _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), _PyEval_EvalFrameDefault);
}

static PyObject *
ctx_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    kn_capctx *ctx = (kn_capctx *)self, *saved;
    int saved_off;
    hook_enter(ctx, &saved, &saved_off);
    PyObject *r = PyObject_Vectorcall(ctx->fn, args, nargsf, kwnames);
    hook_exit(saved, saved_off);
    return r;
}

static PyObject *
ctx_call(PyObject *self, PyObject *args, PyObject *kw)
{
    kn_capctx *ctx = (kn_capctx *)self, *saved;
    int saved_off;
    hook_enter(ctx, &saved, &saved_off);
    PyObject *r = PyObject_Call(ctx->fn, args, kw);
    hook_exit(saved, saved_off);
    return r;
}

typedef struct {
    kn_capctx base;
    vectorcallfunc vectorcall;
} kn_capobj;

static int
ctx_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fn", "backend", "root_code", "fullgraph", "cache_size_limit", "dynamic", NULL};
    kn_capctx *c = (kn_capctx *)self;
    PyObject *fn, *backend, *root = Py_None, *dyn = Py_None;
    int fullgraph = 0;
    long limit = 8;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OplO", kwlist, &fn, &backend, &root, &fullgraph, &limit, &dyn))
        return -1;
    /* None or -1: automatic dynamic; -2: mark_dynamic's marks alone; 0/False, 1/True */
    long d = dyn == Py_None ? -1 : PyBool_Check(dyn) ? (dyn == Py_True) : PyLong_AsLong(dyn);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (d < -2 || d > 1) {
        PyErr_SetString(PyExc_ValueError, "Captured: dynamic is None, True, False, -1 or -2");
        return -1;
    }
    c->dynamic = (int)d;
    Py_XSETREF(c->fn, Py_NewRef(fn));
    Py_XSETREF(c->backend, Py_NewRef(backend));
    Py_XSETREF(c->root_code, root == Py_None ? NULL : Py_NewRef(root));
    c->fullgraph = fullgraph;
    c->cache_limit = limit;
    ((kn_capobj *)self)->vectorcall = ctx_vectorcall;
    return 0;
}

static void
ctx_dealloc(PyObject *self)
{
    kn_capctx *c = (kn_capctx *)self;
    PyObject_GC_UnTrack(self);
    Py_CLEAR(c->fn);
    Py_CLEAR(c->backend);
    Py_CLEAR(c->root_code);
    Py_TYPE(self)->tp_free(self);
}

static int
ctx_traverse(PyObject *self, visitproc visit, void *arg)
{
    kn_capctx *c = (kn_capctx *)self;
    Py_VISIT(c->fn);
    Py_VISIT(c->backend);
    Py_VISIT(c->root_code);
    return 0;
}

static PyObject *
ctx_get_fn(PyObject *self, void *unused)
{
    return Py_NewRef(((kn_capctx *)self)->fn);
}

static PyGetSetDef ctx_getset[] = {
    {"fn", ctx_get_fn, NULL, "the wrapped callable", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CapType = {
    KN_TYPE_HEAD("Captured", kn_capobj, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                 "A callable whose frames kiln records and runs as compiled segments."),
    .tp_new = PyType_GenericNew,
    .tp_init = ctx_init,
    .tp_dealloc = ctx_dealloc,
    .tp_traverse = ctx_traverse,
    .tp_call = ctx_call,
    .tp_vectorcall_offset = offsetof(kn_capobj, vectorcall),
    .tp_getset = ctx_getset,
};

/* ------------------------------------------------------------------ module functions */

static PyObject *
py_capture_setup(PyObject *self, PyObject *args)
{
    PyObject *mod, *rules;
    if (!PyArg_ParseTuple(args, "OO!", &mod, &PyTuple_Type, &rules))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rules); i++) {
        PyObject *rule = PyTuple_GET_ITEM(rules, i);
        if (!PyTuple_Check(rule) || PyTuple_GET_SIZE(rule) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(rule, 0)))
            return PyErr_Format(PyExc_TypeError, "capture_setup: path rules are (prefix, skip) pairs");
    }
    Py_XSETREF(path_rules, Py_NewRef(rules));
    Py_XSETREF(kn_cenv.mod, Py_NewRef(mod));
#define GET(field, name)                                          \
    do {                                                          \
        Py_XSETREF(kn_cenv.field, PyObject_GetAttrString(mod, name)); \
        if (kn_cenv.field == NULL)                                \
            return NULL;                                          \
    } while (0)
    GET(new_graph, "new_graph");
    GET(dims_for, "dims_for");
    GET(wants_symbols, "wants_symbols");
    GET(int_dynamic, "int_dynamic");
    GET(int_symbol, "int_symbol");
    GET(symbolic_fake, "symbolic_fake");
    GET(fx_arg, "fx_arg");
    GET(concrete, "concrete");
    GET(is_symbolic, "is_symbolic");
    GET(guard_program, "guard_program");
    GET(sym_int, "SymInt");
    GET(sym_float, "SymFloat");
    GET(sym_bool, "SymBool");
    GET(op_add, "op_add");
    GET(size_program, "size_program");
    GET(finish, "finish");
    GET(note_break, "note_break");
    GET(warn, "warn");
    GET(classify, "classify");
    GET(torch_tensor, "Tensor");
    GET(torch_param, "Parameter");
    GET(nn_module, "Module");
    GET(getitem, "getitem");
    GET(set_grad, "set_grad_enabled");
    GET(is_grad, "is_grad_enabled");
    GET(no_grad, "no_grad");
    GET(enable_grad, "enable_grad");
    GET(set_grad_enabled_cls, "set_grad_enabled_cls");
    GET(module_members, "module_members");
    GET(fake_exc, "DataDependent");
    GET(torch_size, "Size");
    GET(torch_dtype, "dtype");
    GET(torch_device, "device");
    GET(s_global_hooks, "global_hook_dicts");
    GET(autocast_cls, "autocast");
    GET(enter_autocast, "enter_autocast");
    GET(exit_autocast, "exit_autocast");
    GET(nullcontext, "nullcontext");
    GET(regen_view, "regen_view");
    GET(view_creation, "view_creation");
    GET(fill_object, "fill_object");
    GET(function_apply, "function_apply");
    GET(function_apply_whole, "function_apply_whole");
    GET(constructor_fakes, "constructor_fakes");
    GET(constructor_tensors, "constructor_tensors");
    GET(has_fake, "has_fake");
    GET(backend_failed, "BackendCompilerFailed");
    GET(user_error, "UserError");
    GET(tensor_unsupported, "tensor_unsupported");
    GET(fake_overrides, "fake_overrides");
    if (!PyDict_Check(kn_cenv.fake_overrides))
        return PyErr_Format(PyExc_TypeError, "capture_setup: fake_overrides is a dict");
    GET(dead_locals, "dead_locals");
    GET(private_cells, "private_cells");
    GET(dead_cells, "dead_cells");
    Py_XSETREF(kn_cenv.dump_guards, PyObject_GetAttrString(mod, "dump_guards"));
    if (kn_cenv.dump_guards == Py_None)
        Py_CLEAR(kn_cenv.dump_guards);
    PyErr_Clear();
#undef GET
#define STR(field, text)                                           \
    do {                                                           \
        if (kn_cenv.field == NULL)                                 \
            kn_cenv.field = PyUnicode_InternFromString(text);      \
        if (kn_cenv.field == NULL)                                 \
            return NULL;                                           \
    } while (0)
    STR(s_shape, "shape");
    STR(s_stride, "stride");
    STR(s_dtype, "dtype");
    STR(s_device, "device");
    STR(s_requires_grad, "requires_grad");
    STR(s_parameters, "_parameters");
    STR(s_buffers, "_buffers");
    STR(s_modules, "_modules");
    STR(s_dynamo_disable, "_torchdynamo_disable");
    STR(s_dict, "__dict__");
    STR(s_training, "training");
    STR(s_forward, "forward");
    STR(s_call_function, "call_function");
    STR(s_call_method, "call_method");
    STR(s_placeholder, "placeholder");
    STR(s_output, "output");
    STR(s_from_tensor, "from_tensor");
    STR(s_fwd_hooks, "_forward_hooks");
    STR(s_fwd_pre_hooks, "_forward_pre_hooks");
#undef STR
    if (capture_stats == NULL && (capture_stats = PyDict_New()) == NULL)
        return NULL;
    if (kn_cenv.rpath_keys == NULL && (kn_cenv.rpath_keys = PyList_New(0)) == NULL)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
py_sizes_eval(PyObject *self, PyObject *args)
{
    PyObject *prog, *vals;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &prog, &PyList_Type, &vals))
        return NULL;
    int failed;
    int ok = kn_sizes_eval((const int64_t *)PyBytes_AS_STRING(prog), PyBytes_GET_SIZE(prog) / 8,
                           &PyList_GET_ITEM(vals, 0), PyList_GET_SIZE(vals), &failed);
    if (ok < 0)
        return PyErr_Format(PyExc_ValueError, "sizes_eval: a malformed program");
    return Py_BuildValue("(Oi)", ok ? Py_True : Py_False, failed);
}

static PyObject *
py_capture_reset(PyObject *self, PyObject *unused)
{
    /* frames may be running these segments (other threads, or this one
     * below a call): detach the chains, free them once none runs.  Nothing
     * here runs Python code, so the list of infos cannot change under us. */
    reset_epoch++;
    for (infonode *n = all_infos.next; n != &all_infos; n = n->next) {
        kn_codeinfo *info = &n->info;
        grave_add(info->segs);
        info->segs = NULL;
        PyMem_Free(info->noinline);   /* read by recordings only between Python calls */
        info->noinline = NULL;
        info->nnoinline = info->capnoinline = 0;
        info->nseg_entry = 0;
        info->warned = 0;
        Py_CLEAR(info->dynstate);
        /* state and ret_index are facts about the code, read by running frames */
        info->eager = info->ret_index < 0 && !KN_PY312;
    }
    grave_empty();
    if (capture_stats)
        PyDict_Clear(capture_stats);
    Py_RETURN_NONE;
}

static PyObject *
py_capture_stats(PyObject *self, PyObject *unused)
{
    return PyDict_Copy(capture_stats ? capture_stats : Py_None);
}

/* Guards of every cached segment of a code object, as readable strings. */
static PyObject *
py_capture_guards(PyObject *self, PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "capture_guards expects a code object");
        return NULL;
    }
    void *p = NULL;
    if (kn_code_get_extra(code, extra_index, &p) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL || p == NULL)
        return out;
    for (kn_seg *s = ((infonode *)p)->info.segs; s; s = s->next) {
        PyObject *g = kn_guard_describe(s, (PyCodeObject *)code);
        if (g == NULL || PyList_Append(out, g) < 0) {
            Py_XDECREF(g);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(g);
    }
    return out;
}

static PyObject *
py_opcode_table(PyObject *self, PyObject *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
#define OPC(name, how)                                                            \
    {                                                                             \
        PyObject *v = PyUnicode_FromString(#how);                                 \
        if (v == NULL || PyDict_SetItemString(d, #name, v) < 0) {                 \
            Py_XDECREF(v);                                                        \
            Py_DECREF(d);                                                         \
            return NULL;                                                          \
        }                                                                         \
        Py_DECREF(v);                                                             \
    }
#include "capture/opcodes.def"
#undef OPC
    return d;
}

static PyObject *
py_capture_where(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return kn_record_where();
}

/* unhooked(fn, *args): fn(*args) with the frame hook off on this thread, as
   while a graph runs: what kiln itself runs there (a compiled backward that
   autograd calls from the user's frame, its compile on first use) is not
   the user's code to record. */
static PyObject *
py_unhooked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 1)
        return PyErr_Format(PyExc_TypeError, "unhooked(fn, *args): fn missing");
    kn_hook_off++;
    PyObject *r = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    kn_hook_off--;
    return r;
}

static PyMethodDef capture_methods[] = {
    {"unhooked", (PyCFunction)(void (*)(void))py_unhooked, METH_FASTCALL,
     "unhooked(fn, *args): fn(*args) with kiln's frame hook off on this thread (kiln's own work inside a "
     "compiled call: a backward graph, its compile)."},
    {"capture_setup", py_capture_setup, METH_VARARGS, "capture_setup(module, rules): hand capture its Python helpers and its path rules ((prefix, skip), ...)."},
    {"capture_reset", py_capture_reset, METH_NOARGS, "Drop every cached segment of every code object."},
    {"sizes_eval", py_sizes_eval, METH_VARARGS,
     "sizes_eval(program, values): KN_G_SIZES's evaluator on a program (bytes) and the values of its slots "
     "(a list): (holds, index of the failing relation or -1).  For tests."},
    {"capture_stats", py_capture_stats, METH_NOARGS, "Counters of the capture stage."},
    {"capture_guards", py_capture_guards, METH_O, "Readable guards of each cached segment of a code object."},
    {"opcode_table", py_opcode_table, METH_NOARGS, "The recorder's opcode table: name -> HANDLED or BREAK."},
    {"capture_where", py_capture_where, METH_NOARGS,
     "[(filename, line, function)] of the instruction being recorded, innermost first (empty outside a "
     "recording): where kiln.symbolic says a size was made concrete."},
    {NULL, NULL, 0, NULL},
};

int
kn_capture_init(PyObject *m)
{
    if (PyType_Ready(&CapType) < 0 || PyModule_AddObjectRef(m, "Captured", (PyObject *)&CapType) < 0)
        return -1;
    if (PyModule_AddFunctions(m, capture_methods) < 0)
        return -1;
    PyObject *reasons = PyTuple_New(KN_NBREAKS);   /* breaks.def's names, in order */
    if (reasons == NULL)
        return -1;
    for (int i = 0; i < KN_NBREAKS; i++) {
        PyObject *nm = PyUnicode_FromString(kn_break_names[i]);
        if (nm == NULL) {
            Py_DECREF(reasons);
            return -1;
        }
        PyTuple_SET_ITEM(reasons, i, nm);
    }
    int added = PyModule_AddObjectRef(m, "BREAK_REASONS", reasons);
    Py_DECREF(reasons);
    if (added < 0)
        return -1;
    extra_index = kn_request_extra_index(free_extra);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "kiln: no code-object extra slot left");
        return -1;
    }
    return kn_opcodes_bind();
}
