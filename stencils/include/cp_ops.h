/* Scalar semantics shared by the stencils, written so that no operation has undefined or
 * implementation-defined behaviour in C: the same result on every architecture, equal to
 * NumPy's where NumPy defines one (see docs/semantics.md). */
#ifndef CP_OPS_H
#define CP_OPS_H

#include <stdint.h>

#include "cp_math.h"

/* int32 arithmetic wraps (two's complement), as NumPy's int32. */
static inline int32_t cp_wrap_add(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}
static inline int32_t cp_wrap_sub(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b);
}
static inline int32_t cp_wrap_mul(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a * (uint32_t)b);
}

/* Truncating division for b != 0, b != -1. CPUs without a divide instruction (ARMv6) get a
 * shift-subtract loop of ours instead of a call into the compiler's runtime library. */
static inline int32_t cp_div_trunc(int32_t a, int32_t b, int32_t *rem)
{
#if defined(__arm__) && !defined(__ARM_FEATURE_IDIV)
    uint32_t n = a < 0 ? 0u - (uint32_t)a : (uint32_t)a;
    uint32_t d = b < 0 ? 0u - (uint32_t)b : (uint32_t)b;
    uint32_t q = 0u, r = 0u;
    for (int bit = 31; bit >= 0; bit--) {
        r = (r << 1) | ((n >> bit) & 1u);
        if (r >= d) {
            r -= d;
            q |= 1u << bit;
        }
    }
    *rem = a < 0 ? (int32_t)(0u - r) : (int32_t)r;
    return (a < 0) != (b < 0) ? (int32_t)(0u - q) : (int32_t)q;
#else
    *rem = a % b;
    return a / b;
#endif
}

/* Floor division as Python/NumPy: x // 0 == 0, INT32_MIN // -1 wraps to INT32_MIN. */
static inline int32_t cp_floordiv_i32(int32_t a, int32_t b)
{
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return cp_wrap_sub(0, a);
    }
    int32_t r;
    int32_t q = cp_div_trunc(a, b, &r);
    if (r != 0 && ((a < 0) != (b < 0))) {
        q -= 1;
    }
    return q;
}

/* Modulo with the sign of the divisor (Python/NumPy): x % 0 == 0. */
static inline int32_t cp_mod_i32(int32_t a, int32_t b)
{
    if (b == 0 || b == -1) {
        return 0;
    }
    int32_t r;
    (void)cp_div_trunc(a, b, &r);
    if (r != 0 && ((r < 0) != (b < 0))) {
        r += b;
    }
    return r;
}

/* Shifts: counts outside 0..31 (including negative ones) shift everything out, as NumPy. */
static inline int32_t cp_shl_i32(int32_t a, int32_t b)
{
    return (uint32_t)b >= 32u ? 0 : (int32_t)((uint32_t)a << (uint32_t)b);
}
static inline int32_t cp_shr_i32(int32_t a, int32_t b)
{
    uint32_t n = (uint32_t)b >= 32u ? 31u : (uint32_t)b;
    /* Arithmetic shift without relying on implementation-defined signed >>. */
    return a < 0 ? (int32_t)~(~(uint32_t)a >> n) : (int32_t)((uint32_t)a >> n);
}

/* Integer power by squaring, wrapping; a negative exponent gives 1/a truncated (0 unless
 * |a| == 1), since the result must stay an integer. */
static inline int32_t cp_pow_i32(int32_t a, int32_t b)
{
    if (b < 0) {
        if (a == 1) {
            return 1;
        }
        if (a == -1) {
            return (b & 1) ? -1 : 1;
        }
        return 0;
    }
    uint32_t result = 1u;
    uint32_t base = (uint32_t)a;
    uint32_t e = (uint32_t)b;
    while (e != 0u) {
        if (e & 1u) {
            result *= base;
        }
        base *= base;
        e >>= 1;
    }
    return (int32_t)result;
}

/* NumPy's minimum/maximum: a NaN in either operand gives NaN. */
static inline float cp_min_f32(float a, float b)
{
    return a != a ? a : (a < b ? a : b);
}
static inline float cp_max_f32(float a, float b)
{
    return a != a ? a : (a > b ? a : b);
}
static inline double cp_min_f64(double a, double b)
{
    return a != a ? a : (a < b ? a : b);
}
static inline double cp_max_f64(double a, double b)
{
    return a != a ? a : (a > b ? a : b);
}

/* |a| with the sign of b. A NaN b counts as positive: the sign of a NaN belongs to its payload,
 * which CPUs choose differently (x86 makes negative NaNs, RISC-V positive ones), so a sign read
 * from a NaN would make results differ between CPUs. Otherwise a bit operation, exact. */
static inline float cp_copysign_f32(float a, float b)
{
    return b != b ? __builtin_fabsf(a) : __builtin_copysignf(a, b);
}
static inline double cp_copysign_f64(double a, double b)
{
    return b != b ? __builtin_fabs(a) : __builtin_copysign(a, b);
}

static inline float cp_sign_f32(float a)
{
    return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : (a == 0.0f ? 0.0f : a));
}
static inline double cp_sign_f64(double a)
{
    return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : (a == 0.0 ? 0.0 : a));
}

/* cp_fmodf with its common case inline where float64 is in hardware: a quotient
 * |a / b| in [1, 2^29). Then q |b| is exact in float64 (at most 29 + 24 bits), and so is
 * |a| - q |b| (the remainder of float32 operands is a float32); q is the quotient's floor
 * or, rounded up by the division, one more, whose remainder below 0 is corrected by one
 * |b|. The same bits as cp_fmodf's long division, without its data-dependent loops (a
 * lane of a packed loop pays for each branch). NaN, infinities, b = 0 and |a| < |b| fail
 * the range test and take cp_fmodf. */
#if defined(__SSE2__) || defined(__aarch64__) || (defined(__ARM_FP) && (__ARM_FP & 8)) || \
    (defined(__riscv_flen) && (__riscv_flen >= 64) && defined(__riscv_fdiv))
#define CP_HW_F64_DIV 1 /* else a float64 division would call a runtime helper */
#else
#define CP_HW_F64_DIV 0
#endif
static inline float cp_fmodf_fast(float a, float b)
{
#if CP_HW_F64_DIV
    double da = __builtin_fabs((double)a), db = __builtin_fabs((double)b);
    double q = da / db;
    if (q >= 1.0 && q < 0x1p29) {
        double r = da - (double)(int32_t)q * db;
        return __builtin_copysignf((float)(r < 0.0 ? r + db : r), a);
    }
#endif
    return cp_fmodf(a, b);
}

/* NumPy's npy_divmod: floor division and modulo consistent with each other. */
static inline float cp_floordiv_f32(float a, float b)
{
    float mod = cp_fmodf_fast(a, b);
    if (b == 0.0f) {
        return a / b;
    }
    float div = (a - mod) / b;
    if (mod != 0.0f) {
        if ((b < 0.0f) != (mod < 0.0f)) {
            div -= 1.0f;
        }
    }
    if (div != 0.0f) {
        float floordiv = cp_floorf(div);
        if (div - floordiv > 0.5f) {
            floordiv += 1.0f;
        }
        return floordiv;
    }
    return __builtin_copysignf(0.0f, a / b);
}
static inline float cp_mod_f32(float a, float b)
{
    float mod = cp_fmodf_fast(a, b);
    if (b == 0.0f) {
        return mod;
    }
    if (mod != 0.0f) {
        if ((b < 0.0f) != (mod < 0.0f)) {
            mod += b;
        }
        return mod;
    }
    return __builtin_copysignf(0.0f, b);
}
static inline double cp_floordiv_f64(double a, double b)
{
    double mod = cp_fmod(a, b);
    if (b == 0.0) {
        return a / b;
    }
    double div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0.0) != (mod < 0.0)) {
            div -= 1.0;
        }
    }
    if (div != 0.0) {
        double floordiv = cp_floor(div);
        if (div - floordiv > 0.5) {
            floordiv += 1.0;
        }
        return floordiv;
    }
    return __builtin_copysign(0.0, a / b);
}
static inline double cp_mod_f64(double a, double b)
{
    double mod = cp_fmod(a, b);
    if (b == 0.0) {
        return mod;
    }
    if (mod != 0.0) {
        if ((b < 0.0) != (mod < 0.0)) {
            mod += b;
        }
        return mod;
    }
    return __builtin_copysign(0.0, b);
}

/* Float to int32: truncate toward zero, saturate, NaN gives 0 (C leaves these undefined). */
static inline int32_t cp_f32_to_i32(float a)
{
#if defined(__TRICORE__)
    /* TriCore's FTOIZ truncates, saturates and gives 0 for NaN: exactly these semantics */
    int32_t r;
    __asm__("ftoiz %0, %1" : "=d"(r) : "d"(a));
    return r;
#else
    if (a != a) {
        return 0;
    }
    if (a >= 2147483648.0f) {
        return INT32_MAX;
    }
    if (a <= -2147483648.0f) {
        return INT32_MIN;
    }
    return (int32_t)a;
#endif
}
static inline int32_t cp_f64_to_i32(double a)
{
    if (a != a) {
        return 0;
    }
    if (a >= 2147483647.0) {
        return INT32_MAX;
    }
    if (a <= -2147483648.0) {
        return INT32_MIN;
    }
    return (int32_t)a;
}

#endif /* CP_OPS_H */
