/* frame.h — CPython's _PyInterpreterFrame as kiln reads and moves it, for
 * 3.11, 3.12 and 3.13 (hook.c and replay.c include it; nothing else touches
 * frames).
 *
 * Where a frame stands is one pointer that changed meaning in 3.13: 3.11 and
 * 3.12 keep `prev_instr` (the instruction that last ran; the evaluator
 * resumes at prev_instr + 1), 3.13 keeps `instr_ptr` (the instruction now
 * running or about to begin).  kiln moves a frame for three reasons, each
 * its own macro:
 *
 *   KN_FRAME_RESUME(f, i)  the evaluator continues at instruction i
 *   KN_FRAME_AT(f, i)      instruction i is the one running (f_lineno, a
 *                          traceback, sys._getframe() see its line)
 *   KN_FRAME_RAISE(f, i)   the pending exception is raised by instruction i
 *                          when the evaluator takes the frame with
 *                          throwflag set: its exception table finds the
 *                          handler from offset (resume pointer - 1)
 *
 * KN_FRAME_FRESH(f) is true for a frame whose first instruction has not run.
 */
#ifndef KILN_FRAME_H
#define KILN_FRAME_H

#include "capture/capture.h"

#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h"
#undef Py_BUILD_CORE

#ifndef CO_FAST_CELL
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80
#endif

#if KN_PY313
#define KN_FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#else
#define KN_FRAME_CODE(f) ((f)->f_code)
#endif

#if KN_PY312
#define FRAME_FUNC(f) ((PyFunctionObject *)(f)->f_funcobj)
#else
#define FRAME_FUNC(f) ((f)->f_func)
#endif

#define KN_FRAME_INSTR(f, i) (_PyCode_CODE(KN_FRAME_CODE(f)) + (i))
#if KN_PY313
#define KN_FRAME_RESUME(f, i) ((f)->instr_ptr = KN_FRAME_INSTR(f, i))
#define KN_FRAME_AT(f, i) ((f)->instr_ptr = KN_FRAME_INSTR(f, i))
#define KN_FRAME_RAISE(f, i) ((f)->instr_ptr = KN_FRAME_INSTR(f, (i) + 1))
#define KN_FRAME_FRESH(f) ((f)->instr_ptr == KN_FRAME_INSTR(f, 0))
#else
#define KN_FRAME_RESUME(f, i) ((f)->prev_instr = KN_FRAME_INSTR(f, (i) - 1))
#define KN_FRAME_AT(f, i) ((f)->prev_instr = KN_FRAME_INSTR(f, i))
#define KN_FRAME_RAISE(f, i) ((f)->prev_instr = KN_FRAME_INSTR(f, i))
#define KN_FRAME_FRESH(f) ((f)->prev_instr == KN_FRAME_INSTR(f, -1))
#endif

/* the thread's current Python frame (a field of cframe before 3.13) */
#if KN_PY313
#define KN_TS_FRAME(ts) ((ts)->current_frame)
#else
#define KN_TS_FRAME(ts) ((ts)->cframe->current_frame)
#endif

#endif
