/* hypot(x, y) = sqrt(x^2 + y^2) without overflow or underflow in between
 * (float32 and float64).
 *
 * C99 special cases first: an infinite operand gives +inf even when the
 * other one is NaN, otherwise NaN gives NaN (canonical); hypot(x, +-0) = |x|.
 * With a = max(|x|, |y|) >= b = min(|x|, |y|) > 0: if b is below
 * a * 2^-(p+2) (exponents more than p+1 apart, p = 24 / 53 significand bits)
 * the result rounds to a.  Otherwise both are scaled by the same power of
 * two (exactly) so that a is in [2, 4), the sum of squares a^2 + b^2 is
 * formed as a double-word hi + lo (exact Dekker squares, TwoSum), and
 * r = sqrt(hi) (correctly rounded) is corrected once by
 * (hi - r^2 + lo) / (2r) with r^2 exact, before scaling back with a single
 * rounding (two for subnormal results).  No FMA, only IEEE basic operations:
 * the same bits on every target.
 */
#define CP_MATH_IMPL
#include "cp_math.h"

float cp_hypotf(float x, float y)
{
    uint32_t ux = cp_f2u(x) & 0x7fffffffu, uy = cp_f2u(y) & 0x7fffffffu;
    if (ux == 0x7f800000u || uy == 0x7f800000u) return CP_INFF;
    if (ux > 0x7f800000u || uy > 0x7f800000u) return CP_NANF;
    if (ux < uy) {
        uint32_t t = ux;
        ux = uy;
        uy = t;
    }
    if (uy == 0 || (ux >> 23) - (uy >> 23) > 25u) return cp_u2f(ux);
    int32_t k = 0;                               /* result = hypot(a, b) * 2^k */
    float a = cp_u2f(ux), b = cp_u2f(uy);
    if (ux < 0x00800000u) {                      /* both subnormal: make them normal */
        a = a * 0x1p24f;
        b = b * 0x1p24f;
        k = -24;
        ux = cp_f2u(a);
    }
    int32_t e = (int32_t)(ux >> 23) - 128;       /* a * 2^-e in [2, 4) */
    float s = cp_u2f((uint32_t)(127 - e) << 23);
    a = a * s;                                   /* exact; b * s is normal (see above) */
    b = b * s;
    k += e;
    float pa, ea, pb, eb, hi, lo;
    cp_two_prodf(a, a, &pa, &ea);
    cp_two_prodf(b, b, &pb, &eb);
    CP_TWO_SUM(hi, lo, pa, pb);
    lo = lo + (ea + eb);
    float r = cp_sqrtf_i(hi);
    float rr, re;
    cp_two_prodf(r, r, &rr, &re);
    r = r + (((hi - rr) - re) + lo) / (2.0f * r);
    return cp_scalef(r, k);
}

double cp_hypot(double x, double y)
{
    uint64_t ux = cp_d2u(x) & 0x7fffffffffffffffull, uy = cp_d2u(y) & 0x7fffffffffffffffull;
    const uint64_t INFB = 0x7ff0000000000000ull;
    if (ux == INFB || uy == INFB) return CP_INF;
    if (ux > INFB || uy > INFB) return CP_NAN;
    if (ux < uy) {
        uint64_t t = ux;
        ux = uy;
        uy = t;
    }
    if (uy == 0 || (ux >> 52) - (uy >> 52) > 54u) return cp_u2d(ux);
    int32_t k = 0;
    double a = cp_u2d(ux), b = cp_u2d(uy);
    if (ux < 0x0010000000000000ull) {
        a = a * 0x1p54;
        b = b * 0x1p54;
        k = -54;
        ux = cp_d2u(a);
    }
    int32_t e = (int32_t)(ux >> 52) - 1024;      /* a * 2^-e in [2, 4) */
    double s = cp_u2d((uint64_t)(uint32_t)(1023 - e) << 52);
    a = a * s;
    b = b * s;
    k += e;
    double pa, ea, pb, eb, hi, lo;
    cp_two_prod(a, a, &pa, &ea);
    cp_two_prod(b, b, &pb, &eb);
    CP_TWO_SUM(hi, lo, pa, pb);
    lo = lo + (ea + eb);
    double r = cp_sqrt_i(hi);
    double rr, re;
    cp_two_prod(r, r, &rr, &re);
    r = r + (((hi - rr) - re) + lo) / (2.0 * r);
    return cp_scaled(r, k);
}
