/* error.c -- kiln._C.InternalError and kn_internal, kiln._C.Unsupported and
 * kn_unsupported (src/error.h).
 * Consumes: a file, a line and a message (a reason).  Produces: a Python
 * exception of type kiln._C.InternalError (a subclass of RuntimeError) or
 * kiln._C.Unsupported, set as the current error. */
#include "error.h"

#include <stdarg.h>
#include <string.h>

/* *slot, made on first use (a new reference kept for the process) */
static PyObject *
exception_type(PyObject **slot, const char *name, const char *doc, PyObject *base)
{
    if (*slot == NULL)
        *slot = PyErr_NewExceptionWithDoc(name, doc, base, NULL);
    return *slot;
}

static PyObject *internal_error, *unsupported_error;

PyObject *
kn_internal_error_type(void)
{
    return exception_type(&internal_error, "kiln._C.InternalError",
                          "A kiln bug: an invariant of kiln's C core was broken.  Raised under KILN_DEBUG; "
                          "otherwise kiln warns once and runs the graph or frame eagerly.",
                          PyExc_RuntimeError);
}

PyObject *
kn_unsupported_type(void)
{
    return exception_type(&unsupported_error, "kiln._C.Unsupported",
                          "kiln's C core cannot compile this graph (the message is the reason); the graph runs "
                          "eagerly, counted as a fallback.  Never reaches the user.",
                          PyExc_Exception);
}

/* Sets `type` (NULL: creating it failed, its error is set) with the
   message fmt/ap, prefixed by "kiln internal error at <where>: " when where
   is given.  Always -1. */
static int
set_error(PyObject *type, const char *where, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (type == NULL)
        return -1;
    if (where)
        PyErr_Format(type, "kiln internal error at %s: %s", where, msg);
    else
        PyErr_SetString(type, msg);
    return -1;
}

int
kn_internal(const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    char where[256];
    snprintf(where, sizeof where, "%s:%d", base ? base + 1 : file, line);
    va_list ap;
    va_start(ap, fmt);
    set_error(kn_internal_error_type(), where, fmt, ap);
    va_end(ap);
    return -1;
}

int
kn_unsupported(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(kn_unsupported_type(), NULL, fmt, ap);
    va_end(ap);
    return -1;
}
