/* Square root: hardware instruction where the target has one (correctly
 * rounded by IEEE-754), otherwise an exact integer algorithm; both give
 * identical bits.  NaN results are canonical. */
#define CP_MATH_IMPL
#include "cp_math.h"

float cp_sqrtf(float x)
{
    uint32_t u = cp_f2u(x);
    if (u > 0x80000000u || (u & 0x7fffffffu) > 0x7f800000u)
        return CP_NANF;                 /* NaN or x < 0 (-0 passes) */
    return cp_sqrtf_i(x);
}

double cp_sqrt(double x)
{
    uint64_t u = cp_d2u(x);
    if (u > 0x8000000000000000ull || (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)
        return CP_NAN;
    return cp_sqrt_i(x);
}

float cp_sqrtf_soft(float x) { return cp_sqrtf_sw(x); }
double cp_sqrt_soft(double x) { return cp_sqrt_sw(x); }

#if CP_VMATH
/* Block forms: the hardware square root (SSE2, AArch64) and the NaN select of cp_sqrtf. The
 * condition is on the bits: the C compiler may take any NaN for any other, and with the
 * comparison x >= 0 it proved the select's canonical NaN equal to the one the square root
 * makes and dropped it. */
CP_INLINE float cp_vk_sqrtf(float x, uint32_t *bad)
{
    uint32_t u = cp_f2u(x);
    *bad = 0;
    return CP_SEL(u > 0x80000000u || (u & 0x7fffffffu) > 0x7f800000u, CP_NANF, cp_sqrtf_i(x));
}
CP_INLINE double cp_vk_sqrt(double x, uint32_t *bad)
{
    uint64_t u = cp_d2u(x);
    *bad = 0;
    return CP_SEL(u > 0x8000000000000000ull || (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull,
                  CP_NAN, cp_sqrt_i(x));
}
CP_VBLOCK_FORM(sqrt, f32, float, cp_vk_sqrtf, cp_sqrtf)
CP_VBLOCK_FORM(sqrt, f64, double, cp_vk_sqrt, cp_sqrt)
#endif
