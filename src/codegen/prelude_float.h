/* prelude_float.h — the float ops every target spells alike.  setup.py
 * (embed_prelude) writes this file in place of the `#include "prelude_float.h"`
 * line of prelude.h and prelude_cuda.h; each defines before it KN_D (its
 * function qualifiers) and KN_FLOAT_TARGET_OPS(T, tag, F), the ops it spells
 * its own way (NaN-propagating max/min, fmax/fmin, rsqrt, isnan, isinf,
 * signbit).  KN_FLOAT_OPS(T, tag, F) defines them all for one float type. */
#define KN_FLOAT_OPS(T, tag, F)                                                                  \
KN_D T kn_div_##tag(T a, T b) { return a / b; }                                                   \
KN_D T kn_truncdiv_##tag(T a, T b, int64_t *e) { (void)e; return trunc##F(a / b); }               \
KN_D T kn_floordiv_##tag(T a, T b, int64_t *e) {                                                  \
    (void)e;                                                                                      \
    if (b == 0) return a / b;                                                                     \
    T m = fmod##F(a, b), d = (a - m) / b;                                                         \
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;                                                   \
    if (d == 0) return copysign##F((T)0, a / b);                                                  \
    T f = floor##F(d);                                                                            \
    if (d - f > (T)0.5) f += 1;                                                                   \
    return f; }                                                                                   \
KN_D T kn_rem_##tag(T a, T b, int64_t *e) {                                                       \
    (void)e;                                                                                      \
    T m = fmod##F(a, b);                                                                          \
    if (m != 0 && ((b < 0) != (m < 0))) m += b;                                                   \
    return m; }                                                                                   \
KN_D T kn_fmod_##tag(T a, T b, int64_t *e) { (void)e; return fmod##F(a, b); }                     \
KN_D T kn_abs_##tag(T a) { return fabs##F(a); }                                                   \
KN_D T kn_sign_##tag(T a) { return (T)((a > 0) - (a < 0)); } /* eager: sign(NaN) = 0 */           \
KN_D T kn_pow_##tag(T a, T b) { return pow##F(a, b); }                                            \
KN_D T kn_recip_##tag(T a) { return (T)1 / a; }                                                   \
KN_D T kn_sigmoid_##tag(T a) { return (T)1 / ((T)1 + exp##F(-a)); }                               \
KN_D T kn_gelu_##tag(T a) { return (T)0.5 * a * ((T)1 + erf##F(a * (T)0.70710678118654752440)); } \
KN_D T kn_gelu_tanh_##tag(T a) {                                                                  \
    T k = (T)0.79788456080286535588; /* sqrt(2/pi) */                                             \
    return (T)0.5 * a * ((T)1 + tanh##F(k * (a + (T)0.044715 * a * a * a))); }                    \
KN_FLOAT_TARGET_OPS(T, tag, F)
