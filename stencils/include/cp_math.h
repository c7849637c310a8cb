/*
 * cp_math.h - deterministic math kernels for copapy stencils.
 *
 * Every kernel is written in portable C11 using only IEEE-754 basic
 * operations (+ - * /, comparisons, int<->float conversions of in-range
 * values, correctly rounded square root) with a fixed evaluation order,
 * no FMA and no libm.  Compiled with -ffp-contract=off and without
 * fast-math, the result bits are therefore the same on every target.
 * See docs/math.md for algorithms, accuracy and special values.
 *
 *   - float32 kernels use float32 arithmetic and 32/64-bit integers only
 *     (no double anywhere), so they need no soft-float helpers on
 *     single-precision-only FPUs (Cortex-M4, RV32F).
 *   - float64 kernels use double (soft-float helpers where there is no
 *     double FPU).
 *   - Every NaN result is the canonical quiet NaN 0x7fc00000 /
 *     0x7ff8000000000000 (never a propagated payload), so NaN bits are
 *     deterministic too.
 */
#ifndef CP_MATH_H
#define CP_MATH_H

#include <stdint.h>
#include <stddef.h>

#if defined(__FLT_EVAL_METHOD__) && (__FLT_EVAL_METHOD__ != 0)
#error "cp_math requires FLT_EVAL_METHOD == 0 (on i386 use -mfpmath=sse -msse2)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the kernels --------------------------------------------------------
 * X(name, arity, accuracy) per kernel: cp_<name>f (float32) and cp_<name>
 * (float64) of one or two arguments; accuracy exact (exactly or correctly
 * rounded: tested bit for bit) or approx (the ulp bounds of docs/math.md).
 * The list declares the kernels here and drives their measurement
 * (tools/ulp_harness.c, tools/measure_ulp.py).  round is half to even (like
 * numpy.round); atan2 takes (y, x). */
#define CP_KERNELS(X)                                                          \
    X(sin, 1, approx)                                                          \
    X(cos, 1, approx)                                                          \
    X(tan, 1, approx)                                                          \
    X(asin, 1, approx)                                                         \
    X(acos, 1, approx)                                                         \
    X(atan, 1, approx)                                                         \
    X(atan2, 2, approx)                                                        \
    X(exp, 1, approx)                                                          \
    X(log, 1, approx)                                                          \
    X(pow, 2, approx)                                                          \
    X(tanh, 1, approx)                                                         \
    X(hypot, 2, approx)                                                        \
    X(log1p, 1, approx)                                                        \
    X(expm1, 1, approx)                                                        \
    X(sqrt, 1, exact)                                                          \
    X(floor, 1, exact)                                                         \
    X(ceil, 1, exact)                                                          \
    X(round, 1, exact)                                                         \
    X(trunc, 1, exact)                                                         \
    X(fmod, 2, exact)

#define CP_KERNEL_PROTO_1(name) float cp_##name##f(float x); double cp_##name(double x);
#define CP_KERNEL_PROTO_2(name)                                                \
    float cp_##name##f(float x, float y); double cp_##name(double x, double y);
#define CP_KERNEL_PROTO(name, arity, accuracy) CP_KERNEL_PROTO_##arity(name)
CP_KERNELS(CP_KERNEL_PROTO)

/* ---- block forms for the packed loops ----------------------------------
 * cp_v<name>_f32(out, a, n) / cp_v<name>_f64(out, a, n): out[i] = the scalar
 * kernel of a[i] for i < n, bit for bit (out may be a itself, never a partial
 * overlap).  Defined where the vector unit is IEEE-754 exact (CP_VMATH: x86
 * SSE2 and up, AArch64 Advanced SIMD; not the 32-bit ARM units, which flush
 * float32 denormals, see cp_array.h).  A block form evaluates blocks of
 * CP_VBLOCK elements with a branch-free copy of the kernel's operation
 * sequence (its fast path: selects instead of branches, so the C compiler
 * vectorises it; no FMA contraction), and recomputes a block with the scalar
 * kernel when one of its elements needs a path the copy does not have (a
 * large argument reduction, say).  The packed loops of the element lines of
 * kind vec call them (cp_elements.h). */
#if defined(__SSE2__) || defined(__aarch64__)
#define CP_VMATH 1
#else
#define CP_VMATH 0
#endif
#define CP_VKERNELS(X)                                                         \
    X(sqrt)                                                                    \
    X(sin)                                                                     \
    X(cos)                                                                     \
    X(exp)                                                                     \
    X(log)                                                                     \
    X(tanh)
#if CP_VMATH
#define CP_VKERNEL_PROTO(name)                                                 \
    void cp_v##name##_f32(float *out, const float *a, size_t n);               \
    void cp_v##name##_f64(double *out, const double *a, size_t n);
CP_VKERNELS(CP_VKERNEL_PROTO)
#endif
/* The fused loops' stencils of these kernels are defined with them (CP_VBLOCK_FORM). */
#if defined(CP_FUSE_BYTES) && !CP_VMATH
#error "CP_FUSE_BYTES (fused loops) needs an IEEE-exact vector unit (CP_VMATH)"
#endif

/* Correctly rounded integer-only square roots.  cp_sqrtf/cp_sqrt use these
 * on targets without a hardware square root; exported so that tests can
 * check them bit-for-bit against the hardware instruction. */
float cp_sqrtf_soft(float x);
double cp_sqrt_soft(double x);

#ifdef __cplusplus
}
#endif

/* ======================================================================
 * Internal helpers, only for the kernel sources (stencils/math/ *.c).
 * ====================================================================== */
#ifdef CP_MATH_IMPL

#define CP_INLINE static inline __attribute__((always_inline))

typedef union { float f; uint32_t u; } cp_u32f;
typedef union { double f; uint64_t u; } cp_u64d;

CP_INLINE uint32_t cp_f2u(float x) { cp_u32f v; v.f = x; return v.u; }
CP_INLINE float cp_u2f(uint32_t u) { cp_u32f v; v.u = u; return v.f; }
CP_INLINE uint64_t cp_d2u(double x) { cp_u64d v; v.f = x; return v.u; }
CP_INLINE double cp_u2d(uint64_t u) { cp_u64d v; v.u = u; return v.f; }

/* 64-bit shifts by a variable count s (0 <= s < 64) in the float32 kernels. TriCore: GCC
 * builds them from the register form of DEXTR, which unicorn and qemu (7.2) compute wrongly
 * for a count of 0 mod 32 (docs/tricore.md); the halves below compile without it. */
#if defined(__TRICORE__)
CP_INLINE uint64_t cp_shl64_tc(uint64_t x, uint32_t s)
{
    uint32_t hi = (uint32_t)(x >> 32), lo = (uint32_t)x;
    if (s >= 32u) { hi = lo << (s - 32u); lo = 0u; }
    else if (s != 0u) { hi = (hi << s) | ((lo >> 1) >> (31u - s)); lo <<= s; }
    return ((uint64_t)hi << 32) | lo;
}
CP_INLINE uint64_t cp_shr64_tc(uint64_t x, uint32_t s)
{
    uint32_t hi = (uint32_t)(x >> 32), lo = (uint32_t)x;
    if (s >= 32u) { lo = hi >> (s - 32u); hi = 0u; }
    else if (s != 0u) { lo = (lo >> s) | ((hi << 1) << (31u - s)); hi >>= s; }
    return ((uint64_t)hi << 32) | lo;
}
#define CP_SHL64(x, s) cp_shl64_tc((x), (uint32_t)(s))
#define CP_SHR64(x, s) cp_shr64_tc((x), (uint32_t)(s))
#else
#define CP_SHL64(x, s) ((x) << (s))
#define CP_SHR64(x, s) ((x) >> (s))
#endif

#define CP_NANF   cp_u2f(0x7fc00000u)
#define CP_INFF   cp_u2f(0x7f800000u)
#define CP_NAN    cp_u2d(0x7ff8000000000000ull)
#define CP_INF    cp_u2d(0x7ff0000000000000ull)

/* 2^k as float / double, k in the normal exponent range */
CP_INLINE float cp_pow2f(int32_t k) { return cp_u2f((uint32_t)(k + 127) << 23); }
CP_INLINE double cp_pow2d(int32_t k) { return cp_u2d((uint64_t)(uint32_t)(k + 1023) << 52); }

/* x * 2^k with a single rounding, k in [-300, 300] (float: [-160, 160]) */
CP_INLINE float cp_scalef(float x, int32_t k)
{
    if (k > 127) { x = x * cp_pow2f(127); k -= 127; if (k > 127) k = 127; return x * cp_pow2f(k); }
    if (k < -126) { x = x * cp_pow2f(k + 100); return x * cp_pow2f(-100); }
    return x * cp_pow2f(k);
}
CP_INLINE double cp_scaled(double x, int32_t k)
{
    if (k > 1023) { x = x * cp_pow2d(1023); k -= 1023; if (k > 1023) k = 1023; return x * cp_pow2d(k); }
    if (k < -1022) { x = x * cp_pow2d(k + 600); return x * cp_pow2d(-600); }
    return x * cp_pow2d(k);
}

/* --- error-free transformations (round-to-nearest, no FMA) ------------ */
/* s + e == a + b exactly (any a, b) */
#define CP_TWO_SUM(s, e, a, b) do { __typeof__(a) cp_a_ = (a), cp_b_ = (b); \
    __typeof__(a) cp_s_ = cp_a_ + cp_b_; __typeof__(a) cp_bb_ = cp_s_ - cp_a_; \
    (e) = (cp_a_ - (cp_s_ - cp_bb_)) + (cp_b_ - cp_bb_); (s) = cp_s_; } while (0)
/* requires |a| >= |b| (or a == 0) */
#define CP_FAST_TWO_SUM(s, e, a, b) do { __typeof__(a) cp_a_ = (a), cp_b_ = (b); \
    __typeof__(a) cp_s_ = cp_a_ + cp_b_; (e) = cp_b_ - (cp_s_ - cp_a_); (s) = cp_s_; } while (0)

/* Dekker product, float: split by masking 12 low bits -> 12+12 bit halves */
CP_INLINE float cp_hi12(float a) { return cp_u2f(cp_f2u(a) & 0xfffff000u); }
CP_INLINE void cp_two_prodf(float a, float b, float *p, float *e)
{
    float ah = cp_hi12(a), al = a - ah;
    float bh = cp_hi12(b), bl = b - bh;
    float pp = a * b;
    *p = pp;
    *e = (((ah * bh - pp) + ah * bl) + al * bh) + al * bl;
}
/* Dekker product, double: mask split 26+27 bits; exact up to a relative
 * 2^-106 (the al*bl term), never overflows in the split. */
CP_INLINE double cp_hi26(double a) { return cp_u2d(cp_d2u(a) & 0xfffffffff8000000ull); }
CP_INLINE void cp_two_prod(double a, double b, double *p, double *e)
{
    double ah = cp_hi26(a), al = a - ah;
    double bh = cp_hi26(b), bl = b - bh;
    double pp = a * b;
    *p = pp;
    *e = (((ah * bh - pp) + ah * bl) + al * bh) + al * bl;
}

/* --- square root --------------------------------------------------------
 * Hardware square root (correctly rounded by IEEE-754) where the target
 * has one, otherwise an exact integer digit-by-digit algorithm.  Both give
 * the same bits. */
#if defined(__SSE2__) || defined(__aarch64__) || \
    (defined(__ARM_FP) && (__ARM_FP & 4)) || \
    (defined(__riscv_flen) && (__riscv_flen >= 32) && defined(__riscv_fsqrt))
#define CP_HW_SQRTF 1
#else
#define CP_HW_SQRTF 0
#endif
#if defined(__SSE2__) || defined(__aarch64__) || \
    (defined(__ARM_FP) && (__ARM_FP & 8)) || \
    (defined(__riscv_flen) && (__riscv_flen >= 64) && defined(__riscv_fsqrt))
#define CP_HW_SQRT 1
#else
#define CP_HW_SQRT 0
#endif

CP_INLINE float cp_sqrtf_sw(float x)
{
    uint32_t u = cp_f2u(x);
    if (u >= 0x7f800000u) {                 /* +inf, NaN, any negative */
        if (u == 0x7f800000u || u == 0x80000000u) return x;   /* +inf, -0 */
        return CP_NANF;
    }
    if (u == 0) return x;
    int32_t e = (int32_t)(u >> 23);
    uint32_t m;
    if (e == 0) {                           /* subnormal: normalise */
        m = u; e = 1;
        while (!(m & 0x800000u)) { m <<= 1; e--; }
    } else {
        m = (u & 0x7fffffu) | 0x800000u;
    }
    int32_t ee = e - 127;                   /* x = m * 2^(ee-23) */
    if ((uint32_t)ee & 1u) { m <<= 1; ee -= 1; }
    /* root of X = m * 2^23 (48 bits, 24 bit pairs) -> 24-bit q */
    uint64_t X = (uint64_t)m << 23;
    uint32_t q = 0, r = 0;
    for (int i = 23; i >= 0; i--) {
        r = (r << 2) | (uint32_t)(CP_SHR64(X, 2 * i) & 3u);
        uint32_t t = (q << 2) | 1u;
        q <<= 1;
        if (r >= t) { r -= t; q |= 1u; }
    }
    /* round to nearest (ties impossible): up iff remainder > q */
    uint32_t bits = ((uint32_t)(ee / 2 + 127) << 23) + (q - 0x800000u);
    if (r > q) bits += 1u;
    return cp_u2f(bits);
}

CP_INLINE double cp_sqrt_sw(double x)
{
    uint64_t u = cp_d2u(x);
    if (u >= 0x7ff0000000000000ull) {
        if (u == 0x7ff0000000000000ull || u == 0x8000000000000000ull) return x;
        return CP_NAN;
    }
    if (u == 0) return x;
    int32_t e = (int32_t)(u >> 52);
    uint64_t m;
    if (e == 0) {
        m = u; e = 1;
        while (!(m & 0x0010000000000000ull)) { m <<= 1; e--; }
    } else {
        m = (u & 0x000fffffffffffffull) | 0x0010000000000000ull;
    }
    int32_t ee = e - 1023;                  /* x = m * 2^(ee-52) */
    if ((uint32_t)ee & 1u) { m <<= 1; ee -= 1; }
    /* root of X = m * 2^52 (m < 2^54: 27 bit pairs, then 26 zero pairs) */
    uint64_t q = 0, r = 0;
    for (int i = 26; i >= -26; i--) {
        uint32_t pair = (i >= 0) ? (uint32_t)((m >> (2 * i)) & 3u) : 0u;
        r = (r << 2) | pair;
        uint64_t t = (q << 2) | 1u;
        q <<= 1;
        if (r >= t) { r -= t; q |= 1u; }
    }
    uint64_t bits = ((uint64_t)(uint32_t)(ee / 2 + 1023) << 52) + (q - 0x0010000000000000ull);
    if (r > q) bits += 1u;
    return cp_u2d(bits);
}

CP_INLINE float cp_sqrtf_i(float x)
{
#if CP_HW_SQRTF
    return __builtin_sqrtf(x);
#else
    return cp_sqrtf_sw(x);
#endif
}
CP_INLINE double cp_sqrt_i(double x)
{
#if CP_HW_SQRT
    return __builtin_sqrt(x);
#else
    return cp_sqrt_sw(x);
#endif
}

/* --- block forms (CP_VMATH) ---------------------------------------------
 * CP_VBLOCK_FORM(op, S, T, FAST, SCALAR) defines cp_v<op>_<S> (S: f32, f64;
 * T its C type): FAST(x, &bad) is the branch-free copy of SCALAR(x), equal to
 * it wherever it leaves bad 0.  Full blocks run FAST over CP_VBLOCK elements
 * into a local buffer (the inputs of a block are read before its outputs are
 * written, so out == a is fine); a block with a bad element is recomputed by
 * SCALAR; the tail (fewer than CP_VBLOCK elements) runs SCALAR.  Where the
 * target has fused loops (CP_FUSE_BYTES) it also defines the fused loops'
 * stencils of the kernel (cp_fused.h, CP_FUSED_VEC: FAST inline per block)
 * and cp_v<op>_<S>_w, SCALAR over one block, their path for a bad lane. */
#define CP_VBLOCK 16u
#if defined(__clang__)
#define CP_VECTOR_LOOP _Pragma("clang loop vectorize(enable)")
#else
#define CP_VECTOR_LOOP
#endif
#define CP_VBLOCK_FORM(op, S, T, FAST, SCALAR)                                 \
    void cp_v##op##_##S(T *out, const T *a, size_t n)                          \
    {                                                                          \
        size_t i = 0;                                                          \
        for (; n - i >= CP_VBLOCK; i += CP_VBLOCK) {                           \
            T y[CP_VBLOCK];                                                    \
            uint32_t bad = 0;                                                  \
            CP_VECTOR_LOOP                                                     \
            for (size_t j = 0; j < CP_VBLOCK; j++) {                           \
                uint32_t b;                                                    \
                y[j] = FAST(a[i + j], &b);                                     \
                bad |= b;                                                      \
            }                                                                  \
            if (bad) {                                                         \
                for (size_t j = 0; j < CP_VBLOCK; j++) y[j] = SCALAR(a[i + j]); \
            }                                                                  \
            for (size_t j = 0; j < CP_VBLOCK; j++) out[i + j] = y[j];          \
        }                                                                      \
        for (; i < n; i++) out[i] = SCALAR(a[i]);                              \
    }                                                                          \
    CP_VBLOCK_LANES(op, S, T, FAST, SCALAR)
#if defined(CP_FUSE_BYTES)
#define CP_VBLOCK_LANES(op, S, T, FAST, SCALAR)                                \
    CP_VSLOW_CC cp_fr_##S cp_v##op##_##S##_w(cp_fr_##S a)                      \
    {                                                                          \
        for (size_t j = 0; j < CP_FUSE_REG_BYTES / sizeof(T); j++) {           \
            a[j] = SCALAR(a[j]);                                               \
        }                                                                      \
        return a;                                                              \
    }                                                                          \
    CP_VSLOW_END                                                               \
    CP_FUSED_VEC(op, S, FAST, cp_v##op##_##S##_w)
#else
#define CP_VBLOCK_LANES(op, S, T, FAST, SCALAR)
#endif
/* select without a branch on the condition's evaluation order */
#define CP_SEL(c, x, y) ((c) ? (x) : (y))

#endif /* CP_MATH_IMPL */
#endif /* CP_MATH_H */

/* the fused loops' stencils that CP_VBLOCK_FORM defines (after the guard: cp_fused.h includes
 * cp_array.h, which includes this header) */
#if defined(CP_MATH_IMPL) && defined(CP_FUSE_BYTES)
#include "cp_fused.h"
#endif
