/* params.c — a size's parameter values read off its generated source
 * against a parametric build (issue 17; kiln/kernel_params.py).
 *
 * Consumes: a build's match plan, packed once by kernel_params.Build into
 * bytes (steps in source order, each a kind byte, a little-endian uint32
 * parameter index and uint32 length, then that many bytes of text), and a
 * size's generated source (an ASCII str).  Produces: (ints, floats), the
 * values of the build's parameters under which it computes what the
 * source does, or None where the source is not the build's text but for
 * its parameters' literals and OpenMP splits.
 *
 * It is `Build._match_plain` (kernel_params.py, the reference, compared
 * with it under KILN_DEBUG and in tests/compile/test_parametric.py) in C:
 * the match ran once per new size, ~400 steps through Python's regex
 * engine for BERT's CUDA program (~1 ms of a ~7 ms size plan).  Steps:
 *   text     the build's text between literals, compared as it is
 *   split    an outer loop's OpenMP pragma (taken: 1), its kn:serial
 *            comment or nothing (not taken: 0), whitespace around it
 *   int, long, i64, f64, f32   a literal of that C class (kernel_params
 *            `_literal`: a plain decimal up to INT_MAX, one past it, an
 *            INT64_C(n), a double, a float with its f): a parameter
 *            appearing twice must read the same value both times.
 * A literal's number is its longest spelling and must not run on into a
 * word character or a point, as the Python match's lookahead requires.
 */
#include "../kiln.h"
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { P_TEXT, P_SPLIT, P_INT, P_LONG, P_I64, P_F64, P_F32 };

static int
is_word(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

static int
is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Python's \s over ASCII: space, \t \n \v \f \r and \x1c-\x1f */
static size_t
skip_ws(const char *s, size_t n, size_t pos)
{
    while (pos < n && (s[pos] == ' ' || (s[pos] >= '\t' && s[pos] <= '\r') || (s[pos] >= 0x1c && s[pos] <= 0x1f)))
        pos++;
    return pos;
}

/* The longest decimal number at s[pos] (digits, a point, digits, an
 * exponent with at least one digit), with `fsuffix` an f or F after it;
 * its end, or 0 where there is none or it runs on into a word character or
 * a point.  *real: it has a point or an exponent. */
static size_t
number_end(const char *s, size_t n, size_t pos, int fsuffix, int *real)
{
    size_t p = pos, d0;
    *real = 0;
    while (p < n && is_digit(s[p]))
        p++;
    d0 = p - pos;
    if (p < n && s[p] == '.') {
        size_t q = p + 1;
        while (q < n && is_digit(s[q]))
            q++;
        if (d0 == 0 && q == p + 1)
            return 0;   /* a point alone */
        p = q;
        *real = 1;
    } else if (d0 == 0) {
        return 0;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < n && (s[q] == '+' || s[q] == '-'))
            q++;
        if (q < n && is_digit(s[q])) {
            while (q < n && is_digit(s[q]))
                q++;
            p = q;
            *real = 1;
        }
    }
    if (fsuffix) {
        if (p >= n || (s[p] != 'f' && s[p] != 'F'))
            return 0;
        p++;
    }
    if (p < n && (is_word(s[p]) || s[p] == '.'))
        return 0;
    return p;
}

/* a run of decimal digits (optionally after a minus) as an int64: 0 on overflow */
static int
parse_i64(const char *s, size_t a, size_t b, int64_t *out)
{
    int neg = a < b && s[a] == '-';
    if (neg)
        a++;
    if (a >= b)
        return 0;
    uint64_t v = 0;
    for (size_t i = a; i < b; i++) {
        if (!is_digit(s[i]))
            return 0;
        if (v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
        return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

/* numbers are read in the C locale whatever the process's LC_NUMERIC (the
 * generated code's decimal point is a point); a float literal is rounded
 * once, from its decimal, as a C compiler rounds it (kernel_params._f32) */
static locale_t c_locale;

static int
read_real(const char *buf, int f32, double *out)
{
    if (c_locale == (locale_t)0)
        c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0)
        return 0;
    *out = f32 ? (double)strtof_l(buf, NULL, c_locale) : strtod_l(buf, NULL, c_locale);
    return isfinite(*out);
}

static uint32_t
u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* match_params(plan, source, nints, nfloats) -> (ints, floats) or None */
PyObject *
kn_py_match_params(PyObject *self, PyObject *args)
{
    Py_buffer plan;
    PyObject *source;
    Py_ssize_t nints, nfloats;
    if (!PyArg_ParseTuple(args, "y*Unn", &plan, &source, &nints, &nfloats))
        return NULL;
    PyObject *result = NULL;
    int64_t *iv = NULL;
    double *fv = NULL;
    char *iset = NULL, *fset = NULL;
    if (nints < 0 || nfloats < 0 || !PyUnicode_IS_ASCII(source)) {
        PyErr_SetString(PyExc_ValueError, "match_params: counts >= 0 and an ASCII source");
        goto done;
    }
    iv = calloc((size_t)nints + 1, sizeof(int64_t));
    fv = calloc((size_t)nfloats + 1, sizeof(double));
    iset = calloc((size_t)nints + 1, 1);
    fset = calloc((size_t)nfloats + 1, 1);
    if (!iv || !fv || !iset || !fset) {
        PyErr_NoMemory();
        goto done;
    }
    const char *s = (const char *)PyUnicode_DATA(source);
    size_t n = (size_t)PyUnicode_GET_LENGTH(source), pos = 0;
    const unsigned char *p = plan.buf, *pend = p + plan.len;
    int ok = 1;
    while (ok && p < pend) {
        if (pend - p < 9) {
            PyErr_SetString(PyExc_ValueError, "match_params: a truncated plan");
            goto done;
        }
        int kind = p[0];
        uint32_t j = u32_at(p + 1), len = u32_at(p + 5);
        const char *text = (const char *)p + 9;
        p += 9;
        if ((size_t)(pend - p) < len || kind > P_F32 || (kind != P_TEXT && kind != P_F64 && kind != P_F32 &&
                                                          j >= (uint32_t)nints) ||
            ((kind == P_F64 || kind == P_F32) && j >= (uint32_t)nfloats)) {
            PyErr_SetString(PyExc_ValueError, "match_params: a malformed plan");
            goto done;
        }
        p += len;
        switch (kind) {
        case P_TEXT:
            if (n - pos < len || memcmp(s + pos, text, len) != 0)
                ok = 0;
            else
                pos += len;
            break;
        case P_SPLIT:
            pos = skip_ws(s, n, pos);
            if (n - pos >= len && memcmp(s + pos, text, len) == 0) {
                iv[j] = 1;
                pos += len;
            } else {
                iv[j] = 0;
                /* "/ * kn:serial " + pragma + " * /" (13 + len + 3 bytes) */
                if (n - pos >= (size_t)len + 16 && memcmp(s + pos, "/* kn:serial ", 13) == 0 &&
                    memcmp(s + pos + 13, text, len) == 0 && memcmp(s + pos + 13 + len, " */", 3) == 0)
                    pos += (size_t)len + 16;
            }
            iset[j] = 1;
            pos = skip_ws(s, n, pos);
            break;
        case P_INT:
        case P_LONG: {
            size_t e = pos;
            while (e < n && is_digit(s[e]))
                e++;
            int64_t v;
            if (e == pos || (e < n && (is_word(s[e]) || s[e] == '.')) || (e - pos > 1 && s[pos] == '0') ||
                !parse_i64(s, pos, e, &v) || (kind == P_INT) != (v <= 2147483647)) {
                ok = 0;
                break;
            }
            if (iset[j] && iv[j] != v) {
                ok = 0;
                break;
            }
            iv[j] = v;
            iset[j] = 1;
            pos = e;
            break;
        }
        case P_I64: {
            if (n - pos < 9 || memcmp(s + pos, "INT64_C(", 8) != 0) {
                ok = 0;
                break;
            }
            size_t a = pos + 8, e = a;
            if (e < n && s[e] == '-')
                e++;
            while (e < n && is_digit(s[e]))
                e++;
            int64_t v;
            if (e >= n || s[e] != ')' || !parse_i64(s, a, e, &v) || (iset[j] && iv[j] != v)) {
                ok = 0;
                break;
            }
            iv[j] = v;
            iset[j] = 1;
            pos = e + 1;
            break;
        }
        case P_F64:
        case P_F32: {
            int real;
            size_t e = number_end(s, n, pos, kind == P_F32, &real);
            if (e == 0 || !real || e - pos > 400) {
                ok = 0;
                break;
            }
            char buf[402];
            size_t l = e - pos - (kind == P_F32);
            memcpy(buf, s + pos, l);
            buf[l] = 0;
            double v;
            if (!read_real(buf, kind == P_F32, &v) || (fset[j] && fv[j] != v)) {
                ok = 0;   /* (an overflowing literal: the size is built on its own) */
                break;
            }
            fv[j] = v;
            fset[j] = 1;
            pos = e;
            break;
        }
        }
    }
    if (!ok || pos != n) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *it = PyTuple_New(nints), *ft = PyTuple_New(nfloats);
    for (Py_ssize_t i = 0; it && ft && i < nints; i++) {
        PyObject *x = PyLong_FromLongLong(iv[i]);
        if (x == NULL) {
            Py_CLEAR(it);
            break;
        }
        PyTuple_SET_ITEM(it, i, x);
    }
    for (Py_ssize_t i = 0; it && ft && i < nfloats; i++) {
        PyObject *x = PyFloat_FromDouble(fv[i]);
        if (x == NULL) {
            Py_CLEAR(ft);
            break;
        }
        PyTuple_SET_ITEM(ft, i, x);
    }
    if (it && ft)
        result = PyTuple_Pack(2, it, ft);
    Py_XDECREF(it);
    Py_XDECREF(ft);
done:
    free(iv);
    free(fv);
    free(iset);
    free(fset);
    PyBuffer_Release(&plan);
    return result;
}
