/* emit.h — expression emission shared by the C (c.c) and CUDA (cuda.c)
 * renderers.  Both walk the same loop IR; they differ in how loops map onto
 * hardware, not in how a scalar expression becomes text, so the expression
 * side (temporaries, CSE scopes, loads, stores, constants) lives once, in c.c,
 * with a `cuda` switch for the few spellings that differ (half-precision
 * storage, 32-bit index arithmetic).
 */
#ifndef KN_EMIT_H
#define KN_EMIT_H
#include "../kiln.h"

typedef struct {
    kn_ctx *c;
    kn_str *s;
    const kn_kernel *k;
    int kid;
    int scope[48];       /* active scope tokens */
    int nscope;
    int indent;
    int par_red;         /* C: parallelise reduction loops themselves */
    int cuda;            /* render CUDA C */
    int ix32;            /* CUDA: index arithmetic whose range fits in int32 is 32-bit */
    /* CUDA vector path: loads already fetched as lanes of a vector register
       (lane_e[i] is rendered as the raw storage value lane_txt[i]) */
    int nlanes;
    int vw;              /* lanes per thread of the vector loop emitted */
    kn_expr *lane_e[256];
    char lane_txt[256][40];
    /* C: index checks of the inner loop being emitted, OR-reduced into
       kb<id> / kv<id> (the bad value, max-reduced) so the loop vectorises */
    int nchk;
    int chkgen;           /* numbers each checked loop's accumulators (kb<id>_<gen>) */
    kn_expr *chk[16];
} kn_gen;

void kn_cg_open_scope(kn_gen *g);
void kn_cg_close_scope(kn_gen *g);
void kn_cg_ind(kn_gen *g);
/* Statements for e in the current scope; kn_cg_value also returns the
   reference text (caller frees). */
void kn_cg_emit(kn_gen *g, kn_expr *e);
kn_str kn_cg_value(kn_gen *g, kn_expr *e);
void kn_cg_hoist(kn_gen *g, kn_expr *e);
void kn_cg_store(kn_gen *g, kn_buf *b, kn_expr *ix, const char *val);
void kn_cg_open_loops(kn_gen *g, int n, const int64_t *ext, int var0, int simd_last, const char *clause);
void kn_cg_close_loops(kn_gen *g, int n);
const char *kn_cg_acc_init(kn_rop r, kn_dtype acc, int *is_float);
int kn_cg_in_register(kn_gen *g, const kn_buf *b);
int kn_cg_is_outer_member(const kn_kernel *k, const kn_buf *b);
uint8_t *kn_cg_used_bufs(kn_ctx *c, const kn_kernel *k);  /* 1 read, 2 stored; caller frees */
int kn_cg_scan(kn_gen *g, kn_buf *b);
const char *kn_cg_ctype(kn_dtype dt);   /* compute type name */
const char *kn_cg_tag(kn_dtype dt);     /* helper suffix: f32, i64, ... */
#endif
