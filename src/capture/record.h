/* record.h — the recorder's private declarations (record.c, record_value.c,
 * record_call.c, builtins.c, segment.c).
 *
 * Symbolic values (kn_val) live in the recording's arena; every Python object
 * they point at is pinned in rec->pins, so an abort from any depth releases
 * everything in one place.
 */
#ifndef KILN_RECORD_H
#define KILN_RECORD_H

#include "capture/capture.h"
#include "error.h"

typedef enum {
    V_NULL,      /* CPython's NULL stack marker, or an unbound local */
    V_CONST,     /* a Python value known at record time (guarded if it came from a source) */
    V_TENSOR,    /* a tensor: fx node + fake tensor */
    V_TUPLE,
    V_LIST,
    V_DICT,      /* keys are constants (keys[]), values symbolic */
    V_OBJ,       /* a real object read through sources (modules, user objects) */
    V_FUNC,      /* a function made by MAKE_FUNCTION while recording */
    V_CELL,      /* a closure cell, real (obj) or made while recording */
    V_METHOD,    /* fn bound to self */
    V_TMETHOD,   /* a Tensor method: self + name */
    V_BMETHOD,   /* a method of a symbolic container: self + name */
    V_ITER,      /* an iterator over known items */
    V_SUPER,     /* super(cls, self) */
    V_CTX,       /* a grad-mode context manager */
    V_SLICE,
} kn_vkind;

typedef struct kn_val kn_val;
typedef struct kn_attr {
    struct kn_attr *next;
    PyObject *name;
    kn_val *val;             /* NULL: deleted */
} kn_attr;

struct kn_val {
    int kind;
    int src;                 /* source index or -1 */
    PyObject *obj;           /* CONST value; OBJ/CELL real object; TENSOR fake; FUNC code; T/BMETHOD name */
    PyObject *node;          /* TENSOR: fx node */
    int n, cap;
    kn_val **items;          /* containers, ITER, SLICE(3), FUNC closure */
    PyObject **keys;         /* DICT keys */
    int pos;                 /* ITER */
    kn_val *self, *fn;       /* METHOD, TMETHOD, BMETHOD, SUPER(self); FUNC defaults in fn, kwdefaults in self */
    kn_val *content;         /* CELL */
    PyObject *globals;       /* FUNC */
    int mutated;
    int tmp;                 /* replay temp + 1, 0 none */
    int outidx;              /* TENSOR graph output + 1, 0 none */
    int mode, entered, prev; /* CTX: grad mode to set (-1 none), entered, mode before */
    int ctxkind;             /* CTX: 0 grad mode, 1 no-op, 2 autocast, 3 a user class (fn: its bound __exit__) */
    PyObject *ctxargs, *ctxnode, *ctxreal;   /* autocast: its arguments, enter node, real mode */
    kn_attr *attrs;          /* OBJ: attribute stores made while recording */
    int newobj;              /* OBJ made while recording by object.__new__: obj is an empty shell, */
    kn_val *idict;           /*   its attributes are this V_DICT (its __dict__); __init__ was inlined */
    kn_val *ctor;            /* OBJ built at record time (library classes): a V_TUPLE (class, args...) */
    PyObject *ctor_kw;       /* its keyword names, or NULL */
    PyObject *ttype;         /* TUPLE: a tuple subclass (structseq, namedtuple) to rebuild */
    kn_val *vanchor;         /* TENSOR, a view: the input or non-view graph tensor it views */
    PyObject *vinfo;         /*   (size, stride, offset - anchor's, anchor size, anchor stride, grad) */
    kn_val *rparent;         /* reached from an object built while recording: */
    PyObject *rkey;          /*   rparent.rkey (rkind 1) or rparent[rkey] (rkind 2) */
    int rkind;
};

typedef struct rframe {
    PyCodeObject *code;
    const uint8_t *ins;
    int nins;
    PyObject *globals, *builtins;
    kn_val **locals, **initial;
    int nlocals;
    kn_val **stack;
    int sp, stackcap;
    PyObject *kwnames;
    int pc, lastpc;
    struct rframe *parent;
    int call_off;            /* root: offset of the call that led into this inlined chain */
    kn_val *ret;
    int nwith;
    kn_val *yields;          /* generators: yielded values (a V_LIST) */
    kn_val *funcv;           /* the function being run (for __class__ / super) */
} rframe;

typedef enum { E_SETATTR, E_DELATTR, E_GLOBAL, E_CELL, E_REPLACE } kn_effkind;
typedef struct {
    int kind;
    kn_val *a, *b;
    PyObject *name;
} kn_effect;

typedef struct {
    kn_capctx *ctx;
    kn_codeinfo *info;
    kn_arena arena;
    PyObject *pins;          /* list: every object values point at */
    PyObject *srcmemo;       /* dict (kind, parent, key) -> source index */
    PyObject *objmemo;       /* dict id -> index in vtab */
    kn_val **vtab;
    int nvtab, capvtab;
    kn_val **bysrc;          /* value made for each source */
    kn_src *srcs;
    int nsrc, capsrc;
    kn_guard *guards;
    int nguard, capguard;
    kn_effect *effects;
    int neff, capeff;
    PyObject *graph, *fake_mode, *examples;
    int fake_exited;
    int symbolic;            /* the fake mode has a ShapeEnv: sizes may be symbols */
    int restart_symbolic;    /* a size became dynamic in a recording without one: record again */
    PyObject *symnodes;      /* symbolic: dict sympy Symbol -> size placeholder (and fx_arg's memo) */
    PyObject *symslots;      /* symbolic: dict sympy Symbol -> source index of its KN_SRC_SIZE */
    PyObject *live_autocast;  /* list: autocast modes entered for real while recording */
    int *inputs;
    int ninputs, capinputs;
    int nops;                /* op nodes in the graph */
    int steps;               /* instruction budget */
    char reason[300];        /* the break's message, formatted */
    int brk;                 /* its kn_break code; -1 none */
    int unrebuildable;       /* 1 + the kind of a value finish cannot rebuild after the graph; 0 none */
    PyCodeObject *break_code;
    int break_pc;
    int grad_start, grad_cur;
    PyObject *root_globals, *root_builtins;
    rframe *root;
} kn_rec;

static inline const char *
kn_break_name(kn_rec *r)
{
    return r->brk >= 0 && r->brk < KN_NBREAKS ? kn_break_names[r->brk] : "NONE";
}

/* break: returns this with rec->brk and rec->reason set (kn_brk) */
#define KN_BREAK 1
#define KN_ERR (-1)
/* return a step's non-zero status (break or error) to the caller */
#define CHECK(call)                   \
    do {                              \
        int _rc = (call);             \
        if (_rc != 0)                 \
            return _rc;               \
    } while (0)

/* a failed step: an error if an exception is set, else a break (reason set) */
#define KN_FAIL (PyErr_Occurred() ? KN_ERR : KN_BREAK)

extern kn_val kn_lazy;       /* marker: a root local not read yet */
#define LAZY (&kn_lazy)

/* record.c */
kn_val *kn_v_new(kn_rec *r, int kind);
kn_val *kn_v_const(kn_rec *r, PyObject *obj);              /* borrows obj, pins it */
kn_val *kn_v_const_steal(kn_rec *r, PyObject *obj);        /* steals obj (NULL passes through) */
int kn_is_simple_const(PyObject *o);   /* None, numbers, str, bytes, dtype, device, Size, slice, range: compared by value */
PyObject *kn_opfn(const char *name);   /* operator.<name>, new ref */
PyObject *kn_input_real(kn_rec *r, int src);   /* the real tensor of the graph input read from src, borrowed, or NULL */
kn_val *kn_v_method(kn_rec *r, kn_val *fn, kn_val *self);   /* fn bound to self; NULL on failure */
int kn_v_add(kn_rec *r, kn_val *c, kn_val *item);
int kn_src_add(kn_rec *r, int kind, int parent, PyObject *key, Py_ssize_t idx);
int kn_guard_add(kn_rec *r, int kind, int src, PyObject *obj, PyObject *obj2, PyObject *obj3, PyObject *obj4,
                 Py_ssize_t n);
kn_val *kn_wrap(kn_rec *r, PyObject *obj, int src);
int kn_brk(kn_rec *r, kn_break why, ...);                   /* KN_BREAK; args: why's format */
void kn_brk_clear(kn_rec *r);                               /* forget a break taken back */
PyObject *kn_to_py(kn_rec *r, kn_val *v, int fake);         /* new ref; NULL + reason on unsupported */
int kn_v_is_const(kn_val *v);
PyObject *kn_const_of(kn_rec *r, kn_val *v);                /* new ref or NULL (not constant) */
int kn_run_frame(kn_rec *r, rframe *fr);
int kn_memo_obj(kn_rec *r, PyObject *obj, kn_val *v);
int kn_rebuildable(kn_val *v);                          /* the replay can reach it again */
void kn_set_rpath(kn_val *v, kn_val *parent, int kind, PyObject *key);
kn_val *kn_memo_get(kn_rec *r, PyObject *obj);
int kn_effect_add(kn_rec *r, int kind, kn_val *a, kn_val *b, PyObject *name);
int kn_set_grad(kn_rec *r, int mode);
int kn_plain_store(kn_rec *r, kn_val *o, PyObject *name);  /* 0, or KN_BREAK: a store not read back as stored */

/* record.c: decoding and the recorded frame's real locals */
int kn_decode(rframe *fr, int pc, int *op, int *arg, int *next);
int kn_jump_target(int op, int arg, int next);
int kn_inlined_comp_loop(rframe *fr, int pc);
kn_val *kn_load_local(kn_rec *r, rframe *fr, int i);        /* a local, read from the real frame if not yet */
int kn_cell_load(kn_rec *r, kn_val *cell, kn_val **out);    /* a cell's contents (guarded through its source) */
extern _Thread_local PyObject **kn_root_locals;

/* record.c: the recorded frame's symbolic stack, inside a step of fr
 * (PUSH of NULL fails the step: an error if one is set, else a break) */
#define PUSH(v)                                                  \
    do {                                                         \
        kn_val *_v = (v);                                        \
        if (_v == NULL)                                          \
            return PyErr_Occurred() ? KN_ERR : KN_BREAK;         \
        if (fr->sp >= fr->stackcap)                              \
            return kn_brk(r, KN_BRK_SYMBOLIC_STACK_OVERFLOW);         \
        fr->stack[fr->sp++] = _v;                                \
    } while (0)
#define POP() (fr->stack[--fr->sp])
#define TOP() (fr->stack[fr->sp - 1])
#define PEEK(i) (fr->stack[fr->sp - (i)])

kn_val *kn_as_tuple(kn_rec *r, kn_val *a);                  /* tuple(a) for a list built while recording */
int kn_store_subscr(kn_rec *r, kn_val *c, kn_val *k, kn_val *v);
PyObject *kn_pin(kn_rec *r, PyObject *o);
PyObject *kn_concrete_obj(kn_rec *r, PyObject *o);      /* steals o: symbolic sizes -> ints (guarded) */
PyObject *kn_const_real(kn_rec *r, kn_val *v);          /* kn_const_of, sizes concrete: for real Python */
int kn_numeric_items(PyObject *o);                      /* a number (kn_numeric), or a tuple or list of them */
int kn_numeric(PyObject *o);                            /* int, float, bool or a SymInt/SymFloat/SymBool */

/* record_ops.c: opcode families of run_one (0, KN_BREAK or KN_ERR) */
int kn_op_attr(kn_rec *r, rframe *fr, int op, int arg);      /* LOAD_ATTR, LOAD_METHOD, LOAD_SUPER_ATTR, STORE_ATTR */
int kn_op_build(kn_rec *r, rframe *fr, int op, int arg);     /* BUILD_*, FORMAT_VALUE, LIST_APPEND ... DICT_MERGE */
int kn_op_call(kn_rec *r, rframe *fr, int op, int arg);      /* CALL, CALL_FUNCTION_EX, MAKE_FUNCTION */
int kn_op_import(kn_rec *r, rframe *fr, int op, int arg);    /* IMPORT_NAME, IMPORT_FROM */

/* record_value.c */
int kn_has_tensor(PyObject *o);
int kn_any_tensor_arg(kn_val **args, int n);
PyObject *kn_builtin(const char *name);                     /* borrowed */

/* record_call.c: call f for real on constant arguments (a break when one is not constant) */
int kn_call_real(kn_rec *r, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out);
/* record_call.c: cls(*args) built now over fake tensors, and again by the replay over real ones
   (a V_OBJ with ctor): library containers, sets of constants */
int kn_construct_at_record_time(kn_rec *r, rframe *fr, kn_val *cls, kn_val **args, int nargs, PyObject *kwnames,
                                kn_val **out);

/* builtins.c: a call to a modelled builtin (*handled 0: f is none, or not with these arguments) */
int kn_builtin_call(kn_rec *r, rframe *fr, PyObject *f, kn_val **args, int nargs, PyObject *kwnames, kn_val **out,
                    int *handled);

/* record_call.c, record_value.c */
int kn_call(kn_rec *r, rframe *fr, kn_val *fn, kn_val **args, int nargs, PyObject *kwnames, kn_val **out);
int kn_getattr(kn_rec *r, rframe *fr, kn_val *obj, PyObject *name, kn_val **out);
int kn_torch_op(kn_rec *r, PyObject *target, int method, kn_val **args, int nargs, PyObject *kwnames,
                kn_val **out);
int kn_inline(kn_rec *r, rframe *caller, PyObject *func, kn_val *funcv, kn_val **args, int nargs, PyObject *kwnames,
              kn_val **out);
int kn_iter_items(kn_rec *r, kn_val *v, kn_val **out);      /* make a V_ITER */
/* m.modules() ... m.named_buffers() (which: the index in kn_cenv.module_members) with default
   arguments, walked at record time: a V_ITER; 1 when f is none of them (nothing done) */
int kn_module_members(kn_rec *r, PyObject *f, kn_val *m, kn_val **out);
/* v is an object built at record time over fake tensors (kn_construct_at_record_time) whose
   method `name` is C's (no Python code of its class runs when it is called) */
int kn_record_time_c_method(kn_val *v, const char *name);
int kn_truth(kn_rec *r, kn_val *v, int *out);               /* 0 ok, KN_BREAK */
int kn_is_module_seq(PyObject *o);                        /* ModuleList or Sequential */
int kn_binop(kn_rec *r, PyObject *opfn, kn_val *a, kn_val *b, kn_val **out);
int kn_note_views(kn_rec *r, kn_val *out, kn_val **args, int nargs);
int kn_view_refresh(kn_rec *r, kn_val *v);                 /* vinfo from the fakes now */
int kn_newobj_setattr(kn_rec *r, kn_val *o, PyObject *name, kn_val *v);   /* 0, KN_BREAK, KN_ERR */
/* record_ops.c: a.name = b as STORE_ATTR does it: 0, KN_BREAK or KN_ERR */
int kn_store_attr(kn_rec *r, kn_val *a, PyObject *name, kn_val *b);
/* o.name = v on an object built at record time: 1 done (*rc: 0, KN_BREAK, KN_ERR), 0 not that case */
int kn_record_time_setattr(kn_rec *r, kn_val *o, PyObject *name, kn_val *v, int *rc);

#endif
