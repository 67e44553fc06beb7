/* emit.h — the expression emitter shared by the C (c.c) and CUDA (cuda.c)
 * renderers (codegen/emit.c).  Both walk the same loop IR; they differ in how
 * loops map onto hardware, not in how a scalar expression becomes text, so
 * the expression side (temporaries, CSE scopes, loads, stores, constants,
 * loop headers, scans) lives once, in emit.c.  The few spellings that differ
 * come from a target descriptor (kn_target) each renderer fills, as
 * tinygrad's C-style renderer lets a target override a few ops; the emitter
 * tests no target by name.
 */
#ifndef KN_EMIT_H
#define KN_EMIT_H
#include "../kiln.h"

/* What a target spells its own way.  Templates use scalar.def's language:
   %0 is the argument text (the storage element or the value). */
typedef struct {
    const char *name;                    /* "C", "CUDA" (for messages) */
    const char *ix_type;                 /* type of loop variables */
    const char *storage[KN_NDTYPES];     /* element type of a buffer pointer */
    const char *load[KN_NDTYPES];        /* storage element -> compute value; NULL: as is */
    const char *store[KN_NDTYPES];       /* compute value -> storage element; NULL: a cast */
    const char *round[KN_NDTYPES];       /* compute value rounded through a narrow dtype
                                            (kn_round; NULL: a cast to the compute type) */
    int exact_f2i;                       /* float -> integer casts through the prelude's
                                            kn_f2<to>_<from> (a C cast of an out-of-range
                                            float is undefined: gcc folds (float)(int)x) */
    const char *prelude;                 /* the text heading every unit (prelude.h, prelude_cuda.h) */
} kn_target;

extern const kn_target kn_target_c;      /* codegen/c.c */
extern const kn_target kn_target_cuda;   /* codegen/cuda.c */

typedef struct {
    kn_ctx *c;
    const kn_target *t;
    kn_str *s;
    const kn_kernel *k;
    int kid;
    int scope[48];       /* active scope tokens */
    int nscope;
    int indent;
    int par_red;         /* C: parallelise reduction loops themselves */
    int ix32;            /* CUDA: index arithmetic whose range fits in int32 is 32-bit */
    /* CUDA vector path: loads already fetched as lanes of a vector register
       (lane_e[i] is rendered as the raw storage value lane_txt[i]) */
    int nlanes;
    int vw;              /* lanes per thread of the vector loop emitted */
    kn_expr *lane_e[256];
    char lane_txt[256][40];
    /* C: index checks of the inner loop being emitted, OR-reduced into
       kb<id> / kv<id> (the bad value, max-reduced) so the loop vectorises;
       a CHECK not listed here keeps kn_chk's branch */
    int nchk;
    int chkgen;           /* numbers each checked loop's accumulators (kb<id>_<gen>) */
    kn_expr *chk[16];
} kn_gen;

void kn_cg_open_scope(kn_gen *g);
void kn_cg_close_scope(kn_gen *g);
int kn_cg_active(kn_gen *g, int mark);   /* mark is a scope open now */
int kn_cg_root_scope(void);              /* a fresh token for a kernel's body scope */
uint32_t kn_cg_stamp(void);              /* a fresh kn_expr.visit stamp */
void kn_cg_ind(kn_gen *g);
/* Statements for e in the current scope; kn_cg_value also returns the
   reference text (caller frees). */
void kn_cg_emit(kn_gen *g, kn_expr *e);
kn_str kn_cg_value(kn_gen *g, kn_expr *e);
void kn_cg_hoist(kn_gen *g, kn_expr *e);
void kn_cg_store(kn_gen *g, kn_buf *b, kn_expr *ix, const char *val);
/* reduction member b's result: the register r<id> (its accumulator a<id>
   in the compute dtype), stored at b's store index unless b is local,
   inside `if (guard)` when guard is given; 0 or -1 */
int kn_cg_result(kn_gen *g, kn_buf *b, const char *guard);
const char *kn_cg_storage(kn_gen *g, kn_dtype dt);   /* buffer element type */
void kn_cg_to_storage(kn_gen *g, kn_str *out, kn_dtype dt, const char *val);
kn_expr *kn_cg_stored(kn_expr *e, kn_dtype dt);
extern int kn_fault_bad_expr;   /* kiln._C.test_fault (compile/index_hook.c) */
void kn_cg_open_loops(kn_gen *g, int n, const int64_t *ext, int var0, int simd_last, const char *clause);
void kn_cg_close_loops(kn_gen *g, int n);
const char *kn_cg_acc_init(kn_rop r, kn_dtype acc, int *is_float);
int kn_cg_in_register(kn_gen *g, const kn_buf *b);
int kn_cg_is_outer_member(const kn_kernel *k, const kn_buf *b);
/* the end of the run of inner pointwise members of k that starts at member m
   (those share one inner loop) */
int kn_cg_inner_run(kn_ctx *c, const kn_kernel *k, int m);
uint8_t *kn_cg_used_bufs(kn_ctx *c, const kn_kernel *k);  /* 1 read, 2 stored; caller frees */
/* Number a kernel's locals named by graph ids (temporaries t<n>,
   accumulators a<n>, ...: emit.c local_prefixes), the text of
   s from `from` on, by their first use: names made from graph ids shift
   when another part of the graph changes, so the same kernel at two sizes
   reads the same but for its size literals (kiln/kernel_params.py matches
   a size's source against a parametric build's text as it is). */
int kn_cg_canon_locals(kn_str *s, size_t from);
int kn_cg_scan(kn_gen *g, kn_buf *b);
#endif
