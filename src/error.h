/* error.h -- the three kinds of failure, in C (docs/ARCHITECTURE.md,
 * "Failures"; kiln/errors.py is the Python side).
 *
 *   unsupported   a stage declines: it returns 0 (or NULL) with NO Python
 *                 exception set, and says why through a reason from an
 *                 enumerated list (capture: src/capture/breaks.def).  The
 *                 caller falls back (ATen call, graph break, eager), counted.
 *                 A step that has nothing left to fall back to (an extern
 *                 past its argument limits) calls kn_unsupported(fmt, ...):
 *                 it sets kiln._C.Unsupported and returns -1, and the whole
 *                 graph runs eagerly with that reason.
 *   user error    bad input from the user's call: a Python TypeError or
 *                 ValueError set where the user called kiln, saying what to
 *                 do; return -1 (or NULL).
 *   internal      a kiln bug: an invariant broken.  KN_ASSERT(cond) sets
 *                 kiln._C.InternalError naming the file, line and condition
 *                 and returns -1 (KN_ASSERT_NULL: NULL) from the function;
 *                 Python raises it under KILN_DEBUG and in the tests, else
 *                 warns once and runs that graph or frame eagerly.
 *
 * KN_ASSERT checks in KN_CHECKED builds (make asan; KILN_CHECKED=1 at build
 * time) and compiles to nothing otherwise, so it may guard hot paths.
 * KN_INTERNAL(fmt, ...) reports an internal error unconditionally (a state
 * that no input can reach, detected where the check costs nothing).
 */
#ifndef KN_ERROR_H
#define KN_ERROR_H

#include <Python.h>

/* sets kiln._C.InternalError ("kiln internal error at file:line: what");
 * returns -1 so that `return kn_internal(...)` reads naturally */
int kn_internal(const char *file, int line, const char *fmt, ...);
PyObject *kn_internal_error_type(void);   /* kiln._C.InternalError (created on first use) */

#define KN_INTERNAL(...) kn_internal(__FILE__, __LINE__, __VA_ARGS__)

/* sets kiln._C.Unsupported (the graph falls back, with this reason); -1 */
int kn_unsupported(const char *fmt, ...);
PyObject *kn_unsupported_type(void);   /* kiln._C.Unsupported (created on first use) */

#ifdef KN_CHECKED
#define KN_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond))                                                          \
            return kn_internal(__FILE__, __LINE__, "assertion failed: %s", #cond); \
    } while (0)
#define KN_ASSERT_NULL(cond)                                                  \
    do {                                                                      \
        if (!(cond)) {                                                        \
            kn_internal(__FILE__, __LINE__, "assertion failed: %s", #cond);   \
            return NULL;                                                      \
        }                                                                     \
    } while (0)
#else
#define KN_ASSERT(cond) ((void)0)
#define KN_ASSERT_NULL(cond) ((void)0)
#endif

#endif
