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
