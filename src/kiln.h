/* kiln.h — shared declarations of kiln's C core, one section per stage.
 *
 *   Python description of an ATen graph (kiln/fx_bridge.py)
 *     │  graph/graph.c     parse into kn_graph (nodes, args, output metadata);
 *     │                    graph/ops.def: the ATen ops lowered in C
 *     ▼
 *   kn_graph ──compile/lower.c──▶ buffers: lazy pointwise bodies, reductions,
 *     │                            externs (expression DAGs from compile/expr.c)
 *     ▼
 *   compile/expr.c   hash-consed expressions, index algebra, the dtype table
 *   compile/fuse.c   group realized buffers into kernels sharing an iteration space
 *   compile/plan.c   lifetimes, arena offsets for intermediates, extern frees
 *   compile/print.c  readable dumps of the loop IR (KILN_DUMP=loops)
 *   compile/index_hook.c  kiln._C.index_expr: the index algebra for the tests
 *     ▼
 *   codegen/emit.c   the expression emitter both renderers share, driven by a
 *                    target descriptor (codegen/emit.h); scalar.def's table
 *   codegen/c.c      C source with OpenMP + SIMD loops, one function per kernel
 *   codegen/cuda.c   CUDA C source for NVRTC, one __global__ function per kernel
 *                    (codegen/prelude.h, prelude_cuda.h: text heading each unit)
 *     ▼
 *   runtime/load.c   system C compiler, content-hashed disk cache, dlopen
 *   runtime/run.c    the step loop: allocate, call kernels, call ATen externs
 *   runtime/cuda.c   NVRTC and the CUDA driver (dlopen), launches, the device
 *                    error record             (API of all three: runtime/runtime.h)
 *
 *   module.c         the kiln._C module: compile() drives the stages above
 *   error.c          the three kinds of failure in C (error.h)
 *   capture/         the PEP 523 frame hook and bytecode recorder (capture/capture.h)
 *
 * Compile-time memory lives in one arena per compilation (kn_arena), freed in
 * one call, so an error from any depth leaks nothing.
 */
#ifndef KILN_H
#define KILN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>

#define KN_MAXDIM 12

/* The head of each of kiln._C's Python types: its name "kiln._C.<name>",
   instance struct, flags and docstring (the type's other slots follow). */
#define KN_TYPE_HEAD(name, cstruct, flags, doc)                              \
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._C." name,                \
    .tp_basicsize = sizeof(cstruct), .tp_flags = (flags), .tp_doc = (doc)
#define KN_MAXARGS 16

/* ---------------------------------------------------------------- dtypes */
/* One row per dtype: name, storage type in C, bytes, compute type in
   generated code (f16/bf16 compute in float, bool in the prelude's b_t) and
   the tag naming the prelude's helpers for it (kn_max_f32, ...).  The order
   is the dtype code kiln/fx_bridge.py uses: it reads it from kiln._C.DTYPES
   (module.c), so it is written only here. */
#define KN_DTYPES(X)                                              \
    X(BOOL, "bool", "uint8_t", 1, "b_t", "b")                     \
    X(U8, "uint8", "uint8_t", 1, "uint8_t", "u8")                 \
    X(I8, "int8", "int8_t", 1, "int8_t", "i8")                    \
    X(I16, "int16", "int16_t", 2, "int16_t", "i16")               \
    X(I32, "int32", "int32_t", 4, "int32_t", "i32")               \
    X(I64, "int64", "int64_t", 8, "int64_t", "i64")               \
    X(F16, "float16", "_Float16", 2, "float", "f32")              \
    X(BF16, "bfloat16", "uint16_t", 2, "float", "f32")            \
    X(F32, "float32", "float", 4, "float", "f32")                 \
    X(F64, "float64", "double", 8, "double", "f64")

typedef enum {
#define X(n, s, c, b, cc, tag) KN_##n,
    KN_DTYPES(X)
#undef X
    KN_NDTYPES
} kn_dtype;

typedef struct {
    const char *name;     /* torch's name: "float32" */
    const char *ctype;    /* storage type in C */
    int size;             /* bytes of an element */
    const char *cctype;   /* compute type in generated code */
    const char *tag;      /* prelude helper suffix: f32, i64, ... */
} kn_dtype_info;
extern const kn_dtype_info kn_dtypes[KN_NDTYPES];   /* (expr.c, from KN_DTYPES) */
int kn_dtype_is_float(kn_dtype d);
int kn_dtype_is_int(kn_dtype d);                       /* integral, not bool */
kn_dtype kn_dtype_compute(kn_dtype d);                 /* f16/bf16 -> f32 */
kn_dtype kn_dtype_promote(kn_dtype a, kn_dtype b);     /* same-priority promotion */

/* ---------------------------------------------------------------- arena */
typedef struct kn_arena_chunk kn_arena_chunk;
typedef struct {
    kn_arena_chunk *head;
    size_t used, cap;
} kn_arena;

void *kn_alloc(kn_arena *a, size_t n);                 /* zeroed; aborts via NULL+MemoryError */
void kn_arena_free(kn_arena *a);
char *kn_strdup(kn_arena *a, const char *s);

/* A growable text buffer for generated source. */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} kn_str;
void kn_str_printf(kn_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kn_str_put(kn_str *s, const char *p, size_t k);   /* k bytes of p */
void kn_str_int(kn_str *s, long long v);               /* v in decimal */
void kn_str_free(kn_str *s);
PyObject *kn_str_printf_check(void);   /* text.c's formatter against libc's: "" when they agree */

/* ---------------------------------------------------------------- scalar ops */
typedef enum {
#define SOP(name, nargs, cls, flags, tmpl) KN_S_##name,
#include "codegen/scalar.def"
#undef SOP
    KN_S__COUNT
} kn_sop;

/* Classes of scalar op, from scalar.def. */
enum { KN_SC_SPECIAL, KN_SC_ARITH, KN_SC_FLOAT, KN_SC_CMP, KN_SC_LOGIC, KN_SC_BITS, KN_SC_PRED };
/* Flags of scalar op, from scalar.def. */
enum { KN_SF_COMM = 1 };

/* scalar.def's table (defined in codegen/emit.c) */
typedef struct {
    const char *name;
    int nargs;
    int cls;
    int flags;            /* KN_SF_* */
    const char *tmpl;
} kn_sop_info;
extern const kn_sop_info kn_sops[KN_S__COUNT];

/* Errors a kernel records in the call's error record (codegen/prelude.h:
   kn_flag; same values there) and runtime/run.c raises after the kernel:
   kind | dim << 8 | KN_E_WRAP (negative indices count from the end). */
enum { KN_E_INDEX_SELF = 1, KN_E_INDEX = 2, KN_E_GATHER = 3, KN_E_ZERODIV = 4, KN_E_DATA_BOUNDS = 5, KN_E_WRAP = 0x10000 };

/* ---------------------------------------------------------------- expressions */
/* Hash-consed expression DAG: identical subexpressions are the same node, so
   equality is pointer equality and CSE in code generation is free.  Index
   arithmetic is canonicalised (sums of coef*atom: loop variables first by number,
   other atoms by id; expr.c atom_before). */
typedef struct kn_expr kn_expr;
struct kn_expr {
    uint16_t op;          /* kn_sop */
    uint8_t dt;           /* kn_dtype of the value (never F16/BF16: those load as F32) */
    uint8_t n;            /* number of arguments */
    uint32_t id;          /* creation order: a topological order */
    kn_expr *a[3];
    int64_t i;            /* CONST int value; VAR number; LOAD/LOCAL buffer id */
    double f;             /* CONST float value */
    int64_t ext;          /* VAR extent; LOAD: 1 if the load is of a kernel-local */
    uint32_t hash;
    uint32_t depth;       /* max loop level of vars used (0 = none) */
    kn_expr *next;        /* hash chain */
    int mark;             /* scratch for code generation */
    uint32_t visit;       /* traversal stamp (codegen hoisting) */
};

typedef struct kn_ctx kn_ctx;

kn_expr *kn_const_i(kn_ctx *c, kn_dtype dt, int64_t v);
kn_expr *kn_const_f(kn_ctx *c, kn_dtype dt, double v);
kn_expr *kn_var(kn_ctx *c, int64_t num, int64_t extent);
kn_expr *kn_op1(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a);
kn_expr *kn_op2(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a, kn_expr *b);
kn_expr *kn_op3(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a, kn_expr *b, kn_expr *d);
kn_expr *kn_cast(kn_ctx *c, kn_expr *a, kn_dtype dt);
kn_expr *kn_round(kn_ctx *c, kn_expr *a, kn_dtype dt);
kn_expr *kn_load(kn_ctx *c, int buf, kn_dtype dt, kn_expr *index);
/* index arithmetic on int64 */
kn_expr *kn_iadd(kn_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_imul(kn_ctx *c, kn_expr *a, int64_t k);
kn_expr *kn_iconst(kn_ctx *c, int64_t v);
kn_expr *kn_idiv(kn_ctx *c, kn_expr *a, int64_t k);   /* floor division, a >= 0 */
kn_expr *kn_imod(kn_ctx *c, kn_expr *a, int64_t k);   /* a >= 0 */
int kn_expr_range(kn_expr *e, int64_t *lo, int64_t *hi);  /* 1 if known */
int kn_is_const(kn_expr *e);
double kn_const_val(kn_expr *e);

/* Substitution of variables: map[var number] -> expr (NULL = keep). */
#define KN_NVARS 160
typedef struct {
    kn_expr *to[KN_NVARS];
} kn_subst;
kn_expr *kn_substitute(kn_ctx *c, kn_expr *e, const kn_subst *s);
/* Frees the compile's substitution memos (kn_ctx.subst_memo); at its end. */
void kn_subst_memo_free(kn_ctx *c);
size_t kn_expr_size(kn_expr *e, size_t cap);

/* Variable numbering: placeholders of a buffer body, reduction placeholders,
   and the loop variables of a kernel. */
#define KN_VAR_P(i) (i)
#define KN_VAR_R(i) (16 + (i))
#define KN_VAR_O(i) (32 + (i))   /* kernel outer loop */
#define KN_VAR_I(i) (48 + (i))   /* kernel inner loop */
#define KN_VAR_TMP(i) (64 + (i)) /* scratch for lowerings (scan, cat, ...) */

/* ---------------------------------------------------------------- graph */
typedef enum { KN_A_NONE, KN_A_REF, KN_A_INT, KN_A_FLOAT, KN_A_BOOL, KN_A_LIST, KN_A_STR, KN_A_OTHER } kn_argkind;

typedef struct kn_arg kn_arg;
struct kn_arg {
    kn_argkind kind;
    int64_t i;            /* REF: node index; INT/BOOL value */
    double f;
    int n;                /* LIST length */
    kn_arg *items;
    const char *s;
};

typedef struct {
    int ndim;
    int64_t size[KN_MAXDIM];
    int64_t stride[KN_MAXDIM];
    kn_dtype dt;
    int valid;
    int64_t offset;       /* storage offset torch traced (elements) */
    int sym;              /* a size is a symbol of the graph (one size of a symbolic lowering,
                             kiln/template.py): it differs between the sizes compiled */
} kn_meta;

typedef struct {
    const char *target;   /* "aten.add.Tensor", "input", "getitem", "output" */
    int nargs;
    kn_arg *args;
    int nout;             /* number of tensor results described */
    kn_meta *out;         /* nout entries; tuple results list each element */
    int is_tuple;
    int uses;             /* number of user nodes */
    PyObject *op;         /* borrowed: the OpOverload (for externs) */
    int root;             /* node whose storage its results share (views, in-place
                             results), -1: storage of its own */
} kn_node;

typedef struct {
    int nnodes;
    kn_node *nodes;
    int ninputs;
    int *inputs;          /* node indices of inputs */
    int noutputs;
    kn_arg *outputs;      /* REF or constants */
} kn_graph;

int kn_graph_parse(kn_ctx *c, PyObject *desc, kn_graph *g);

/* ---------------------------------------------------------------- buffers */
typedef enum {
    KN_B_INPUT,           /* graph input: storage given */
    KN_B_LAZY,            /* pointwise body, not (yet) stored */
    KN_B_POINTWISE,       /* realized pointwise: stored by a kernel */
    KN_B_REDUCTION,       /* realized reduction (or scan) */
    KN_B_EXTERN,          /* produced by an ATen call */
    KN_B_ALIAS            /* strided view of another stored buffer (extern arg / output) */
} kn_bufkind;

typedef enum {
    KN_R_SUM, KN_R_PROD, KN_R_MAX, KN_R_MIN, KN_R_ARGMAX, KN_R_ARGMIN, KN_R_ANY, KN_R_ALL,
    KN_R_CUMSUM, KN_R_CUMPROD, KN_R__COUNT
} kn_rop;

typedef struct kn_buf kn_buf;
struct kn_buf {
    int id;
    kn_bufkind kind;
    kn_dtype dt;          /* storage dtype */
    int ndim;
    int64_t size[KN_MAXDIM];
    int64_t stride[KN_MAXDIM];
    int64_t offset;       /* element offset (ALIAS) */
    int has_meta;         /* meta_stride holds the strides torch traced */
    int64_t meta_stride[KN_MAXDIM];
    kn_expr *body;        /* LAZY/POINTWISE: over P vars; REDUCTION: over P and R vars */
    /* reductions */
    kn_rop rop;
    int nred;
    int64_t rsize[KN_MAXDIM];
    kn_dtype acc_dt;      /* accumulator dtype */
    int scan_dim;         /* scans: the output dim scanned (its var is R0) */
    /* aliases */
    int base;             /* ALIAS: buffer viewed */
    int view_src;         /* LAZY view of another lazy buffer: its id, else -1 */
    kn_expr *view_idx[KN_MAXDIM]; /* index into view_src, over P vars */
    /* extern results */
    int extern_step;      /* EXTERN: step producing it */
    int extern_index;     /* -1: single tensor result; k: element k of the tuple */
    /* scheduling & planning */
    int uses;             /* graph-level uses remaining (for inlining heuristics) */
    int is_output;
    int kernel;           /* kernel index that stores it (-1) */
    int local;            /* reduction kept in a register inside its kernel only */
    int first, last;      /* step indices of definition and last use */
    int64_t arena_off;    /* intermediate: byte offset in the arena; -1 otherwise */
    int input_index;      /* INPUT: position in the argument list */
    int needs_tensor;     /* intermediate consumed by an extern: needs a torch tensor */
    int inplace_of;       /* stored into the tensor of this dying extern result (-1: no) */
    int arena_tensor;     /* needs a tensor, and lives in the arena (plan.c plan_arena_tensors): its
                             tensor a view of the call's arena, made when an extern takes it */
    int sym;              /* made for a node whose sizes (its own or its inputs') are symbols
                             (kn_meta.sym): its size differs between the sizes compiled, so a
                             decision taken by its size would differ too (lower_buf.c) */
};

/* ---------------------------------------------------------------- schedule */
/* KN_ST_LINEAR: an extern matmul (x @ W.t() + b) run by oneDNN on a packed
   copy of the weight W, a graph input, re-packed whenever W's bytes change. */
typedef enum { KN_ST_KERNEL, KN_ST_EXTERN, KN_ST_LINEAR } kn_stepkind;

typedef struct {
    kn_stepkind kind;
    /* KERNEL */
    int kernel;
    /* EXTERN */
    int node;             /* graph node */
    int nres;             /* number of result buffers */
    int res[KN_MAXARGS];  /* buffer ids of results (-1 for non-tensor) */
    int nin;
    int in[KN_MAXARGS * 4]; /* buffer ids passed as tensors (in argument order) */
    int in_node[KN_MAXARGS * 4]; /* EXTERN, LINEAR: the graph node each in[] stands for (the
                                    binding when the step was lowered, which a
                                    later rebinding of the node must not change;
                                    -1: none) */
    int64_t rows;         /* LINEAR: M, the packing hint */
    int w_kn;             /* LINEAR: the weight input is stored [K, N] (x @ W), not [N, K] */
    int has_bias;         /* LINEAR: in[2] is the bias */
    int nover;            /* arguments redirected to other buffers (layout copies) */
    int over_node[2], over_buf[2];
} kn_step;

/* One fused kernel: an outer iteration space shared by all members, each
   member a reduction (over an inner space) or a pointwise store. */
/* A CUDA kernel's forms (codegen/cuda.c), kn_kernel.cu_form[]: 32-bit
   indexing; the form (KN_FORM_FLAT: one element (or vector) per thread,
   KN_FORM_ROWS: G threads per row, KN_FORM_REGS: the row in registers);
   threads per row; vector lanes (0: none); vectors per thread (rows in
   registers). */
enum { KN_FORM_IX32, KN_FORM_KIND, KN_FORM_G, KN_FORM_VW, KN_FORM_NCH, KN_FORM_N };
enum { KN_FORM_FLAT = 1, KN_FORM_ROWS, KN_FORM_REGS };

typedef struct {
    int nouter;
    int64_t outer[KN_MAXDIM];
    int ninner;
    int64_t inner[KN_MAXDIM];
    int nmembers;
    int *members;         /* buffer ids, in order */
    int cap;
    int has_reduction;
    int64_t work;         /* elements touched, for the parallel threshold */
    int permuted;         /* loop order differs from the logical dim order */
    int perm[2 * KN_MAXDIM]; /* logical position (in O ++ I) -> loop position */
    /* CUDA launch (codegen/cuda.c): threads per block, blocks, and the
       buffer ids passed as the kernel's pointer arguments, in order */
    int cu_threads;
    int64_t cu_blocks;
    int cu_nparams;
    int *cu_params;
    /* the forms codegen/cuda.c took (KN_FORM_*): what a size of a symbolic
       lowering must take again to share another size's build */
    int32_t cu_form[KN_FORM_N];
} kn_kernel;

struct kn_ctx {
    kn_arena arena;
    /* expression interning */
    kn_expr **table;
    size_t tcap, tcount;
    uint32_t next_id;
    /* graph and buffers */
    kn_graph g;
    int nbufs, bufcap;
    kn_buf **bufs;
    int **node_bufs;      /* per node: buffer ids of its tensor results (or NULL) */
    int *node_nres;
    /* schedule */
    int nsteps, stepcap;
    kn_step *steps;
    int nkernels, kcap;
    kn_kernel *kernels;
    int64_t arena_bytes;
    /* statistics (kiln.explain) */
    int n_aten_ops, n_externs, n_fallbacks;
    PyObject *extern_names;   /* list of str */
    /* options */
    int nthreads_hint;
    int packed_linear;        /* oneDNN packed linear is available */
    int cur_sym;              /* lowering a node whose sizes are symbols: new buffers' sym */
    const char *prefix;       /* symbol prefix for generated functions */
    int dump_loops;
    int cuda;                 /* target: 0 C for the CPU, 1 CUDA C */
    int cuda_sms;             /* CUDA: multiprocessors of the device (launch sizing) */
    int cuda_row_regs;        /* CUDA: rows that fit are held in registers (cuda.c) */
    /* CUDA, a size of a symbolic lowering (issue 17; cuda.c `take_row_forms`):
       the forms of the lowering's first build, KN_FORM_N ints per kernel
       (NULL: none yet), and whether the kernels' own forms are robust (rows
       a warp at least, flat kernels 4 lanes at most), so that sizes of
       other lengths take them too */
    const int32_t *cuda_forms;
    int cuda_nforms;
    int cuda_robust;
    /* A size of a symbolic lowering (issue 17; fuse.c): the fusion of the
       lowering's first build, one byte per KERNEL step of the lowered step
       list (1: its buffer joined the kernel before it), NULL for none.  A
       buffer joins only where it joined there, so that two extents equal at
       one size only (a sequence of 256 and a hidden size of 256) fuse at no
       size.  fuse_bits: this compile's own decisions (Program.fusion). */
    const uint8_t *fuse_ref;
    int fuse_nref;
    uint8_t *fuse_bits;
    int fuse_nbits;
    /* expr.c: a memo per distinct substitution map, kept for the whole
       compile (kn_substitute); freed by kn_subst_memo_free */
    struct kn_submemos *subst_memo;
};

kn_buf *kn_buf_new(kn_ctx *c, kn_bufkind kind, kn_dtype dt, int ndim, const int64_t *size);
void kn_contiguous_strides(int ndim, const int64_t *size, int64_t *stride);

/* compile/lower.c: graph -> buffers + extern steps.  0 on success, -1 with a
   Python exception set. */
int kn_lower_graph(kn_ctx *c);
/* Value of buffer `b` at multi-index idx (inlines lazy buffers). */
kn_expr *kn_buf_load(kn_ctx *c, kn_buf *b, kn_expr *const *idx);
int kn_realize(kn_ctx *c, kn_buf *b);
int kn_add_step(kn_ctx *c, const kn_step *st);
PyObject *kn_lowered_ops(void);

/* compile/fuse.c: group realized buffers into kernels; rewrites the steps. */
int kn_fuse(kn_ctx *c);
/* Map buffer b's placeholders onto kernel k's loop variables. 0 or -1. */
int kn_member_map(kn_ctx *c, const kn_kernel *k, const kn_buf *b, kn_subst *s);
/* b's body over kernel k's loop variables, or NULL. */
kn_expr *kn_member_body(kn_ctx *c, const kn_kernel *k, const kn_buf *b);
/* Index (in kernel k's loop variables) at which b is stored, or NULL. */
kn_expr *kn_store_index(kn_ctx *c, const kn_kernel *k, const kn_buf *b);
/* Elements spanned by b's storage (offset + extent of its strides). */
int64_t kn_buf_span(const kn_buf *b);
/* compile/plan.c: lifetimes and the arena. */
int kn_plan(kn_ctx *c);
/* compile/print.c: textual dumps (KILN_DUMP=loops). */
void kn_print_expr(kn_str *s, kn_expr *e);
void kn_dump_loops(kn_ctx *c, kn_str *s);

/* codegen/c.c: one C function per kernel */
int kn_codegen_c(kn_ctx *c, kn_str *out);
/* codegen/emit.c: the text heading every unit of target "c" or "cuda" (NULL: no such target) */
const char *kn_codegen_prelude(const char *target);
/* codegen/cuda.c: one extern "C" __global__ function per kernel; fills each
   kernel's cu_* launch fields */
int kn_codegen_cuda(kn_ctx *c, kn_str *out);

/* runtime/: declared in runtime/runtime.h */

#endif
