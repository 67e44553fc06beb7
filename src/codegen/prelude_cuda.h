/* prelude_cuda.h — text placed at the top of every generated CUDA program
 * (embedded into the extension by setup.py, like prelude.h for C).  NVRTC
 * compiles it with no system headers: the fixed-width types and limits are
 * defined here, the math functions are CUDA's built-in device functions.
 * Outside NVRTC (no __CUDACC_RTC__) the same text compiles as C++ on the CPU
 * under kiln/cuda_emulator.py's shim, which supplies those from the C library.
 * The scalar helpers have the names and semantics of prelude.h's
 * (kn_<op>_<tag>), so both renderers share scalar.def's templates. */
#ifdef __CUDACC_RTC__
typedef unsigned char uint8_t;
typedef signed char int8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef bool b_t;
#define INT8_MIN (-128)
#define INT8_MAX 127
#define UINT8_MAX 255
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-INT64_MAX - 1LL)
#define INT64_C(v) v##LL
#define NAN __int_as_float(0x7fc00000)
#define INFINITY __int_as_float(0x7f800000)

#endif
#define KN_D __device__ __forceinline__

/* A bad index is recorded in the call's error record { code, value, size }
   (the first one wins; codes as in prelude.h) and raised by the host after
   the call; the kernel goes on with a clamped index. */
#define KN_E_INDEX_SELF 1
#define KN_E_INDEX 2
#define KN_E_GATHER 3
#define KN_E_ZERODIV 4
#define KN_E_DATA_BOUNDS 5
#define KN_E_WRAP 0x10000
__device__ __noinline__ void kn_flag(int64_t *e, int64_t code, int64_t v, int64_t n) {
#ifdef __CUDACC_RTC__
    if (atomicCAS((unsigned long long *)e, 0ull, (unsigned long long)code) == 0ull) {
#else
    int64_t z = 0;
    if (__atomic_compare_exchange_n(e, &z, code, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
#endif
        e[1] = v;
        e[2] = n;
    }
}
KN_D int64_t kn_chk(int64_t v, int64_t n, int64_t code, int64_t *e) {
    int64_t lo = (code & KN_E_WRAP) ? -n : 0;
    if (v < lo || v >= n) kn_flag(e, code, v, n);
    return v;
}

KN_D float kn_bf2f(uint16_t v) { return __uint_as_float((unsigned)v << 16); }
KN_D uint16_t kn_f2bf(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    /* one instruction from sm_80 on (as __float2bfloat16, eager's rounding) */
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
#ifdef __CUDACC_RTC__
KN_D float kn_h2f(uint16_t v) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
KN_D uint16_t kn_f2h(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#else /* kiln's CPU emulation of CUDA kernels (kiln/cuda_emulator.py) */
KN_D float kn_h2f(uint16_t v) { _Float16 h; memcpy(&h, &v, 2); return (float)h; }
KN_D uint16_t kn_f2h(float f) { _Float16 h = (_Float16)f; uint16_t v; memcpy(&v, &h, 2); return v; }
#endif

#define KN_FLOAT_TARGET_OPS(T, tag, F)                                                           \
KN_D T kn_max_##tag(T a, T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }            \
KN_D T kn_min_##tag(T a, T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }            \
KN_D T kn_fmax_##tag(T a, T b) { return fmax##F(a, b); } /* as ATen's GPU kernel */               \
KN_D T kn_fmin_##tag(T a, T b) { return fmin##F(a, b); } /* as ATen's GPU kernel */               \
KN_D T kn_rsqrt_##tag(T a) { return rsqrt##F(a); }                                                \
KN_D b_t kn_isnan_##tag(T a) { return a != a; }                                                   \
KN_D b_t kn_isinf_##tag(T a) { return isinf(a); }                                                 \
KN_D b_t kn_signbit_##tag(T a) { return signbit(a) != 0; }
#include "prelude_float.h"

KN_FLOAT_OPS(float, f32, f)
KN_FLOAT_OPS(double, f64, )

/* Integer division by zero: on the GPU it does not trap, and eager CUDA
   returns whatever the hardware's division gives, so the device code divides
   as ATen's kernels do; the CPU emulator (which would trap) returns 0. */
#ifdef __CUDACC_RTC__
#define KN_DIV0(b) 0
#else
#define KN_DIV0(b) ((b) == 0)
#endif
#define KN_INT_OPS(T, tag)                                                                        \
KN_D T kn_truncdiv_##tag(T a, T b, int64_t *e) {                                                              \
    if (KN_DIV0(b)) return 0;                                                                     \
    if (b == -1) return (T)(0 - (uint64_t)a);                                                     \
    return (T)(a / b); }                                                                          \
KN_D T kn_div_##tag(T a, T b) { return kn_truncdiv_##tag(a, b, 0); }                                 \
KN_D T kn_floordiv_##tag(T a, T b, int64_t *e) {                                                              \
    if (KN_DIV0(b)) return 0;                                                                     \
    if (b == -1) return (T)(0 - (uint64_t)a);                                                     \
    T q = (T)(a / b);                                                                             \
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;                                             \
    return q; }                                                                                   \
KN_D T kn_rem_##tag(T a, T b, int64_t *e) {                                                                   \
    if (KN_DIV0(b) || b == -1) return 0;                                                          \
    T m = (T)(a % b);                                                                             \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                                   \
    return m; }                                                                                   \
KN_D T kn_fmod_##tag(T a, T b, int64_t *e) { return (KN_DIV0(b) || b == -1) ? 0 : (T)(a % b); }               \
KN_D T kn_abs_##tag(T a) { return a < 0 ? (T)(0 - (uint64_t)a) : a; }                             \
KN_D T kn_max_##tag(T a, T b) { return a > b ? a : b; }                                           \
KN_D T kn_min_##tag(T a, T b) { return a < b ? a : b; }                                           \
KN_D T kn_sign_##tag(T a) { return (T)((a > 0) - (a < 0)); }                                      \
KN_D T kn_pow_##tag(T a, T b) {                                                                   \
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);                            \
    uint64_t r = 1, x = (uint64_t)a; int64_t e = b;                                               \
    while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }                                             \
    return (T)r; }                                                                                \
KN_D T kn_bnot_##tag(T a) { return (T)~a; }                                                       \
KN_D T kn_shl_##tag(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? 0 : (T)((uint64_t)a << b); } \
KN_D T kn_shr_##tag(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? (a < 0 ? -1 : 0) : (T)(a >> b); } \
KN_D b_t kn_isnan_##tag(T a) { (void)a; return 0; }                                               \
KN_D b_t kn_isinf_##tag(T a) { (void)a; return 0; }                                               \
KN_D b_t kn_signbit_##tag(T a) { return a < 0; }

KN_INT_OPS(uint8_t, u8)
KN_INT_OPS(int8_t, i8)
KN_INT_OPS(int16_t, i16)
KN_INT_OPS(int32_t, i32)
KN_INT_OPS(int64_t, i64)

KN_D b_t kn_max_b(b_t a, b_t b) { return a || b; }
KN_D b_t kn_min_b(b_t a, b_t b) { return a && b; }
KN_D b_t kn_abs_b(b_t a) { return a; }
KN_D b_t kn_sign_b(b_t a) { return a; }
KN_D b_t kn_bnot_b(b_t a) { return !a; }
KN_D b_t kn_isnan_b(b_t a) { (void)a; return 0; }
KN_D b_t kn_isinf_b(b_t a) { (void)a; return 0; }
KN_D b_t kn_signbit_b(b_t a) { (void)a; return 0; }
KN_D b_t kn_pow_b(b_t a, b_t b) { return a || !b; }
KN_D b_t kn_div_b(b_t a, b_t b) { return b ? a : 0; }
KN_D b_t kn_truncdiv_b(b_t a, b_t b, int64_t *e) { return b ? a : 0; }
KN_D b_t kn_floordiv_b(b_t a, b_t b, int64_t *e) { return b ? a : 0; }
KN_D b_t kn_rem_b(b_t a, b_t b, int64_t *e) { (void)a; (void)b; return 0; }
KN_D b_t kn_fmod_b(b_t a, b_t b, int64_t *e) { (void)a; (void)b; return 0; }
KN_D b_t kn_shl_b(b_t a, b_t b) { return b ? 0 : a; }
KN_D b_t kn_shr_b(b_t a, b_t b) { return b ? 0 : a; }

/* a vector of N values loaded or stored as one aligned access (16 bytes
   for four floats) */
template <typename T, int N> struct alignas(sizeof(T) * N) kn_vec { T v[N]; };

/* ---- reductions across the threads of a row group (G lanes, G | 32, or a
   whole block through shared memory) */
KN_D int kn_shfl(int v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
KN_D unsigned kn_shfl(unsigned v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
KN_D long long kn_shfl(long long v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
KN_D float kn_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
KN_D double kn_shfl(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
KN_D bool kn_shfl(bool v, int o) { return __shfl_xor_sync(0xffffffffu, (int)v, o) != 0; }
KN_D uint8_t kn_shfl(uint8_t v, int o) { return (uint8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
KN_D int8_t kn_shfl(int8_t v, int o) { return (int8_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
KN_D int16_t kn_shfl(int16_t v, int o) { return (int16_t)__shfl_xor_sync(0xffffffffu, (int)v, o); }
#ifndef __CUDACC_RTC__
KN_D long kn_shfl(long v, int o) { return (long)__shfl_xor_sync(0xffffffffu, (long long)v, o); }
#endif

/* argmax/argmin: (value, index) pairs; a NaN wins (the first one), ties go
   to the smaller index, as torch does */
template <typename T> KN_D void kn_argcomb(T &m, long long &a, T m2, long long a2, bool is_max) {
    bool n1 = m != m, n2 = m2 != m2;
    bool take;
    if (n1 || n2)
        take = n2 && (!n1 || a2 < a);
    else
        take = is_max ? (m2 > m || (m2 == m && a2 < a)) : (m2 < m || (m2 == m && a2 < a));
    if (take) { m = m2; a = a2; }
}
