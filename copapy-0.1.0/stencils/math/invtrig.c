/* asin, acos, atan, atan2 (float32 and float64).
 *
 * asin/acos: |x| <= 1/2: asin x = x + x^3 A(x^2);  |x| > 1/2:
 *   asin|x| = pi/2 - 2 asin(s), s = sqrt((1-|x|)/2) carried as s_hi + s_lo
 *   (exact remainder z - s_hi^2 via a Dekker product).
 * atan: reduction of |x| around c in {0, 1/2, 1, 3/2, inf}:
 *   atan x = atan c + atan((x-c)/(1+xc)) with |u| <= 7/16, u + u^3 B(u^2).
 * atan2: q = min(|y|,|x|)/max(|y|,|x|) with its rounding error q_lo
 *   (Dekker product), atan(q_hi) + q_lo/(1+q^2), then quadrant fix-up in
 *   extra precision (pi and pi/2 as hi + lo).
 * Polynomials: minimax (relative error) fitted for this project.
 */
#define CP_MATH_IMPL
#include "cp_math.h"

/* ASINF: degree 5, minimax rel. err 2^-31.76 (after rounding coeffs 2^-29.79) */
#define ASINF0 0x1.55554cp-3f
#define ASINF1 0x1.33387cp-4f
#define ASINF2 0x1.6caed2p-5f
#define ASINF3 0x1.0491a2p-5f
#define ASINF4 0x1.d91fa2p-7f
#define ASINF5 0x1.3355c2p-5f
/* ATANF: degree 4, minimax rel. err 2^-29.59 (after rounding coeffs 2^-28.16) */
#define ATANF0 -0x1.555542p-2f
#define ATANF1 0x1.998dbep-3f
#define ATANF2 -0x1.236bfep-3f
#define ATANF3 0x1.adb418p-4f
#define ATANF4 -0x1.dcb37p-5f
/* ASIND: degree 12, minimax rel. err 2^-59.86 (after rounding coeffs 2^-59.18) */
#define ASIND0 0x1.5555555555577p-3
#define ASIND1 0x1.333333332e101p-4
#define ASIND2 0x1.6db6db72142fcp-5
#define ASIND3 0x1.f1c71a9463e0dp-6
#define ASIND4 0x1.6e8bdeede944cp-6
#define ASIND5 0x1.1c49ef829d5bcp-6
#define ASIND6 0x1.ca1f9ff17d9e3p-7
#define ASIND7 0x1.7584febd430bp-7
#define ASIND8 0x1.613f5e286ee32p-7
#define ASIND9 0x1.e5cdbbf8eaf64p-9
#define ASIND10 0x1.63a7d3d969ce1p-6
#define ASIND11 -0x1.580cb5a8eb9cdp-6
#define ASIND12 0x1.0b4b428e91502p-5
/* ATAND: degree 11, minimax rel. err 2^-62.33 (after rounding coeffs 2^-58.45) */
#define ATAND0 -0x1.5555555555552p-2
#define ATAND1 0x1.9999999998fb8p-3
#define ATAND2 -0x1.2492492444de3p-3
#define ATAND3 0x1.c71c71a103c59p-4
#define ATAND4 -0x1.745d11c4329d1p-4
#define ATAND5 0x1.3b132f123e846p-4
#define ATAND6 -0x1.11090319238cp-4
#define ATAND7 0x1.e13268bd36fabp-5
#define ATAND8 -0x1.a9fa50a54377ap-5
#define ATAND9 0x1.6b1a89576b489p-5
#define ATAND10 -0x1.055deccf0644ep-5
#define ATAND11 0x1.c05e2a12b8c9dp-7
#define CPF_PIO2_HI 0x1.921fb6p+0f
#define CPF_PIO2_LO -0x1.777a5cp-25f
#define CPF_PI_HI 0x1.921fb6p+1f
#define CPF_PI_LO -0x1.777a5cp-24f
#define CPF_PIO4_HI 0x1.921fb6p-1f
#define CPF_PIO4_LO -0x1.777a5cp-26f
#define CPF_ATAN0P5_HI 0x1.dac67p-2f
#define CPF_ATAN0P5_LO 0x1.586ed4p-28f
#define CPF_ATAN1P5_HI 0x1.f730bep-1f
#define CPF_ATAN1P5_LO -0x1.afc12cp-26f
#define CPD_PIO2_HI 0x1.921fb54442d18p+0
#define CPD_PIO2_LO 0x1.1a62633145c07p-54
#define CPD_PI_HI 0x1.921fb54442d18p+1
#define CPD_PI_LO 0x1.1a62633145c07p-53
#define CPD_PIO4_HI 0x1.921fb54442d18p-1
#define CPD_PIO4_LO 0x1.1a62633145c07p-55
#define CPD_ATAN0P5_HI 0x1.dac670561bb4fp-2
#define CPD_ATAN0P5_LO 0x1.a2b7f222f65e2p-56
#define CPD_ATAN1P5_HI 0x1.f730bd281f69bp-1
#define CPD_ATAN1P5_LO 0x1.007887af0cbbdp-56

/* ------------------------------------------------------------ float32 */

CP_INLINE float cp_asin_pf(float t)
{
    return ASINF0 + t * (ASINF1 + t * (ASINF2 + t * (ASINF3 + t * (ASINF4 + t * ASINF5))));
}

/* for 1/2 < a <= 1: asin(S), S = sqrt((1-a)/2) = sh + sl:
 * returns sh and the small part sl + S^3 A(S^2) in *lo */
CP_INLINE float cp_asin_tailf(float a, float *lo)
{
    float z = (1.0f - a) * 0.5f;                 /* exact */
    float s = cp_sqrtf_i(z);
    float ph, pe;
    cp_two_prodf(s, s, &ph, &pe);
    float sl = 0.0f;
    if (s > 0.0f) sl = (((z - ph) - pe) * 0.5f) / s;
    *lo = sl + (s * z) * cp_asin_pf(z);
    return s;
}

float cp_asinf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    if (ax > 0x3f800000u) return CP_NANF;        /* |x| > 1, inf, NaN */
    if (ax < 0x39800000u) return x;              /* |x| < 2^-12 */
    float a = cp_u2f(ax), y;
    if (ax <= 0x3f000000u) {                     /* |x| <= 1/2 */
        float t = a * a;
        y = a + (a * t) * cp_asin_pf(t);
    } else {
        float lo, s = cp_asin_tailf(a, &lo);
        float s2 = 2.0f * s;
        float h = CPF_PIO2_HI - s2;
        float e = (CPF_PIO2_HI - h) - s2;
        y = h + ((e + CPF_PIO2_LO) - 2.0f * lo);
    }
    return cp_u2f(cp_f2u(y) ^ sg);
}

float cp_acosf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu;
    if (ax > 0x3f800000u) return CP_NANF;
    if (ax <= 0x3f000000u) {                     /* |x| <= 1/2: pi/2 - asin x */
        float t = x * x;
        float p = (x * t) * cp_asin_pf(t);
        float h = CPF_PIO2_HI - x;
        float e = (CPF_PIO2_HI - h) - x;
        return h + ((e + CPF_PIO2_LO) - p);
    }
    float a = cp_u2f(ax);
    float lo, s = cp_asin_tailf(a, &lo);
    if (!(u >> 31)) return 2.0f * s + 2.0f * lo; /* x > 1/2: 2 asin(S) */
    float s2 = 2.0f * s;                         /* x < -1/2: pi - 2 asin(S) */
    float h = CPF_PI_HI - s2;
    float e = (CPF_PI_HI - h) - s2;
    return h + ((e + CPF_PI_LO) - 2.0f * lo);
}

/* atan(a + al) for 0 <= a (a may be +inf): returns the big constant part,
 * the rest in *rest */
CP_INLINE float cp_atan_coref(float a, float al, float *rest)
{
    float ch, cl, v;
    if (a < 0.4375f) { ch = 0.0f; cl = 0.0f; v = a; }
    else if (a < 0.6875f) { ch = CPF_ATAN0P5_HI; cl = CPF_ATAN0P5_LO; v = (2.0f * a - 1.0f) / (2.0f + a); }
    else if (a < 1.1875f) { ch = CPF_PIO4_HI; cl = CPF_PIO4_LO; v = (a - 1.0f) / (a + 1.0f); }
    else if (a < 2.4375f) { ch = CPF_ATAN1P5_HI; cl = CPF_ATAN1P5_LO; v = (a - 1.5f) / (1.0f + 1.5f * a); }
    else { ch = CPF_PIO2_HI; cl = CPF_PIO2_LO; v = -1.0f / a; }
    float t = v * v;
    float p = (v * t) * (ATANF0 + t * (ATANF1 + t * (ATANF2 + t * (ATANF3 + t * ATANF4))));
    float corr = (al != 0.0f) ? al / (1.0f + a * a) : 0.0f;
    *rest = cl + ((p + corr) + v);
    return ch;
}

float cp_atanf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    if (ax > 0x7f800000u) return CP_NANF;
    if (ax < 0x39800000u) return x;              /* |x| < 2^-12 */
    float rest, h = cp_atan_coref(cp_u2f(ax), 0.0f, &rest);
    float y = h + rest;
    return cp_u2f(cp_f2u(y) ^ sg);
}

float cp_atan2f(float y, float x)
{
    uint32_t uy = cp_f2u(y), ux = cp_f2u(x);
    uint32_t ay = uy & 0x7fffffffu, ax = ux & 0x7fffffffu;
    uint32_t sy = uy & 0x80000000u, sx = ux & 0x80000000u;
    float r;
    if (ay > 0x7f800000u || ax > 0x7f800000u) return CP_NANF;
    if (ay == 0) {                               /* y = +-0 */
        r = sx ? CPF_PI_HI + CPF_PI_LO : 0.0f;
    } else if (ax == 0) {
        r = CPF_PIO2_HI + CPF_PIO2_LO;
    } else if (ax == 0x7f800000u) {
        if (ay == 0x7f800000u) r = sx ? 3.0f * CPF_PIO4_HI : CPF_PIO4_HI + CPF_PIO4_LO;
        else r = sx ? CPF_PI_HI + CPF_PI_LO : 0.0f;
    } else if (ay == 0x7f800000u) {
        r = CPF_PIO2_HI + CPF_PIO2_LO;
    } else {
        float fy = cp_u2f(ay), fx = cp_u2f(ax);
        uint32_t swap = ay > ax;
        float num = swap ? fx : fy, den = swap ? fy : fx;
        if (num < 0x1p-90f && den < 0x1p60f) { num *= 0x1p64f; den *= 0x1p64f; }  /* exact */
        float q = num / den, ql = 0.0f;
        if (num >= 0x1p-90f) {
            float ph, pe;
            cp_two_prodf(q, den, &ph, &pe);
            ql = ((num - ph) - pe) / den;
        }
        float rest, h = cp_atan_coref(q, ql, &rest);
        if (!swap && !sx) {
            r = h + rest;
        } else {
            float kh, kl, sgn_rest;
            if (!swap) { kh = CPF_PI_HI; kl = CPF_PI_LO; h = -h; sgn_rest = -rest; }  /* pi - atan q */
            else if (!sx) { kh = CPF_PIO2_HI; kl = CPF_PIO2_LO; h = -h; sgn_rest = -rest; } /* pi/2 - atan q */
            else { kh = CPF_PIO2_HI; kl = CPF_PIO2_LO; sgn_rest = rest; }             /* pi/2 + atan q */
            float s, e;
            CP_TWO_SUM(s, e, kh, h);
            r = s + ((e + kl) + sgn_rest);
        }
    }
    return cp_u2f(cp_f2u(r) ^ sy);
}

/* ------------------------------------------------------------ float64 */

CP_INLINE double cp_asin_p(double t)
{
    double p = ASIND12;
    p = ASIND11 + t * p; p = ASIND10 + t * p; p = ASIND9 + t * p; p = ASIND8 + t * p;
    p = ASIND7 + t * p; p = ASIND6 + t * p; p = ASIND5 + t * p; p = ASIND4 + t * p;
    p = ASIND3 + t * p; p = ASIND2 + t * p; p = ASIND1 + t * p; p = ASIND0 + t * p;
    return p;
}

CP_INLINE double cp_asin_tail(double a, double *lo)
{
    double z = (1.0 - a) * 0.5;
    double s = cp_sqrt_i(z);
    double ph, pe;
    cp_two_prod(s, s, &ph, &pe);
    double sl = 0.0;
    if (s > 0.0) sl = (((z - ph) - pe) * 0.5) / s;
    *lo = sl + (s * z) * cp_asin_p(z);
    return s;
}

double cp_asin(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull, sg = u & 0x8000000000000000ull;
    if (ax > 0x3ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e40000000000000ull) return x;    /* |x| < 2^-27 */
    double a = cp_u2d(ax), y;
    if (ax <= 0x3fe0000000000000ull) {
        double t = a * a;
        y = a + (a * t) * cp_asin_p(t);
    } else {
        double lo, s = cp_asin_tail(a, &lo);
        double s2 = 2.0 * s;
        double h = CPD_PIO2_HI - s2;
        double e = (CPD_PIO2_HI - h) - s2;
        y = h + ((e + CPD_PIO2_LO) - 2.0 * lo);
    }
    return cp_u2d(cp_d2u(y) ^ sg);
}

double cp_acos(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull;
    if (ax > 0x3ff0000000000000ull) return CP_NAN;
    if (ax <= 0x3fe0000000000000ull) {
        double t = x * x;
        double p = (x * t) * cp_asin_p(t);
        double h = CPD_PIO2_HI - x;
        double e = (CPD_PIO2_HI - h) - x;
        return h + ((e + CPD_PIO2_LO) - p);
    }
    double a = cp_u2d(ax);
    double lo, s = cp_asin_tail(a, &lo);
    if (!(u >> 63)) return 2.0 * s + 2.0 * lo;
    double s2 = 2.0 * s;
    double h = CPD_PI_HI - s2;
    double e = (CPD_PI_HI - h) - s2;
    return h + ((e + CPD_PI_LO) - 2.0 * lo);
}

CP_INLINE double cp_atan_core(double a, double al, double *rest)
{
    double ch, cl, v;
    if (a < 0.4375) { ch = 0.0; cl = 0.0; v = a; }
    else if (a < 0.6875) { ch = CPD_ATAN0P5_HI; cl = CPD_ATAN0P5_LO; v = (2.0 * a - 1.0) / (2.0 + a); }
    else if (a < 1.1875) { ch = CPD_PIO4_HI; cl = CPD_PIO4_LO; v = (a - 1.0) / (a + 1.0); }
    else if (a < 2.4375) { ch = CPD_ATAN1P5_HI; cl = CPD_ATAN1P5_LO; v = (a - 1.5) / (1.0 + 1.5 * a); }
    else { ch = CPD_PIO2_HI; cl = CPD_PIO2_LO; v = -1.0 / a; }
    double t = v * v;
    double p = ATAND11;
    p = ATAND10 + t * p; p = ATAND9 + t * p; p = ATAND8 + t * p; p = ATAND7 + t * p;
    p = ATAND6 + t * p; p = ATAND5 + t * p; p = ATAND4 + t * p; p = ATAND3 + t * p;
    p = ATAND2 + t * p; p = ATAND1 + t * p; p = ATAND0 + t * p;
    p = (v * t) * p;
    double corr = (al != 0.0) ? al / (1.0 + a * a) : 0.0;
    *rest = cl + ((p + corr) + v);
    return ch;
}

double cp_atan(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull, sg = u & 0x8000000000000000ull;
    if (ax > 0x7ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e40000000000000ull) return x;    /* |x| < 2^-27 */
    double rest, h = cp_atan_core(cp_u2d(ax), 0.0, &rest);
    double y = h + rest;
    return cp_u2d(cp_d2u(y) ^ sg);
}

double cp_atan2(double y, double x)
{
    uint64_t uy = cp_d2u(y), ux = cp_d2u(x);
    uint64_t ay = uy & 0x7fffffffffffffffull, ax = ux & 0x7fffffffffffffffull;
    uint64_t sy = uy & 0x8000000000000000ull, sx = ux & 0x8000000000000000ull;
    const uint64_t INFB = 0x7ff0000000000000ull;
    double r;
    if (ay > INFB || ax > INFB) return CP_NAN;
    if (ay == 0) {
        r = sx ? CPD_PI_HI + CPD_PI_LO : 0.0;
    } else if (ax == 0) {
        r = CPD_PIO2_HI + CPD_PIO2_LO;
    } else if (ax == INFB) {
        if (ay == INFB) r = sx ? 3.0 * CPD_PIO4_HI + 3.0 * CPD_PIO4_LO : CPD_PIO4_HI + CPD_PIO4_LO;
        else r = sx ? CPD_PI_HI + CPD_PI_LO : 0.0;
    } else if (ay == INFB) {
        r = CPD_PIO2_HI + CPD_PIO2_LO;
    } else {
        double fy = cp_u2d(ay), fx = cp_u2d(ax);
        uint32_t swap = ay > ax;
        double num = swap ? fx : fy, den = swap ? fy : fx;
        if (num < 0x1p-900 && den < 0x1p500) { num *= 0x1p512; den *= 0x1p512; }
        double q = num / den, ql = 0.0;
        if (num >= 0x1p-900) {
            double ph, pe;
            cp_two_prod(q, den, &ph, &pe);
            ql = ((num - ph) - pe) / den;
        }
        double rest, h = cp_atan_core(q, ql, &rest);
        if (!swap && !sx) {
            r = h + rest;
        } else {
            double kh, kl, sr;
            if (!swap) { kh = CPD_PI_HI; kl = CPD_PI_LO; h = -h; sr = -rest; }
            else if (!sx) { kh = CPD_PIO2_HI; kl = CPD_PIO2_LO; h = -h; sr = -rest; }
            else { kh = CPD_PIO2_HI; kl = CPD_PIO2_LO; sr = rest; }
            double s, e;
            CP_TWO_SUM(s, e, kh, h);
            r = s + ((e + kl) + sr);
        }
    }
    return cp_u2d(cp_d2u(r) ^ sy);
}
