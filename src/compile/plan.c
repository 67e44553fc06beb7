/* plan.c — lifetimes and memory planning.
 *
 * Consumes: the fused schedule (kernels and extern steps).  Produces, per
 * buffer: first/last step, whether a reduction or outer value can stay in a
 * register of its kernel (`local`), and for intermediates used only by kiln
 * kernels an offset in one per-call arena, reusing the bytes of buffers that
 * died in an earlier step.  Graph outputs and buffers handed to ATen get torch
 * tensors of their own; a pointwise store may write into a dying extern
 * result instead, when no other tensor shares that result's storage.
 */
#include "../kiln.h"
#include <string.h>


static uint32_t plan_gen = 1u << 30;


/* Loads of buffer x in e: count them, and whether every one reads at index ix. */
static void
loads_of(kn_expr *e, int x, kn_expr *ix, int *n, int *same, uint32_t gen)
{
    if (e->mark == (int)gen)
        return;
    e->mark = (int)gen;
    if (e->op == KN_S_LOAD && e->i == x) {
        (*n)++;
        if (e->a[0] != ix)
            *same = 0;
    }
    for (int j = 0; j < e->n; j++)
        loads_of(e->a[j], x, ix, n, same, gen);
}

/* Graph node of each extern result buffer (-1 for other buffers). */
static int *
extern_nodes(kn_ctx *c)
{
    int *nodes = kn_alloc(&c->arena, sizeof(int) * (size_t)(c->nbufs + 1));
    if (nodes == NULL)
        return NULL;
    for (int i = 0; i < c->nbufs; i++)
        nodes[i] = -1;
    for (int s = 0; s < c->nsteps; s++) {
        kn_step *st = &c->steps[s];
        if (st->kind != KN_ST_KERNEL)
            for (int j = 0; j < st->nres; j++)
                if (st->res[j] >= 0)
                    nodes[st->res[j]] = st->node;
    }
    return nodes;
}

/* 1 if extern result x has storage that nothing else alive at step s shares:
   its op made it (not a view of an argument: unfold, alias, an in-place op's
   result), and no other extern result viewing it (a view ATen made) is read
   at s or later. */
static int
own_storage(kn_ctx *c, const int *nodes, int x, int s)
{
    int nx = nodes[x];
    if (nx < 0 || c->g.nodes[nx].root >= 0)
        return 0;
    for (int y = 0; y < c->nbufs; y++)
        if (y != x && nodes[y] >= 0 && c->g.nodes[nodes[y]].root == nx && c->bufs[y]->last >= s)
            return 0;
    return 1;
}

/* A pointwise store that needs a tensor of its own can instead write into the
   tensor of an extern result that dies in this kernel, when it reads that
   result only at the element it writes (bias/BN/activation after a
   convolution or matmul) and no other tensor shares that storage: no
   allocation, no fresh pages. */
static int
plan_inplace(kn_ctx *c)
{
    int *nodes = extern_nodes(c);
    if (nodes == NULL)
        return -1;
    for (int s = 0; s < c->nsteps; s++) {
        kn_step *st = &c->steps[s];
        if (st->kind != KN_ST_KERNEL)
            continue;
        kn_kernel *k = &c->kernels[st->kernel];
        for (int m = 0; m < k->nmembers; m++) {
            kn_buf *b = c->bufs[k->members[m]];
            if (b->kind != KN_B_POINTWISE || !(b->needs_tensor || b->is_output))
                continue;
            kn_subst sub;
            if (kn_member_map(c, k, b, &sub) < 0)
                return -1;
            kn_expr *body = kn_substitute(c, b->body, &sub), *ix = kn_store_index(c, k, b);
            if (body == NULL || ix == NULL)
                return -1;
            for (int x = 0; x < c->nbufs && b->inplace_of < 0; x++) {
                kn_buf *xb = c->bufs[x];
                if (xb->kind != KN_B_EXTERN || xb->last != s || xb->is_output || xb->dt != b->dt ||
                    xb->ndim != b->ndim || xb->needs_tensor == 2 || !own_storage(c, nodes, x, s))
                    continue;
                int ok = 1;
                for (int d = 0; d < b->ndim; d++)
                    if (xb->size[d] != b->size[d] || (b->size[d] > 1 && xb->stride[d] != b->stride[d]))
                        ok = 0;
                if (!ok)
                    continue;
                int n = 0, same = 1;
                loads_of(body, x, ix, &n, &same, ++plan_gen);
                if (n == 0 || !same)
                    continue;
                /* no other member of the kernel may read it */
                for (int o = 0; o < k->nmembers && ok; o++) {
                    kn_buf *ob = c->bufs[k->members[o]];
                    if (ob == b)
                        continue;
                    int n2 = 0, same2 = 1;
                    loads_of(ob->body, x, NULL, &n2, &same2, ++plan_gen);
                    if (n2)
                        ok = 0;
                }
                /* nor may an alias view of it outlive this step */
                for (int a = 0; a < c->nbufs && ok; a++)
                    if (c->bufs[a]->kind == KN_B_ALIAS && c->bufs[a]->base == x && c->bufs[a]->last >= s)
                        ok = 0;
                if (!ok)
                    continue;
                b->inplace_of = x;
                xb->needs_tensor = 2; /* taken */
            }
        }
    }
    return 0;
}


/* The extern ops that return fresh tensors and keep no reference to their
   tensor arguments once they return (prefixes of the op's name).  A value
   computed only for them (and kiln's kernels) may live in the arena, its
   tensor a view of the call's arena, so that a call allocates, and faults
   in, no fresh pages for it: allocated per call, such a value was fresh
   memory from the C library (a transformer's FFN activations, each several
   MB), a good part of BERT's steady call on the CPU. */
static const char *const fresh_externs[] = {
    "aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.", "aten.convolution.", "kiln.attention.",
    "aten._scaled_dot_product_flash_attention_for_cpu.", NULL,
};

static int
fresh_extern(kn_ctx *c, const kn_step *st)
{
    if (st->kind == KN_ST_LINEAR)
        return 1;   /* oneDNN's packed linear or aten.addmm/mm (run.c run_linear) */
    if (st->kind != KN_ST_EXTERN || st->node < 0)
        return 0;
    const char *t = c->g.nodes[st->node].target;
    for (int k = 0; fresh_externs[k]; k++)
        if (strncmp(t, fresh_externs[k], strlen(fresh_externs[k])) == 0)
            return 1;
    return 0;
}

/* Mark the values that need a tensor only to be read by fresh_externs
   (directly or through an alias view) and kiln's kernels, and are no
   output (nor an output's base), not written in place of an extern result:
   they take arena blocks like any other intermediate.  CPU only (a GPU's
   caching allocator hands out warm memory already). */
static void
plan_arena_tensors(kn_ctx *c)
{
    for (int i = 0; i < c->nbufs; i++) {
        kn_buf *b = c->bufs[i];
        b->arena_tensor = !c->cuda && b->needs_tensor == 1 && !b->is_output && b->inplace_of < 0 && !b->local &&
                          (b->kind == KN_B_POINTWISE || b->kind == KN_B_REDUCTION) && b->first >= 0;
    }
    for (int i = 0; i < c->nbufs; i++) {
        kn_buf *a = c->bufs[i];
        if (a->kind == KN_B_ALIAS && a->base >= 0 && a->is_output)
            c->bufs[a->base]->arena_tensor = 0;
    }
    for (int s = 0; s < c->nsteps; s++) {
        kn_step *st = &c->steps[s];
        if (st->kind == KN_ST_KERNEL || fresh_extern(c, st))
            continue;
        for (int j = 0; j < st->nin; j++) {
            kn_buf *b = c->bufs[st->in[j]];
            b->arena_tensor = 0;
            if (b->kind == KN_B_ALIAS && b->base >= 0)
                c->bufs[b->base]->arena_tensor = 0;
        }
    }
}

static void
note_loads(kn_ctx *c, kn_expr *e, int step, int kernel, uint32_t gen)
{
    if (e->mark == (int)gen)
        return;
    e->mark = (int)gen;
    if (e->op == KN_S_LOAD) {
        kn_buf *b = c->bufs[e->i];
        if (step > b->last)
            b->last = step;
        if (b->kernel != kernel)
            b->local = 0;
    }
    for (int j = 0; j < e->n; j++)
        note_loads(c, e->a[j], step, kernel, gen);
}

int64_t
kn_buf_span(const kn_buf *b)
{
    int64_t hi = b->offset;
    for (int d = 0; d < b->ndim; d++) {
        if (b->size[d] == 0)
            return 0;
        hi += (b->size[d] - 1) * b->stride[d];
    }
    return hi + 1;
}

int
kn_plan(kn_ctx *c)
{
    for (int i = 0; i < c->nbufs; i++) {
        kn_buf *b = c->bufs[i];
        b->first = b->last = -1;
        b->local = (b->kind == KN_B_POINTWISE || b->kind == KN_B_REDUCTION) && !b->is_output && !b->needs_tensor;
    }
    for (int s = 0; s < c->nsteps; s++) {
        kn_step *st = &c->steps[s];
        if (st->kind == KN_ST_KERNEL) {
            kn_kernel *k = &c->kernels[st->kernel];
            uint32_t gen = ++plan_gen;
            for (int m = 0; m < k->nmembers; m++) {
                kn_buf *b = c->bufs[k->members[m]];
                if (b->first < 0)
                    b->first = s;
                if (b->last < s)
                    b->last = s;
                note_loads(c, b->body, s, st->kernel, gen);
            }
        } else {
            for (int j = 0; j < st->nin; j++) {
                kn_buf *b = c->bufs[st->in[j]];
                b->local = 0;
                if (b->last < s)
                    b->last = s;
                if (b->kind == KN_B_ALIAS) {
                    kn_buf *base = c->bufs[b->base];
                    base->local = 0;
                    if (base->last < s)
                        base->last = s;
                }
            }
            for (int j = 0; j < st->nres; j++)
                if (st->res[j] >= 0)
                    c->bufs[st->res[j]]->first = s;
        }
    }
    /* Only reductions and outer values can live in a register; scans and
       inner values are always stored. */
    for (int i = 0; i < c->nbufs; i++) {
        kn_buf *b = c->bufs[i];
        if (!b->local)
            continue;
        if (b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD))
            b->local = 0;
        else if (b->kind == KN_B_POINTWISE) {
            kn_kernel *k = &c->kernels[b->kernel];
            int64_t s[KN_MAXDIM];
            int n = 0;
            for (int d = 0; d < b->ndim; d++)
                if (b->size[d] != 1)
                    s[n++] = b->size[d];
            int outer = k->has_reduction && n == k->nouter &&
                        (n == 0 || memcmp(s, k->outer, sizeof(int64_t) * (size_t)n) == 0);
            if (!outer)
                b->local = 0;
        }
    }
    /* values written in place of a dying extern result need no storage of
       their own; the others that need a tensor may live in the arena */
    if (plan_inplace(c) < 0)
        return -1;
    plan_arena_tensors(c);
    /* arena: first-fit reuse of blocks whose owner died before */
    typedef struct {
        int64_t off, size;
        int last;
    } block;
    block *blocks = kn_alloc(&c->arena, sizeof(block) * (size_t)(c->nbufs + 1));
    if (blocks == NULL)
        return -1;
    int nblocks = 0;
    int64_t top = 0;
    for (int s = 0; s < c->nsteps; s++) {
        for (int i = 0; i < c->nbufs; i++) {
            kn_buf *b = c->bufs[i];
            if (b->first != s || b->local || b->is_output || (b->needs_tensor && !b->arena_tensor))
                continue;
            if (b->kind != KN_B_POINTWISE && b->kind != KN_B_REDUCTION)
                continue;
            int64_t bytes = (kn_buf_span(b) * kn_dtypes[b->dt].size + 63) & ~(int64_t)63;
            if (bytes == 0)
                bytes = 64;
            int best = -1;
            for (int k = 0; k < nblocks; k++)
                if (blocks[k].last < s && blocks[k].size >= bytes && (best < 0 || blocks[k].size < blocks[best].size))
                    best = k;
            if (best < 0) {
                blocks[nblocks].off = top;
                blocks[nblocks].size = bytes;
                best = nblocks++;
                top += bytes;
            }
            blocks[best].last = b->last > s ? b->last : s;
            b->arena_off = blocks[best].off;
        }
    }
    c->arena_bytes = top;
    return 0;
}
