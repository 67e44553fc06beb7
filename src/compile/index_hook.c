/* index_hook.c — test hooks: kiln._C.index_expr, the index algebra of
 * expr.c callable from the tests (tests/compile/test_index_algebra.py), and
 * kiln._C.test_fault, a deliberately broken code generator (the failure
 * taxonomy's tests, tests/compile/test_backend.py).
 *
 * Consumes: an index expression as nested tuples:
 *   ("v", n, extent)   loop variable n (printed p<n>; 0 <= value < extent)
 *   ("c", k)           the integer k
 *   ("+", a, b)        kn_iadd
 *   ("*", a, k)        kn_imul by the integer k
 *   ("//", a, k)       kn_idiv (floor division of a >= 0 by k > 0)
 *   ("%", a, k)        kn_imod
 * Produces: the canonical expression kn_iadd/... build, printed as
 * KILN_DUMP=loops prints it (kn_print_expr).  Not used by the pipeline.
 */
#include "../kiln.h"
#include "../error.h"
#include <string.h>

static kn_expr *
build_expr(kn_ctx *c, PyObject *spec, int depth)
{
    if (depth > 64) {
        PyErr_SetString(PyExc_ValueError, "kiln: index_expr nested too deeply");
        return NULL;
    }
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(spec, 0))) {
        PyErr_SetString(PyExc_TypeError, "kiln: index_expr takes (op, ...) tuples");
        return NULL;
    }
    const char *op = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 0));
    Py_ssize_t n = PyTuple_GET_SIZE(spec);
    if (op == NULL)
        return NULL;
    if (strcmp(op, "v") == 0 && n == 3) {
        long long num = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 1));
        long long ext = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 2));
        if (PyErr_Occurred())
            return NULL;
        if (num < 0 || num >= KN_VAR_R(0) || ext < 1) {
            PyErr_SetString(PyExc_ValueError, "kiln: index_expr variable number 0..15, extent >= 1");
            return NULL;
        }
        return kn_var(c, num, ext);
    }
    if (strcmp(op, "c") == 0 && n == 2) {
        long long k = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 1));
        return PyErr_Occurred() ? NULL : kn_iconst(c, k);
    }
    if (n != 3) {
        PyErr_Format(PyExc_ValueError, "kiln: index_expr: bad node (%s with %zd items)", op, n);
        return NULL;
    }
    kn_expr *a = build_expr(c, PyTuple_GET_ITEM(spec, 1), depth + 1);
    if (a == NULL)
        return NULL;
    if (strcmp(op, "+") == 0) {
        kn_expr *b = build_expr(c, PyTuple_GET_ITEM(spec, 2), depth + 1);
        return b ? kn_iadd(c, a, b) : NULL;
    }
    long long k = PyLong_AsLongLong(PyTuple_GET_ITEM(spec, 2));
    if (PyErr_Occurred())
        return NULL;
    if (strcmp(op, "*") == 0)
        return kn_imul(c, a, k);
    if ((strcmp(op, "//") == 0 || strcmp(op, "%") == 0) && k < 1) {
        PyErr_SetString(PyExc_ValueError, "kiln: index_expr divides by a positive integer");
        return NULL;
    }
    if (strcmp(op, "//") == 0)
        return kn_idiv(c, a, k);
    if (strcmp(op, "%") == 0)
        return kn_imod(c, a, k);
    PyErr_Format(PyExc_ValueError, "kiln: index_expr: unknown op %s", op);
    return NULL;
}

PyObject *
kn_py_index_expr(PyObject *self, PyObject *spec)
{
    kn_ctx c;
    memset(&c, 0, sizeof c);
    kn_str s = {0};
    PyObject *out = NULL;
    kn_expr *e = build_expr(&c, spec, 0);
    if (e != NULL) {
        kn_print_expr(&s, e);
        out = s.oom ? PyErr_NoMemory() : PyUnicode_FromStringAndSize(s.p ? s.p : "", (Py_ssize_t)s.n);
    } else if (!PyErr_Occurred()) {
        KN_INTERNAL("index_expr: an index op returned NULL without an exception");
    }
    kn_str_free(&s);
    free(c.table);
    kn_subst_memo_free(&c);
    kn_arena_free(&c.arena);
    return out;
}

/* kiln._C.test_fault(name): "bad_expr" sets kn_fault_bad_expr (emit.c then
   renders every addition as an invalid C expression); None clears it. */
int kn_fault_bad_expr;

PyObject *
kn_py_test_fault(PyObject *self, PyObject *name)
{
    if (name == Py_None) {
        kn_fault_bad_expr = 0;
        Py_RETURN_NONE;
    }
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (s == NULL || strcmp(s, "bad_expr") != 0) {
        if (!PyErr_Occurred() || s != NULL)
            PyErr_SetString(PyExc_ValueError, "kiln: test_fault takes 'bad_expr' or None");
        return NULL;
    }
    kn_fault_bad_expr = 1;
    Py_RETURN_NONE;
}
