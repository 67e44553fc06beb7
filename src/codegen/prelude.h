/* prelude.h — text placed at the top of every generated C file (embedded
 * into the extension as a string by codegen/c.c).  Scalar helpers named
 * kn_<op>_<tag> for the tags b u8 i8 i16 i32 i64 f32 f64, with torch's
 * semantics: NaN-propagating max/min, Python-style remainder and floor
 * division, division by zero that never traps (an integer one is recorded in
 * the call's error record, which runtime/run.c raises as eager's
 * ZeroDivisionError), index checks (kn_chk), bfloat16 conversions with
 * round-to-nearest-even. */
#include <stdint.h>
#include <math.h>
#include <string.h>

typedef _Bool b_t;

/* Errors a kernel reports instead of trapping or reading out of bounds
   (runtime/run.c raises them after the kernel, as ATen would): every kernel
   gets kn_err, the call's error record { code, value, size }.  The first
   violation wins the record (a compare-exchange, so OpenMP threads race
   safely); the kernel goes on with a clamped index or a zero quotient, so it
   never touches memory outside its buffers.  Codes: kind | dim << 8 |
   KN_E_WRAP (the index may be negative, counted from the end). */
#define KN_E_INDEX_SELF 1   /* IndexError: index out of range in self */
#define KN_E_INDEX 2        /* IndexError: index v is out of bounds for dimension d with size n */
#define KN_E_GATHER 3       /* RuntimeError: the same words */
#define KN_E_ZERODIV 4      /* RuntimeError: ZeroDivisionError */
#define KN_E_DATA_BOUNDS 5  /* RuntimeError: INDICES element is out of DATA bounds (index_select, dim 1) */
#define KN_E_WRAP 0x10000
__attribute__((cold, noinline)) static void kn_flag(int64_t *e, int64_t code, int64_t v, int64_t n) {
    int64_t z = 0;
    if (e && __atomic_compare_exchange_n(&e[0], &z, code, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        e[1] = v;
        e[2] = n;
    }
}
/* the index v itself; flags it when it lies outside [0, n) (or [-n, n)) */
static inline int64_t kn_chk(int64_t v, int64_t n, int64_t code, int64_t *e) {
    int64_t lo = (code & KN_E_WRAP) ? -n : 0;
    if (__builtin_expect(v < lo || v >= n, 0)) kn_flag(e, code, v, n);
    return v;
}
static inline int kn_zerodiv(int64_t *e) { kn_flag(e, KN_E_ZERODIV, 0, 0); return 0; }

/* glibc's libmvec has vector versions of the float math functions; declaring
   them `simd` lets the vectoriser call them (kiln/config.py turns this on
   where glibc >= 2.35 provides them all). */
#ifdef KN_LIBMVEC
#define KN_SIMD1(T, f) extern T f(T) __attribute__((__simd__("notinbranch")));
KN_SIMD1(float, expf) KN_SIMD1(float, logf) KN_SIMD1(float, sinf) KN_SIMD1(float, cosf)
KN_SIMD1(float, tanhf) KN_SIMD1(float, erff) KN_SIMD1(float, expm1f) KN_SIMD1(float, log1pf)
KN_SIMD1(double, exp) KN_SIMD1(double, log) KN_SIMD1(double, tanh) KN_SIMD1(double, erf)
#endif

static inline float kn_bf2f(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t kn_f2bf(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* sign bit through the bits (gcc 12 miscompiles a vectorised signbit of a
   bfloat16 load) */
static inline b_t KN_SIGNBIT_f32(float a) { uint32_t u; memcpy(&u, &a, 4); return (u >> 31) != 0; }
static inline b_t KN_SIGNBIT_f64(double a) { uint64_t u; memcpy(&u, &a, 8); return (u >> 63) != 0; }

/* NaN-propagating max/min are written as a plain select plus an unordered
   test (a NaN operand makes a + b NaN): gcc 12 vectorises that form, but not
   `a != a` in a short-circuit condition nor a nested isnan select. */
#define KN_D static inline
#define KN_FLOAT_TARGET_OPS(T, tag, F)                                                           \
KN_D T kn_max_##tag(T a, T b) { T m = a > b ? a : b; return __builtin_isunordered(a, b) ? a + b : m; } \
KN_D T kn_min_##tag(T a, T b) { T m = a < b ? a : b; return __builtin_isunordered(a, b) ? a + b : m; } \
KN_D T kn_fmax_##tag(T a, T b) { return (a >= b || b != b) ? a : b; }                            \
KN_D T kn_fmin_##tag(T a, T b) { return (a <= b || b != b) ? a : b; }                            \
KN_D T kn_rsqrt_##tag(T a) { return (T)1 / sqrt##F(a); }                                         \
KN_D b_t kn_isnan_##tag(T a) { return __builtin_isnan(a) != 0; }                                 \
KN_D b_t kn_isinf_##tag(T a) { return isinf(a) != 0; }                                           \
KN_D b_t kn_signbit_##tag(T a) { return KN_SIGNBIT_##tag(a); }
#include "prelude_float.h"

KN_FLOAT_OPS(float, f32, f)
KN_FLOAT_OPS(double, f64, )

/* float -> integer casts with eager's (x86 ATen's) values where a C cast is
   undefined (NaN, +-inf, out of range): int64 and int32 give their minimum
   (cvttss2si's "integer indefinite"), int16 and int8 wrap the int32 value,
   uint8 wraps the int64 one. */
#define KN_F2I(T, tag)                                                                            \
static inline int64_t kn_f2i64_##tag(T a) {                                                       \
    return (a >= (T)-9223372036854775808.0 && a < (T)9223372036854775808.0) ? (int64_t)a : INT64_MIN; } \
static inline int32_t kn_f2i32_##tag(T a) {                                                       \
    return (a > (T)-2147483649.0 && a < (T)2147483648.0) ? (int32_t)a : INT32_MIN; }              \
static inline int16_t kn_f2i16_##tag(T a) { return (int16_t)kn_f2i32_##tag(a); }                  \
static inline int8_t kn_f2i8_##tag(T a) { return (int8_t)kn_f2i32_##tag(a); }                     \
static inline uint8_t kn_f2u8_##tag(T a) { return (uint8_t)kn_f2i64_##tag(a); }

KN_F2I(float, f32)
KN_F2I(double, f64)

/* An integer 0 the compiler cannot see (a global that could be interposed):
   (float)(int)x of a float x is emitted as (float)((int)x ^ kn_opaque_zero),
   since gcc with -fno-trapping-math turns (float)(int)x into trunc(x), which
   keeps the sign of a zero (eager: atan2(int(-0.3), -1) is +pi). */
int64_t kn_opaque_zero __attribute__((weak, visibility("default"))) = 0;

#define KN_INT_OPS(T, tag, MINV)                                                                  \
static inline T kn_truncdiv_##tag(T a, T b, int64_t *e) {                                         \
    if (b == 0) return kn_zerodiv(e);                                                                         \
    if (b == -1) return (T)(0 - (uint64_t)a);                                                     \
    return (T)(a / b); }                                                                          \
static inline T kn_div_##tag(T a, T b) { return b == 0 ? 0 : kn_truncdiv_##tag(a, b, NULL); }     \
static inline T kn_floordiv_##tag(T a, T b, int64_t *e) {                                         \
    if (b == 0) return kn_zerodiv(e);                                                                         \
    if (b == -1) return (T)(0 - (uint64_t)a);                                                     \
    T q = (T)(a / b);                                                                             \
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;                                             \
    return q; }                                                                                   \
static inline T kn_rem_##tag(T a, T b, int64_t *e) {                                              \
    if (b == 0) return kn_zerodiv(e);                                                             \
    if (b == -1) return 0;                                                              \
    T m = (T)(a % b);                                                                             \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                                   \
    return m; }                                                                                   \
static inline T kn_fmod_##tag(T a, T b, int64_t *e) { return b == 0 ? kn_zerodiv(e) : b == -1 ? 0 : (T)(a % b); } \
static inline T kn_abs_##tag(T a) { return a < 0 ? (T)(0 - (uint64_t)a) : a; }                    \
static inline T kn_max_##tag(T a, T b) { return a > b ? a : b; }                                  \
static inline T kn_min_##tag(T a, T b) { return a < b ? a : b; }                                  \
static inline T kn_sign_##tag(T a) { return (T)((a > 0) - (a < 0)); }                             \
static inline T kn_pow_##tag(T a, T b) {                                                          \
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);                            \
    uint64_t r = 1, x = (uint64_t)a; int64_t e = b;                                               \
    while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }                                             \
    return (T)r; }                                                                                \
static inline T kn_bnot_##tag(T a) { return (T)~a; }                                              \
static inline T kn_shl_##tag(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? 0 : (T)((uint64_t)a << b); } \
static inline T kn_shr_##tag(T a, T b) { return (b < 0 || b >= (T)(8 * sizeof(T))) ? (a < 0 ? -1 : 0) : (T)(a >> b); } \
static inline b_t kn_isnan_##tag(T a) { (void)a; return 0; }                                      \
static inline b_t kn_isinf_##tag(T a) { (void)a; return 0; }                                      \
static inline b_t kn_signbit_##tag(T a) { return a < 0; }

KN_INT_OPS(uint8_t, u8, 0)
KN_INT_OPS(int8_t, i8, INT8_MIN)
KN_INT_OPS(int16_t, i16, INT16_MIN)
KN_INT_OPS(int32_t, i32, INT32_MIN)
KN_INT_OPS(int64_t, i64, INT64_MIN)

static inline b_t kn_max_b(b_t a, b_t b) { return a || b; }
static inline b_t kn_min_b(b_t a, b_t b) { return a && b; }
static inline b_t kn_abs_b(b_t a) { return a; }
static inline b_t kn_sign_b(b_t a) { return a; }
static inline b_t kn_bnot_b(b_t a) { return !a; }
static inline b_t kn_isnan_b(b_t a) { (void)a; return 0; }
static inline b_t kn_isinf_b(b_t a) { (void)a; return 0; }
static inline b_t kn_signbit_b(b_t a) { (void)a; return 0; }
static inline b_t kn_pow_b(b_t a, b_t b) { return a || !b; }
static inline b_t kn_div_b(b_t a, b_t b) { return b ? a : 0; }
static inline b_t kn_truncdiv_b(b_t a, b_t b, int64_t *e) { (void)e; return b ? a : 0; }
static inline b_t kn_floordiv_b(b_t a, b_t b, int64_t *e) { (void)e; return b ? a : 0; }
static inline b_t kn_rem_b(b_t a, b_t b, int64_t *e) { (void)e; (void)a; (void)b; return 0; }
static inline b_t kn_fmod_b(b_t a, b_t b, int64_t *e) { (void)e; (void)a; (void)b; return 0; }
static inline b_t kn_shl_b(b_t a, b_t b) { return b ? 0 : a; }
static inline b_t kn_shr_b(b_t a, b_t b) { return b ? 0 : a; }

#ifdef _OPENMP
#include <omp.h>
#endif
