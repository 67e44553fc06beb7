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

int
kn_internal(const char *file, int line, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    PyObject *type = kn_internal_error_type();
    if (type == NULL)
        return -1;   /* (the MemoryError creating it is set) */
    const char *base = strrchr(file, '/');
    PyErr_Format(type, "kiln internal error at %s:%d: %s", base ? base + 1 : file, line, what);
    return -1;
}

int
kn_unsupported(const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    PyObject *type = kn_unsupported_type();
    if (type == NULL)
        return -1;
    PyErr_SetString(type, why);
    return -1;
}
