/* cuda.c — NVRTC and the CUDA driver, loaded at run time (issue 4's runtime).
 *
 * Consumes: CUDA C source text.  Produces: a loaded module of native device
 * code (a cubin for the current device's architecture, never PTX left to the
 * driver's JIT) whose kernels launch on a stream the caller names, normally
 * torch's current stream, so kiln's kernels order with torch's own work and
 * compose with CUDA graph capture.
 *
 * It also clears and reads back a program's error record (a few bytes of
 * device memory its index-checking kernels write; see runtime/run.c): with a
 * wait for the stream (sync mode), or as a copy into pinned host memory and
 * an event, both queued on the stream and looked at later without a wait
 * (async mode, the default).
 *
 * Nothing is linked: libcuda.so.1 and libnvrtc are opened with dlopen (the
 * NVRTC path comes from kiln/cuda.py, which finds the copy torch's CUDA build
 * ships).  On a machine without them, kiln._C.cuda_available() says why and
 * the caller runs on ATen.
 */
#include "runtime.h"
#include "error.h"

#include <dlfcn.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* One line per entry point: name, return type, arguments. */
#define KN_CU_FUNCS(X)                                                                                     \
    X(cuInit, CUresult, (unsigned))                                                                        \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                                            \
    X(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                                              \
    X(cuCtxGetCurrent, CUresult, (CUcontext *))                                                            \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                              \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                         \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                              \
    X(cuModuleUnload, CUresult, (CUmodule))                                                                \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                               \
    X(cuLaunchKernel, CUresult,                                                                            \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, \
       void **))                                                                                           \
    X(cuGetErrorString, CUresult, (CUresult, const char **))

#define KN_NVRTC_FUNCS(X)                                                                                  \
    X(nvrtcCreateProgram, nvrtcResult,                                                                     \
      (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *))         \
    X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char *const *))                          \
    X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t *))                                      \
    X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char *))                                             \
    X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t *))                                            \
    X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char *))                                                  \
    X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram *))                                                  \
    X(nvrtcVersion, nvrtcResult, (int *, int *))                                                           \
    X(nvrtcGetErrorString, const char *, (nvrtcResult))

/* NVRTC's entry points.  NVRTC alone (no driver, no GPU) compiles CUDA C to
   a cubin for a named architecture, which lets machines without a GPU check
   what kiln generates; a failure to load it is reported by its own error. */
static struct {
#define X(name, ret, args) ret(*name) args;
    KN_NVRTC_FUNCS(X)
#undef X
    int ready;              /* 1 loaded, -1 failed (why in error) */
    char error[512];
} nv;

static int
nvrtc_load(const char *nvrtc_path)
{
    if (nv.ready)
        return nv.ready;
    void *ln = dlopen(nvrtc_path && *nvrtc_path ? nvrtc_path : "libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (ln == NULL) {
        snprintf(nv.error, sizeof nv.error, "no NVRTC (%s): %s", nvrtc_path ? nvrtc_path : "libnvrtc.so", dlerror());
        return nv.ready = -1;
    }
#define X(name, ret, args)                                                          \
    *(void **)&nv.name = dlsym(ln, #name);                                          \
    if (nv.name == NULL) {                                                          \
        snprintf(nv.error, sizeof nv.error, "missing NVRTC entry point %s", #name); \
        return nv.ready = -1;                                                       \
    }
    KN_NVRTC_FUNCS(X)
#undef X
    return nv.ready = 1;
}

/* The driver's entry points, usable once NVRTC is loaded too. */
static struct {
#define X(name, ret, args) ret(*name) args;
    KN_CU_FUNCS(X)
#undef X
    int ready;              /* 1 loaded, -1 failed (why in error) */
    char error[512];
} cu;

static int
cuda_load(const char *nvrtc_path)
{
    if (cu.ready)
        return cu.ready;
    void *lc = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lc == NULL) {
        snprintf(cu.error, sizeof cu.error, "no CUDA driver (libcuda.so.1): %s", dlerror());
        return cu.ready = -1;
    }
    if (nvrtc_load(nvrtc_path) < 0) {
        snprintf(cu.error, sizeof cu.error, "%s", nv.error);
        return cu.ready = -1;
    }
#define X(name, ret, args)                                                         \
    *(void **)&cu.name = dlsym(lc, #name);                                         \
    if (cu.name == NULL) {                                                         \
        snprintf(cu.error, sizeof cu.error, "missing CUDA entry point %s", #name); \
        return cu.ready = -1;                                                      \
    }
    KN_CU_FUNCS(X)
#undef X
    if (cu.cuInit(0) != 0) {
        snprintf(cu.error, sizeof cu.error, "cuInit failed: no usable GPU");
        return cu.ready = -1;
    }
    return cu.ready = 1;
}

static int
cu_check(CUresult r, const char *what)
{
    if (r == 0)
        return 0;
    const char *msg = NULL;
    if (cu.cuGetErrorString)
        cu.cuGetErrorString(r, &msg);
    PyErr_Format(PyExc_RuntimeError, "kiln: %s failed: CUDA error %d (%s)", what, r, msg ? msg : "?");
    return -1;
}

/* Make the device's primary context current (torch uses the same one). */
static int
use_device(int device)
{
    CUcontext ctx = NULL;
    if (cu_check(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent") < 0)
        return -1;
    if (ctx != NULL)
        return 0;
    CUdevice dev;
    if (cu_check(cu.cuDeviceGet(&dev, device), "cuDeviceGet") < 0 ||
        cu_check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") < 0 ||
        cu_check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent") < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ CudaModule */

typedef struct {
    PyObject_HEAD
    CUmodule mod;
    PyObject *cubin;      /* bytes: the native code, for the disk cache and inspection */
    PyObject *funcs;      /* dict name -> capsule(CUfunction) */
    PyObject *log;        /* NVRTC's log (warnings) */
    int arch;             /* e.g. 90 */
} kn_cudamod;

static PyObject *
compile_cubin(const char *src, int arch, const char *extra, PyObject **log_out)
{
    nvrtcProgram prog;
    nvrtcResult rc = nv.nvrtcCreateProgram(&prog, src, "kiln.cu", 0, NULL, NULL);
    if (rc != 0) {
        PyErr_Format(PyExc_RuntimeError, "kiln: nvrtcCreateProgram: %s", nv.nvrtcGetErrorString(rc));
        return NULL;
    }
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=sm_%d", arch);
    /* extra: one more option (kiln passes --Ofast-compile=min, see
       kiln/config.py), dropped if this NVRTC does not know it */
    const char *opts[] = {archopt, "--std=c++17", "-default-device", extra};
    int nopts = extra && *extra ? 4 : 3;
    /* the GIL is released: a graph's kernels compile as several programs
       on several threads (kiln/cuda.py) */
    Py_BEGIN_ALLOW_THREADS
    rc = nv.nvrtcCompileProgram(prog, nopts, opts);
    if (rc == 5 /* NVRTC_ERROR_INVALID_OPTION */ && nopts == 4) {
        nv.nvrtcDestroyProgram(&prog);
        rc = nv.nvrtcCreateProgram(&prog, src, "kiln.cu", 0, NULL, NULL);
        if (rc == 0)
            rc = nv.nvrtcCompileProgram(prog, 3, opts);
    }
    Py_END_ALLOW_THREADS
    size_t lsz = 0;
    nv.nvrtcGetProgramLogSize(prog, &lsz);
    char *log = PyMem_Malloc(lsz + 1);
    if (log) {
        log[0] = 0;
        nv.nvrtcGetProgramLog(prog, log);
        log[lsz] = 0;
        *log_out = PyUnicode_DecodeUTF8(log, (Py_ssize_t)strlen(log), "replace");
        PyMem_Free(log);
    }
    PyObject *cubin = NULL;
    if (rc != 0) {
        PyErr_Format(PyExc_RuntimeError, "kiln: NVRTC could not compile the kernels: %s\n%S",
                     nv.nvrtcGetErrorString(rc), *log_out ? *log_out : Py_None);
    } else {
        size_t n = 0;
        if (nv.nvrtcGetCUBINSize(prog, &n) == 0 && n > 0 && (cubin = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n)))
            nv.nvrtcGetCUBIN(prog, PyBytes_AS_STRING(cubin));
        else if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "kiln: NVRTC produced no cubin");
    }
    nv.nvrtcDestroyProgram(&prog);
    return cubin;
}

static int
cudamod_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "names", "device", "nvrtc", "cubin", "options", NULL};
    kn_cudamod *m = (kn_cudamod *)self;
    const char *src, *nvrtc = NULL, *options = NULL;
    PyObject *names, *cubin = Py_None;
    int device = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|izOz", kwlist, &src, &names, &device, &nvrtc, &cubin, &options))
        return -1;
    if (cuda_load(nvrtc) < 0) {
        PyErr_Format(PyExc_RuntimeError, "kiln: CUDA is not usable here: %s", cu.error);
        return -1;
    }
    if (use_device(device) < 0)
        return -1;
    CUdevice dev;
    int major = 0, minor = 0;
    if (cu_check(cu.cuDeviceGet(&dev, device), "cuDeviceGet") < 0 ||
        cu_check(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attribute") <
            0 ||
        cu_check(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attribute") < 0)
        return -1;
    m->arch = major * 10 + minor;
    if (cubin != Py_None && PyBytes_Check(cubin)) {
        m->cubin = Py_NewRef(cubin);   /* from the disk cache */
    } else {
        m->cubin = compile_cubin(src, m->arch, options, &m->log);
        if (m->cubin == NULL)
            return -1;
    }
    if (cu_check(cu.cuModuleLoadData(&m->mod, PyBytes_AS_STRING(m->cubin)), "cuModuleLoadData") < 0)
        return -1;
    m->funcs = PyDict_New();
    PyObject *it = m->funcs ? PyObject_GetIter(names) : NULL, *name;
    if (it == NULL)
        return -1;
    while ((name = PyIter_Next(it))) {
        CUfunction fn;
        const char *s = PyUnicode_AsUTF8(name);
        if (s == NULL || cu_check(cu.cuModuleGetFunction(&fn, m->mod, s), s) < 0) {
            Py_DECREF(name);
            Py_DECREF(it);
            return -1;
        }
        PyObject *cap = PyCapsule_New((void *)fn, "kn_cufunction", NULL);
        int rc = cap ? PyDict_SetItem(m->funcs, name, cap) : -1;
        Py_XDECREF(cap);
        Py_DECREF(name);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static void
cudamod_dealloc(PyObject *self)
{
    kn_cudamod *m = (kn_cudamod *)self;
    if (m->mod && cu.cuModuleUnload)
        cu.cuModuleUnload(m->mod);
    Py_XDECREF(m->cubin);
    Py_XDECREF(m->funcs);
    Py_XDECREF(m->log);
    Py_TYPE(self)->tp_free(self);
}

/* launch(name, grid, block, fmt, values, stream, shared=0): fmt has one letter
 * per kernel argument: p pointer (an int address), i int32, l int64, f float32,
 * d float64. */
static PyObject *
cudamod_launch(PyObject *self, PyObject *args)
{
    kn_cudamod *m = (kn_cudamod *)self;
    PyObject *name, *values;
    unsigned g[3], b[3], shared = 0;
    const char *fmt;
    unsigned long long stream;
    if (!PyArg_ParseTuple(args, "O(III)(III)sOK|I", &name, &g[0], &g[1], &g[2], &b[0], &b[1], &b[2], &fmt, &values,
                          &stream, &shared))
        return NULL;
    PyObject *cap = PyDict_GetItemWithError(m->funcs, name);
    if (cap == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "kiln: no kernel %R in this module", name);
        return NULL;
    }
    Py_ssize_t n = (Py_ssize_t)strlen(fmt);
    if (!PySequence_Check(values) || PySequence_Size(values) != n || n > 64) {
        PyErr_SetString(PyExc_ValueError, "kiln: launch needs one value per format letter (at most 64)");
        return NULL;
    }
    union {
        unsigned long long p;
        int i;
        long long l;
        float f;
        double d;
    } store[64];
    void *ptrs[64];
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PySequence_GetItem(values, k);
        if (v == NULL)
            return NULL;
        switch (fmt[k]) {
        case 'p': store[k].p = PyLong_AsUnsignedLongLong(v); break;
        case 'i': store[k].i = (int)PyLong_AsLong(v); break;
        case 'l': store[k].l = PyLong_AsLongLong(v); break;
        case 'f': store[k].f = (float)PyFloat_AsDouble(v); break;
        case 'd': store[k].d = PyFloat_AsDouble(v); break;
        default:
            Py_DECREF(v);
            PyErr_Format(PyExc_ValueError, "kiln: unknown kernel argument kind %c", fmt[k]);
            return NULL;
        }
        Py_DECREF(v);
        if (PyErr_Occurred())
            return NULL;
        ptrs[k] = &store[k];
    }
    CUfunction fn = (CUfunction)PyCapsule_GetPointer(cap, "kn_cufunction");
    if (fn == NULL)
        return NULL;
    CUresult r;
    Py_BEGIN_ALLOW_THREADS
    r = cu.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], shared, (CUstream)(uintptr_t)stream, ptrs, NULL);
    Py_END_ALLOW_THREADS
    if (cu_check(r, "cuLaunchKernel") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
cudamod_get_cubin(PyObject *self, void *unused)
{
    return Py_NewRef(((kn_cudamod *)self)->cubin);
}

static PyObject *
cudamod_get_log(PyObject *self, void *unused)
{
    PyObject *l = ((kn_cudamod *)self)->log;
    return Py_NewRef(l ? l : Py_None);
}

static PyObject *
cudamod_get_arch(PyObject *self, void *unused)
{
    return PyLong_FromLong(((kn_cudamod *)self)->arch);
}

static PyMethodDef cudamod_methods[] = {
    {"launch", cudamod_launch, METH_VARARGS,
     "launch(name, grid, block, fmt, values, stream, shared=0): launch a kernel on a CUDA stream."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cudamod_getset[] = {
    {"cubin", cudamod_get_cubin, NULL, "the module's native code (an ELF cubin)", NULL},
    {"log", cudamod_get_log, NULL, "NVRTC's compile log", NULL},
    {"arch", cudamod_get_arch, NULL, "the compute capability compiled for, e.g. 90", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject kn_CudaModuleType = {
    KN_TYPE_HEAD("CudaModule", kn_cudamod, Py_TPFLAGS_DEFAULT,
                 "CUDA C compiled by NVRTC to native code for the current device, loaded through the driver API."),
    .tp_new = PyType_GenericNew,
    .tp_init = cudamod_init,
    .tp_dealloc = cudamod_dealloc,
    .tp_methods = cudamod_methods,
    .tp_getset = cudamod_getset,
};

/* cuda_available(nvrtc_path) -> (bool, reason, nvrtc_version) */
PyObject *
kn_py_cuda_available(PyObject *self, PyObject *args)
{
    const char *path = NULL;
    if (!PyArg_ParseTuple(args, "|z", &path))
        return NULL;
    if (cuda_load(path) < 0)
        return Py_BuildValue("(Os(ii))", Py_False, cu.error, 0, 0);
    int major = 0, minor = 0;
    nv.nvrtcVersion(&major, &minor);
    return Py_BuildValue("(Os(ii))", Py_True, "", major, minor);
}

/* nvrtc_compile(source, arch, nvrtc_path=None, options=None) -> (cubin
   bytes, log): NVRTC only, no driver or GPU needed. */
PyObject *
kn_py_nvrtc_compile(PyObject *self, PyObject *args)
{
    const char *src, *path = NULL, *options = NULL;
    int arch;
    if (!PyArg_ParseTuple(args, "si|zz", &src, &arch, &path, &options))
        return NULL;
    if (nvrtc_load(path) < 0) {
        PyErr_Format(PyExc_RuntimeError, "kiln: %s", nv.error);
        return NULL;
    }
    PyObject *log = NULL;
    PyObject *cubin = compile_cubin(src, arch, options, &log);
    if (cubin == NULL) {
        Py_XDECREF(log);
        return NULL;
    }
    PyObject *r = Py_BuildValue("(NO)", cubin, log ? log : Py_None);
    Py_XDECREF(log);
    return r;
}

/* For the step runner (run.c): a kernel of a loaded module, and a launch. */
int
kn_cuda_is_module(PyObject *o)
{
    return PyObject_TypeCheck(o, &kn_CudaModuleType);
}

void *
kn_cuda_function(PyObject *mod, const char *name)
{
    PyObject *cap = PyDict_GetItemString(((kn_cudamod *)mod)->funcs, name);
    if (cap == NULL) {
        KN_INTERNAL("kernel %s missing from the CUDA module", name);
        return NULL;
    }
    return PyCapsule_GetPointer(cap, "kn_cufunction");
}

/* Events, for timing launch configurations (kiln's max-autotune modes).
   Loaded apart from the entry points above: a driver without them only
   loses tuning. */
typedef struct CUevent_st *CUevent;
static struct {
    CUresult (*create)(CUevent *, unsigned);
    CUresult (*record)(CUevent, CUstream);
    CUresult (*sync)(CUevent);
    CUresult (*elapsed)(float *, CUevent, CUevent);
    CUresult (*destroy)(CUevent);
    int ready; /* 1 loaded, -1 missing */
} ev;

static int
events_load(void)
{
    if (ev.ready)
        return ev.ready;
    void *lc = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lc == NULL)
        return ev.ready = -1;
    *(void **)&ev.create = dlsym(lc, "cuEventCreate");
    *(void **)&ev.record = dlsym(lc, "cuEventRecord");
    *(void **)&ev.sync = dlsym(lc, "cuEventSynchronize");
    *(void **)&ev.elapsed = dlsym(lc, "cuEventElapsedTime");
    *(void **)&ev.destroy = dlsym(lc, "cuEventDestroy_v2");
    return ev.ready = ev.create && ev.record && ev.sync && ev.elapsed && ev.destroy ? 1 : -1;
}

/* The device's error record of a program (codegen/prelude_cuda.h: kn_flag).
   Loaded apart from the entry points above, like the events. */
typedef unsigned long long CUdeviceptr;
static struct {
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*sync)(CUstream);
    CUresult (*capturing)(CUstream, int *);
    /* the asynchronous read (config.cuda_index_errors "async"): a pinned
       host copy of the record and an event after the copy */
    CUresult (*dtoh_now)(void *, CUdeviceptr, size_t);
    CUresult (*hostalloc)(void **, size_t, unsigned);
    CUresult (*freehost)(void *);
    CUresult (*evcreate)(CUevent *, unsigned);
    CUresult (*evrecord)(CUevent, CUstream);
    CUresult (*evquery)(CUevent);
    CUresult (*evsync)(CUevent);
    CUresult (*evdestroy)(CUevent);
    int ready; /* 1 loaded, -1 missing */
} er;

static int
errors_load(void)
{
    if (er.ready < 0)
        PyErr_SetString(PyExc_RuntimeError,
                        "kiln: the CUDA driver lacks an entry point of the error record (cuMemsetD8Async, "
                        "cuMemcpyDtoHAsync_v2, cuStreamIsCapturing, cuMemHostAlloc, cuEvent*)");
    if (er.ready)
        return er.ready;
    void *lc = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lc == NULL)
        return er.ready = -1;
    *(void **)&er.memset8 = dlsym(lc, "cuMemsetD8Async");
    *(void **)&er.dtoh = dlsym(lc, "cuMemcpyDtoHAsync_v2");
    *(void **)&er.sync = dlsym(lc, "cuStreamSynchronize");
    *(void **)&er.capturing = dlsym(lc, "cuStreamIsCapturing");
    *(void **)&er.dtoh_now = dlsym(lc, "cuMemcpyDtoH_v2");
    *(void **)&er.hostalloc = dlsym(lc, "cuMemHostAlloc");
    *(void **)&er.freehost = dlsym(lc, "cuMemFreeHost");
    *(void **)&er.evcreate = dlsym(lc, "cuEventCreate");
    *(void **)&er.evrecord = dlsym(lc, "cuEventRecord");
    *(void **)&er.evquery = dlsym(lc, "cuEventQuery");
    *(void **)&er.evsync = dlsym(lc, "cuEventSynchronize");
    *(void **)&er.evdestroy = dlsym(lc, "cuEventDestroy_v2");
    er.ready = er.memset8 && er.dtoh && er.sync && er.capturing && er.dtoh_now && er.hostalloc && er.freehost && er.evcreate &&
                       er.evrecord && er.evquery && er.evsync && er.evdestroy
                   ? 1
                   : -1;
    return er.ready < 0 ? errors_load() : 1;
}

/* Zero `bytes` of device memory at dptr, in order on `stream`. */
int
kn_cuda_clear(void *dptr, size_t bytes, uintptr_t stream)
{
    if (errors_load() < 0)
        return -1;
    return cu_check(er.memset8((CUdeviceptr)(uintptr_t)dptr, 0, bytes, (CUstream)stream), "cuMemsetD8Async");
}

/* Read a program's error record (int64[3] at dptr) once the work queued on
   `stream` is done, clearing it when it holds an error.  Returns 0, 1 when
   the stream is being captured into a CUDA graph (no wait is allowed: the
   record is not read), -1 with a Python error. */
int
kn_cuda_read_error(void *dptr, int64_t *host, uintptr_t stream)
{
    if (errors_load() < 0)
        return -1;
    int status = 0;
    if (cu_check(er.capturing((CUstream)stream, &status), "cuStreamIsCapturing") < 0)
        return -1;
    if (status != 0)
        return 1;
    CUresult r;
    Py_BEGIN_ALLOW_THREADS
    r = er.dtoh(host, (CUdeviceptr)(uintptr_t)dptr, 3 * sizeof(int64_t), (CUstream)stream);
    if (r == 0)
        r = er.sync((CUstream)stream);
    Py_END_ALLOW_THREADS
    if (cu_check(r, "reading the kernels' error record") < 0)
        return -1;
    return host[0] ? kn_cuda_clear(dptr, 3 * sizeof(int64_t), stream) : 0;
}

/* 1 when `stream` is being captured into a CUDA graph, 0 when not, -1
   with a Python error. */
int
kn_cuda_capturing(uintptr_t stream)
{
    if (errors_load() < 0)
        return -1;
    int status = 0;
    if (cu_check(er.capturing((CUstream)stream, &status), "cuStreamIsCapturing") < 0)
        return -1;
    return status != 0;
}

/* The asynchronous read of an error record: a pinned host copy of it and
   an event recorded on the stream after the copy.  post() queues the copy
   and the event (no wait); poll() looks at the copy only once the event has
   completed (cuEventQuery, no wait). */
#define CUDA_ERROR_NOT_READY 600
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_MEMHOSTALLOC_PORTABLE 0x1
typedef struct {
    int64_t *host; /* int64[3], pinned */
    CUevent done;  /* recorded after the copy */
} kn_errcopy;

void *
kn_cuda_errcopy_new(void)
{
    if (errors_load() < 0)
        return NULL;
    kn_errcopy *c = calloc(1, sizeof *c);
    if (c == NULL)
        return PyErr_NoMemory();
    if (cu_check(er.hostalloc((void **)&c->host, 3 * sizeof(int64_t), CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc") <
        0) {
        free(c);
        return NULL;
    }
    memset(c->host, 0, 3 * sizeof(int64_t));
    if (cu_check(er.evcreate(&c->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate") < 0) {
        er.freehost(c->host);
        free(c);
        return NULL;
    }
    return c;
}

/* Waits for a copy still in flight (a program freed right after a call),
   then frees; driver errors here (at exit) are ignored. */
void
kn_cuda_errcopy_free(void *p)
{
    kn_errcopy *c = p;
    if (c == NULL)
        return;
    er.evsync(c->done);
    er.evdestroy(c->done);
    er.freehost(c->host);
    free(c);
}

/* Queue on `stream`: the device record at dptr into the pinned copy, then
   the event.  The device record is not cleared: kernels keep its first
   violation (kn_flag), so a later copy still carries it. */
int
kn_cuda_errcopy_post(void *p, void *dptr, uintptr_t stream)
{
    kn_errcopy *c = p;
    if (cu_check(er.dtoh(c->host, (CUdeviceptr)(uintptr_t)dptr, 3 * sizeof(int64_t), (CUstream)stream),
                 "cuMemcpyDtoHAsync") < 0)
        return -1;
    return cu_check(er.evrecord(c->done, (CUstream)stream), "cuEventRecord");
}

/* 0: the copy has not completed yet; 1: it has, and *out holds it (the
   pinned copy is zeroed); -1 with a Python error. */
int
kn_cuda_errcopy_poll(void *p, int64_t *out)
{
    kn_errcopy *c = p;
    CUresult r = er.evquery(c->done);
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    if (cu_check(r, "cuEventQuery") < 0)
        return -1;
    memcpy(out, c->host, 3 * sizeof(int64_t));
    memset(c->host, 0, 3 * sizeof(int64_t));
    return 1;
}

/* Read an error record (int64[3] at dptr) now, for a caller that has
   waited for the device (a synchronous copy: it does not clear the record). */
int
kn_cuda_read_now(void *dptr, int64_t *host)
{
    if (errors_load() < 0)
        return -1;
    CUresult r;
    Py_BEGIN_ALLOW_THREADS
    r = er.dtoh_now(host, (CUdeviceptr)(uintptr_t)dptr, 3 * sizeof(int64_t));
    Py_END_ALLOW_THREADS
    return cu_check(r, "reading the kernels' error record");
}

/* Time `reps` launches of fn at one launch size on `stream` (after one
   untimed launch): milliseconds per launch in *ms.  Returns 0, 1 when the
   driver has no events (nothing timed), -1 with a Python error. */
int
kn_cuda_time_launch(void *fn, unsigned blocks, unsigned threads, uintptr_t stream, void **params, int reps,
                    float *ms)
{
    if (cu.ready != 1 || events_load() < 0)
        return 1;
    CUevent a = NULL, b = NULL;
    int rc = -1;
    if (cu_check(ev.create(&a, 0), "cuEventCreate") < 0 || cu_check(ev.create(&b, 0), "cuEventCreate") < 0)
        goto done;
    if (kn_cuda_launch(fn, blocks, threads, stream, params) < 0 ||
        cu_check(ev.record(a, (CUstream)stream), "cuEventRecord") < 0)
        goto done;
    for (int i = 0; i < reps; i++)
        if (kn_cuda_launch(fn, blocks, threads, stream, params) < 0)
            goto done;
    if (cu_check(ev.record(b, (CUstream)stream), "cuEventRecord") < 0 ||
        cu_check(ev.sync(b), "cuEventSynchronize") < 0 || cu_check(ev.elapsed(ms, a, b), "cuEventElapsedTime") < 0)
        goto done;
    *ms /= (float)(reps > 0 ? reps : 1);
    rc = 0;
done:
    if (a)
        ev.destroy(a);
    if (b)
        ev.destroy(b);
    return rc;
}

int
kn_cuda_launch(void *fn, unsigned blocks, unsigned threads, uintptr_t stream, void **params)
{
    CUresult r = cu.cuLaunchKernel((CUfunction)fn, blocks, 1, 1, threads, 1, 1, 0, (CUstream)stream, params, NULL);
    return r == 0 ? 0 : cu_check(r, "cuLaunchKernel");
}
