/* print.c — readable dumps of the loop IR (KILN_DUMP=loops).
 *
 * Consumes: fused kernels.  Produces: text like
 *   kernel 0: outer [64] inner [1000]
 *     buf3 = max_r(load(buf0, 1000*o0 + i0))          (reduction, register)
 *     buf5 = sum_r(exp(load(buf0, ...) - buf3))       (reduction, register)
 *     buf6[1000*o0 + i0] = exp(...) / buf5            (pointwise)
 */
#include "../kiln.h"


static const char *rop_name[KN_R__COUNT] = {"sum", "prod", "max", "min", "argmax", "argmin", "any", "all",
                                            "cumsum", "cumprod"};

void
kn_print_expr(kn_str *s, kn_expr *e)
{
    switch (e->op) {
    case KN_S_CONST:
        if (e->dt == KN_F32 || e->dt == KN_F64)
            kn_str_printf(s, "%g", e->f);
        else
            kn_str_printf(s, "%lld", (long long)e->i);
        return;
    case KN_S_VAR: {
        long long v = (long long)e->i;
        if (v >= KN_VAR_I(0) && v < KN_VAR_TMP(0))
            kn_str_printf(s, "i%lld", v - KN_VAR_I(0));
        else if (v >= KN_VAR_O(0))
            kn_str_printf(s, "o%lld", v - KN_VAR_O(0));
        else if (v >= KN_VAR_R(0))
            kn_str_printf(s, "r%lld", v - KN_VAR_R(0));
        else
            kn_str_printf(s, "p%lld", v);
        return;
    }
    case KN_S_LOAD:
        kn_str_printf(s, "buf%lld[", (long long)e->i);
        kn_print_expr(s, e->a[0]);
        kn_str_printf(s, "]");
        return;
    case KN_S_CAST:
        kn_str_printf(s, "%s(", kn_dtypes[e->i ? e->i : e->dt].name);
        kn_print_expr(s, e->a[0]);
        kn_str_printf(s, ")");
        return;
    default:
        break;
    }
    const char *n = kn_sops[e->op].name;
    kn_str_printf(s, "%s(", n);
    for (int j = 0; j < e->n; j++) {
        if (j)
            kn_str_printf(s, ", ");
        kn_print_expr(s, e->a[j]);
    }
    kn_str_printf(s, ")");
}

static void
dims(kn_str *s, int n, const int64_t *d)
{
    kn_str_printf(s, "[");
    for (int i = 0; i < n; i++)
        kn_str_printf(s, "%s%lld", i ? ", " : "", (long long)d[i]);
    kn_str_printf(s, "]");
}

void
kn_dump_loops(kn_ctx *c, kn_str *s)
{
    for (int st = 0; st < c->nsteps; st++) {
        kn_step *p = &c->steps[st];
        if (p->kind != KN_ST_KERNEL) {
            kn_str_printf(s, "%s %s ->", p->kind == KN_ST_LINEAR ? "linear (packed weight)" : "extern",
                          c->g.nodes[p->node].target);
            for (int j = 0; j < p->nres; j++)
                kn_str_printf(s, " buf%d", p->res[j]);
            kn_str_printf(s, "\n");
            continue;
        }
        kn_kernel *k = &c->kernels[p->kernel];
        kn_str_printf(s, "kernel %d: outer ", p->kernel);
        dims(s, k->nouter, k->outer);
        kn_str_printf(s, " inner ");
        dims(s, k->ninner, k->inner);
        kn_str_printf(s, "\n");
        for (int m = 0; m < k->nmembers; m++) {
            kn_buf *b = c->bufs[k->members[m]];
            kn_subst sub;
            kn_expr *body = b->body;
            if (!(b->kind == KN_B_REDUCTION && (b->rop == KN_R_CUMSUM || b->rop == KN_R_CUMPROD)) &&
                kn_member_map(c, k, b, &sub) == 0)
                body = kn_substitute(c, b->body, &sub);
            if (body == NULL) {
                PyErr_Clear();
                body = b->body;
            }
            kn_str_printf(s, "  buf%d %s = ", b->id, kn_dtypes[b->dt].name);
            if (b->kind == KN_B_REDUCTION)
                kn_str_printf(s, "%s_r(", rop_name[b->rop]);
            kn_print_expr(s, body);
            kn_str_printf(s, "%s   (%s%s)\n", b->kind == KN_B_REDUCTION ? ")" : "",
                          b->kind == KN_B_REDUCTION ? "reduction" : "pointwise",
                          b->local ? ", register only" : b->arena_off >= 0 ? ", arena" : ", tensor");
        }
    }
}
