/* runtime.h — the runtime's API: what module.c and the runtime files call
 * across file boundaries (everything else in src/runtime/ is static).
 *
 *   load.c   generated C -> a cached, loaded shared object (kiln._C.build)
 *   run.c    the step loop: kiln._C.Program, kiln._C.Library, torch wiring
 *   cuda.c   NVRTC and the CUDA driver, loaded with dlopen: kiln._C.CudaModule,
 *            launches and the device-side error record for run.c
 *
 * Failures follow src/error.h: a function returning int gives -1 (a pointer
 * NULL) with a Python exception set.
 */
#ifndef KN_RUNTIME_H
#define KN_RUNTIME_H
#include "../kiln.h"

/* ---------------------------------------------------------------- load.c */
/* kiln._C.build(units, cache_dir, cc, cflags, salt, jobs) -> (so_path, was_cached) */
PyObject *kn_py_build(PyObject *self, PyObject *args);
/* kiln._C.CompilerError: the system C compiler is missing or failed
   (created on first use; borrowed) */
PyObject *kn_compiler_error_type(void);
PyObject *kn_toolchain_missing_type(void);   /* a CompilerError: no compiler to run */
PyObject *kn_compiler_timeout_type(void);    /* a CompilerError: the compiler was stopped after cc_timeout */

/* ---------------------------------------------------------------- run.c */
extern PyTypeObject kn_LibraryType;    /* kiln._C.Library(path): a dlopen'ed shared object */
extern PyTypeObject kn_ProgramType;    /* kiln._C.Program: a compiled graph, callable once loaded */
/* A Program from a finished compilation (lowered, fused, planned; source
   and KILN_DUMP=loops text generated); copies what it needs from c. */
PyObject *kn_program_new(kn_ctx *c, PyObject *desc, PyObject *source, PyObject *loops, PyObject *forms,
                         PyObject *fusion);
/* kiln._C.set_runtime / set_fast_runtime / set_cuda_stream / set_linear_mode:
   torch's entry points, handed over once by kiln's Python shell */
PyObject *kn_py_set_runtime(PyObject *self, PyObject *args);
PyObject *kn_py_set_fast_runtime(PyObject *self, PyObject *args);
PyObject *kn_py_set_cuda_stream(PyObject *self, PyObject *fn);
PyObject *kn_py_set_linear_mode(PyObject *self, PyObject *arg);
PyObject *kn_py_runtime_reset(PyObject *self, PyObject *unused);   /* linear choices, shared packings */
int kn_runtime_packed_linear(void);    /* oneDNN's packed linear is available */

/* ---------------------------------------------------------------- cuda.c */
extern PyTypeObject kn_CudaModuleType; /* kiln._C.CudaModule: a loaded cubin */
/* kiln._C.cuda_available(nvrtc_path=None) -> (usable, reason, nvrtc_version) */
PyObject *kn_py_cuda_available(PyObject *self, PyObject *args);
/* kiln._C.nvrtc_compile(source, arch, nvrtc_path=None) -> (cubin, log) */
PyObject *kn_py_nvrtc_compile(PyObject *self, PyObject *args);
/* for run.c: kernels of a loaded module and their launches */
int kn_cuda_is_module(PyObject *o);
void *kn_cuda_function(PyObject *mod, const char *name);   /* CUfunction, or NULL */
int kn_cuda_launch(void *fn, unsigned blocks, unsigned threads, uintptr_t stream, void **params);
/* `reps` timed launches: ms per launch in *ms; 1 when the driver has no
   events (nothing timed) */
int kn_cuda_time_launch(void *fn, unsigned blocks, unsigned threads, uintptr_t stream, void **params, int reps,
                        float *ms);
/* 1 when `stream` is being captured into a CUDA graph, else 0 */
int kn_cuda_capturing(uintptr_t stream);
/* the error record (int64[3] of device memory): zero it on `stream`; read
   it after the stream's work (1: the stream is capturing, not read); read
   it now (the caller has waited) */
int kn_cuda_clear(void *dptr, size_t bytes, uintptr_t stream);
int kn_cuda_read_error(void *dptr, int64_t *host, uintptr_t stream);
int kn_cuda_read_now(void *dptr, int64_t *host);
/* its asynchronous read: post() queues a copy into pinned host memory and
   an event; poll() looks at the copy once the event has completed (no wait) */
void *kn_cuda_errcopy_new(void);
void kn_cuda_errcopy_free(void *c);
int kn_cuda_errcopy_post(void *c, void *dptr, uintptr_t stream);
int kn_cuda_errcopy_poll(void *c, int64_t *out);

#endif
