/* module.c — the kiln._C extension module: entry points called by kiln's
 * Python shell.
 *
 *   compile(desc, prefix, want_loops[, packed_linear, cuda, sms, row_regs, forms, robust, fusion])
 *                                                   -> Program: parse, lower, fuse, plan, generate C
 *                                                   (CUDA C when cuda: sms sizes launches,
 *                                                   row_regs keeps rows in registers; forms,
 *                                                   robust, fusion: a size of a symbolic
 *                                                   lowering takes its first build's)
 *   build(units, cache_dir, cc, cflags, salt, jobs) -> (so_path, was_cached)
 *   prelude() -> str                                text heading every generated unit
 *   prelude_cuda() -> str                           text heading every generated CUDA program
 *   nvrtc_compile(src, arch[, nvrtc]) -> (cubin, log)  NVRTC only (no GPU needed)
 *   lowered_ops() -> list[str]                      ATen ops lowered in C (graph/ops.def)
 *   set_runtime(empty_strided, empty, as_strided, dtypes, uint8, Ref[, reorder, linear])
 *   set_linear_mode(-1 | 0 | 1)                     how linear layers choose oneDNN or ATen
 *   runtime_reset()                                 forget linear choices and shared packed weights
 *   Library(path), Program, CompilerError, ToolchainMissing, CompilerTimeout, InternalError,
 *   Unsupported (src/error.h)
 *   DTYPES                                          dtype names in code order (kiln.h:
 *                                                   KN_DTYPES; kiln/fx_bridge.py reads it)
 */
#include "kiln.h"
#include "error.h"

#include "runtime/runtime.h"
#include "capture/capture.h"   /* kn_capture_init */
#include <string.h>

static void
ctx_free(kn_ctx *c)
{
    free(c->table);
    c->table = NULL;
    kn_subst_memo_free(c);
    kn_arena_free(&c->arena);
    Py_CLEAR(c->extern_names);
}

PyObject *kn_py_index_expr(PyObject *self, PyObject *spec);   /* compile/index_hook.c */

static PyObject *
py_str_printf_check(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return kn_str_printf_check();
}
PyObject *kn_py_test_fault(PyObject *self, PyObject *name);   /* compile/index_hook.c */
PyObject *kn_py_match_params(PyObject *self, PyObject *args);   /* codegen/params.c */

static PyObject *
py_compile(PyObject *self, PyObject *args)
{
    PyObject *desc;
    const char *prefix;
    int want_loops, packed_linear = 0, cuda = 0, sms = 0, row_regs = 1, robust = 0;
    Py_buffer forms = {0}, fusion = {0};
    if (!PyArg_ParseTuple(args, "O!sp|ppipz*pz*", &PyTuple_Type, &desc, &prefix, &want_loops, &packed_linear, &cuda,
                          &sms, &row_regs, &forms, &robust, &fusion))
        return NULL;
    kn_ctx c;
    memset(&c, 0, sizeof c);
    c.cuda = cuda;
    c.cuda_sms = sms;
    c.cuda_row_regs = row_regs;
    /* a size of a symbolic lowering: the forms of the lowering's first build
       (its Program.forms), taken where valid; robust own forms elsewhere */
    if (forms.buf != NULL && forms.len % (Py_ssize_t)(sizeof(int32_t) * KN_FORM_N) == 0) {
        c.cuda_forms = forms.buf;
        c.cuda_nforms = (int)(forms.len / (Py_ssize_t)sizeof(int32_t));
    }
    c.cuda_robust = robust;
    /* a size of a symbolic lowering: the first build's fusion (its
       Program.fusion), whose joins this compile's may not exceed */
    if (fusion.buf != NULL) {
        c.fuse_ref = fusion.buf;
        c.fuse_nref = (int)fusion.len;
    }
    c.packed_linear = !cuda && packed_linear && kn_runtime_packed_linear();
    kn_str src = {0}, loops = {0};
    PyObject *source = NULL, *loops_s = NULL, *prog = NULL, *forms_out = NULL, *fusion_out = NULL;
    const char *stage = "setup";
    c.prefix = prefix;
    c.extern_names = PyList_New(0);
    if (c.extern_names == NULL)
        goto done;
    stage = "graph parsing";
    if (kn_graph_parse(&c, desc, &c.g) < 0)
        goto done;
    stage = "lowering";
    if (kn_lower_graph(&c) < 0)
        goto done;
    stage = "fusion";
    if (kn_fuse(&c) < 0)
        goto done;
    stage = "memory planning";
    if (kn_plan(&c) < 0)
        goto done;
    stage = "code generation";
    if ((cuda ? kn_codegen_cuda(&c, &src) : kn_codegen_c(&c, &src)) < 0)
        goto done;
    stage = "program construction";
    if (src.oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (want_loops)
        kn_dump_loops(&c, &loops);
    source = PyUnicode_FromStringAndSize(src.p ? src.p : "", (Py_ssize_t)src.n);
    loops_s = PyUnicode_FromStringAndSize(loops.p ? loops.p : "", (Py_ssize_t)loops.n);
    if (source == NULL || loops_s == NULL)
        goto done;
    /* the forms each CUDA kernel took, for the sizes that should share its build */
    forms_out = PyBytes_FromStringAndSize(NULL, cuda ? (Py_ssize_t)(sizeof(int32_t) * KN_FORM_N) * c.nkernels : 0);
    if (forms_out == NULL)
        goto done;
    for (int k = 0; cuda && k < c.nkernels; k++)
        memcpy(PyBytes_AS_STRING(forms_out) + sizeof(int32_t) * KN_FORM_N * (size_t)k, c.kernels[k].cu_form,
               sizeof(int32_t) * KN_FORM_N);
    /* and where each buffer joined a kernel, for the sizes that should fuse alike */
    fusion_out = PyBytes_FromStringAndSize((const char *)c.fuse_bits, c.fuse_bits ? c.fuse_nbits : 0);
    if (fusion_out == NULL)
        goto done;
    prog = kn_program_new(&c, desc, source, loops_s, forms_out, fusion_out);
done:
    if (forms.obj != NULL)
        PyBuffer_Release(&forms);
    if (fusion.obj != NULL)
        PyBuffer_Release(&fusion);
    Py_XDECREF(forms_out);
    Py_XDECREF(fusion_out);
    Py_XDECREF(source);
    Py_XDECREF(loops_s);
    kn_str_free(&src);
    kn_str_free(&loops);
    ctx_free(&c);
    if (prog == NULL && !PyErr_Occurred())   /* a stage failed without saying why: a kiln bug */
        KN_INTERNAL("%s failed without setting an exception", stage);
    return prog;
}

static PyObject *
py_prelude(PyObject *self, PyObject *args)
{
    const char *target = "c";
    if (!PyArg_ParseTuple(args, "|s", &target))
        return NULL;
    const char *text = kn_codegen_prelude(target);
    if (text == NULL)
        return PyErr_Format(PyExc_ValueError, "kiln: no code generation target %s (\"c\" or \"cuda\")", target);
    return PyUnicode_FromString(text);
}

static PyObject *
py_lowered_ops(PyObject *self, PyObject *unused)
{
    return kn_lowered_ops();
}

static PyMethodDef methods[] = {
    {"compile", py_compile, METH_VARARGS, "Compile a graph description into a Program (not yet loaded)."},
    {"build", kn_py_build, METH_VARARGS, "Compile C units into a cached shared object; returns (path, cached)."},
    {"prelude", py_prelude, METH_VARARGS,
     "prelude(target=\"c\"): the text that heads every generated unit of target \"c\" or \"cuda\"."},
    {"nvrtc_compile", kn_py_nvrtc_compile, METH_VARARGS,
     "nvrtc_compile(source, arch, nvrtc_path=None) -> (cubin, log): compile CUDA C with NVRTC alone."},
    {"lowered_ops", py_lowered_ops, METH_NOARGS, "Names of the ATen ops kiln lowers itself."},
    {"match_params", kn_py_match_params, METH_VARARGS,
     "match_params(plan, source, nints, nfloats) -> (ints, floats) or None: a size's parameter values read "
     "off its generated source against a parametric build's packed plan (src/codegen/params.c)."},
    {"test_fault", kn_py_test_fault, METH_O,
     "test_fault(name or None): break code generation on purpose (a test hook): 'bad_expr' makes every "
     "rendered addition an invalid C expression; None restores it."},
    {"index_expr", kn_py_index_expr, METH_O,
     "index_expr(spec) -> str: expr.c's canonical form of a nested-tuple index expression (a test hook)."},
    {"str_printf_check", py_str_printf_check, METH_NOARGS,
     "str_printf_check() -> str: text.c's formatter against libc's vsnprintf on a table of formats; \"\" "
     "when they agree (a test hook)."},
    {"set_runtime", kn_py_set_runtime, METH_VARARGS, "Hand the C runtime torch's allocation functions."},
    {"set_fast_runtime", kn_py_set_fast_runtime, METH_VARARGS,
     "set_fast_runtime(empty_strided_cuda, reinterpret_tensor): torch's lean bindings (None: not available)."},
    {"set_cuda_stream", kn_py_set_cuda_stream, METH_O,
     "Hand the C runtime a function: device index -> torch's current CUDA stream (an int)."},
    {"set_linear_mode", kn_py_set_linear_mode, METH_O,
     "Linear layers: -1 time oneDNN-packed against ATen per shape (default), 0 always ATen, 1 always packed."},
    {"runtime_reset", kn_py_runtime_reset, METH_NOARGS,
     "Forget the linear layers' timed choices and the packed weights shared between programs (kiln.reset)."},
    {"cuda_available", kn_py_cuda_available, METH_VARARGS,
     "cuda_available(nvrtc_path=None) -> (usable, reason, nvrtc_version): load the CUDA driver and NVRTC."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "kiln._C", "kiln's C core: lowering, fusion, code generation and the step runner.", -1,
    methods, NULL, NULL, NULL, NULL,
};

/* kn_dtype's names in code order, for kiln/fx_bridge.py's DTYPES. */
static PyObject *
dtype_names(void)
{
    PyObject *t = PyTuple_New(KN_NDTYPES);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < KN_NDTYPES; i++) {
        PyObject *n = PyUnicode_FromString(kn_dtypes[i].name);
        if (n == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, n);
    }
    return t;
}

PyMODINIT_FUNC
PyInit__C(void)
{
    if (PyType_Ready(&kn_LibraryType) < 0 || PyType_Ready(&kn_ProgramType) < 0 ||
        PyType_Ready(&kn_CudaModuleType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (m == NULL)
        return NULL;
    PyObject *ce = kn_compiler_error_type(), *ie = kn_internal_error_type(), *ue = kn_unsupported_type();
    PyObject *tm = kn_toolchain_missing_type(), *ct = kn_compiler_timeout_type();
    PyObject *dts = dtype_names();
    int bad = dts == NULL || PyModule_AddObjectRef(m, "DTYPES", dts) < 0;
    Py_XDECREF(dts);
    if (bad || ce == NULL || ie == NULL || ue == NULL || tm == NULL || PyModule_AddObjectRef(m, "CompilerError", ce) < 0 ||
        ct == NULL || PyModule_AddObjectRef(m, "ToolchainMissing", tm) < 0 ||
        PyModule_AddObjectRef(m, "CompilerTimeout", ct) < 0 ||
        PyModule_AddObjectRef(m, "InternalError", ie) < 0 || PyModule_AddObjectRef(m, "Unsupported", ue) < 0 ||
        PyModule_AddObjectRef(m, "Library", (PyObject *)&kn_LibraryType) < 0 ||
        PyModule_AddObjectRef(m, "Program", (PyObject *)&kn_ProgramType) < 0 ||
        PyModule_AddObjectRef(m, "CudaModule", (PyObject *)&kn_CudaModuleType) < 0 || kn_capture_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
