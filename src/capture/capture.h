/* capture.h — declarations shared by the capture stage (src/capture/).
 *
 *   hook.c     PEP 523 frame hook, per-code cache (co_extra), the segment loop
 *   frame.h    CPython's _PyInterpreterFrame as kiln reads and moves it (3.11-3.13)
 *   guard.c    sources (how to fetch a value from a frame) and guards (facts
 *              checked before a cached segment is reused), evaluated in C
 *   replay.c   the small program a segment runs after its graph: rebuild
 *              values, replay side effects, write locals and stack back
 *   record.c   the symbolic interpreter over bytecode (one case per opcode),
 *              values, sources and guards as the recording makes them
 *   record_value.c  tensor ops as graph nodes, truth, iteration, operators,
 *              attribute loads
 *   record_call.c   calls, inlining, objects built while recording
 *   builtins.c the Python builtins the recorder models: one function each,
 *              dispatched through one table (recff[])
 *   breaks.def every reason a recording breaks or declines (kn_break)
 *   opcodes.def every opcode name: HANDLED (a case in record.c) or BREAK
 *   segment.c  a finished recording -> kn_seg (graph, replay, guards,
 *              terminal); kn_record, the recording driver
 *
 * A function's execution under kiln is a chain of segments over its real
 * frame.  A segment starts at an instruction offset with the frame's locals
 * (and stack, for resume points) as its inputs, runs one compiled graph,
 * writes its results back into the frame, and ends with a terminal action:
 * return, perform one call or branch for real (a graph break), or hand the
 * frame to CPython at an offset.  After a break, the next segment is looked
 * up (or recorded) at the following offset: that is kiln's resume function.
 */
#ifndef KILN_CAPTURE_H
#define KILN_CAPTURE_H

#include "kiln.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "kiln's capture supports CPython 3.11, 3.12 and 3.13"
#endif
#define KN_PY312 (PY_VERSION_HEX >= 0x030C0000)
#define KN_PY313 (PY_VERSION_HEX >= 0x030D0000)

/* The code-object extra slot: "unstable" API names from 3.12 */
#if KN_PY312
#define kn_code_get_extra PyUnstable_Code_GetExtra
#define kn_code_set_extra PyUnstable_Code_SetExtra
#define kn_request_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#else
#define kn_code_get_extra _PyCode_GetExtra
#define kn_code_set_extra _PyCode_SetExtra
#define kn_request_extra_index _PyEval_RequestCodeExtraIndex
#endif

/* getattr that tells a missing attribute (0, no error) from an error (-1) */
#if KN_PY313
#define kn_lookup_attr PyObject_GetOptionalAttr
#else
#define kn_lookup_attr _PyObject_LookupAttr
#endif

/* A type's own attribute dict (new reference, or NULL): from 3.12 the
 * dicts of static builtin types (object, tuple) live outside tp_dict, which
 * is NULL there. */
static inline PyObject *
kn_type_dict(PyTypeObject *tp)
{
#if KN_PY312
    return PyType_GetDict(tp);
#else
    return Py_XNewRef(tp->tp_dict);
#endif
}

/* The pending exception as one normalized object (new reference, or NULL),
 * clearing it: PyErr_Fetch is deprecated from 3.12. */
static inline PyObject *
kn_err_take(void)
{
#if KN_PY312
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (t == NULL)
        return NULL;
    PyErr_NormalizeException(&t, &v, &tb);
    if (v && tb)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

/* The referent of weak reference ref (new reference; Py_None when it is
 * gone): PyWeakref_GET_OBJECT is deprecated from 3.13. */
static inline PyObject *
kn_weak_get(PyObject *ref)
{
#if KN_PY313
    PyObject *o = NULL;
    if (PyWeakref_GetRef(ref, &o) < 0)
        PyErr_Clear();
    return o ? o : Py_NewRef(Py_None);
#else
    return Py_NewRef(PyWeakref_GET_OBJECT(ref));
#endif
}

static inline void
PyErr_SetRaisedException_compat(PyObject *exc)   /* steals exc */
{
#if KN_PY312
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* ---------------------------------------------------------------- opcodes */
typedef enum {
#define OPC(name, how) KN_OP_##name,
#include "capture/opcodes.def"
#undef OPC
    KN_NOPCODES
} kn_opcode;

extern const char *const kn_opcode_names[KN_NOPCODES];   /* kn_opcode -> its name */
extern int16_t kn_opmap[512];          /* CPython opcode number -> kn_opcode, -1 unbound */
extern uint8_t kn_opcaches[512];       /* inline cache entries after the opcode */
int kn_opcodes_bind(void);             /* fill the tables from dis/opcode; -1 on error */
extern PyTypeObject *kn_method_wrapper_type;   /* type(None.__repr__), set by kn_opcodes_bind
                                                  (3.13 does not export _PyMethodWrapper_Type) */

/* ---------------------------------------------------------------- break reasons */
/* why a recording breaks or declines: one code per line of breaks.def
 * (kn_brk in record.c raises them; kiln._C.BREAK_REASONS names them) */
/* why a recording breaks or declines: one code per line of breaks.def */
typedef enum {
#define BREAK(name, fmt) KN_BRK_##name,
#include "capture/breaks.def"
#undef BREAK
    KN_NBREAKS
} kn_break;

extern const char *const kn_break_names[KN_NBREAKS];    /* "NAME" */
extern const char *const kn_break_formats[KN_NBREAKS];  /* its message format */

/* ---------------------------------------------------------------- sources */
typedef enum {
    KN_SRC_LOCAL,     /* frame local slot idx */
    KN_SRC_STACK,     /* frame stack entry idx (resume points) */
    KN_SRC_GLOBAL,    /* frame globals[key], then builtins[key] */
    KN_SRC_ATTR,      /* getattr(parent, key) */
    KN_SRC_DICT,      /* parent (a dict) [key]; missing -> guard fails */
    KN_SRC_INSTDICT,  /* parent.__dict__ */
    KN_SRC_ITEM,      /* parent[idx] for a list or tuple */
    KN_SRC_CELL,      /* contents of the cell parent */
    KN_SRC_CLOSURE,   /* parent.__closure__[idx] (a cell) */
    KN_SRC_DEFAULTS,  /* parent.__defaults__ */
    KN_SRC_CONST,     /* the object in key itself (another module's globals) */
    KN_SRC_SIZE,      /* parent (a tensor).shape[idx], an int: a symbolic size's value; idx -1:
                         parent itself, an int argument that is a symbol */
} kn_srckind;

typedef struct {
    int kind, parent;
    Py_ssize_t idx;
    PyObject *key;       /* strong: name or dict key */
} kn_src;

typedef enum {
    KN_G_TYPE,      /* type(v) is obj */
    KN_G_ID,        /* v is obj */
    KN_G_EQ,        /* type(v) is type(obj) and v == obj */
    KN_G_TENSOR,    /* exact tensor type, dtype, device, sizes, strides, requires_grad */
    KN_G_LEN,       /* len(v) == n */
    KN_G_KEYS,      /* list(v.keys()) == obj (a tuple) */
    KN_G_NULL,      /* slot is unbound */
    KN_G_SAME,      /* v is value of source n */
    KN_G_GRAD,      /* torch.is_grad_enabled() == n */
    KN_G_DISTINCT,  /* the sources in obj (a tuple of indices) are distinct objects */
    KN_G_EMPTY,     /* v (a dict) maps each key in obj (a tuple) to an empty dict */
    KN_G_WEAKID,    /* v is the (live) referent of the weak reference obj2 */
    KN_G_CODE,      /* v is a function with __code__ obj, __defaults__ obj2, __kwdefaults__ obj3 */
    KN_G_STATE,     /* global torch state: each (fn, args, want) in obj has fn(*args) == want */
    KN_G_ALIAS,     /* tensor inputs overlap in memory as recorded (obj: kn_alias_facts' blob) */
    KN_G_HASKEY,    /* v is a dict and (obj in v) == n (dict's own lookup) */
    KN_G_SIZES,     /* the relations between symbolic sizes hold: obj is a postfix program
                       over the int values of KN_SRC_SIZE sources (kn_sizeop), obj2 the
                       relations' descriptions, one per KN_SZ_CHECK (kiln/symbolic.py) */
} kn_guardkind;

/* KN_G_SIZES's program: int64 words, an op then its operand where it has one.
 * Arithmetic is Python's on ints (floor division and modulo), in int64 with
 * overflow making the guard fail (the call records again rather than trust a
 * wrapped value).  Each KN_SZ_CHECK pops one relation: zero fails the guard. */
typedef enum {
    KN_SZ_SLOT,      /* operand k: push the int value of source k */
    KN_SZ_CONST,     /* operand c: push c */
    KN_SZ_ADD, KN_SZ_SUB, KN_SZ_MUL, KN_SZ_FLOORDIV, KN_SZ_MOD, KN_SZ_MIN, KN_SZ_MAX,
    KN_SZ_NEG,
    KN_SZ_EQ, KN_SZ_NE, KN_SZ_LT, KN_SZ_LE,
    KN_SZ_AND, KN_SZ_OR, KN_SZ_NOT,
    KN_SZ_CHECK,     /* pop: the next relation holds */
} kn_sizeop;
/* 1 every relation holds, 0 one fails (*failed: its index), -1 a malformed program */
int kn_sizes_eval(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int *failed);
/* The value of a program without KN_SZ_CHECK that leaves one int: 1 ok, 0 it
 * overflows or a value is missing, -1 malformed. */
int kn_sizes_value(const int64_t *prog, Py_ssize_t n, PyObject **vals, Py_ssize_t nvals, int64_t *out);

typedef struct {
    int kind, src;
    Py_ssize_t n;
    PyObject *obj, *obj2, *obj3, *obj4;   /* strong */
} kn_guard;

/* ---------------------------------------------------------------- replay program */
typedef enum {
    KN_P_SRC,        /* push value of source a */
    KN_P_CONST,      /* push consts[a] */
    KN_P_OUT,        /* push graph output a */
    KN_P_NULL,       /* push NULL (CPython's stack marker) */
    KN_P_TUPLE,      /* pop a values, push tuple */
    KN_P_LIST,
    KN_P_DICT,       /* pop a (key, value) pairs */
    KN_P_SET,
    KN_P_SLICE,      /* pop 3 */
    KN_P_ITER,       /* replace top with iter(top) */
    KN_P_WRAP,       /* replace top with consts[a](top) */
    KN_P_GETATTR,    /* replace top with getattr(top, consts[a]) */
    KN_P_GETITEM,    /* replace top with top[consts[a]] */
    KN_P_CALL,       /* pop a args then fn; push fn(*args) */
    KN_P_CALLKW,     /* pop kwnames, a args (the last len(kwnames) by keyword), fn */
    KN_P_TMP_SET,    /* tmp[a] = top (top stays) */
    KN_P_TMP_GET,    /* push tmp[a] */
    KN_P_SETATTR,    /* pop value, obj: setattr(obj, consts[a], value) */
    KN_P_DELATTR,    /* pop obj */
    KN_P_SETITEM,    /* pop value, key, obj */
    KN_P_DELITEM,    /* pop key, obj */
    KN_P_REPLACE,    /* pop new, old: old[:] = new (list) / clear+update (dict) */
    KN_P_GLOBAL,     /* pop value: globals[consts[a]] = value */
    KN_P_CELLSET,    /* pop value, cell */
    KN_P_LOCAL,      /* pop value into frame local a */
    KN_P_PUSH,       /* pop value onto the frame's stack */
    KN_P_RET,        /* pop: the frame's return value */
    KN_P_GRAD,       /* torch._C._set_grad_enabled(a) */
    KN_P_CLEARSTACK, /* drop the frame's a stack entries (a resume point's inputs) */
    KN_P_SIZE,       /* push the int of consts[a], a KN_SZ_* program over the sources' values
                        (a symbolic size: a view's geometry in a symbolic recording) */
} kn_popkind;

typedef struct {
    int kind, a;
} kn_pop;

typedef enum {
    KN_T_RETURN,     /* the replay program produced the return value */
    KN_T_CALL,       /* run the CALL/CALL_FUNCTION_EX at off for real, continue at next */
    KN_T_JUMP,       /* pop, branch for real (arg: which test), to target or next */
    KN_T_FALLBACK,   /* CPython runs the frame from off */
} kn_term;

/* One cached segment: guards, a graph, a replay program and a terminal. */
typedef struct kn_seg {
    struct kn_seg *next;
    int offset;                  /* start, in code units */
    int nsrc, nguard, ninput, nops, ntmp;
    kn_src *srcs;
    kn_guard *guards;
    int *inputs;                 /* graph argument i comes from source inputs[i] */
    kn_pop *ops;
    PyObject *consts;            /* list */
    PyObject *graph;             /* compiled callable or NULL */
    int term, term_off, term_next, term_target, term_arg;
    PyObject *kwnames;           /* KN_T_CALL */
    int hits;
    int writes;                  /* the graph writes one of its tensor inputs (or may): if it
                                    raises, the segment cannot re-run as Python (unless
                                    the error is marked _kiln_unwritten: nothing written) */
} kn_seg;

typedef struct {
    int state;                   /* 0 unknown, 1 skip, 2 capture, 3 run as Python with the hook
                                    off below (a tensor subclass's __torch_dispatch__/__torch_function__) */
    int nseg_entry;              /* entries recorded at the function's start */
    int warned;
    kn_seg *segs;
    int *noinline;               /* root call offsets not to inline */
    int nnoinline, capnoinline;
    int eager;                   /* too many entries or a hard failure: run as Python */
    int ret_index;               /* a RETURN_VALUE instruction's index + 1; 0 unknown */
    int wrapper;                 /* torch's decorator wrapper `_fn` (skipped code): its function
                                    may be a torch.compiler.disable, run with the hook off */
    PyObject *dynstate;          /* dict: source -> [size or None per dim] seen by recordings
                                    (automatic dynamic, kiln/symbolic.py dims_for), or NULL */
} kn_codeinfo;

/* ---------------------------------------------------------------- runtime API */
/* Evaluate the guards of seg against a frame's locals and stack; fills vals
 * (borrowed references) for every source.  1 pass, 0 miss, -1 error. */
int kn_guard_check(kn_seg *seg, PyObject **locals, int nlocals, PyObject **stack, int nstack,
                   PyObject *globals, PyObject *builtins, PyObject **vals);
PyObject *kn_guard_describe(kn_seg *seg, PyCodeObject *code);    /* list of str */
/* The first guard that fails now, of the newest segment at offset off (the
 * one a recompile or the cache limit is about): "<the guard> (got <what it
 * saw>)", a new str, or NULL with no exception (none fails, or an error).
 * Evaluates the guards again: only where a recording is about to happen. */
PyObject *kn_guard_failure(kn_seg *segs, int off, PyObject **locals, int nlocals, PyObject **stack, int nstack,
                           PyObject *globals, PyObject *builtins, PyCodeObject *code);

/* The global torch state a recording depends on, as KN_G_STATE's tuple:
 * default dtype, the torch-function mode stack (torch.set_default_device,
 * `with torch.device(...)`), autocast.  New reference or NULL with an error. */
PyObject *kn_state_snapshot(void);

/* KN_G_ALIAS's facts for a graph with n tensor inputs (srcs: their sources,
 * reals: the real tensors, fakes: a list of the fake tensors the recording
 * ran on, None where unknown).  Only inputs the graph writes to (their
 * fake's version moved) make overlap matter: NULL (no error) when none is
 * written, else a bytes blob: which inputs overlap a written one, and at
 * which relative offset.  Error: NULL with an exception set. */
PyObject *kn_alias_facts(const int *srcs, int n, PyObject *reals, PyObject *fakes);
PyObject *kn_src_describe(kn_src *srcs, int i, PyCodeObject *code);
void kn_seg_free(kn_seg *seg);

/* hook.c: > 0 while the frame hook is off on this thread (recording,
 * running a graph, replaying) */
extern _Thread_local int kn_hook_off;

/* replay.c: run seg's graph and replay program against frame f, whose
 * sources are already in vals; on KN_T_RETURN sets *ret (new reference).
 * 0 ok; -1 error; -2 the graph raised before anything of the frame was
 * touched.  kn_frame_push pushes v (stolen) onto f's value stack. */
struct _PyInterpreterFrame;
int kn_replay(kn_seg *seg, struct _PyInterpreterFrame *f, PyObject **vals, PyObject **ret);
int kn_frame_push(struct _PyInterpreterFrame *f, PyObject *v);

/* Capture's Python-side helpers (kiln/_capture.py), set by capture_setup. */
typedef struct {
    PyObject *mod;               /* kiln._capture */
    PyObject *new_graph;         /* (symbolic) -> (fx.Graph, fake_mode): with a ShapeEnv if symbolic */
    PyObject *dims_for;          /* (state, key, tensor, dynamic, is_param) -> dims that are symbols */
    PyObject *wants_symbols;     /* (state, dynamic) -> bool: start the recording with a ShapeEnv */
    PyObject *int_dynamic;       /* (state, key, int, dynamic) -> bool: an int argument is a symbol */
    PyObject *int_symbol;        /* (mode, int, name) -> SymInt: its symbol */
    PyObject *symbolic_fake;     /* (mode, tensor, name, dims) -> (fake, [(dim, SymInt)]) */
    PyObject *fx_arg;            /* (graph, obj, symnodes) -> obj with SymInts as fx nodes */
    PyObject *concrete;          /* (obj) -> obj with SymInts as ints (guarded) */
    PyObject *is_symbolic;       /* (obj) -> bool: a SymInt/SymBool/SymFloat inside */
    PyObject *sym_int, *sym_float, *sym_bool;   /* torch.SymInt, SymFloat, SymBool */
    PyObject *op_add;            /* operator.add */
    PyObject *size_program;      /* (SymInt, slots) -> bytes: KN_P_SIZE's program, or None */
    PyObject *guard_program;     /* (mode, slots) -> (bytes, [str], names) or None: KN_G_SIZES */
    PyObject *finish;            /* (graph, fake_mode, examples, backend, info) -> callable */
    PyObject *note_break;        /* (reason, filename, lineno, kind, outer or None, function's qualname) */
    PyObject *warn;              /* (message) */
    PyObject *classify;          /* (callable) -> int: how a call to it is recorded */
    PyObject *torch_tensor, *torch_param, *nn_module, *getitem, *set_grad, *is_grad;
    PyObject *no_grad, *enable_grad, *set_grad_enabled_cls, *fake_exc, *module_members;
    PyObject *torch_size, *torch_dtype, *torch_device;
    PyObject *s_shape, *s_stride, *s_dtype, *s_device, *s_requires_grad;
    PyObject *s_parameters, *s_buffers, *s_modules, *s_dict, *s_training, *s_forward, *s_dynamo_disable;
    PyObject *s_call_function, *s_call_method, *s_placeholder, *s_output, *s_from_tensor;
    PyObject *s_fwd_hooks, *s_fwd_pre_hooks, *s_global_hooks;
    PyObject *rpath_keys;        /* keeps integer path keys alive */
    PyObject *autocast_cls, *enter_autocast, *exit_autocast, *nullcontext;
    PyObject *dump_guards;       /* callable(code, offset, [str]) or NULL */
    PyObject *regen_view;        /* (anchor, graph output, geometry) -> the view, rebuilt */
    PyObject *view_creation;     /* (fake view) -> its autograd CreationMeta, or None for the default */
    PyObject *fill_object;       /* (obj, dict) -> obj with its __dict__ filled */
    PyObject *function_apply;    /* (Fn, *args) -> Fn.forward with a stand-in ctx (no autograd) */
    PyObject *function_apply_whole;   /* (Fn, *args) -> Fn.apply(*args), or None: a graph node (autograd) */
    PyObject *constructor_fakes; /* obj -> [(path, fake)] it holds */
    PyObject *constructor_tensors; /* (cls, args, kwargs, paths) -> [(fn, args, kwargs)] or None */
    PyObject *has_fake;          /* (list) -> bool: a fake tensor inside (the replay's constants) */
    PyObject *backend_failed;    /* kiln.BackendCompilerFailed: a user backend raised (the user's error) */
    PyObject *user_error;        /* kiln.errors.UserError: raised where the user called (mark_dynamic's promise) */
    PyObject *tensor_unsupported;   /* (tensor or tuple) -> reason str or None */
    PyObject *fake_overrides;    /* {torch function: its recording fake (*args, **kw) -> result or NotImplemented} */
    PyObject *dead_locals;       /* (code, offset) -> locals nothing from offset on reads */
    PyObject *private_cells;     /* (code) -> its cells nothing reads after it returns */
    PyObject *dead_cells;        /* (code, offset) -> private cells nothing from offset on reads */
} kn_capture_env;

extern kn_capture_env kn_cenv;

/* Record a segment of code starting at offset with the frame's current state.
 * Returns a new segment (also linked into info), or NULL with an exception set
 * (a user error under fullgraph, or an internal error). */
typedef struct kn_capctx kn_capctx;
struct kn_capctx {
    PyObject_HEAD
    PyObject *fn;                /* the user's callable */
    PyObject *backend;           /* callable(gm, example_inputs) */
    PyObject *root_code;         /* code recorded even inside torch files, or NULL */
    int fullgraph;
    long cache_limit;
    int dynamic;                 /* kiln.compile's dynamic=: -1 None (automatic), 0 False, 1 True */
};

kn_seg *kn_record(kn_capctx *ctx, kn_codeinfo *info, PyCodeObject *code, PyObject *func,
                  PyObject *globals, PyObject *builtins, PyObject **locals, PyObject **stack, int nstack,
                  int offset, int *abort_kind);
/* [(filename, line, function)] of the instruction being recorded, innermost
 * first; empty outside a recording (record.c) */
PyObject *kn_record_where(void);

int kn_capture_init(PyObject *module);

/* 1 when this thread's C stack is nearly used up (hook.c): recursion in C
 * must stop there (raise RecursionError, or break the recording). */
int kn_c_stack_low(void);

/* Exception-table question: is instruction offset covered by a `try` handler
 * (1), a with-block cleanup (2), or nothing / compiler cleanup (0)? */
int kn_exc_region(PyCodeObject *code, int offset);

#endif
