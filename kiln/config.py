"""kiln.config — the knobs.  Environment variables (KILN_*, CC, CXX) set the
defaults when kiln is imported; assign the attributes to change them later.
Every variable and attribute, its default, its effect and when it is read:
docs/CONFIG.md.
"""
import os

cache_dir = os.environ.get("KILN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln")
cc = os.environ.get("CC") or "cc"
cxx = os.environ.get("CXX") or "c++"
cuda_emulate = os.environ.get("KILN_CUDA_EMULATE", "") not in ("", "0")
# -fwrapv: integer overflow wraps as in torch; no -ffast-math: NaN and inf
# keep torch's semantics; -ffp-contract=off: an expression that two kernels
# both compute (a fused kernel recomputes its producers) rounds the same in
# each, so x - mean(x) of a constant row is exactly 0 (gcc's default
# contracts each copy into its own multiply-adds).
cflags = "-O3 -march=native -fopenmp -fPIC -fno-math-errno -fno-trapping-math -fwrapv -ffp-contract=off -w"
# GPU graphs whose kernels index with tensor values: how their error record
# is read ("async", "sync" or "off"; read when a graph is loaded, see
# runtime/run.c).  "1" (the old on) is "async".
def _index_errors_mode(v):
    v = v.strip().lower()
    if v in ("", "0", "off", "false", "no"):
        return "off"
    if v in ("sync", "async"):
        return v
    if v not in ("1", "on", "true", "yes"):
        import warnings
        warnings.warn(f"kiln: KILN_CUDA_INDEX_ERRORS={v!r} is not async, sync or off: using async")
    return "async"


cuda_index_errors = _index_errors_mode(os.environ.get("KILN_CUDA_INDEX_ERRORS", "async"))
# a compiler process (gcc with its cc1/as/ld children) still running after
# this many seconds is killed: CompilerError, and the graph runs eagerly
try:
    cc_timeout = float(os.environ.get("KILN_CC_TIMEOUT", "600"))
except ValueError:
    cc_timeout = 600.0



def _libmvec():
    # glibc >= 2.35 ships vector exp/log/tanh/erf/... in libmvec (x86-64)
    try:
        import platform
        name, ver = os.confstr("CS_GNU_LIBC_VERSION").split()
        major, minor = (int(x) for x in ver.split(".")[:2])
        return name == "glibc" and (major, minor) >= (2, 35) and platform.machine() == "x86_64"
    except (ValueError, OSError, AttributeError):
        return False


if _libmvec() and os.environ.get("KILN_NO_LIBMVEC", "") in ("", "0"):
    cflags += " -DKN_LIBMVEC -lmvec"
dump = {s.strip() for s in os.environ.get("KILN_DUMP", "").split(",") if s.strip()}
# a status line on stderr (a terminal only) for a compile past 2 s (kiln/progress.py)
progress = os.environ.get("KILN_PROGRESS", "1") not in ("0", "")
debug = os.environ.get("KILN_DEBUG", "") not in ("", "0")
disable = os.environ.get("KILN_DISABLE", "") not in ("", "0")
# record frames of installed libraries (site-packages: transformers' model
# code) when the hook meets them, as TorchDynamo does.  Off by default for
# now: recording them exposed wrong results the fixes for issue 15 have not
# covered yet (a FunnelModel output of the wrong shape; a KeyError from a
# T5/BART LM's ModelOutput), see docs/ARCHITECTURE.md, "Capture".  Read by
# kiln._capture.setup (call it again after changing this).
capture_libraries = os.environ.get("KILN_CAPTURE_LIBRARIES", "") not in ("", "0")
cache_size_limit = 8
# kiln.compile of a plain function returns the C callable itself instead of a
# functools.wraps wrapper around it (one Python frame less per call; the
# callable has no __name__/__doc__ of the function)
bare_callable = False
# who records Python into graphs for kiln.compile: "kiln" (the C recorder in
# src/capture) or "dynamo" (torch.compile's TorchDynamo, kept for comparison)
capture = os.environ.get("KILN_CAPTURE", "kiln")
# Linear layers (x @ W.t() + b with W a float32 input of the graph) run on
# oneDNN with a packed copy of W, re-packed whenever W's bytes change
# (KILN_PACKED_LINEAR=0 turns this off: then they are plain ATen addmm/mm).
packed_linear = os.environ.get("KILN_PACKED_LINEAR", "1") not in ("0", "")
# inference graphs without mutation of inputs lower by one plain make_fx
# trace instead of AOT export (see trace._trace_plain)
fast_lowering = os.environ.get("KILN_FAST_LOWERING", "1") not in ("0", "")
# ReLU / tanh-GELU right after a matmul on a GPU done by cuBLASLt's epilogue
lt_epilogues = os.environ.get("KILN_LT_EPILOGUES", "1") not in ("0", "")
# NVRTC's --Ofast-compile level for kiln's CUDA kernels ("" = off): "min"
# cuts NVRTC's time by about a third on kiln's kernels (fewer NVVM and ptxas
# passes) with no measurable cost to them (benchmarks/variants.py)
_ofc = os.environ.get("KILN_NVRTC_FAST_COMPILE", "min")
nvrtc_fast_compile = "" if _ofc in ("", "0", "off") else _ofc
# CUDA kernels with reductions over short rows (softmax, layer_norm,
# RMSNorm) keep each row in registers, loaded once as 16-byte vectors, across
# all their passes (codegen/cuda.c: gen_rows_regs)
cuda_row_registers = os.environ.get("KILN_CUDA_ROW_REGISTERS", "1") not in ("0", "")
# kiln::attention on a GPU where scaled_dot_product_attention would pick
# cuDNN's kernel: "cudnn" keeps it, "fused" calls flash attention (no mask)
# or the memory-efficient kernel instead.  cuDNN plans each new shape (about
# 70 ms per shape on an H100, torch 2.11: benchmarks/diag/attention_new_shapes.py),
# which a sweep over sizes pays at every one; the other two plan nothing
cuda_attention = os.environ.get("KILN_CUDA_ATTENTION", "fused")
# max-autotune modes on a GPU: timed launches per candidate launch size
autotune_reps = 20
# the plain trace with torch's Python dispatcher on (as AOT export): slower,
# and not needed once cudnn_batch_norm is decomposed (decomp.decompositions)
trace_python_dispatcher = os.environ.get("KILN_TRACE_PYTHON_DISPATCHER", "0") not in ("0", "")
# kernels per C translation unit before a graph is split into chunks that
# compile in parallel
chunk_kernels = 48
compile_jobs = max(1, os.cpu_count() or 1)
# graphs with symbolic sizes (kiln/dynamic.py): the compiled sizes kept per
# graph, least recently used first out
# a symbolic graph that needs grad (training) traced once by AOT autograd on
# its symbolic sizes, its forward and backward served per size from their own
# symbolic lowerings; off: each size is specialised and traced on its own
symbolic_training = os.environ.get("KILN_SYMBOLIC_TRAINING", "1") not in ("0", "")
dynamic_specializations = int(os.environ.get("KILN_DYNAMIC_SPECIALIZATIONS", "64") or 64)
# kiln.compile(dynamic=None): a recording made because an input's size
# changed records the sizes that changed as symbols ("automatic dynamic", as
# torch.compile); off: every new shape is a new recording (up to
# cache_size_limit)
automatic_dynamic_shapes = os.environ.get("KILN_AUTOMATIC_DYNAMIC", "1") not in ("0", "")
# a graph with symbolic sizes is lowered to ATen once, its sizes symbolic, and
# that lowering filled in for each size (kiln/template.py); off: every size is
# traced on its own.
symbolic_lowering = os.environ.get("KILN_SYMBOLIC_LOWERING", "1") not in ("0", "")
# the CPU kernels of such a graph's sizes share one native build where their
# C differs only in literals, read as size parameters (kiln/kernel_params.py);
# off: each size's kernels are built on their own.
parametric_kernels = os.environ.get("KILN_PARAMETRIC_KERNELS", "1") not in ("0", "")
# once one size of such a graph compiled from its symbolic lowering, later
# sizes skip the static path (the specialised graph, the front rewrites,
# kiln's checks on eager's kernels) and go from the filled-in lowering
# straight to the C core (kiln/dynamic.py PerSize._direct); off: every size
# takes the static path.
direct_sizes = os.environ.get("KILN_DIRECT_SIZES", "1") not in ("0", "")
