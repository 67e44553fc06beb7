"""kiln.cuda_emulator — run kiln's generated CUDA kernels on the CPU.

GPU time is scarce and CI has no GPU, so kiln checks what its CUDA renderer
generates by running it here: the CUDA source (prelude_cuda.h + kernels) is
compiled as C++ by the system compiler under a small shim, and every block of
a launch runs as one OS thread per CUDA thread, with `__syncthreads` and warp
shuffles made of barriers.  Kernels stride over their iteration space by the
grid, so a launch of a few blocks computes the whole result.  The program's
tensors stay on the host; everything else (lowering, fusion, the CUDA text,
the step loop with its launches) is what runs on a GPU.

Used by tests (`kiln.config.cuda_emulate = True`, or KILN_CUDA_EMULATE=1):
graphs on the CPU then compile through the CUDA renderer and run here.  It is
a correctness tool: slow, and blind to what only hardware shows (timing,
memory-model races between blocks, register limits).
"""
import re

from . import _C, config
from .cuda import unique_kernels

SHIM = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
typedef bool b_t;
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static
struct kn_dim3 { unsigned x, y, z; };
static thread_local kn_dim3 threadIdx, blockIdx;
static kn_dim3 blockDim, gridDim;
struct kn_emu_block {
    pthread_barrier_t bar;
    pthread_barrier_t warp[32];
    unsigned long long slot[1024];
};
static thread_local kn_emu_block *kn_emu_cur;
static inline void __syncthreads() { pthread_barrier_wait(&kn_emu_cur->bar); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) {
    kn_emu_block *b = kn_emu_cur;
    unsigned t = threadIdx.x, w = t >> 5, lane = t & 31;
    memcpy(&b->slot[t], &v, sizeof(T));
    pthread_barrier_wait(&b->warp[w]);
    T r;
    memcpy(&r, &b->slot[(w << 5) | (lane ^ (unsigned)o)], sizeof(T));
    pthread_barrier_wait(&b->warp[w]);
    return r;
}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
typedef void (*kn_emu_body)(void **);
struct kn_emu_arg { kn_emu_body body; void **params; unsigned tid, bid; kn_emu_block *blk; };
static void *kn_emu_thread(void *p) {
    kn_emu_arg *a = (kn_emu_arg *)p;
    threadIdx = {a->tid, 0, 0};
    blockIdx = {a->bid, 0, 0};
    kn_emu_cur = a->blk;
    a->body(a->params);
    return 0;
}
static void kn_emu_run(kn_emu_body body, void **params, unsigned blocks, unsigned threads) {
    gridDim = {blocks, 1, 1};
    blockDim = {threads, 1, 1};
    kn_emu_block *blk = new kn_emu_block;
    pthread_barrier_init(&blk->bar, 0, threads);
    for (unsigned w = 0; w < (threads + 31) / 32; w++)
        pthread_barrier_init(&blk->warp[w], 0, threads - 32 * w < 32 ? threads - 32 * w : 32);
    pthread_t *tids = new pthread_t[threads];
    kn_emu_arg *args = new kn_emu_arg[threads];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 18);
    for (unsigned b = 0; b < blocks; b++) {   /* blocks one after another: __shared__ is static */
        for (unsigned t = 0; t < threads; t++) {
            args[t] = {body, params, t, b, blk};
            pthread_create(&tids[t], &attr, kn_emu_thread, &args[t]);
        }
        for (unsigned t = 0; t < threads; t++)
            pthread_join(tids[t], 0);
    }
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&blk->bar);
    for (unsigned w = 0; w < (threads + 31) / 32; w++)
        pthread_barrier_destroy(&blk->warp[w]);
    delete[] tids;
    delete[] args;
    delete blk;
}
"""

_SIGNATURE = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(([^)]*)\)')


def _trampolines(source):
    """One `extern "C" kn_emu_<kernel>(params, blocks, threads)` per kernel:
    unpacks the launch's parameter array as cuLaunchKernel would."""
    out = []
    for name, params in _SIGNATURE.findall(source):
        types = []
        for p in params.split(","):
            p = p.strip()
            if not p:
                continue
            types.append(p.rsplit(" ", 1)[0].replace("__restrict__", "").strip())
        call = ", ".join(f"*({t}*)q[{i}]" for i, t in enumerate(types))
        out.append(f'extern "C" void kn_emu_{name}(void **p, unsigned blocks, unsigned threads) {{\n'
                   f'    kn_emu_run([](void **q) {{ {name}({call}); }}, p, blocks, threads);\n}}\n')
    return "".join(out)


def build(programs):
    """Compile CUDA Programs' kernels for the CPU emulator (through kiln's
    disk cache, with the system C++ compiler) and bind them."""
    lib, per_program, so, cached = compile_kernels(programs)
    for p, names in zip(programs, per_program):
        p.load_emulated(lib, names)
    return so, cached


def compile_kernels(programs, decls=""):
    """(library, per program its kernels' names, path, cached): the
    distinct kernels of `programs` (anything with .source and .num_kernels)
    compiled for the emulator, `decls` (a parametric build's declarations,
    kiln/kernel_params.py) after the prelude."""
    bodies, per_program = unique_kernels(programs)
    kernels = "".join(body.replace("KN_FN", fn, 1) for body, fn in bodies.items())
    unit = SHIM + _C.prelude("cuda") + decls + kernels + _trampolines(kernels)
    flags = "-O1 -std=c++17 -fPIC -pthread -fwrapv -w"
    from .pipeline import cc
    so, cached = cc([unit], config.cxx, flags, "kiln cuda emulator 1", 1)
    return _C.Library(so), per_program, so, cached
