/* expr.c — the expression DAG of the loop IR.
 *
 * Consumes: requests from lowering ("add these two values", "load buffer b at
 * index i").  Produces: hash-consed kn_expr nodes.  Identical expressions are
 * one node, so equality is pointer equality and CSE is free.  Index arithmetic
 * (int64 ADD/MUL by constant/IDIV/IMOD) is kept in a canonical form — a sum of
 * coefficient*atom terms in a fixed order (loop variables first, by number;
 * other atoms by id), constant last — and simplified with
 * the ranges of loop variables, so that views compose into plain affine
 * indices and two spellings of the same index compare equal (a term that
 * cancels is kept, times 0, when it can raise: a CHECK or an integer division;
 * so is the operand a constant WHERE condition or an absorbing && / || constant
 * would drop).
 * Also here: the compile arena and dtype helpers (the text buffer: text.c).
 */
#include "../kiln.h"
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---------------------------------------------------------------- arena */
struct kn_arena_chunk {
    kn_arena_chunk *next;
    size_t size;
    char data[];
};

void *
kn_alloc(kn_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->head == NULL || a->used + n > a->cap) {
        size_t cap = n > (1 << 20) ? n : (1 << 20);
        kn_arena_chunk *ch = calloc(1, sizeof(kn_arena_chunk) + cap);
        if (ch == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        ch->next = a->head;
        ch->size = cap;
        a->head = ch;
        a->used = 0;
        a->cap = cap;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    return p;
}

void
kn_arena_free(kn_arena *a)
{
    kn_arena_chunk *ch = a->head;
    while (ch) {
        kn_arena_chunk *nx = ch->next;
        free(ch);
        ch = nx;
    }
    a->head = NULL;
    a->used = a->cap = 0;
}

char *
kn_strdup(kn_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = kn_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* ---------------------------------------------------------------- dtypes */
const kn_dtype_info kn_dtypes[KN_NDTYPES] = {
#define X(n, s, c, b, cc, tag) {s, c, b, cc, tag},
    KN_DTYPES(X)
#undef X
};

int
kn_dtype_is_float(kn_dtype d)
{
    return d == KN_F16 || d == KN_BF16 || d == KN_F32 || d == KN_F64;
}

int
kn_dtype_is_int(kn_dtype d)
{
    return d >= KN_U8 && d <= KN_I64;
}

kn_dtype
kn_dtype_compute(kn_dtype d)
{
    return (d == KN_F16 || d == KN_BF16) ? KN_F32 : d;
}

/* torch's promotion within one priority class: bool < ints < floats; u8 with
   a signed int widens to int16; f16 with bf16 gives f32. */
kn_dtype
kn_dtype_promote(kn_dtype a, kn_dtype b)
{
    if (a == b)
        return a;
    if (a == KN_BOOL)
        return b;
    if (b == KN_BOOL)
        return a;
    int fa = kn_dtype_is_float(a), fb = kn_dtype_is_float(b);
    if (fa && !fb)
        return a;
    if (fb && !fa)
        return b;
    if (fa && fb) {
        if ((a == KN_F16 && b == KN_BF16) || (a == KN_BF16 && b == KN_F16))
            return KN_F32;
        return a > b ? a : b;
    }
    if (a == KN_U8 || b == KN_U8) {
        kn_dtype o = a == KN_U8 ? b : a;
        return o == KN_I8 ? KN_I16 : o;
    }
    return a > b ? a : b;
}

/* ---------------------------------------------------------------- interning */
static uint32_t
mix(uint32_t h, uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    return (h ^ (uint32_t)v ^ (uint32_t)(v >> 32)) * 16777619u;
}

static uint32_t
hash_of(const kn_expr *e)
{
    uint32_t h = 2166136261u;
    h = mix(h, e->op);
    h = mix(h, e->dt);
    h = mix(h, e->n);
    for (int k = 0; k < e->n; k++)
        h = mix(h, (uint64_t)(uintptr_t)e->a[k]);
    h = mix(h, (uint64_t)e->i);
    uint64_t fb;
    memcpy(&fb, &e->f, sizeof fb);
    h = mix(h, fb);
    h = mix(h, (uint64_t)e->ext);
    return h;
}

static int
same(const kn_expr *x, const kn_expr *y)
{
    if (x->op != y->op || x->dt != y->dt || x->n != y->n || x->i != y->i || x->ext != y->ext)
        return 0;
    if (memcmp(&x->f, &y->f, sizeof(double)) != 0)
        return 0;
    for (int k = 0; k < x->n; k++)
        if (x->a[k] != y->a[k])
            return 0;
    return 1;
}

static int
grow_table(kn_ctx *c)
{
    size_t ncap = c->tcap ? c->tcap * 2 : 4096;
    kn_expr **nt = calloc(ncap, sizeof *nt);
    if (nt == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < c->tcap; k++) {
        kn_expr *e = c->table[k];
        while (e) {
            kn_expr *nx = e->next;
            size_t b = e->hash & (ncap - 1);
            e->next = nt[b];
            nt[b] = e;
            e = nx;
        }
    }
    free(c->table);
    c->table = nt;
    c->tcap = ncap;
    return 0;
}

static uint32_t
var_depth(int64_t num)
{
    if (num >= KN_VAR_O(0) && num < KN_VAR_I(0))
        return 1;
    if (num >= KN_VAR_I(0) && num < KN_VAR_TMP(0))
        return 2;
    return 3;
}

static kn_expr *
intern(kn_ctx *c, const kn_expr *proto)
{
    if (c->tcount * 2 >= c->tcap && grow_table(c) < 0)
        return NULL;
    uint32_t h = hash_of(proto);
    size_t b = h & (c->tcap - 1);
    for (kn_expr *e = c->table[b]; e; e = e->next)
        if (e->hash == h && same(e, proto))
            return e;
    kn_expr *e = kn_alloc(&c->arena, sizeof *e);
    if (e == NULL)
        return NULL;
    *e = *proto;
    e->hash = h;
    e->id = c->next_id++;
    e->depth = 0;
    if (e->op == KN_S_VAR)
        e->depth = var_depth(e->i);
    else if (e->op == KN_S_LOCAL)
        e->depth = 1;
    for (int k = 0; k < e->n; k++)
        if (e->a[k]->depth > e->depth)
            e->depth = e->a[k]->depth;
    e->next = c->table[b];
    c->table[b] = e;
    c->tcount++;
    return e;
}

int
kn_is_const(kn_expr *e)
{
    return e->op == KN_S_CONST;
}

double
kn_const_val(kn_expr *e)
{
    return kn_dtype_is_float(e->dt) ? e->f : (double)e->i;
}

kn_expr *
kn_const_i(kn_ctx *c, kn_dtype dt, int64_t v)
{
    kn_expr p = {0};
    p.op = KN_S_CONST;
    p.dt = dt;
    if (kn_dtype_is_float(dt))
        p.f = (double)v;
    else
        p.i = dt == KN_BOOL ? (v != 0) : v;
    return intern(c, &p);
}

kn_expr *
kn_const_f(kn_ctx *c, kn_dtype dt, double v)
{
    kn_expr p = {0};
    p.op = KN_S_CONST;
    p.dt = dt;
    if (kn_dtype_is_float(dt)) {
        if (dt == KN_F32)
            v = (double)(float)v;
        p.f = v;
    } else if (dt == KN_BOOL) {
        p.i = v != 0;
    } else {
        p.i = (int64_t)v;
    }
    return intern(c, &p);
}

kn_expr *
kn_iconst(kn_ctx *c, int64_t v)
{
    return kn_const_i(c, KN_I64, v);
}

kn_expr *
kn_var(kn_ctx *c, int64_t num, int64_t extent)
{
    if (extent <= 1)
        return kn_iconst(c, 0);
    kn_expr p = {0};
    p.op = KN_S_VAR;
    p.dt = KN_I64;
    p.i = num;
    p.ext = extent;
    return intern(c, &p);
}

static kn_expr *
mk(kn_ctx *c, kn_sop op, kn_dtype dt, int n, kn_expr *a, kn_expr *b, kn_expr *d)
{
    if ((n > 0 && a == NULL) || (n > 1 && b == NULL) || (n > 2 && d == NULL))
        return NULL;
    kn_expr p = {0};
    p.op = (uint16_t)op;
    p.dt = (uint8_t)dt;
    p.n = (uint8_t)n;
    p.a[0] = a;
    p.a[1] = b;
    p.a[2] = d;
    return intern(c, &p);
}

/* ---------------------------------------------------------------- index algebra */
#define MAXTERMS 48
typedef struct {
    int n;
    int64_t c;
    int64_t k[MAXTERMS];
    kn_expr *atom[MAXTERMS];
} terms;

static int
collect(terms *t, kn_expr *e, int64_t coef)
{
    if (e->op == KN_S_CONST) {
        t->c += coef * e->i;
        return 0;
    }
    if (e->op == KN_S_ADD && e->dt == KN_I64) {
        if (collect(t, e->a[0], coef) < 0)
            return -1;
        return collect(t, e->a[1], coef);
    }
    if (e->op == KN_S_MUL && e->dt == KN_I64 && e->a[1]->op == KN_S_CONST)
        return collect(t, e->a[0], coef * e->a[1]->i);
    for (int j = 0; j < t->n; j++)
        if (t->atom[j] == e) {
            t->k[j] += coef;
            return 0;
        }
    if (t->n == MAXTERMS)
        return -1;
    t->atom[t->n] = e;
    t->k[t->n] = coef;
    t->n++;
    return 0;
}

/* (x / k) * (k*m) + (x % k) * m  ==  x * m: undo a reshape that split a
   dim and merged it back, so the index is affine again. */
static void
merge_divmod(terms *t)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (int j = 0; j < t->n && !changed; j++) {
            kn_expr *d = t->atom[j];
            if (d->op != KN_S_IDIV || t->k[j] == 0)
                continue;
            for (int m = 0; m < t->n; m++) {
                kn_expr *r = t->atom[m];
                if (r->op != KN_S_IMOD || r->a[0] != d->a[0] || r->a[1] != d->a[1] || t->k[m] == 0)
                    continue;
                int64_t k = d->a[1]->i, cm = t->k[m];
                if (t->k[j] != cm * k)
                    continue;
                t->k[j] = 0;
                t->k[m] = 0;
                if (collect(t, d->a[0], cm) < 0)
                    return;
                changed = 1;
                break;
            }
        }
    }
}

/* Can evaluating e raise: an index CHECK, or an integer division whose
   divisor may be zero?  Conservative (yes) past the budget. */
static int
may_raise(kn_expr *e, int *budget)
{
    if (--*budget < 0 || e->op == KN_S_CHECK)
        return 1;
    if ((e->op == KN_S_FLOORDIV || e->op == KN_S_TRUNCDIV || e->op == KN_S_REM || e->op == KN_S_FMOD) &&
        !kn_dtype_is_float(e->dt) && !(e->a[1]->op == KN_S_CONST && e->a[1]->i != 0))
        return 1;
    for (int j = 0; j < e->n; j++)
        if (e->a[j] && may_raise(e->a[j], budget))
            return 1;
    return 0;
}

/* The order of a sum's terms: loop variables first, by number (then
   extent), other atoms after them by id.  Not plain creation order: a
   variable's node is shared by every kernel where it has that extent, so
   its id would depend on whether an earlier kernel happened to have a loop
   of that size, and two sizes of one graph would print one index in two
   orders (kiln/kernel_params.py matches sizes' sources token by token). */
static int
atom_before(const kn_expr *a, const kn_expr *b)
{
    int va = a->op == KN_S_VAR, vb = b->op == KN_S_VAR;
    if (va != vb)
        return va;
    if (va)
        return a->i != b->i ? a->i < b->i : a->ext < b->ext;
    return a->id < b->id;
}

static kn_expr *
build(kn_ctx *c, terms *t)
{
    merge_divmod(t);
    /* insertion sort by atom_before */
    for (int x = 1; x < t->n; x++) {
        kn_expr *a = t->atom[x];
        int64_t k = t->k[x];
        int y = x - 1;
        while (y >= 0 && atom_before(a, t->atom[y])) {
            t->atom[y + 1] = t->atom[y];
            t->k[y + 1] = t->k[y];
            y--;
        }
        t->atom[y + 1] = a;
        t->k[y + 1] = k;
    }
    kn_expr *acc = NULL;
    for (int j = 0; j < t->n; j++) {
        int budget = 256;
        /* a term that cancels still runs its checks (`(a // b) * 0` raises on b == 0) */
        if (t->k[j] == 0 && !may_raise(t->atom[j], &budget))
            continue;
        kn_expr *term = t->atom[j];
        if (t->k[j] != 1)
            term = mk(c, KN_S_MUL, KN_I64, 2, term, kn_iconst(c, t->k[j]), NULL);
        acc = acc ? mk(c, KN_S_ADD, KN_I64, 2, acc, term, NULL) : term;
        if (acc == NULL)
            return NULL;
    }
    if (acc == NULL)
        return kn_iconst(c, t->c);
    if (t->c != 0)
        acc = mk(c, KN_S_ADD, KN_I64, 2, acc, kn_iconst(c, t->c), NULL);
    return acc;
}

kn_expr *
kn_iadd(kn_ctx *c, kn_expr *a, kn_expr *b)
{
    if (a == NULL || b == NULL)
        return NULL;
    terms t = {0};
    if (collect(&t, a, 1) < 0 || collect(&t, b, 1) < 0)
        return mk(c, KN_S_ADD, KN_I64, 2, a, b, NULL);
    return build(c, &t);
}

kn_expr *
kn_imul(kn_ctx *c, kn_expr *a, int64_t k)
{
    if (a == NULL)
        return NULL;
    terms t = {0};
    if (collect(&t, a, k) < 0)
        return mk(c, KN_S_MUL, KN_I64, 2, a, kn_iconst(c, k), NULL);
    return build(c, &t);
}

int
kn_expr_range(kn_expr *e, int64_t *lo, int64_t *hi)
{
    int64_t l0, h0, l1, h1;
    switch (e->op) {
    case KN_S_CONST:
        if (e->dt != KN_I64)
            return 0;
        *lo = *hi = e->i;
        return 1;
    case KN_S_VAR:
        *lo = 0;
        *hi = e->ext - 1;
        return 1;
    case KN_S_ADD:
        if (e->dt != KN_I64 || !kn_expr_range(e->a[0], &l0, &h0) || !kn_expr_range(e->a[1], &l1, &h1))
            return 0;
        *lo = l0 + l1;
        *hi = h0 + h1;
        return 1;
    case KN_S_MUL:
        if (e->dt != KN_I64 || e->a[1]->op != KN_S_CONST || !kn_expr_range(e->a[0], &l0, &h0))
            return 0;
        if (e->a[1]->i >= 0) {
            *lo = l0 * e->a[1]->i;
            *hi = h0 * e->a[1]->i;
        } else {
            *lo = h0 * e->a[1]->i;
            *hi = l0 * e->a[1]->i;
        }
        return 1;
    case KN_S_IDIV:
        if (!kn_expr_range(e->a[0], &l0, &h0) || l0 < 0)
            return 0;
        *lo = l0 / e->a[1]->i;
        *hi = h0 / e->a[1]->i;
        return 1;
    case KN_S_IMOD:
        *lo = 0;
        *hi = e->a[1]->i - 1;
        return 1;
    default:
        return 0;
    }
}

/* Range of the sum of the terms selected by `pick` (1: coef divisible by k,
   0: not), constant included when include_c. */
static int
terms_range(terms *t, int64_t k, int pick, int include_c, int64_t *lo, int64_t *hi)
{
    int64_t l = include_c ? t->c : 0, h = l;
    for (int j = 0; j < t->n; j++) {
        if ((t->k[j] % k == 0) != pick || t->k[j] == 0)
            continue;
        int64_t al, ah;
        if (!kn_expr_range(t->atom[j], &al, &ah))
            return 0;
        if (t->k[j] >= 0) {
            l += al * t->k[j];
            h += ah * t->k[j];
        } else {
            l += ah * t->k[j];
            h += al * t->k[j];
        }
    }
    *lo = l;
    *hi = h;
    return 1;
}

static int64_t
gcd64(int64_t a, int64_t b)
{
    if (a < 0)
        a = -a;
    if (b < 0)
        b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Split a = d*Q + R with d | k, every coefficient of Q's terms a multiple of
   d, and 0 <= R < d.  Then a / k = Q / (k/d) and a % k = d*(Q % (k/d)) + R.
   Tries the divisors d = gcd(k, coef) from largest down; 1 if found. */
static int
split_by_divisor(kn_ctx *c, kn_expr *a, int64_t k, int64_t *dout, kn_expr **q, kn_expr **r)
{
    terms t = {0};
    if (collect(&t, a, 1) < 0)
        return 0;
    int64_t cands[MAXTERMS + 1];
    int nc = 0;
    for (int j = 0; j < t.n; j++) {
        int64_t g = gcd64(k, t.k[j]);
        if (g > 1) {
            int dup = 0;
            for (int x = 0; x < nc; x++)
                dup |= cands[x] == g;
            if (!dup)
                cands[nc++] = g;
        }
    }
    int64_t best = 0;
    for (int x = 0; x < nc; x++) {
        int64_t d = cands[x];
        if (d <= best)
            continue;
        terms rt = {0};
        rt.c = t.c >= 0 ? t.c % d : t.c;
        for (int j = 0; j < t.n; j++)
            if (t.k[j] % d != 0) {
                rt.atom[rt.n] = t.atom[j];
                rt.k[rt.n++] = t.k[j];
            }
        int64_t lo, hi;
        if (terms_range(&rt, d, 0, 1, &lo, &hi) && lo >= 0 && hi < d)
            best = d;
    }
    if (best <= 1)
        return 0;
    terms qt = {0}, rt = {0};
    qt.c = t.c >= 0 ? t.c / best : 0;
    rt.c = t.c >= 0 ? t.c % best : t.c;
    for (int j = 0; j < t.n; j++) {
        if (t.k[j] % best == 0) {
            qt.atom[qt.n] = t.atom[j];
            qt.k[qt.n++] = t.k[j] / best;
        } else {
            rt.atom[rt.n] = t.atom[j];
            rt.k[rt.n++] = t.k[j];
        }
    }
    *dout = best;
    *q = build(c, &qt);
    *r = build(c, &rt);
    return *q && *r;
}

/* a = k*Q + R with R >= 0 made of the terms whose coefficient k does not
   divide; 1 if there was something to pull out. */
static int
pull_multiples(kn_ctx *c, kn_expr *a, int64_t k, kn_expr **q, kn_expr **r)
{
    terms t = {0};
    if (collect(&t, a, 1) < 0)
        return 0;
    terms qt = {0}, rt = {0};
    rt.c = t.c;
    for (int j = 0; j < t.n; j++) {
        if (t.k[j] != 0 && t.k[j] % k == 0) {
            qt.atom[qt.n] = t.atom[j];
            qt.k[qt.n++] = t.k[j] / k;
        } else {
            rt.atom[rt.n] = t.atom[j];
            rt.k[rt.n++] = t.k[j];
        }
    }
    int64_t lo, hi;
    if (qt.n == 0 || !terms_range(&rt, k, 0, 1, &lo, &hi) || lo < 0)
        return 0;
    *q = build(c, &qt);
    *r = build(c, &rt);
    return *q && *r;
}

kn_expr *
kn_idiv(kn_ctx *c, kn_expr *a, int64_t k)
{
    if (a == NULL)
        return NULL;
    if (k == 1)
        return a;
    int64_t lo, hi;
    if (kn_expr_range(a, &lo, &hi) && lo >= 0 && hi < k)
        return kn_iconst(c, 0);
    int64_t d;
    kn_expr *q, *r;
    if (split_by_divisor(c, a, k, &d, &q, &r))
        return d == k ? q : kn_idiv(c, q, k / d);
    /* (k*A + B) / k == A + B / k when B >= 0 */
    if (pull_multiples(c, a, k, &q, &r))
        return kn_iadd(c, q, kn_idiv(c, r, k));
    return mk(c, KN_S_IDIV, KN_I64, 2, a, kn_iconst(c, k), NULL);
}

kn_expr *
kn_imod(kn_ctx *c, kn_expr *a, int64_t k)
{
    if (a == NULL)
        return NULL;
    if (k == 1)
        return kn_iconst(c, 0);
    int64_t lo, hi;
    if (kn_expr_range(a, &lo, &hi) && lo >= 0 && hi < k)
        return a;
    int64_t d;
    kn_expr *q, *r;
    if (split_by_divisor(c, a, k, &d, &q, &r)) {
        if (d == k)
            return r;
        return kn_iadd(c, kn_imul(c, kn_imod(c, q, k / d), d), r);
    }
    /* (k*A + B) % k == B % k when B >= 0 */
    if (pull_multiples(c, a, k, &q, &r))
        return kn_imod(c, r, k);
    return mk(c, KN_S_IMOD, KN_I64, 2, a, kn_iconst(c, k), NULL);
}

/* ---------------------------------------------------------------- value ops */
kn_expr *
kn_op1(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a)
{
    return mk(c, op, dt, 1, a, NULL, NULL);
}

kn_expr *
kn_op2(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a, kn_expr *b)
{
    if (a == NULL || b == NULL)
        return NULL;
    if (dt == KN_I64 && a->dt == KN_I64 && b->dt == KN_I64) {
        if (op == KN_S_ADD)
            return kn_iadd(c, a, b);
        if (op == KN_S_SUB)
            return kn_iadd(c, a, kn_imul(c, b, -1));
        if (op == KN_S_MUL && b->op == KN_S_CONST)
            return kn_imul(c, a, b->i);
        if (op == KN_S_MUL && a->op == KN_S_CONST)
            return kn_imul(c, b, a->i);
    }
    if (kn_dtype_is_float(dt) && b->op == KN_S_CONST && kn_dtype_is_float(b->dt)) {
        if ((op == KN_S_MUL || op == KN_S_DIV) && b->f == 1.0 && a->dt == dt)
            return a;
        /* x - (+0) and x + (-0) are x; x + (+0) is not (-0 + +0 is +0) */
        if (b->f == 0.0 && a->dt == dt && ((op == KN_S_SUB && !signbit(b->f)) || (op == KN_S_ADD && signbit(b->f))))
            return a;
    }
    if (op == KN_S_LAND || op == KN_S_LOR) {
        /* x && true == x, x || false == x, and the absorbing constants */
        kn_expr *k = a->op == KN_S_CONST ? a : b->op == KN_S_CONST ? b : NULL;
        if (k && dt == KN_BOOL && a->dt == KN_BOOL && b->dt == KN_BOOL) {
            kn_expr *other = k == a ? b : a;
            int truth = kn_const_val(k) != 0, budget = 256;
            if (op == KN_S_LAND && (truth || !may_raise(other, &budget)))
                return truth ? other : k;
            if (op == KN_S_LOR && (!truth || !may_raise(other, &budget)))
                return truth ? k : other;   /* (an operand that can raise is kept) */
        }
    }
    if ((kn_sops[op].flags & KN_SF_COMM) && a->id > b->id) {
        kn_expr *t = a;
        a = b;
        b = t;
    }
    return mk(c, op, dt, 2, a, b, NULL);
}

kn_expr *
kn_op3(kn_ctx *c, kn_sop op, kn_dtype dt, kn_expr *a, kn_expr *b, kn_expr *d)
{
    if (a == NULL || b == NULL || d == NULL)
        return NULL;
    /* a constant condition picks a branch; the other is kept when it can
       raise (eager computed it: `masked_fill_` by an all-true mask of a % b) */
    int budget = 256;
    if (op == KN_S_WHERE && a->op == KN_S_CONST && !may_raise(a->i ? d : b, &budget))
        return a->i ? b : d;
    if (op == KN_S_WHERE && b == d)
        return b;
    return mk(c, op, dt, 3, a, b, d);
}

/* Is a's value already representable in the narrow float dtype nd: a load of
   nd storage or a rounding to nd. */
static int
rounded_to(const kn_expr *a, kn_dtype nd)
{
    return (a->op == KN_S_LOAD && a->ext == nd) || (a->op == KN_S_CAST && a->i == nd);
}

/* An explicit conversion (_to_copy, copy_ into a narrow tensor) to F16/BF16
   rounds to the narrow dtype also when fused (x.half().float() is not x):
   such a CAST has dt F32 and i = the narrow dtype; code generation rounds
   through it.  Other dtypes: kn_cast. */
kn_expr *
kn_round(kn_ctx *c, kn_expr *a, kn_dtype dt)
{
    if (a == NULL)
        return NULL;
    if ((dt == KN_F16 || dt == KN_BF16) && !rounded_to(a, dt)) {
        if (a->op == KN_S_CONST && !isfinite(a->f) && kn_dtype_is_float(a->dt))
            return kn_const_f(c, KN_F32, a->f);
        kn_expr p = {0};
        p.op = KN_S_CAST;
        p.dt = KN_F32;
        p.n = 1;
        p.a[0] = a;
        p.i = dt;
        return intern(c, &p);
    }
    return kn_cast(c, a, dt);
}

/* The value of a in dtype dt's compute type.  An op's F16/BF16 result is not
   rounded between fused ops (computed in F32 as TorchInductor does; only its
   store rounds): rounding every intermediate cost ResNet-50 a quarter of its
   GPU time.  Explicit conversions round (kn_round), and so does a value a
   decision is taken on (comparison, rounding to an integer, argmax; lower.c
   settle_narrow). */
kn_expr *
kn_cast(kn_ctx *c, kn_expr *a, kn_dtype dt)
{
    if (a == NULL)
        return NULL;
    dt = kn_dtype_compute(dt);
    if (a->dt == dt)
        return a;
    if (a->op == KN_S_CONST) {
        if (kn_dtype_is_float(a->dt))
            return kn_dtype_is_float(dt) ? kn_const_f(c, dt, a->f)
                   : (dt == KN_BOOL ? kn_const_i(c, dt, a->f != 0) : (isfinite(a->f) ? kn_const_f(c, dt, a->f) : mk(c, KN_S_CAST, dt, 1, a, NULL, NULL)));
        if (kn_dtype_is_float(dt))
            return kn_const_f(c, dt, (double)a->i);
        if (dt == KN_BOOL)
            return kn_const_i(c, dt, a->i != 0);
        if (dt == KN_I64)
            return kn_const_i(c, dt, a->i);
    }
    return mk(c, KN_S_CAST, dt, 1, a, NULL, NULL);
}

kn_expr *
kn_load(kn_ctx *c, int buf, kn_dtype dt, kn_expr *index)
{
    if (index == NULL)
        return NULL;
    kn_expr p = {0};
    p.op = KN_S_LOAD;
    p.dt = (uint8_t)kn_dtype_compute(dt);
    p.n = 1;
    p.a[0] = index;
    p.i = buf;
    p.ext = dt; /* storage dtype, needed to render the load */
    return intern(c, &p);
}

/* ---------------------------------------------------------------- substitution */
typedef struct {
    kn_expr **key, **val;
    size_t cap, n;
} ptrmap;

static kn_expr **
pm_slot(ptrmap *m, kn_expr *k)
{
    size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ULL;
    size_t i = h & (m->cap - 1);
    while (m->key[i] && m->key[i] != k)
        i = (i + 1) & (m->cap - 1);
    return &m->key[i];
}

static int
pm_put(ptrmap *m, kn_expr *k, kn_expr *v)
{
    if ((m->n + 1) * 2 > m->cap) {
        ptrmap nm = {0};
        nm.cap = m->cap ? m->cap * 2 : 256;
        nm.key = calloc(nm.cap, sizeof(kn_expr *));
        nm.val = calloc(nm.cap, sizeof(kn_expr *));
        if (!nm.key || !nm.val) {
            free(nm.key);
            free(nm.val);
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                kn_expr **s = pm_slot(&nm, m->key[i]);
                *s = m->key[i];
                nm.val[s - nm.key] = m->val[i];
                nm.n++;
            }
        free(m->key);
        free(m->val);
        *m = nm;
    }
    kn_expr **s = pm_slot(m, k);
    if (*s == NULL)
        m->n++;
    *s = k;
    m->val[s - m->key] = v;
    return 0;
}

static kn_expr *
pm_get(ptrmap *m, kn_expr *k)
{
    if (m->cap == 0)
        return NULL;
    kn_expr **s = pm_slot(m, k);
    return *s ? m->val[s - m->key] : NULL;
}

static kn_expr *
subst_rec(kn_ctx *c, kn_expr *e, const kn_subst *s, ptrmap *memo)
{
    if (e->depth == 0)
        return e;
    if (e->op == KN_S_VAR) {
        kn_expr *t = (e->i >= 0 && e->i < KN_NVARS) ? s->to[e->i] : NULL;
        return t ? t : e;
    }
    kn_expr *hit = pm_get(memo, e);
    if (hit)
        return hit;
    kn_expr *na[3] = {0};
    int changed = 0;
    for (int k = 0; k < e->n; k++) {
        na[k] = subst_rec(c, e->a[k], s, memo);
        if (na[k] == NULL)
            return NULL;
        changed |= na[k] != e->a[k];
    }
    kn_expr *r = e;
    if (changed) {
        switch (e->op) {
        case KN_S_LOAD:
            r = kn_load(c, (int)e->i, (kn_dtype)e->ext, na[0]);
            break;
        case KN_S_CAST:
            r = e->i ? kn_round(c, na[0], (kn_dtype)e->i) : kn_cast(c, na[0], (kn_dtype)e->dt);
            break;
        case KN_S_IDIV:
            r = kn_idiv(c, na[0], e->a[1]->i);
            break;
        case KN_S_IMOD:
            r = kn_imod(c, na[0], e->a[1]->i);
            break;
        default:
            if (e->n == 1)
                r = kn_op1(c, e->op, e->dt, na[0]);
            else if (e->n == 2)
                r = kn_op2(c, e->op, e->dt, na[0], na[1]);
            else
                r = kn_op3(c, e->op, e->dt, na[0], na[1], na[2]);
        }
        if (r == NULL)
            return NULL;
    }
    if (pm_put(memo, e, r) < 0)
        return NULL;
    return r;
}

/* Substitutions repeat within a compile: the CUDA renderer substitutes the
   same member bodies under the same map once for each vector width it
   tries, and a buffer's map into its kernel is made again wherever its body
   is asked for.  Expressions are interned and never change, and building
   one consults nothing but its operands, so a substitution's result holds
   until the compile ends: each distinct map keeps its memo for the whole
   compile (a repeat finds its results there instead of walking and
   re-interning the tree; it would have found every one interned already, so
   the expressions and their numbering are the same either way). */
typedef struct {
    uint64_t sig;
    int n;                   /* the map's entries: var[k] -> to[k] (KN_NVARS fits a byte) */
    uint8_t var[KN_NVARS];
    kn_expr **to;
    ptrmap memo;
} submemo;

_Static_assert(KN_NVARS <= 256, "submemo.var holds a variable number in a byte");

struct kn_submemos {
    submemo **slot;          /* open addressing on sig; cap a power of two */
    size_t cap, n;
};

static submemo *
memo_for(kn_ctx *c, const kn_subst *s)
{
    struct kn_submemos *m = c->subst_memo;
    if (m == NULL) {
        if ((m = calloc(1, sizeof *m)) == NULL)
            return NULL;
        c->subst_memo = m;
    }
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        submemo **ns = calloc(ncap, sizeof *ns);
        if (ns == NULL)
            return NULL;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slot[i]) {
                size_t j = m->slot[i]->sig & (ncap - 1);
                while (ns[j])
                    j = (j + 1) & (ncap - 1);
                ns[j] = m->slot[i];
            }
        free(m->slot);
        m->slot = ns;
        m->cap = ncap;
    }
    /* the map's entries, compact, and their hash */
    uint8_t var[KN_NVARS];
    kn_expr *to[KN_NVARS];
    int n = 0;
    uint64_t sig = 0x9E3779B97F4A7C15ULL;
    _Static_assert(KN_NVARS % 8 == 0, "the map is scanned 8 entries at a time");
    for (int v = 0; v < KN_NVARS; v++) {
        if (v % 8 == 0) {   /* (a map has a few entries: skip empty runs of 8) */
            kn_expr *const *r = s->to + v;
            if (((uintptr_t)r[0] | (uintptr_t)r[1] | (uintptr_t)r[2] | (uintptr_t)r[3] | (uintptr_t)r[4] |
                 (uintptr_t)r[5] | (uintptr_t)r[6] | (uintptr_t)r[7]) == 0) {
                v += 7;
                continue;
            }
        }
        if (s->to[v] != NULL) {
            var[n] = (uint8_t)v;
            to[n++] = s->to[v];
            sig = (sig ^ (((uint64_t)(uintptr_t)s->to[v] >> 4) + (uint64_t)v * 0x100000001B3ULL)) *
                  0xff51afd7ed558ccdULL;
        }
    }
    sig ^= sig >> 29;
    size_t j = sig & (m->cap - 1);
    for (; m->slot[j]; j = (j + 1) & (m->cap - 1)) {
        submemo *e = m->slot[j];
        if (e->sig == sig && e->n == n && memcmp(e->var, var, (size_t)n) == 0 &&
            memcmp(e->to, to, sizeof(kn_expr *) * (size_t)n) == 0)
            return e;
    }
    submemo *e = calloc(1, sizeof *e);
    if (e == NULL || (n > 0 && (e->to = malloc(sizeof(kn_expr *) * (size_t)n)) == NULL)) {
        free(e);
        return NULL;
    }
    e->sig = sig;
    e->n = n;
    memcpy(e->var, var, (size_t)n);
    if (n > 0)
        memcpy(e->to, to, sizeof(kn_expr *) * (size_t)n);
    m->slot[j] = e;
    m->n++;
    return e;
}

kn_expr *
kn_substitute(kn_ctx *c, kn_expr *e, const kn_subst *s)
{
    if (e == NULL)
        return NULL;
    submemo *m = memo_for(c, s);
    if (m == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    return subst_rec(c, e, s, &m->memo);
}

void
kn_subst_memo_free(kn_ctx *c)
{
    struct kn_submemos *m = c->subst_memo;
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i]) {
            free(m->slot[i]->memo.key);
            free(m->slot[i]->memo.val);
            free(m->slot[i]->to);
            free(m->slot[i]);
        }
    free(m->slot);
    free(m);
    c->subst_memo = NULL;
}

static size_t
size_rec(kn_expr *e, ptrmap *seen, size_t cap)
{
    if (pm_get(seen, e) || seen->n >= cap)
        return 0;
    if (pm_put(seen, e, e) < 0)
        return cap;
    size_t n = 1;
    for (int k = 0; k < e->n; k++)
        n += size_rec(e->a[k], seen, cap);
    return n;
}

/* Number of distinct nodes reachable from e, stopping at cap. */
size_t
kn_expr_size(kn_expr *e, size_t cap)
{
    ptrmap seen = {0};
    size_t n = size_rec(e, &seen, cap);
    free(seen.key);
    free(seen.val);
    if (PyErr_Occurred())
        PyErr_Clear();
    return n;
}
