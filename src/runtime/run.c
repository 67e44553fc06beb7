/* run.c — a compiled graph as a callable: the step loop.
 *
 * Consumes: a finished kn_ctx (lowered, fused, planned, with generated source)
 * and, once loaded, the shared object holding its kernels.  Produces: the
 * kiln._C.Program type.  Calling a Program with the graph's inputs runs a flat
 * list of steps in C: allocate (torch.empty_strided for outputs and tensors
 * handed to ATen, one uint8 arena for every other intermediate), call kernels
 * with an array of data pointers (and, after them, the call's error record:
 * a kernel that meets an index out of range or an integer division by zero
 * records it there, and the loop raises it after that kernel as ATen would;
 * on a GPU the record lives on the device, one per (program, stream), and by
 * default (config.cuda_index_errors "async") the end of a call only queues a
 * copy of it into pinned host memory and an event: the copy is looked at,
 * without a wait, when the program is next called or check_errors() is
 * called, which raises it as CUDA raises its own asynchronous errors; "sync"
 * waits for the stream at the end of each call and raises there), call
 * ATen for externs, release buffers after their last use, and return the
 * outputs as a list.
 */
#include "runtime.h"
#include "../error.h"
#include <dlfcn.h>
#include <time.h>
#include <structmember.h>
#include <string.h>


/* torch entry points, set once by kiln/backends.py */
static PyObject *rt_empty_strided, *rt_empty, *rt_as_strided, *rt_dtypes, *rt_uint8, *rt_ref_type;
/* oneDNN's weight packing and packed linear (torch.ops.mkldnn), or NULL */
static PyObject *rt_reorder_linear, *rt_linear_pointwise, *rt_empty_list, *rt_none_str, *rt_empty_str;

int
kn_runtime_packed_linear(void)
{
    return rt_reorder_linear != NULL && rt_linear_pointwise != NULL;
}
static PyObject *str_data_ptr, *str_storage_offset, *str_dtype_kw;
/* torch's current CUDA stream of a device, as an int (set by kiln/cuda.py) */
static PyObject *rt_cuda_stream;
/* torch's lean bindings, where this torch has them (the ones its own
   generated wrappers call): empty_strided_cuda(size, stride, dtype) and
   reinterpret(base, size, stride, offset_increment).  NULL: the public ones. */
static PyObject *rt_empty_strided_cuda, *rt_reinterpret;

PyObject *
kn_py_set_fast_runtime(PyObject *self, PyObject *args)
{
    PyObject *es, *re;
    if (!PyArg_ParseTuple(args, "OO", &es, &re))
        return NULL;
    Py_XSETREF(rt_empty_strided_cuda, es == Py_None ? NULL : Py_NewRef(es));
    Py_XSETREF(rt_reinterpret, re == Py_None ? NULL : Py_NewRef(re));
    Py_RETURN_NONE;
}

PyObject *
kn_py_set_cuda_stream(PyObject *self, PyObject *fn)
{
    Py_XSETREF(rt_cuda_stream, Py_NewRef(fn));
    Py_RETURN_NONE;
}
static PyObject *dtype_kwargs[KN_NDTYPES]; /* {"dtype": torch dtype}, built once */

PyObject *
kn_py_set_runtime(PyObject *self, PyObject *args)
{
    PyObject *es, *e, *as, *dts, *u8, *rt, *reorder = Py_None, *linear = Py_None;
    if (!PyArg_ParseTuple(args, "OOOO!OO|OO", &es, &e, &as, &PyTuple_Type, &dts, &u8, &rt, &reorder, &linear))
        return NULL;
    Py_CLEAR(rt_reorder_linear);
    Py_CLEAR(rt_linear_pointwise);
    if (reorder != Py_None && linear != Py_None) {
        rt_reorder_linear = Py_NewRef(reorder);
        rt_linear_pointwise = Py_NewRef(linear);
        if (!rt_empty_list) {
            rt_empty_list = PyList_New(0);
            rt_none_str = PyUnicode_InternFromString("none");
            rt_empty_str = PyUnicode_InternFromString("");
            if (!rt_empty_list || !rt_none_str || !rt_empty_str)
                return NULL;
        }
    }
    if (PyTuple_GET_SIZE(dts) != KN_NDTYPES) {
        PyErr_SetString(PyExc_ValueError, "kiln: dtype table has the wrong length");
        return NULL;
    }
    Py_XSETREF(rt_empty_strided, Py_NewRef(es));
    Py_XSETREF(rt_empty, Py_NewRef(e));
    Py_XSETREF(rt_as_strided, Py_NewRef(as));
    Py_XSETREF(rt_dtypes, Py_NewRef(dts));
    Py_XSETREF(rt_uint8, Py_NewRef(u8));
    Py_XSETREF(rt_ref_type, Py_NewRef(rt));
    if (!str_data_ptr) {
        str_data_ptr = PyUnicode_InternFromString("data_ptr");
        str_storage_offset = PyUnicode_InternFromString("storage_offset");
        str_dtype_kw = PyUnicode_InternFromString("dtype");
        if (!str_data_ptr || !str_storage_offset || !str_dtype_kw)
            return NULL;
    }
    for (int d = 0; d < KN_NDTYPES; d++) {
        PyObject *kw = Py_BuildValue("{s:O}", "dtype", PyTuple_GET_ITEM(dts, d));
        if (kw == NULL)
            return NULL;
        Py_XSETREF(dtype_kwargs[d], kw);
    }
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- Library */
typedef struct {
    PyObject_HEAD
    void *handle;
    PyObject *path;
} LibraryObject;

static int
library_init(LibraryObject *self, PyObject *args, PyObject *kw)
{
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return -1;
    self->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (self->handle == NULL) {
        const char *err = dlerror();
        PyErr_Format(PyExc_OSError, "kiln: cannot load %s: %s", path, err ? err : "unknown error");
        return -1;
    }
    self->path = PyUnicode_FromString(path);
    return self->path ? 0 : -1;
}

static void
library_dealloc(LibraryObject *self)
{
    if (self->handle)
        dlclose(self->handle);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef library_members[] = {
    {"path", T_OBJECT, offsetof(LibraryObject, path), READONLY, "path of the shared object"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kn_LibraryType = {
    KN_TYPE_HEAD("Library", LibraryObject, Py_TPFLAGS_DEFAULT,
                 "A loaded shared object of kiln kernels (closed when no Program uses it)."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)library_init,
    .tp_dealloc = (destructor)library_dealloc,
    .tp_members = library_members,
};

/* ---------------------------------------------------------------- Program */
/* A kernel all of whose values have no elements (empty KV caches, zero-length
   slices) only needs its tensors allocated.  (A reduction over an empty range
   into a non-empty result still runs: it writes the identity, or NaN.) */
static int
kernel_stores_nothing(const kn_ctx *c, const kn_kernel *k)
{
    for (int m = 0; m < k->nmembers; m++) {
        const kn_buf *b = c->bufs[k->members[m]];
        int empty = 0;
        for (int d = 0; d < b->ndim; d++)
            empty |= b->size[d] == 0;
        if (!empty)
            return 0;
    }
    return k->nmembers > 0;
}

typedef void (*kn_kernel_fn)(void *const *);

typedef struct {
    kn_bufkind kind;
    int dt;
    int ndim;
    PyObject *size, *stride;   /* tuples, for allocation and views */
    PyObject *alloc_args;      /* (size, stride) for torch.empty_strided */
    PyObject *cuda_args;       /* (size, stride, dtype) for the lean CUDA allocator */
    int64_t arena_off;
    int input_index;
    int base;
    int64_t offset;
    int own_tensor;            /* allocated as its own torch tensor */
    int is_output;
    int first, last;
    int extern_index;
    int inplace_of;            /* take this buffer's tensor instead of allocating */
    int arena_view;            /* its tensor a view of the call's arena (plan.c plan_arena_tensors) */
} rbuf;

typedef struct {
    kn_stepkind kind;
    int kernel;
    int empty;                 /* a kernel with no elements: allocates, runs nothing */
    PyObject *op, *cargs, *ckwargs;  /* extern call */
    int nres;
    int res[KN_MAXARGS];
    int nin;
    int *in;
    int *in_node;              /* EXTERN, LINEAR: node of each in[] (its buffer as lowered; -1: none) */
    int nalloc;
    int *alloc;                /* own-tensor buffers first defined here */
    int nfree;
    int *free_after;           /* buffers released after this step */
    int nover;                 /* argument node -> buffer redirections */
    int over_node[2], over_buf[2];
    /* LINEAR: the packed weight, valid while the weight's bytes are unchanged */
    int64_t rows;
    int w_kn;                  /* weight stored [K, N]: pack its transpose */
    int has_bias;
    void *pack_ptr;
    uint64_t pack_hash;
    PyObject *packed;
    int repacks;               /* packs after the first: a weight that keeps changing */
} rstep;

/* How a GPU program's error record is read (config.cuda_index_errors). */
enum { KN_ERRS_OFF = 0, KN_ERRS_SYNC = 1, KN_ERRS_ASYNC = 2 };

/* A program's error record on one stream: kernels launched on that stream
   write it (so calls on different streams never share one).  A record made
   while the stream was being captured into a CUDA graph belongs to the graph
   (its replays write it) and is never read. */
typedef struct {
    uintptr_t stream;
    int captured;
    PyObject *dev;  /* int64[3] on the device */
    void *copy;     /* async: pinned host copy + event (cuda.c), or NULL */
    int pending;    /* async: a copy is queued and not yet looked at */
    int dirty;      /* async: kernels ran after the last queued copy */
    int clear;      /* dev holds a violation already raised: zero it at the next call on its stream */
} errslot;

typedef struct {
    PyObject_HEAD
    PyObject *source;          /* kernels (without prelude) */
    PyObject *prefix;
    PyObject *stats;           /* dict */
    PyObject *loops;           /* str (KILN_DUMP=loops) */
    PyObject *forms;           /* bytes: each CUDA kernel's forms (kn_kernel.cu_form), b"" for C */
    PyObject *fusion;          /* bytes: per KERNEL step of the lowering, 1 where it joined (fuse.c) */
    PyObject *library;
    int nbufs, nsteps, nkernels, ninputs, noutputs;
    rbuf *bufs;
    rstep *steps;
    kn_kernel_fn *fns;
    int *node_buf;             /* node index -> buffer id (single-tensor nodes) */
    int nnodes;
    PyObject *outputs;         /* list: int buffer id or constant object */
    int *out_buf;              /* per output: buffer id or -1 */
    int64_t arena_bytes;
    PyObject *arena_cache;     /* a reusable arena tensor, or NULL while in use */
    uintptr_t arena_stream;    /* CUDA: the stream the cached arena was last used on */
    /* CUDA programs: kernels are launched, tensors allocated on the device */
    int cuda;
    PyObject *device_index;    /* int, for the stream getter */
    PyObject *kw[KN_NDTYPES];  /* {"dtype", "device"} for allocation (NULL: CPU defaults) */
    PyObject *cumod;           /* the loaded kiln._C.CudaModule(s) (kept alive) */
    /* CUDA kernels run by kiln's CPU emulator (tests): host tensors, and per
       kernel kn_emu_<name>(params, blocks, threads) from a Library */
    int emulated;
    void (**emufns)(void **, unsigned, unsigned);
    void **cufns;
    int *kthreads;
    unsigned *kblocks;
    unsigned *kblocks0;        /* the launch sizes codegen chose (the most a tuned one may use) */
    char *ktunable;            /* 1: re-running the kernel is harmless (it writes nothing it reads) */
    char *ktune;               /* 1: time launch sizes at the next run (tune_next_run) */
    int tune_reps;             /* > 0: the next run tunes the kernels marked in ktune */
    int sms;                   /* multiprocessors of the device the code was generated for */
    PyObject *cunames;         /* list: kernel k's name in its CUDA module (load_cuda), or NULL */
    int *knparams;
    int **kparams;
    int checks;                /* CUDA: some kernel takes the error record (index nbufs) */
    int err_mode;              /* CUDA: KN_ERRS_* (config.cuda_index_errors, read at load) */
    errslot *errs;             /* CUDA: the error records, one per stream the program ran on */
    int nerrs;
    int64_t emu_err[3];        /* emulated "async": a violation raised at the next call */
    /* host_profile(True): CPU time per step, [2 * step] allocation and
       [2 * step + 1] the step itself (ns, summed over calls) */
    int64_t *host_ns;
    long host_calls;
    /* the values of a parametric build's size holes (kiln/kernel_params.py):
       frame pointers nbufs + 1 (int64) and nbufs + 2 (double); a CUDA
       program's are one block (the ints, then the doubles' bits) in
       size_ints, passed by value as every kernel's last argument */
    int64_t *size_ints;
    double *size_floats;
} ProgramObject;

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int tune_kernel(ProgramObject *self, int k, uintptr_t stream, void **params);

static PyObject *
tuple_of(int n, const int64_t *v)
{
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

static void
program_dealloc(ProgramObject *self)
{
    free(self->host_ns);
    free(self->size_ints);
    free(self->size_floats);
    for (int i = 0; i < self->nbufs; i++) {
        Py_XDECREF(self->bufs[i].size);
        Py_XDECREF(self->bufs[i].stride);
        Py_XDECREF(self->bufs[i].alloc_args);
        Py_XDECREF(self->bufs[i].cuda_args);
    }
    for (int s = 0; s < self->nsteps; s++) {
        Py_XDECREF(self->steps[s].op);
        Py_XDECREF(self->steps[s].cargs);
        Py_XDECREF(self->steps[s].ckwargs);
        Py_XDECREF(self->steps[s].packed);
        free(self->steps[s].in);
        free(self->steps[s].in_node);
        free(self->steps[s].alloc);
        free(self->steps[s].free_after);
    }
    free(self->bufs);
    free(self->steps);
    free(self->fns);
    free(self->node_buf);
    free(self->out_buf);
    Py_XDECREF(self->source);
    Py_XDECREF(self->prefix);
    Py_XDECREF(self->stats);
    Py_XDECREF(self->loops);
    Py_XDECREF(self->forms);
    Py_XDECREF(self->fusion);
    Py_XDECREF(self->library);
    Py_XDECREF(self->outputs);
    Py_XDECREF(self->arena_cache);
    Py_XDECREF(self->device_index);
    Py_XDECREF(self->cumod);
    for (int e = 0; e < self->nerrs; e++) {
        kn_cuda_errcopy_free(self->errs[e].copy);
        Py_XDECREF(self->errs[e].dev);
    }
    free(self->errs);
    for (int d = 0; d < KN_NDTYPES; d++)
        Py_XDECREF(self->kw[d]);
    if (self->kparams)
        for (int k = 0; k < self->nkernels; k++)
            free(self->kparams[k]);
    free(self->kparams);
    free(self->cufns);
    free(self->emufns);
    free(self->kthreads);
    free(self->kblocks);
    free(self->kblocks0);
    free(self->ktunable);
    free(self->ktune);
    Py_XDECREF(self->cunames);
    free(self->knparams);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
append_int(int **arr, int *n, int v)
{
    int *na = realloc(*arr, sizeof(int) * (size_t)(*n + 1));
    if (na == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    na[(*n)++] = v;
    *arr = na;
    return 0;
}

PyTypeObject kn_ProgramType;

/* Build a Program from a compiled context.  Borrows c; `desc` is the graph
   description (its node tuples carry op, call args and kwargs).  The Program
   keeps new references to what it runs (an extern step's op and arguments,
   constant outputs), never desc itself: a symbolic graph's size plans each
   fill in a description of their own (kiln/template.py), and keeping each
   alive would leave ~700 objects per size for the collector to walk. */
PyObject *
kn_program_new(kn_ctx *c, PyObject *desc, PyObject *source, PyObject *loops, PyObject *forms, PyObject *fusion)
{
    ProgramObject *p = PyObject_New(ProgramObject, &kn_ProgramType);
    if (p == NULL)
        return NULL;
    memset((char *)p + sizeof(PyObject), 0, sizeof(ProgramObject) - sizeof(PyObject));
    p->source = Py_NewRef(source);
    p->loops = Py_NewRef(loops);
    p->forms = Py_NewRef(forms);
    p->fusion = Py_NewRef(fusion);
    p->prefix = PyUnicode_FromString(c->prefix);
    p->nbufs = c->nbufs;
    p->nsteps = c->nsteps;
    p->nkernels = c->nkernels;
    p->ninputs = c->g.ninputs;
    p->noutputs = c->g.noutputs;
    p->arena_bytes = c->arena_bytes;
    p->nnodes = c->g.nnodes;
    p->bufs = calloc((size_t)c->nbufs + 1, sizeof(rbuf));
    p->steps = calloc((size_t)c->nsteps + 1, sizeof(rstep));
    p->fns = calloc((size_t)c->nkernels + 1, sizeof(kn_kernel_fn));
    p->node_buf = calloc((size_t)c->g.nnodes + 1, sizeof(int));
    p->out_buf = calloc((size_t)c->g.noutputs + 1, sizeof(int));
    if (!p->prefix || !p->bufs || !p->steps || !p->fns || !p->node_buf || !p->out_buf) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto error;
    }
    if (c->cuda) {
        p->cuda = 1;
        int nk = c->nkernels + 1;
        p->cufns = calloc((size_t)nk, sizeof(void *));
        p->kthreads = calloc((size_t)nk, sizeof(int));
        p->kblocks = calloc((size_t)nk, sizeof(unsigned));
        p->kblocks0 = calloc((size_t)nk, sizeof(unsigned));
        p->ktunable = calloc((size_t)nk, 1);
        p->ktune = calloc((size_t)nk, 1);
        p->knparams = calloc((size_t)nk, sizeof(int));
        p->kparams = calloc((size_t)nk, sizeof(int *));
        p->sms = c->cuda_sms > 0 ? c->cuda_sms : 132;
        if (!p->cufns || !p->kthreads || !p->kblocks || !p->kblocks0 || !p->ktunable || !p->ktune ||
            !p->knparams || !p->kparams) {
            PyErr_NoMemory();
            goto error;
        }
        for (int k = 0; k < c->nkernels; k++) {
            kn_kernel *kk = &c->kernels[k];
            p->kthreads[k] = kk->cu_threads;
            p->kblocks[k] = p->kblocks0[k] = (unsigned)kk->cu_blocks;
            p->ktunable[k] = 1;
            for (int m = 0; m < kk->nmembers; m++)
                if (c->bufs[kk->members[m]]->inplace_of >= 0)
                    p->ktunable[k] = 0; /* writes into a tensor it reads: once only */
            p->knparams[k] = kk->cu_nparams;
            p->kparams[k] = malloc(sizeof(int) * (size_t)(kk->cu_nparams + 1));
            if (p->kparams[k] == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            memcpy(p->kparams[k], kk->cu_params, sizeof(int) * (size_t)kk->cu_nparams);
            for (int j = 0; j < kk->cu_nparams; j++)
                if (kk->cu_params[j] == c->nbufs)
                    p->checks = 1;
        }
    }
    PyObject *nodes = PyTuple_GET_ITEM(desc, 0);
    for (int ni = 0; ni < c->g.nnodes; ni++)
        p->node_buf[ni] = c->node_nres[ni] == 1 ? c->node_bufs[ni][0] : -1;
    for (int i = 0; i < c->nbufs; i++) {
        kn_buf *b = c->bufs[i];
        rbuf *r = &p->bufs[i];
        r->kind = b->kind;
        r->dt = b->dt;
        r->ndim = b->ndim;
        r->arena_off = b->arena_off;
        r->input_index = b->input_index;
        r->base = b->base;
        r->offset = b->offset;
        r->is_output = b->is_output;
        r->first = b->first;
        r->last = b->last;
        r->extern_index = b->extern_index;
        r->inplace_of = b->inplace_of;
        r->arena_view = b->arena_tensor && b->arena_off >= 0;
        r->own_tensor = (b->kind == KN_B_POINTWISE || b->kind == KN_B_REDUCTION) && !r->arena_view &&
                        (b->is_output || b->needs_tensor) && !(b->local && !b->is_output && !b->needs_tensor);
        if (b->kind == KN_B_POINTWISE || b->kind == KN_B_REDUCTION) {
            if (!r->own_tensor && b->arena_off < 0 && !b->local)
                r->own_tensor = 1; /* defensive: never leave a stored buffer without storage */
        }
        r->size = tuple_of(b->ndim, b->size);
        r->stride = tuple_of(b->ndim, b->stride);
        if (!r->size || !r->stride)
            goto error;
        r->alloc_args = PyTuple_Pack(2, r->size, r->stride);
        if (r->alloc_args == NULL)
            goto error;
        /* (buffers of non-tensor extern results carry no dtype) */
        if (c->cuda && b->dt < KN_NDTYPES &&
            (r->cuda_args = PyTuple_Pack(3, r->size, r->stride, PyTuple_GET_ITEM(rt_dtypes, b->dt))) == NULL)
            goto error;
    }
    int nkernels = 0;   /* kernels that run (not the empty ones) */
    for (int s = 0; s < c->nsteps; s++) {
        kn_step *st = &c->steps[s];
        rstep *r = &p->steps[s];
        r->kind = st->kind;
        r->kernel = st->kernel;
        r->empty = st->kind == KN_ST_KERNEL && kernel_stores_nothing(c, &c->kernels[st->kernel]);
        nkernels += st->kind == KN_ST_KERNEL && !r->empty;
        if (st->kind == KN_ST_LINEAR) {
            r->rows = st->rows;
            r->w_kn = st->w_kn;
            r->has_bias = st->has_bias;
        }
        if (st->kind != KN_ST_KERNEL) {
            PyObject *nt = PyList_GET_ITEM(nodes, st->node);
            if (PyTuple_GET_SIZE(nt) < 8) {
                PyErr_SetString(PyExc_ValueError, "kiln: node description lacks call arguments");
                goto error;
            }
            r->op = Py_NewRef(PyTuple_GET_ITEM(nt, 5));
            r->cargs = Py_NewRef(PyTuple_GET_ITEM(nt, 6));
            r->ckwargs = Py_NewRef(PyTuple_GET_ITEM(nt, 7));
            r->nres = st->nres;
            memcpy(r->res, st->res, sizeof(int) * (size_t)st->nres);
            r->nover = st->nover;
            memcpy(r->over_node, st->over_node, sizeof st->over_node);
            memcpy(r->over_buf, st->over_buf, sizeof st->over_buf);
            for (int j = 0; j < st->nin; j++) {
                int nn = r->nin;
                if (append_int(&r->in_node, &nn, st->in_node[j]) < 0)
                    goto error;
                if (append_int(&r->in, &r->nin, st->in[j]) < 0)
                    goto error;
            }
        }
    }
    /* allocation points and releases */
    for (int i = 0; i < c->nbufs; i++) {
        rbuf *r = &p->bufs[i];
        if (r->own_tensor && r->first >= 0 && append_int(&p->steps[r->first].alloc, &p->steps[r->first].nalloc, i) < 0)
            goto error;
        int releasable = !r->is_output && r->last >= 0 &&
                         (r->own_tensor || r->arena_view || r->kind == KN_B_EXTERN || r->kind == KN_B_ALIAS);
        if (releasable && append_int(&p->steps[r->last].free_after, &p->steps[r->last].nfree, i) < 0)
            goto error;
    }
    p->outputs = PyList_New(c->g.noutputs);
    if (p->outputs == NULL)
        goto error;
    PyObject *douts = PyTuple_GET_ITEM(desc, 2);
    for (int k = 0; k < c->g.noutputs; k++) {
        kn_arg *a = &c->g.outputs[k];
        p->out_buf[k] = -1;
        if (a->kind == KN_A_REF && c->node_nres[a->i] == 1)
            p->out_buf[k] = c->node_bufs[a->i][0];
        PyList_SET_ITEM(p->outputs, k, Py_NewRef(PyList_GET_ITEM(douts, k)));
    }
    p->stats = Py_BuildValue("{s:i,s:i,s:i,s:i,s:O,s:L}", "aten_ops", c->n_aten_ops, "kernels", nkernels,
                             "externs", c->n_externs, "fallbacks", c->n_fallbacks, "extern_ops", c->extern_names,
                             "arena_bytes", (long long)c->arena_bytes);
    if (p->stats == NULL)
        goto error;
    return (PyObject *)p;
error:
    Py_DECREF(p);
    return NULL;
}

static PyObject *
program_load(ProgramObject *self, PyObject *lib)
{
    if (!PyObject_TypeCheck(lib, &kn_LibraryType)) {
        PyErr_SetString(PyExc_TypeError, "kiln: Program.load takes a kiln._C.Library");
        return NULL;
    }
    void *h = ((LibraryObject *)lib)->handle;
    const char *prefix = PyUnicode_AsUTF8(self->prefix);
    if (prefix == NULL)
        return NULL;
    for (int k = 0; k < self->nkernels; k++) {
        char name[256];
        snprintf(name, sizeof name, "%sk%d", prefix, k);
        void *f = dlsym(h, name);
        if (f == NULL) {
            PyErr_Format(PyExc_RuntimeError, "kiln: kernel %s missing from %U", name, ((LibraryObject *)lib)->path);
            return NULL;
        }
        *(void **)&self->fns[k] = f;
    }
    Py_XSETREF(self->library, Py_NewRef(lib));
    Py_RETURN_NONE;
}

/* How calls read the error record: config.cuda_index_errors, "async",
   "sync" or "off" (a bool: True "async", False "off").  -1 with an error. */
static int
error_mode(void)
{
    PyObject *cfg = PyImport_ImportModule("kiln.config");
    PyObject *rd = cfg ? PyObject_GetAttrString(cfg, "cuda_index_errors") : NULL;
    Py_XDECREF(cfg);
    if (rd == NULL)
        return -1;
    int mode = -1;
    if (PyUnicode_Check(rd)) {
        const char *m = PyUnicode_AsUTF8(rd);
        if (m && (!strcmp(m, "async") || !strcmp(m, "1")))
            mode = KN_ERRS_ASYNC;
        else if (m && !strcmp(m, "sync"))
            mode = KN_ERRS_SYNC;
        else if (m && (!strcmp(m, "off") || !strcmp(m, "0") || !*m))
            mode = KN_ERRS_OFF;
        else if (m)
            PyErr_Format(PyExc_ValueError, "kiln: config.cuda_index_errors is %R: use \"async\", \"sync\" or \"off\"",
                         rd);
    } else {
        int t = PyObject_IsTrue(rd);
        mode = t < 0 ? -1 : t ? KN_ERRS_ASYNC : KN_ERRS_OFF;
    }
    Py_DECREF(rd);
    return mode;
}

/* load_cuda(module, device, device_index): bind the kernels of a loaded
   kiln._C.CudaModule; allocations go to `device` (a torch.device). */
static PyObject *
program_load_cuda(ProgramObject *self, PyObject *args)
{
    PyObject *mod, *device, *index, *names = Py_None;
    if (!PyArg_ParseTuple(args, "OOO!|O", &mod, &device, &PyLong_Type, &index, &names))
        return NULL;
    if (names != Py_None && (!PyList_Check(names) || PyList_GET_SIZE(names) != self->nkernels)) {
        PyErr_SetString(PyExc_ValueError, "kiln: load_cuda names must be a list with one name per kernel");
        return NULL;
    }
    /* mod: one kiln._C.CudaModule, or a list holding kernel k's module at k */
    int listed = PyList_Check(mod);
    if (!self->cuda || (listed ? PyList_GET_SIZE(mod) != self->nkernels : !kn_cuda_is_module(mod))) {
        PyErr_SetString(PyExc_TypeError, "kiln: Program.load_cuda takes a CUDA program and a kiln._C.CudaModule "
                                         "(or a list of one per kernel)");
        return NULL;
    }
    const char *prefix = PyUnicode_AsUTF8(self->prefix);
    if (prefix == NULL)
        return NULL;
    if ((self->err_mode = error_mode()) < 0)
        return NULL;
    void **fns = calloc((size_t)self->nkernels + 1, sizeof(void *));
    if (fns == NULL)
        return PyErr_NoMemory();
    for (int k = 0; k < self->nkernels; k++) {
        char name[256];
        if (names != Py_None) {
            const char *nm = PyUnicode_AsUTF8(PyList_GET_ITEM(names, k));
            if (nm == NULL) {
                free(fns);
                return NULL;
            }
            snprintf(name, sizeof name, "%s", nm);
        } else {
            snprintf(name, sizeof name, "%sk%d", prefix, k);
        }
        PyObject *m = listed ? PyList_GET_ITEM(mod, k) : mod;
        if (!kn_cuda_is_module(m)) {
            PyErr_SetString(PyExc_TypeError, "kiln: Program.load_cuda: not a kiln._C.CudaModule");
            free(fns);
            return NULL;
        }
        if ((fns[k] = kn_cuda_function(m, name)) == NULL) {
            free(fns);
            return NULL;
        }
    }
    PyObject *kws[KN_NDTYPES];
    for (int d = 0; d < KN_NDTYPES; d++) {
        kws[d] = Py_BuildValue("{s:O,s:O}", "dtype", PyTuple_GET_ITEM(rt_dtypes, d), "device", device);
        if (kws[d] == NULL) {
            for (int e = 0; e < d; e++)
                Py_DECREF(kws[e]);
            free(fns);
            return NULL;
        }
    }
    /* everything found: commit at once (a failed reload leaves the previous
       binding whole, and the functions' module is kept alive with them) */
    memcpy(self->cufns, fns, sizeof(void *) * (size_t)self->nkernels);
    free(fns);
    for (int d = 0; d < KN_NDTYPES; d++)
        Py_XSETREF(self->kw[d], kws[d]);
    Py_XSETREF(self->device_index, Py_NewRef(index));
    Py_XSETREF(self->cumod, Py_NewRef(mod));
    if (names != Py_None)
        Py_XSETREF(self->cunames, Py_NewRef(names));
    Py_RETURN_NONE;
}

/* load_emulated(library, names): bind a CUDA program's kernels to their CPU
   emulations (kiln/cuda_emulator.py): kernel k is kn_emu_<names[k]>. */
static PyObject *
program_load_emulated(ProgramObject *self, PyObject *args)
{
    PyObject *lib, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &kn_LibraryType, &lib, &PyList_Type, &names))
        return NULL;
    if (!self->cuda || PyList_GET_SIZE(names) != self->nkernels) {
        PyErr_SetString(PyExc_TypeError, "kiln: load_emulated takes a CUDA program and one name per kernel");
        return NULL;
    }
    void (**fns)(void **, unsigned, unsigned) = calloc((size_t)self->nkernels + 1, sizeof *fns);
    if (fns == NULL)
        return PyErr_NoMemory();
    for (int k = 0; k < self->nkernels; k++) {
        const char *nm = PyUnicode_AsUTF8(PyList_GET_ITEM(names, k));
        char sym[300];
        if (nm == NULL) {
            free(fns);
            return NULL;
        }
        snprintf(sym, sizeof sym, "kn_emu_%s", nm);
        void *f = dlsym(((LibraryObject *)lib)->handle, sym);
        if (f == NULL) {
            free(fns);
            PyErr_Format(PyExc_RuntimeError, "kiln: %s missing from %U", sym, ((LibraryObject *)lib)->path);
            return NULL;
        }
        *(void **)&fns[k] = f;
    }
    int mode = error_mode();
    if (mode < 0) {
        free(fns);
        return NULL;
    }
    free(self->emufns);
    self->emufns = fns;
    self->emulated = 1;
    self->err_mode = mode;
    Py_XSETREF(self->library, Py_NewRef(lib));
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- calling */
/* Raise what a kernel recorded in an error record, as ATen words it
   (codes: kiln.h KN_E_*), followed by `after`.  Returns -1. */
static int
raise_kernel_error_as(const int64_t *err, const char *after)
{
    int kind = (int)(err[0] & 0xff), dim = (int)((err[0] >> 8) & 0xff);
    switch (kind) {
    case KN_E_INDEX_SELF:
        PyErr_Format(PyExc_IndexError, "index out of range in self%s", after);
        break;
    case KN_E_INDEX:
    case KN_E_GATHER:
        PyErr_Format(kind == KN_E_INDEX ? PyExc_IndexError : PyExc_RuntimeError,
                     "index %lld is out of bounds for dimension %d with size %lld%s", (long long)err[1], dim,
                     (long long)err[2], after);
        break;
    case KN_E_ZERODIV:
        PyErr_Format(PyExc_RuntimeError, "ZeroDivisionError%s", after);
        break;
    case KN_E_DATA_BOUNDS:
        PyErr_Format(PyExc_RuntimeError, "INDICES element is out of DATA bounds, id=%lld axis_dim=%lld%s",
                     (long long)err[1], (long long)err[2], after);
        break;
    default:
        KN_INTERNAL("kernel error code %lld", (long long)err[0]);
    }
    return -1;
}

static int
raise_kernel_error(const int64_t *err)
{
    return raise_kernel_error_as(err, "");
}

/* Mark the pending exception (a GPU kernel's error) so capture raises it
   where the graph was called instead of re-running the code eagerly: on a
   GPU, eager's kernel would trip a device-side assert and poison the
   context, and a deferred error belongs to an earlier call's inputs, which
   a re-run of this call would not see.  Returns -1. */
static int
no_replay(void)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (ev != NULL && PyObject_SetAttrString(ev, "_kiln_no_replay", Py_True) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    return -1;
}

/* A violation found after its call returned (config.cuda_index_errors
   "async"): the same exception, saying where it came from. */
static int
raise_deferred_error(const int64_t *err)
{
    static const char *ops[] = {"?", "embedding or index_select", "indexing (tensor[index])", "gather",
                                "integer division", "index_select"};
    int kind = (int)(err[0] & 0xff);
    char after[400];
    snprintf(after, sizeof after,
             " (kiln: found by %s in a kernel of an earlier call of this compiled graph on the GPU; as with CUDA's "
             "own errors it is reported asynchronously, at a later call: KILN_CUDA_INDEX_ERRORS=sync raises it at "
             "the call that failed)",
             ops[kind >= 1 && kind <= 5 ? kind : 0]);
    return raise_kernel_error_as(err, after);
}

static int data_ptr(PyObject *t, void **out);

/* A zeroed int64[3] tensor on the program's device: its error record. */
static PyObject *
new_error_record(ProgramObject *self, uintptr_t stream)
{
    PyObject *sz = Py_BuildValue("(i)", 3);
    PyObject *t = sz ? PyObject_Call(rt_empty, sz, self->kw[KN_I64] ? self->kw[KN_I64] : dtype_kwargs[KN_I64]) : NULL;
    Py_XDECREF(sz);
    void *p;
    if (t == NULL || data_ptr(t, &p) < 0 || kn_cuda_clear(p, 3 * sizeof(int64_t), stream) < 0) {
        Py_XDECREF(t);
        return NULL;
    }
    return t;
}

/* The program's error record on `stream` (made on first use). */
static errslot *
error_slot(ProgramObject *self, uintptr_t stream, int captured)
{
    for (int e = 0; e < self->nerrs; e++)
        if (self->errs[e].stream == stream && self->errs[e].captured == captured)
            return &self->errs[e];
    errslot *es = realloc(self->errs, sizeof(errslot) * (size_t)(self->nerrs + 1));
    if (es == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    self->errs = es;
    errslot *sl = &es[self->nerrs];
    memset(sl, 0, sizeof *sl);
    sl->stream = stream;
    sl->captured = captured;
    /* under capture the zeroing is captured too: each replay starts clean */
    if ((sl->dev = new_error_record(self, stream)) == NULL)
        return NULL;
    if (!captured && self->err_mode == KN_ERRS_ASYNC && (sl->copy = kn_cuda_errcopy_new()) == NULL) {
        Py_CLEAR(sl->dev);
        return NULL;
    }
    self->nerrs++;
    return sl;
}

/* "async": raise a violation an earlier call recorded, if its copy has
   arrived (no wait).  synchronized: the caller has waited for the device
   (torch.cuda.synchronize), so records that kernels wrote after the last
   queued copy are read too.  0, or -1 with the exception. */
static int
poll_errors(ProgramObject *self, int synchronized)
{
    int64_t err[3];
    if (self->emulated && self->emu_err[0]) {
        memcpy(err, self->emu_err, sizeof err);
        memset(self->emu_err, 0, sizeof err);
        return raise_deferred_error(err) < 0 ? no_replay() : 0;
    }
    for (int e = 0; e < self->nerrs; e++) {
        errslot *sl = &self->errs[e];
        if (sl->captured || sl->copy == NULL || sl->clear)
            continue;
        int rc = 0;
        if (sl->pending) {
            if ((rc = kn_cuda_errcopy_poll(sl->copy, err)) < 0)
                return -1;
            sl->pending = rc == 0;
        }
        if ((rc == 0 || !err[0]) && synchronized && sl->dirty && !sl->pending) {
            void *p;
            if (data_ptr(sl->dev, &p) < 0 || kn_cuda_read_now(p, err) < 0)
                return -1;
            sl->dirty = 0;
            rc = 1;
        }
        if (rc == 1 && err[0]) {
            /* zeroed on the device at the next call on its stream */
            sl->clear = 1;
            sl->dirty = 0;
            return raise_deferred_error(err) < 0 ? no_replay() : 0;
        }
    }
    return 0;
}

typedef struct {
    void **ptr;
    PyObject **obj;
    PyObject *arena;                 /* the call's arena tensor (uint8), borrowed */
    PyObject *typed[KN_NDTYPES];     /* views of it as each dtype, made on first use */
} frame;

/* The tensor of arena buffer i: a view of the call's arena (new ref). */
static PyObject *
arena_view(ProgramObject *p, frame *f, int i)
{
    rbuf *r = &p->bufs[i];
    if (f->arena == NULL || r->dt < 0 || r->dt >= KN_NDTYPES || r->arena_off % kn_dtypes[r->dt].size) {
        KN_INTERNAL("arena buffer %d has no arena view", i);
        return NULL;
    }
    if (f->typed[r->dt] == NULL) {
        PyObject *dt = PyTuple_GET_ITEM(rt_dtypes, r->dt);
        f->typed[r->dt] = PyObject_CallMethod(f->arena, "view", "O", dt);
        if (f->typed[r->dt] == NULL)
            return NULL;
    }
    long long off = (long long)(r->arena_off / kn_dtypes[r->dt].size);
    return PyObject_CallFunction(rt_reinterpret ? rt_reinterpret : rt_as_strided, "OOOL", f->typed[r->dt], r->size,
                                 r->stride, off);
}

static int
data_ptr(PyObject *t, void **out)
{
    PyObject *v = PyObject_CallMethodNoArgs(t, str_data_ptr);
    if (v == NULL)
        return -1;
    *out = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
alloc_tensor(ProgramObject *p, rbuf *r)
{
    if (p->cuda && !p->emulated && rt_empty_strided_cuda && r->cuda_args)
        return PyObject_Call(rt_empty_strided_cuda, r->cuda_args, NULL);   /* on the current device */
    return PyObject_Call(rt_empty_strided, r->alloc_args, p->kw[r->dt] ? p->kw[r->dt] : dtype_kwargs[r->dt]);
}

/* Tensor object for buffer i (creating alias views on demand). New ref. */
static PyObject *
buffer_object(ProgramObject *p, frame *f, int i)
{
    if (f->obj[i])
        return Py_NewRef(f->obj[i]);
    rbuf *r = &p->bufs[i];
    if (r->arena_view) {
        PyObject *v = arena_view(p, f, i);
        if (v == NULL)
            return NULL;
        f->obj[i] = v;
        return Py_NewRef(v);
    }
    if (r->kind == KN_B_ALIAS) {
        PyObject *base = buffer_object(p, f, r->base);
        if (base == NULL)
            return NULL;
        if (rt_reinterpret) {
            PyObject *v = PyObject_CallFunction(rt_reinterpret, "OOOL", base, r->size, r->stride, (long long)r->offset);
            Py_DECREF(base);
            if (v == NULL)
                return NULL;
            f->obj[i] = v;
            return Py_NewRef(v);
        }
        PyObject *so = PyObject_CallMethodNoArgs(base, str_storage_offset);
        if (so == NULL) {
            Py_DECREF(base);
            return NULL;
        }
        long long off = PyLong_AsLongLong(so) + r->offset;
        Py_DECREF(so);
        PyObject *v = PyObject_CallFunction(rt_as_strided, "OOOL", base, r->size, r->stride, off);
        Py_DECREF(base);
        if (v == NULL)
            return NULL;
        f->obj[i] = v;
        return Py_NewRef(v);
    }
    KN_INTERNAL("buffer %d has no tensor at this point", i);
    return NULL;
}

/* Copy of template o with every node reference replaced by its tensor. */
static PyObject *
fill_args(ProgramObject *p, frame *f, rstep *st, PyObject *o)
{
    if (Py_TYPE(o) == (PyTypeObject *)rt_ref_type) {
        long ni = PyLong_AsLong(o);
        for (int k = 0; k < st->nover; k++)
            if (st->over_node[k] == ni)
                return buffer_object(p, f, st->over_buf[k]);
        /* the buffer the step was lowered (and its lifetimes planned) with:
           an output copy made later rebinds the node in node_buf */
        if (st->in_node)
            for (int k = 0; k < st->nin; k++)
                if (st->in_node[k] == ni)
                    return buffer_object(p, f, st->in[k]);
        if (ni < 0 || ni >= p->nnodes || p->node_buf[ni] < 0) {
            if (!PyErr_Occurred())
                KN_INTERNAL("bad reference (node %ld) in an extern call", ni);
            return NULL;
        }
        return buffer_object(p, f, p->node_buf[ni]);
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject *out = PyList_Check(o) ? PyList_New(n) : PyTuple_New(n);
        if (out == NULL)
            return NULL;
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *v = fill_args(p, f, st, PySequence_Fast_GET_ITEM(o, k));
            if (v == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            if (PyList_Check(out))
                PyList_SET_ITEM(out, k, v);
            else
                PyTuple_SET_ITEM(out, k, v);
        }
        return out;
    }
    if (PyDict_Check(o)) {
        PyObject *out = PyDict_New(), *k, *v;
        Py_ssize_t pos = 0;
        if (out == NULL)
            return NULL;
        while (PyDict_Next(o, &pos, &k, &v)) {
            PyObject *fv = fill_args(p, f, st, v);
            if (fv == NULL || PyDict_SetItem(out, k, fv) < 0) {
                Py_XDECREF(fv);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(fv);
        }
        return out;
    }
    return Py_NewRef(o);
}

static PyObject *str_stride, *str_copy_;

/* An extern result must have the strides the kernels were compiled for (the
   traced ones, or channels-last for convolutions); if ATen chose another
   layout, copy it into the expected one.  Steals t; returns a new ref. */
static PyObject *
expected_layout(ProgramObject *p, rbuf *r, PyObject *t)
{
    if (str_stride == NULL) {
        str_stride = PyUnicode_InternFromString("stride");
        str_copy_ = PyUnicode_InternFromString("copy_");
        if (str_stride == NULL || str_copy_ == NULL)
            goto error;
    }
    PyObject *st = PyObject_CallMethodNoArgs(t, str_stride);
    if (st == NULL)
        goto error;
    int ok = PyTuple_Check(st) && PyTuple_GET_SIZE(st) == r->ndim;
    for (int d = 0; ok && d < r->ndim; d++) {
        if (PyLong_AsLongLong(PyTuple_GET_ITEM(r->size, d)) <= 1)
            continue;
        if (PyLong_AsLongLong(PyTuple_GET_ITEM(st, d)) != PyLong_AsLongLong(PyTuple_GET_ITEM(r->stride, d)))
            ok = 0;
    }
    Py_DECREF(st);
    if (PyErr_Occurred())
        goto error;
    if (ok)
        return t;
    PyObject *fresh = alloc_tensor(p, r);
    if (fresh == NULL)
        goto error;
    PyObject *res = PyObject_CallMethodOneArg(fresh, str_copy_, t);
    Py_DECREF(t);
    if (res == NULL) {
        Py_DECREF(fresh);
        return NULL;
    }
    Py_DECREF(res);
    return fresh;
error:
    Py_DECREF(t);
    return NULL;
}

static int
set_obj(ProgramObject *p, frame *f, int i, PyObject *t)
{
    Py_XSETREF(f->obj[i], t);
    if (p->bufs[i].dt < KN_NDTYPES && t != Py_None)
        return data_ptr(t, &f->ptr[i]);
    return 0;
}

static int
run_extern(ProgramObject *p, frame *f, rstep *st)
{
    PyObject *a = fill_args(p, f, st, st->cargs);
    if (a == NULL)
        return -1;
    PyObject *kw = fill_args(p, f, st, st->ckwargs);
    if (kw == NULL) {
        Py_DECREF(a);
        return -1;
    }
    PyObject *r = PyObject_Call(st->op, a, kw);
    Py_DECREF(a);
    Py_DECREF(kw);
    if (r == NULL)
        return -1;
    if (st->nres == 1 && p->bufs[st->res[0]].extern_index < 0) {
        if (p->bufs[st->res[0]].dt < KN_NDTYPES && r != Py_None && (r = expected_layout(p, &p->bufs[st->res[0]], r)) == NULL)
            return -1;
        return set_obj(p, f, st->res[0], r);
    }
    if (!PyTuple_Check(r) && !PyList_Check(r)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_RuntimeError, "kiln: extern call returned a single value where a tuple was expected");
        return -1;
    }
    for (int k = 0; k < st->nres; k++) {
        if (k >= PySequence_Fast_GET_SIZE(r))
            break;
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(r, k));
        if (p->bufs[st->res[k]].dt < KN_NDTYPES && item != Py_None &&
            (item = expected_layout(p, &p->bufs[st->res[k]], item)) == NULL) {
            Py_DECREF(r);
            return -1;
        }
        if (set_obj(p, f, st->res[k], item) < 0) {
            Py_DECREF(r);
            return -1;
        }
    }
    Py_DECREF(r);
    return 0;
}

/* Hash of n bytes: four lanes of (h + w) * odd constant, each step a
   bijection of h for a fixed word, so any single changed word changes it. */
static uint64_t
bytes_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h[4] = {1, 2, 3, 4};
    size_t words = n / 8, i = 0;
    for (; i + 4 <= words; i += 4) {
        for (int j = 0; j < 4; j++) {
            uint64_t w;
            memcpy(&w, s + (i + (size_t)j) * 8, 8);
            h[j] = (h[j] + w) * 0x9E3779B97F4A7C15ULL;
        }
    }
    for (; i < words; i++) {
        uint64_t w;
        memcpy(&w, s + i * 8, 8);
        h[0] = (h[0] + w) * 0x9E3779B97F4A7C15ULL;
    }
    for (size_t k = words * 8; k < n; k++)
        h[1] = (h[1] + s[k]) * 0x9E3779B97F4A7C15ULL;
    return h[0] ^ (h[1] * 3) ^ (h[2] * 5) ^ (h[3] * 7);
}

/* oneDNN with the packed weight against ATen's addmm/mm, per shape, decided
   once per process by timing both on the first call (MKL's sgemm is fast on
   some CPUs and slow on others): (rows bucket, K, N, bias, w_kn) ->
   False/True.  Rows go by bucket (rows_bucket): a graph with a symbolic
   batch or sequence length meets a new row count at every size, and the
   two libraries' relative speed does not turn within a power of two. */
static PyObject *linear_choice;
static int linear_force = -1; /* -1: measure; 0: always ATen; 1: always packed */

/* Packed weights shared by every program: the sizes of one symbolic graph
   (each its own Program), two graphs over one model.  (weight's address,
   N, K, w_kn, rows bucket) -> (hash of its bytes, packed, weak reference
   to the weight tensor).  An entry serves a step whose weight has that
   address, shape and hash (the same bytes: the packing is a function of
   them); entries whose tensor is gone are swept whenever one is added,
   and kiln.reset() clears them all (runtime_reset). */
static PyObject *packed_shared;

/* the arenas programs share (arena_take, arena_give): the CPU's, and the
   GPU's (and the emulator's), each kept with the device and stream it was
   last used on */
#define ARENA_POOL 4
typedef struct {
    PyObject *t;
    int64_t bytes;
    long dev;
    uintptr_t stream;
} arena_slot;
static arena_slot cpu_pool[ARENA_POOL], gpu_pool[ARENA_POOL];

static int64_t
rows_bucket(int64_t m)
{
    if (m <= 16)
        return m;
    int64_t b = 16;
    while (b < m && b < ((int64_t)1 << 40))
        b <<= 1;
    return b;
}

PyObject *
kn_py_runtime_reset(PyObject *self, PyObject *unused)
{
    Py_CLEAR(linear_choice);
    Py_CLEAR(packed_shared);
    for (int i = 0; i < ARENA_POOL; i++) {
        Py_CLEAR(cpu_pool[i].t);
        Py_CLEAR(gpu_pool[i].t);
    }
    Py_RETURN_NONE;
}

/* The shared packing of weight object w (address wp, n0 x n1, hash h) for
   step st, or NULL (new reference; NULL with an error set on failure,
   without one when there is none yet). */
static PyObject *
shared_packed(rstep *st, void *wp, int64_t n0, int64_t n1, uint64_t h, PyObject **keyp)
{
    *keyp = Py_BuildValue("(KLLiL)", (unsigned long long)(uintptr_t)wp, (long long)n0, (long long)n1, st->w_kn,
                          (long long)rows_bucket(st->rows));
    if (*keyp == NULL || packed_shared == NULL)
        return NULL;
    PyObject *e = PyDict_GetItemWithError(packed_shared, *keyp);   /* borrowed */
    if (e == NULL)
        return NULL;
    uint64_t eh = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(e, 0));
    if (eh == (uint64_t)-1 && PyErr_Occurred())
        return NULL;
    return eh == h ? Py_NewRef(PyTuple_GET_ITEM(e, 1)) : NULL;
}

static int
weak_alive(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *o = NULL;
    if (PyWeakref_GetRef(ref, &o) < 0)
        PyErr_Clear();
    Py_XDECREF(o);
    return o != NULL;
#else
    return PyWeakref_GET_OBJECT(ref) != Py_None;
#endif
}

/* Keep `packed` as the shared packing under key (for weight object w):
   best effort (a failure here only loses the sharing). */
static void
share_packed(PyObject *key, uint64_t h, PyObject *packed, PyObject *w)
{
    if (packed_shared == NULL && (packed_shared = PyDict_New()) == NULL) {
        PyErr_Clear();
        return;
    }
    /* sweep the entries of tensors that are gone */
    PyObject *dead = PyList_New(0), *k, *v;
    Py_ssize_t pos = 0;
    while (dead && PyDict_Next(packed_shared, &pos, &k, &v)) {
        if (!weak_alive(PyTuple_GET_ITEM(v, 2)) && PyList_Append(dead, k) < 0)
            Py_CLEAR(dead);
    }
    for (Py_ssize_t i = 0; dead && i < PyList_GET_SIZE(dead); i++)
        PyDict_DelItem(packed_shared, PyList_GET_ITEM(dead, i));
    Py_XDECREF(dead);
    PyErr_Clear();   /* (a failed sweep, out of memory, only keeps dead entries) */
    PyObject *ref = PyWeakref_NewRef(w, NULL);
    PyObject *e = ref ? Py_BuildValue("(KOO)", (unsigned long long)h, packed, ref) : NULL;
    if (e == NULL || PyDict_SetItem(packed_shared, key, e) < 0)
        PyErr_Clear();
    Py_XDECREF(e);
    Py_XDECREF(ref);
}

PyObject *
kn_py_set_linear_mode(PyObject *self, PyObject *arg)
{
    long m = PyLong_AsLong(arg);
    if (m == -1 && PyErr_Occurred())
        return NULL;
    if (m < -1 || m > 1) {
        PyErr_SetString(PyExc_ValueError, "kiln: linear mode is -1 (measure), 0 (ATen) or 1 (packed)");
        return NULL;
    }
    linear_force = (int)m;
    Py_CLEAR(linear_choice);
    Py_RETURN_NONE;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_extern(ProgramObject *p, frame *f, rstep *st);

/* x @ W.t() (+ b) on a packed copy of W.  The copy is made on the first call
   and again whenever W's address or bytes change, so a weight updated in
   place (even through .data) is never read stale. */
static int
run_packed(ProgramObject *p, frame *f, rstep *st)
{
    int xi = st->in[0], wi = st->in[1], bi = st->has_bias ? st->in[2] : -1;
    rbuf *w = &p->bufs[wi];
    int64_t n0 = PyLong_AsLongLong(PyTuple_GET_ITEM(w->size, 0)), n1 = PyLong_AsLongLong(PyTuple_GET_ITEM(w->size, 1));
    size_t bytes = (size_t)(n0 * n1) * sizeof(float);
    uint64_t h;
    void *wp = f->ptr[wi];
    Py_BEGIN_ALLOW_THREADS
    h = bytes_hash(wp, bytes);
    Py_END_ALLOW_THREADS
    if (st->packed == NULL || st->pack_ptr != wp || st->pack_hash != h) {
        PyObject *key = NULL;
        PyObject *packed = shared_packed(st, wp, n0, n1, h, &key);
        if (packed == NULL && PyErr_Occurred()) {
            Py_XDECREF(key);
            return -1;
        }
        if (packed != NULL) {
            Py_DECREF(key);
            Py_XSETREF(st->packed, packed);
            st->pack_ptr = wp;
            st->pack_hash = h;
            goto packed_ready;
        }
        PyObject *wt = Py_NewRef(f->obj[wi]);
        if (st->w_kn) {
            /* [K, N] -> a contiguous [N, K] copy, made only when packing */
            PyObject *t = PyObject_CallMethod(wt, "t", NULL);
            Py_DECREF(wt);
            wt = t ? PyObject_CallMethod(t, "contiguous", NULL) : NULL;
            Py_XDECREF(t);
            if (wt == NULL) {
                Py_XDECREF(key);
                return -1;
            }
        }
        packed = PyObject_CallFunction(rt_reorder_linear, "OL", wt, (long long)st->rows);
        Py_DECREF(wt);
        if (packed == NULL) {
            Py_XDECREF(key);
            return -1;
        }
        if (st->packed)
            st->repacks++;
        else if (key != NULL)
            share_packed(key, h, packed, f->obj[wi]);
        Py_XDECREF(key);
        Py_XSETREF(st->packed, packed);
        st->pack_ptr = wp;
        st->pack_hash = h;
    }
packed_ready:;
    PyObject *x = buffer_object(p, f, xi);
    if (x == NULL)
        return -1;
    PyObject *b = bi >= 0 ? buffer_object(p, f, bi) : Py_NewRef(Py_None);
    if (b == NULL) {
        Py_DECREF(x);
        return -1;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(rt_linear_pointwise, x, st->packed, b, rt_none_str, rt_empty_list,
                                               rt_empty_str, NULL);
    Py_DECREF(x);
    Py_DECREF(b);
    if (r == NULL)
        return -1;
    if ((r = expected_layout(p, &p->bufs[st->res[0]], r)) == NULL)
        return -1;
    return set_obj(p, f, st->res[0], r);
}

static int
run_linear(ProgramObject *p, frame *f, rstep *st)
{
    if (linear_force >= 0)
        return linear_force ? run_packed(p, f, st) : run_extern(p, f, st);
    /* an operand that changes from call to call (an activation, a gradient)
       is not a weight: packing it each call never pays */
    if (st->repacks >= 2) {
        Py_CLEAR(st->packed);
        return run_extern(p, f, st);
    }
    rbuf *w = &p->bufs[st->in[1]], *x = &p->bufs[st->in[0]];
    PyObject *key = Py_BuildValue("(LOOii)", (long long)rows_bucket(st->rows), PyTuple_GET_ITEM(x->size, 1),
                                  PyTuple_GET_ITEM(w->size, st->w_kn ? 1 : 0), st->has_bias, st->w_kn);
    if (key == NULL)
        return -1;
    if (linear_choice == NULL && (linear_choice = PyDict_New()) == NULL) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *choice = PyDict_GetItemWithError(linear_choice, key);
    if (choice == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    if (choice == NULL) {
        /* time both (the first packed call packs: not timed), keep the best */
        double best[2] = {1e30, 1e30};
        if (run_packed(p, f, st) < 0) {
            Py_DECREF(key);
            return -1;
        }
        for (int rep = 0; rep < 3; rep++)
            for (int v = 0; v < 2; v++) {
                double t0 = now_s();
                if ((v ? run_packed(p, f, st) : run_extern(p, f, st)) < 0) {
                    Py_DECREF(key);
                    return -1;
                }
                double t = now_s() - t0;
                if (t < best[v])
                    best[v] = t;
            }
        choice = best[1] < best[0] ? Py_True : Py_False;
        if (PyDict_SetItem(linear_choice, key, choice) < 0) {
            Py_DECREF(key);
            return -1;
        }
    }
    Py_DECREF(key);
    return choice == Py_True ? run_packed(p, f, st) : run_extern(p, f, st);
}

/* Arenas shared by every program: a few per pool, the largest kept.  A
   program takes the smallest that holds its arena for the call and gives
   it back after (a call inside another's takes another one), so the sizes
   of a symbolic graph, each a program, share memory instead of holding an
   arena each: on the CPU a new size's first call touches no fresh pages; on
   a GPU (gpu_pool) memory no longer grows with the sizes seen, nor does
   every new size allocate afresh.  A GPU arena is taken only on the device
   and stream it was last used on (whose work is ordered before the call's),
   never during a CUDA graph capture (program_call keeps those per program);
   the CPU's are all device -1, stream 0. */
static PyObject *
arena_take(arena_slot *pool, int64_t need, long dev, uintptr_t stream, int64_t *have)
{
    int best = -1;
    for (int i = 0; i < ARENA_POOL; i++)
        if (pool[i].t && pool[i].dev == dev && pool[i].stream == stream && pool[i].bytes >= need &&
            (best < 0 || pool[i].bytes < pool[best].bytes))
            best = i;
    if (best < 0)
        return NULL;
    PyObject *a = pool[best].t;
    *have = pool[best].bytes;
    pool[best].t = NULL;
    return a;
}

static void
arena_give(arena_slot *pool, PyObject *arena, int64_t bytes, long dev, uintptr_t stream)
{
    int slot = -1;
    for (int i = 0; i < ARENA_POOL && slot < 0; i++)
        if (pool[i].t == NULL)
            slot = i;
    if (slot < 0) {   /* full: it replaces the smallest, if it is larger */
        slot = 0;
        for (int i = 1; i < ARENA_POOL; i++)
            if (pool[i].bytes < pool[slot].bytes)
                slot = i;
        if (pool[slot].bytes >= bytes) {
            Py_DECREF(arena);
            return;
        }
        Py_CLEAR(pool[slot].t);
    }
    pool[slot].t = arena;
    pool[slot].bytes = bytes;
    pool[slot].dev = dev;
    pool[slot].stream = stream;
}

static PyObject *
program_call(ProgramObject *self, PyObject *args, PyObject *kw)
{
    if ((self->cuda && !self->emulated ? self->cumod == NULL : self->library == NULL) && self->nkernels > 0) {
        PyErr_SetString(PyExc_RuntimeError, "kiln: program not loaded");
        return NULL;
    }
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs != self->ninputs) {
        PyErr_Format(PyExc_TypeError, "kiln: compiled graph takes %d inputs, got %zd", self->ninputs, nargs);
        return NULL;
    }
    int n = self->nbufs;
    void *ptr_small[67];
    PyObject *obj_small[64];
    frame f;
    f.ptr = n <= 64 ? ptr_small : calloc((size_t)n + 3, sizeof(void *));
    f.obj = n <= 64 ? obj_small : calloc((size_t)n, sizeof(PyObject *));
    if (f.ptr == NULL || f.obj == NULL) {
        if (n > 64) {
            free(f.ptr);
            free(f.obj);
        }
        return PyErr_NoMemory();
    }
    memset(f.ptr, 0, sizeof(void *) * (size_t)n);
    memset(f.obj, 0, sizeof(PyObject *) * (size_t)n);
    f.arena = NULL;
    memset(f.typed, 0, sizeof f.typed);
    /* the call's error record, pointer n of the frame: kernels record a bad
       index or an integer division by zero there (codegen/prelude.h) */
    int64_t err[3] = {0, 0, 0};
    f.ptr[n] = err;
    /* a parametric build's size values (set_size_params), read by its kernels */
    f.ptr[n + 1] = self->size_ints;
    f.ptr[n + 2] = self->size_floats;
    PyObject *result = NULL, *arena = NULL;
    int64_t arena_have = 0;
    uintptr_t stream = 0;
    int capturing = 0; /* CUDA: this call is captured into a CUDA graph (its arena its own) */
    long dev = -1;     /* CUDA: the device's index (-1: the emulator's host arenas) */
    int eslot = -1; /* CUDA: the index in errs of this call's error record */
    if (self->cuda && !self->emulated && self->nkernels > 0) {
        /* torch's current stream, read once per call (kiln/cuda.py sets the
           getter before any CUDA program gets kernels) */
        if (rt_cuda_stream == NULL || self->device_index == NULL) {
            KN_INTERNAL("CUDA program run before it was loaded");
            goto done;
        }
        PyObject *sv = PyObject_CallOneArg(rt_cuda_stream, self->device_index);
        if (sv == NULL)
            goto done;
        stream = (uintptr_t)PyLong_AsUnsignedLongLong(sv);
        Py_DECREF(sv);
        if (PyErr_Occurred())
            goto done;
        if (self->checks) {
            /* "async": first raise what an earlier call's kernels recorded */
            int cap = self->err_mode == KN_ERRS_OFF ? 0 : kn_cuda_capturing(stream);
            if (cap < 0 || (!cap && self->err_mode == KN_ERRS_ASYNC && poll_errors(self, 0) < 0))
                goto done;
            errslot *sl = error_slot(self, stream, cap);
            if (sl == NULL || data_ptr(sl->dev, &f.ptr[n]) < 0)
                goto done;
            if (sl->clear) {
                if (kn_cuda_clear(f.ptr[n], 3 * sizeof(int64_t), stream) < 0)
                    goto done;
                sl->clear = 0;
            }
            eslot = (int)(sl - self->errs);
        }
    } else if (self->emulated && self->checks && self->err_mode == KN_ERRS_ASYNC && poll_errors(self, 0) < 0) {
        goto done;
    }
    for (int i = 0; i < n; i++) {
        rbuf *r = &self->bufs[i];
        if (r->kind == KN_B_INPUT) {
            PyObject *t = PyTuple_GET_ITEM(args, r->input_index);
            f.obj[i] = Py_NewRef(t);
            if (r->dt < KN_NDTYPES && t != Py_None && data_ptr(t, &f.ptr[i]) < 0)
                goto done;
        }
    }
    if (self->arena_bytes > 0) {
        /* take a shared arena (arena_take; re-entrant calls
           take another); under a CUDA graph capture the program's own, kept
           for it on the capture's stream */
        if (self->cuda && !self->emulated) {
            if (self->nkernels == 0 || self->device_index == NULL) {
                capturing = 1;   /* (no stream read for it: its own arena) */
            } else {
                capturing = kn_cuda_capturing(stream);
                if (capturing < 0) {
                    /* (a driver without cuStreamIsCapturing: the program's
                       own arena, as before the pool) */
                    PyErr_Clear();
                    capturing = 1;
                }
                dev = PyLong_AsLong(self->device_index);
                if (dev == -1 && PyErr_Occurred())
                    goto done;
            }
        }
        if (!self->cuda) {
            arena = arena_take(cpu_pool, self->arena_bytes, -1, 0, &arena_have);
        } else if (!capturing) {
            arena = arena_take(gpu_pool, self->arena_bytes, dev, stream, &arena_have);
        } else if (self->arena_cache && self->arena_stream == stream) {
            arena = self->arena_cache;
            self->arena_cache = NULL;
        }
        if (arena == NULL) {
            arena_have = self->arena_bytes;
            PyObject *sz = Py_BuildValue("(L)", (long long)self->arena_bytes);
            arena = sz ? PyObject_Call(rt_empty, sz, self->kw[KN_U8] ? self->kw[KN_U8] : dtype_kwargs[KN_U8]) : NULL;
            Py_XDECREF(sz);
            if (arena == NULL)
                goto done;
        }
        void *base;
        if (data_ptr(arena, &base) < 0)
            goto done;
        f.arena = arena;
        for (int i = 0; i < n; i++)
            if (self->bufs[i].arena_off >= 0 && !self->bufs[i].own_tensor)
                f.ptr[i] = (char *)base + self->bufs[i].arena_off;
    }
    int64_t *hns = self->host_ns, t0 = hns ? now_ns() : 0;
    if (hns)
        self->host_calls++;
    for (int s = 0; s < self->nsteps; s++) {
        rstep *st = &self->steps[s];
        for (int j = 0; j < st->nalloc; j++) {
            int i = st->alloc[j];
            int from = self->bufs[i].inplace_of;
            PyObject *t = from >= 0 && f.obj[from] ? Py_NewRef(f.obj[from]) : alloc_tensor(self, &self->bufs[i]);
            if (t == NULL || set_obj(self, &f, i, t) < 0)
                goto done;
        }
        if (hns) {
            int64_t t1 = now_ns();
            hns[2 * s] += t1 - t0;
            t0 = t1;
        }
        if (st->kind == KN_ST_KERNEL && st->empty) {
            /* no elements: its tensors were allocated above */
        } else if (st->kind == KN_ST_KERNEL && self->cuda) {
            int k = st->kernel, np = self->knparams[k];
            void *params_small[128];
            void **params = np < 128 ? params_small : malloc(sizeof(void *) * (size_t)(np + 1));
            if (params == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            for (int j = 0; j < np; j++)
                params[j] = &f.ptr[self->kparams[k][j]];
            /* a parametric build's kernels take this size's values last */
            params[np] = self->size_ints;
            int rc = 0;
            if (self->emulated) {
                /* kernels stride over their space by the grid: a small grid
                   computes the same result, and emulates far sooner */
                unsigned blocks = self->kblocks[k] < 3 ? self->kblocks[k] : 3;
                void (*ef)(void **, unsigned, unsigned) = self->emufns[k];
                Py_BEGIN_ALLOW_THREADS
                ef(params, blocks, (unsigned)self->kthreads[k]);
                Py_END_ALLOW_THREADS
                if (err[0] && self->err_mode == KN_ERRS_SYNC)
                    rc = raise_kernel_error(err) < 0 ? no_replay() : 0;
            } else {
                if (self->tune_reps > 0 && self->ktune[k] && self->ktunable[k])
                    rc = tune_kernel(self, k, stream, params);
                if (rc == 0)
                    rc = kn_cuda_launch(self->cufns[k], self->kblocks[k], (unsigned)self->kthreads[k], stream, params);
            }
            if (params != params_small)
                free(params);
            if (rc < 0)
                goto done;
        } else if (st->kind == KN_ST_KERNEL) {
            kn_kernel_fn fn = self->fns[st->kernel];
            void *const *ptrs = (void *const *)f.ptr;
            Py_BEGIN_ALLOW_THREADS
            fn(ptrs);
            Py_END_ALLOW_THREADS
            if (err[0]) {
                raise_kernel_error(err);
                goto done;
            }
        } else if (st->kind == KN_ST_LINEAR) {
            if (run_linear(self, &f, st) < 0)
                goto done;
        } else if (run_extern(self, &f, st) < 0) {
            goto done;
        }
        for (int j = 0; j < st->nfree; j++)
            Py_CLEAR(f.obj[st->free_after[j]]);
        if (hns) {
            int64_t t1 = now_ns();
            hns[2 * s + 1] += t1 - t0;
            t0 = t1;
        }
    }
    self->tune_reps = 0; /* a tuning run tunes once */
    /* CUDA: one read of the device's error record per call (a wait for the
       stream), only for programs whose kernels check indices */
    if (eslot >= 0 && self->err_mode == KN_ERRS_SYNC) {
        int rc = kn_cuda_read_error(f.ptr[n], err, stream);
        if (rc < 0 || (rc == 0 && err[0] && raise_kernel_error(err) < 0 && no_replay() < 0))
            goto done;
    }
    result = PyList_New(self->noutputs);
    if (result == NULL)
        goto done;
    for (int k = 0; k < self->noutputs; k++) {
        int b = self->out_buf[k];
        PyObject *v;
        if (b >= 0) {
            v = f.obj[b] ? Py_NewRef(f.obj[b]) : buffer_object(self, &f, b);
            if (v == NULL) {
                Py_CLEAR(result);
                goto done;
            }
        } else {
            v = Py_NewRef(PyList_GET_ITEM(self->outputs, k));
        }
        PyList_SET_ITEM(result, k, v);
    }
done:
    if (result == NULL && eslot >= 0 && self->err_mode == KN_ERRS_SYNC) {
        /* a call that failed after its kernels were queued: clear what they
           may have recorded, so the next call does not raise it */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (kn_cuda_read_error(f.ptr[n], err, stream) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    if (eslot >= 0 && self->err_mode == KN_ERRS_ASYNC && !self->errs[eslot].captured) {
        /* queue a copy of the record and an event after it, unless one is
           still in flight: the record keeps its first violation, so the
           next copy carries what this call's kernels recorded */
        errslot *sl = &self->errs[eslot];
        sl->dirty = 1;
        if (!sl->pending) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            if (kn_cuda_errcopy_post(sl->copy, f.ptr[n], stream) == 0) {
                sl->pending = 1;
                sl->dirty = 0;
                PyErr_Restore(et, ev, tb);
            } else if (et == NULL) {
                Py_CLEAR(result); /* the driver's error */
            } else {
                PyErr_Clear();
                PyErr_Restore(et, ev, tb);
            }
        }
    }
    if (self->emulated && self->err_mode == KN_ERRS_ASYNC && err[0] && !self->emu_err[0])
        memcpy(self->emu_err, err, sizeof err); /* raised at the next call */
    for (int i = 0; i < n; i++)
        Py_XDECREF(f.obj[i]);
    for (int d = 0; d < KN_NDTYPES; d++)
        Py_XDECREF(f.typed[d]);
    if (arena && !self->cuda) {
        arena_give(cpu_pool, arena, arena_have, -1, 0);
    } else if (arena && !capturing) {
        arena_give(gpu_pool, arena, arena_have, dev, stream);
    } else if (arena) {
        if (self->arena_cache == NULL) {
            self->arena_cache = arena;
            self->arena_stream = stream;
        } else {
            Py_DECREF(arena);
        }
    }
    if (n > 64) {
        free(f.ptr);
        free(f.obj);
    }
    return result;
}

/* Launch-size tuning (max-autotune).  Every CUDA kernel strides over its
   space by the grid, so any number of blocks up to the one codegen chose
   computes the same result; fewer blocks that each do more work can be
   faster (less scheduling, more loads in flight per thread) or slower (less
   parallelism).  Candidates: codegen's choice, its halves, and whole waves
   of 1..16 blocks per multiprocessor below it; each is timed over
   tune_reps launches with CUDA events on the run's stream, and the fastest
   is kept for the kernel.  Only kernels that write nothing they read are
   tuned: re-running them is harmless. */
static int
tune_kernel(ProgramObject *self, int k, uintptr_t stream, void **params)
{
    unsigned b0 = self->kblocks0[k], cand[12];
    int n = 0;
    cand[n++] = b0;
    for (unsigned h = b0 / 2; h >= 1 && n < 4; h /= 2)
        cand[n++] = h;
    static const unsigned waves[] = {1, 2, 4, 8, 16};
    for (int w = 0; w < 5 && n < 12; w++) {
        unsigned v = (unsigned)self->sms * waves[w];
        int dup = v >= b0;
        for (int j = 0; j < n && !dup; j++)
            dup = cand[j] == v;
        if (!dup)
            cand[n++] = v;
    }
    unsigned best = self->kblocks[k];
    float best_ms = -1.0f;
    for (int j = 0; j < n; j++) {
        float ms = 0.0f;
        int rc = kn_cuda_time_launch(self->cufns[k], cand[j], (unsigned)self->kthreads[k], stream, params,
                                     self->tune_reps, &ms);
        if (rc < 0)
            return -1;
        if (rc > 0)
            return 0; /* no events in this driver: keep codegen's choice */
        /* a smaller grid must win by 3% to be kept (timing noise) */
        if (best_ms < 0.0f || ms < best_ms * (cand[j] < best ? 0.97f : 1.0f)) {
            best_ms = ms;
            best = cand[j];
        }
    }
    self->kblocks[k] = best;
    self->ktune[k] = 0;
    return 0;
}

/* cuda_launch_sizes() -> [(name or None, blocks, codegen's blocks, threads, tunable)] per kernel */
static PyObject *
program_cuda_launch_sizes(ProgramObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->cuda)
        return PyList_New(0);
    PyObject *out = PyList_New(self->nkernels);
    if (out == NULL)
        return NULL;
    for (int k = 0; k < self->nkernels; k++) {
        PyObject *name = self->cunames ? PyList_GET_ITEM(self->cunames, k) : Py_None;
        PyObject *t = Py_BuildValue("(OIIii)", name, self->kblocks[k], self->kblocks0[k], self->kthreads[k],
                                    (int)self->ktunable[k]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, t);
    }
    return out;
}

/* set_cuda_launch_size(kernel, blocks): a launch size found earlier (the
   tuning cache); at most codegen's, at least 1. */
static PyObject *
program_set_cuda_launch_size(ProgramObject *self, PyObject *args)
{
    int k;
    unsigned long blocks;
    if (!PyArg_ParseTuple(args, "ik", &k, &blocks))
        return NULL;
    if (!self->cuda || k < 0 || k >= self->nkernels) {
        PyErr_SetString(PyExc_IndexError, "kiln: no such CUDA kernel in this program");
        return NULL;
    }
    if (blocks < 1 || blocks > self->kblocks0[k]) {
        PyErr_Format(PyExc_ValueError, "kiln: launch size %lu outside 1..%u", blocks, self->kblocks0[k]);
        return NULL;
    }
    self->kblocks[k] = (unsigned)blocks;
    self->ktune[k] = 0;
    Py_RETURN_NONE;
}

/* tune_next_run(reps, kernels): the next run times launch sizes of these
   kernels (indices) before launching each, and keeps the fastest. */
static PyObject *
program_tune_next_run(ProgramObject *self, PyObject *args)
{
    int reps;
    PyObject *which;
    if (!PyArg_ParseTuple(args, "iO!", &reps, &PyList_Type, &which))
        return NULL;
    if (!self->cuda)
        Py_RETURN_NONE;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(which); j++) {
        long k = PyLong_AsLong(PyList_GET_ITEM(which, j));
        if (k == -1 && PyErr_Occurred())
            return NULL;
        if (k < 0 || k >= self->nkernels) {
            PyErr_SetString(PyExc_IndexError, "kiln: no such CUDA kernel in this program");
            return NULL;
        }
        self->ktune[k] = 1;
    }
    self->tune_reps = reps > 0 ? reps : 0;
    Py_RETURN_NONE;
}

/* Diagnostics (benchmarks/diag/host_steps.py): where a call's host time
   goes, step by step. */
static PyObject *
program_host_profile(ProgramObject *self, PyObject *on)
{
    int want = PyObject_IsTrue(on);
    if (want < 0)
        return NULL;
    PyObject *rows = PyList_New(0);
    if (rows == NULL)
        return NULL;
    for (int s = 0; self->host_ns && s < self->nsteps; s++) {
        rstep *st = &self->steps[s];
        PyObject *what;
        const char *kind;
        if (st->kind == KN_ST_KERNEL) {
            kind = "kernel";
            what = self->cunames && st->kernel < PyList_GET_SIZE(self->cunames)
                       ? Py_NewRef(PyList_GET_ITEM(self->cunames, st->kernel))
                       : PyUnicode_FromFormat("k%d", st->kernel);
        } else {
            kind = st->kind == KN_ST_LINEAR ? "linear" : "extern";
            what = st->op ? PyObject_Str(st->op) : PyUnicode_FromString("?");
        }
        PyObject *row = what ? Py_BuildValue("(sNLL)", kind, what, (long long)self->host_ns[2 * s],
                                             (long long)self->host_ns[2 * s + 1]) : NULL;
        if (row == NULL || PyList_Append(rows, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(rows);
            return NULL;
        }
        Py_DECREF(row);
    }
    PyObject *res = Py_BuildValue("(lN)", self->host_calls, rows);
    free(self->host_ns);
    self->host_ns = NULL;
    self->host_calls = 0;
    if (want && res && (self->host_ns = calloc((size_t)self->nsteps * 2 + 1, sizeof(int64_t))) == NULL) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    return res;
}

/* check_errors(synchronized=False): raise a violation that kernels of an
   earlier call recorded on the GPU ("async" mode), once its copy has
   arrived; synchronized=True after a wait for the device also reads what
   calls since the last copy recorded. */
static PyObject *
program_check_errors(ProgramObject *self, PyObject *args)
{
    int synchronized = 0;
    if (!PyArg_ParseTuple(args, "|p", &synchronized))
        return NULL;
    if (self->err_mode == KN_ERRS_ASYNC && poll_errors(self, synchronized) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* set_size_params(ints, floats): the values of the size holes of a
 * parametric build (kiln/kernel_params.py), before load() (a CUDA
 * program's: before load_cuda / load_emulated, each tuple as long as the
 * build's struct kn_sizes declares it). */
static PyObject *
program_set_size_params(ProgramObject *self, PyObject *args)
{
    PyObject *ints, *floats;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &ints, &PyTuple_Type, &floats))
        return NULL;
    Py_ssize_t ni = PyTuple_GET_SIZE(ints), nf = PyTuple_GET_SIZE(floats);
    if (self->cuda) {
        /* one block, laid out as the build's struct kn_sizes: the ints, then the doubles */
        int64_t *blk = malloc(sizeof(int64_t) * (size_t)(ni + nf + 1));
        if (blk == NULL)
            return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < ni + nf; i++) {
            if (i < ni) {
                blk[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ints, i));
                if (blk[i] == -1 && PyErr_Occurred()) {
                    free(blk);
                    return NULL;
                }
            } else {
                double d = PyFloat_AsDouble(PyTuple_GET_ITEM(floats, i - ni));
                if (d == -1.0 && PyErr_Occurred()) {
                    free(blk);
                    return NULL;
                }
                memcpy(&blk[i], &d, sizeof d);
            }
        }
        free(self->size_ints);
        self->size_ints = blk;
        return Py_NewRef(Py_None);
    }
    int64_t *iv = malloc(sizeof(int64_t) * (size_t)(ni + 1));
    double *fv = malloc(sizeof(double) * (size_t)(nf + 1));
    if (iv == NULL || fv == NULL) {
        free(iv);
        free(fv);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < ni; i++) {
        iv[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ints, i));
        if (iv[i] == -1 && PyErr_Occurred())
            goto bad;
    }
    for (Py_ssize_t i = 0; i < nf; i++) {
        fv[i] = PyFloat_AsDouble(PyTuple_GET_ITEM(floats, i));
        if (fv[i] == -1.0 && PyErr_Occurred())
            goto bad;
    }
    free(self->size_ints);
    free(self->size_floats);
    self->size_ints = iv;
    self->size_floats = fv;
    Py_RETURN_NONE;
bad:
    free(iv);
    free(fv);
    return NULL;
}

static PyMethodDef program_methods[] = {
    {"set_size_params", (PyCFunction)program_set_size_params, METH_VARARGS,
     "set_size_params(ints, floats): the values a parametric build's kernels read for their size holes."},
    {"check_errors", (PyCFunction)program_check_errors, METH_VARARGS,
     "Raise an index or division error that kernels of an earlier call recorded on the GPU (async mode)."},
    {"load", (PyCFunction)program_load, METH_O, "Bind the kernels of a loaded kiln._C.Library."},
    {"load_emulated", (PyCFunction)program_load_emulated, METH_VARARGS,
     "load_emulated(library, names): run this CUDA program's kernels on the CPU (kiln/cuda_emulator.py)."},
    {"load_cuda", (PyCFunction)program_load_cuda, METH_VARARGS,
     "load_cuda(module, device, device_index, names=None): bind the kernels of a kiln._C.CudaModule "
     "(kernel k is names[k], else <prefix>k<k>)."},
    {"cuda_launch_sizes", (PyCFunction)program_cuda_launch_sizes, METH_NOARGS,
     "[(name, blocks, codegen's blocks, threads, tunable)] per CUDA kernel."},
    {"set_cuda_launch_size", (PyCFunction)program_set_cuda_launch_size, METH_VARARGS,
     "set_cuda_launch_size(kernel, blocks): launch kernel with this many blocks (1..codegen's)."},
    {"host_profile", (PyCFunction)program_host_profile, METH_O,
     "host_profile(on): from now on (True) or never (False) time each step's CPU work; returns the times so "
     "far as (calls, [(kind, what, alloc ns, step ns)] per step), summed over calls."},
    {"tune_next_run", (PyCFunction)program_tune_next_run, METH_VARARGS,
     "tune_next_run(reps, kernels): the next run times launch sizes of these kernels and keeps the fastest."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef program_members[] = {
    {"source", T_OBJECT, offsetof(ProgramObject, source), READONLY, "generated C (kernels only)"},
    {"prefix", T_OBJECT, offsetof(ProgramObject, prefix), READONLY, "symbol prefix of the kernels"},
    {"stats", T_OBJECT, offsetof(ProgramObject, stats), READONLY, "counts for kiln.explain"},
    {"loops", T_OBJECT, offsetof(ProgramObject, loops), READONLY, "loop-IR dump"},
    {"forms", T_OBJECT, offsetof(ProgramObject, forms), READONLY,
     "each CUDA kernel's forms (int32 x KN_FORM_N, codegen/cuda.c), for compile(..., forms)"},
    {"fusion", T_OBJECT, offsetof(ProgramObject, fusion), READONLY,
     "per KERNEL step of the lowering, 1 where its buffer joined the kernel before it (compile/fuse.c), "
     "for compile(..., fusion)"},
    {"library", T_OBJECT, offsetof(ProgramObject, library), READONLY, "the loaded Library"},
    {"num_kernels", T_INT, offsetof(ProgramObject, nkernels), READONLY, "number of generated kernels"},
    {"cuda", T_INT, offsetof(ProgramObject, cuda), READONLY, "1 for a CUDA program"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject kn_ProgramType = {
    KN_TYPE_HEAD("Program", ProgramObject, Py_TPFLAGS_DEFAULT,
                 "A compiled graph: call it with the graph's inputs to run its steps."),
    .tp_dealloc = (destructor)program_dealloc,
    .tp_call = (ternaryfunc)program_call,
    .tp_methods = program_methods,
    .tp_members = program_members,
};
