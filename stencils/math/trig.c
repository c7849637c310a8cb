/* sin, cos, tan (float32 and float64).
 *
 * Argument reduction x = k*pi/2 + r, |r| <= pi/4 (r kept as r_hi + r_lo):
 *   float32: |x| < 100: Cody-Waite in float (pi/2 = two exact 17-bit parts
 *            + a 24-bit tail, error-free sums), unless |r| < 2^-20;
 *            otherwise exact integer Payne-Hanek reduction (24-bit mantissa
 *            times a 96-bit window of 2/pi, 64-bit fixed-point fraction,
 *            times pi/2 in 64-bit fixed point).  Accurate over the whole
 *            float range.
 *   float64: |x| < 2^30: Cody-Waite with pi/2 split into 4 x 23-bit parts
 *            (exact products) + a 53-bit tail, error-free sums (abs. error
 *            ~2^-113);
 *            |x| >= 2^30: integer Payne-Hanek (53-bit mantissa times a
 *            192-bit window of 2/pi, 128-bit fraction).
 * Kernels on [-pi/4, pi/4]: minimax polynomials fitted for this project
 * (relative error, Remez, see docs/math.md):
 *   sin r = r + r^3 S(r^2),  cos r = 1 - r^2/2 + r^4 C(r^2),
 *   tan r = r + r^3 T(r^2),  cot via a Newton-corrected reciprocal.
 */
#define CP_MATH_IMPL
#include "cp_math.h"

/* SINF: degree 3, minimax rel. err 2^-37.49 (after rounding coeffs 2^-28.03) */
#define SINF0 -0x1.555556p-3f
#define SINF1 0x1.111108p-7f
#define SINF2 -0x1.a00f76p-13f
#define SINF3 0x1.6ccff8p-19f
/* COSF: degree 2, minimax rel. err 2^-33.00 (after rounding coeffs 2^-32.75) */
#define COSF0 0x1.55554ap-5f
#define COSF1 -0x1.6c0c2cp-10f
#define COSF2 0x1.99e92ap-16f
/* TANF: degree 6, minimax rel. err 2^-29.55 (after rounding coeffs 2^-27.82) */
#define TANF0 0x1.55556p-2f
#define TANF1 0x1.110d84p-3f
#define TANF2 0x1.baddb6p-5f
#define TANF3 0x1.5c9c42p-6f
#define TANF4 0x1.637a9ep-7f
#define TANF5 0x1.32f5a8p-14f
#define TANF6 0x1.1f58ap-8f
/* SIND: degree 6, minimax rel. err 2^-68.72 (after rounding coeffs 2^-57.13) */
#define SIND0 -0x1.5555555555555p-3
#define SIND1 0x1.111111111110bp-7
#define SIND2 -0x1.a01a01a018a42p-13
#define SIND3 0x1.71de3a532d056p-19
#define SIND4 -0x1.ae645288d5816p-26
#define SIND5 0x1.61208944a876p-33
#define SIND6 -0x1.aaa0c34db52f8p-41
/* COSD: degree 5, minimax rel. err 2^-63.94 (after rounding coeffs 2^-59.24) */
#define COSD0 0x1.555555555554bp-5
#define COSD1 -0x1.6c16c16c14f58p-10
#define COSD2 0x1.a01a019c7e991p-16
#define COSD3 -0x1.27e4f7e6894a7p-22
#define COSD4 0x1.1ee9d4c2b2572p-29
#define COSD5 -0x1.8fa30aa74bb23p-37
/* TAND: degree 15, minimax rel. err 2^-63.78 (after rounding coeffs 2^-57.23) */
#define TAND0 0x1.5555555555555p-2
#define TAND1 0x1.111111111120fp-3
#define TAND2 0x1.ba1ba1ba0b3dep-5
#define TAND3 0x1.664f48870a15ep-6
#define TAND4 0x1.226e34b366724p-7
#define TAND5 0x1.d6d3f3acf58bbp-9
#define TAND6 0x1.7da0f3404f974p-10
#define TAND7 0x1.35777d7da163dp-11
#define TAND8 0x1.f3317d3ef5706p-13
#define TAND9 0x1.a66896d98a6fcp-14
#define TAND10 0x1.efa7292809d32p-16
#define TAND11 0x1.1f69b37876081p-15
#define TAND12 -0x1.34a52634fddp-16
#define TAND13 0x1.b0d74c99f783ap-16
#define TAND14 -0x1.a6fd55342249cp-17
#define TAND15 0x1.30b9fb1b48bbap-18

static const uint32_t cp_two_over_pi[41] = {
    0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u,
    0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau,
    0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, 0xe99c7026u,
    0xb45f7e41u, 0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu,
    0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u,
    0x9e5fea2du, 0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u,
    0x1f8d5d08u, 0x56033046u, 0xfc7b6babu, 0xf0cfbc20u, 0x9af4361du,
};
#define CPF_PIO2_C1 0x1.921fp+0f
#define CPF_PIO2_C2 0x1.6a88p-17f
#define CPF_PIO2_C3 0x1.0b4612p-34f
#define CPF_INVPIO2 0x1.45f306p-1f
#define CP_PIO2_Q62 0x6487ed5110b4611aull /* round(pi/2 * 2^62) */
#define CPD_PIO2_CW1 0x1.921fb4p+0
#define CPD_PIO2_CW2 0x1.4442dp-24
#define CPD_PIO2_CW3 0x1.84698p-48
#define CPD_PIO2_CW4 0x1.3198ap-69
#define CPD_PIO2_CW5 0x1.701b839a25205p-92
#define CPD_INVPIO2 0x1.45f306dc9c883p-1
#define CPD_PIO2_HI 0x1.921fb54442d18p+0
#define CPD_PIO2_LO 0x1.1a62633145c07p-54

/* high 64 bits of a 64x64-bit product (only 32x32->64 multiplies) */
CP_INLINE uint64_t cp_mulhi64(uint64_t a, uint64_t b)
{
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t t00 = a0 * b0, t01 = a0 * b1, t10 = a1 * b0, t11 = a1 * b1;
    uint64_t mid = (t00 >> 32) + (uint32_t)t01 + (uint32_t)t10;
    return t11 + (t01 >> 32) + (t10 >> 32) + (mid >> 32);
}

/* 32 bits of the 2/pi bit string starting at bit position (32*wi + sh) */
CP_INLINE uint32_t cp_tpo_word(uint32_t wi, uint32_t sh)
{
    uint64_t w = ((uint64_t)cp_two_over_pi[wi] << 32) | cp_two_over_pi[wi + 1];
    return (uint32_t)(CP_SHL64(w, sh) >> 32);
}

/* ------------------------------------------------------------ float32 */

/* |x| = bits ax (finite, > pi/4): returns quadrant k mod 4, r = rh + rl */
CP_INLINE uint32_t cp_rem_pio2f(uint32_t ax, float *rh, float *rl)
{
    if (ax < 0x42c80000u) {                      /* |x| < 100: Cody-Waite, k <= 64 */
        float x = cp_u2f(ax);
        float kf = x * CPF_INVPIO2 + 0x1.8p23f;
        kf = kf - 0x1.8p23f;
        float r1 = x - kf * CPF_PIO2_C1;         /* exact (17-bit part) */
        float w2 = kf * CPF_PIO2_C2;             /* exact (17-bit part) */
        float s, se, h, l;
        CP_TWO_SUM(s, se, r1, -w2);
        float tail = se - kf * CPF_PIO2_C3;
        CP_TWO_SUM(h, l, s, tail);
        /* absolute error <= 2^-50: accept unless r is tiny */
        if ((cp_f2u(h) & 0x7fffffffu) >= 0x35800000u) {   /* |r| >= 2^-20 */
            *rh = h; *rl = l;
            return (uint32_t)(int32_t)kf & 3u;
        }
    }
    uint32_t E = ax >> 23;                       /* biased exponent */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;   /* x = m * 2^(E-150) */
    /* bit b_i (weight 2^-i) of 2/pi sits at table position 31+i; bits
     * i < E-151 only contribute multiples of 4 -> window starts there */
    uint32_t q = E - 120u;
    uint32_t wi = q >> 5, sh = q & 31u;
    uint64_t v0 = cp_tpo_word(wi, sh), v1 = cp_tpo_word(wi + 1u, sh), v2 = cp_tpo_word(wi + 2u, sh);
    uint64_t p2 = (uint64_t)m * v2, p1 = (uint64_t)m * v1, p0 = (uint64_t)m * v0;
    uint64_t mid = p1 + (p2 >> 32);
    uint64_t hi = p0 + (mid >> 32);
    /* x*2/pi = (hi:mid:p2) * 2^-94: bits 94,95 = quadrant, 30..93 = fraction */
    uint32_t n = (uint32_t)(hi >> 30) & 3u;
    uint64_t F = (hi << 34) | ((uint64_t)(uint32_t)mid << 2) | ((uint32_t)p2 >> 30);
    uint32_t neg = (uint32_t)(F >> 63);
    if (neg) { n = (n + 1u) & 3u; F = 0u - F; }  /* round to nearest quadrant */
    uint64_t R = cp_mulhi64(F, CP_PIO2_Q62);      /* |r| = R * 2^-62 */
    float h = 0.0f, l = 0.0f;
    if (R != 0) {
        int32_t lz = (int32_t)__builtin_clzll(R);
        uint64_t N = CP_SHL64(R, lz);
        h = (float)(int32_t)(uint32_t)(N >> 40) * cp_pow2f(-22 - lz);
        l = (float)(int32_t)((uint32_t)(N >> 9) & 0x7fffffffu) * cp_pow2f(-53 - lz);
    }
    if (neg) { h = -h; l = -l; }
    *rh = h; *rl = l;
    return n;
}

CP_INLINE float cp_sin_kf(float r, float rl)
{
    float t = r * r;
    float p = SINF0 + t * (SINF1 + t * (SINF2 + t * SINF3));
    return r + ((r * t) * p + rl * (1.0f - 0.5f * t));
}

CP_INLINE float cp_cos_kf(float r, float rl)
{
    float t = r * r;
    float hz = 0.5f * t;
    float w = 1.0f - hz;
    float p = COSF0 + t * (COSF1 + t * COSF2);
    return w + ((((1.0f - w) - hz) + (t * t) * p) - r * rl);
}

CP_INLINE float cp_tan_kf(float r, float rl, uint32_t odd)
{
    float t = r * r;
    float p = TANF0 + t * (TANF1 + t * (TANF2 + t * (TANF3 + t * (TANF4 + t * (TANF5 + t * TANF6)))));
    float c = (r * t) * p + rl * (1.0f + t);
    float th = r + c;
    if (!odd) return th;
    float tl = c - (th - r);
    /* -1/(th+tl): q = -1/th, e = 1 + q*(th+tl) (exact product), q(1+e) */
    float q = -1.0f / th;
    float ph, pe;
    cp_two_prodf(q, th, &ph, &pe);
    float e = ((1.0f + ph) + pe) + q * tl;
    return q + q * e;
}

float cp_sinf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    if (ax >= 0x7f800000u) return CP_NANF;       /* inf, NaN */
    if (ax < 0x39800000u) return x;              /* |x| < 2^-12 (also +-0) */
    float r, rl;
    uint32_t n;
    if (ax <= 0x3f490fdau) { r = cp_u2f(ax); rl = 0.0f; n = 0; }   /* |x| <= pi/4 */
    else n = cp_rem_pio2f(ax, &r, &rl);
    float y = (n & 1u) ? cp_cos_kf(r, rl) : cp_sin_kf(r, rl);
    return cp_u2f(cp_f2u(y) ^ sg ^ ((n & 2u) << 30));
}

float cp_cosf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu;
    if (ax >= 0x7f800000u) return CP_NANF;
    if (ax < 0x39800000u) return 1.0f;
    float r, rl;
    uint32_t n;
    if (ax <= 0x3f490fdau) { r = cp_u2f(ax); rl = 0.0f; n = 0; }
    else n = cp_rem_pio2f(ax, &r, &rl);
    float y = (n & 1u) ? cp_sin_kf(r, rl) : cp_cos_kf(r, rl);
    return cp_u2f(cp_f2u(y) ^ (((n + 1u) & 2u) << 30));
}

float cp_tanf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    if (ax >= 0x7f800000u) return CP_NANF;
    if (ax < 0x39800000u) return x;
    float r, rl;
    uint32_t n;
    if (ax <= 0x3f490fdau) { r = cp_u2f(ax); rl = 0.0f; n = 0; }
    else n = cp_rem_pio2f(ax, &r, &rl);
    float y = cp_tan_kf(r, rl, n & 1u);
    return cp_u2f(cp_f2u(y) ^ sg);
}

/* ------------------------------------------------------------ float64 */

/* |x| (finite, > pi/4), bits ax: quadrant k mod 4, r = rh + rl */
CP_INLINE uint32_t cp_rem_pio2(double xd, uint64_t ax, double *rh, double *rl)
{
    if (ax < 0x41d0000000000000ull) {            /* |x| < 2^30 */
        double k = xd * CPD_INVPIO2 + 0x1.8p52;
        k = k - 0x1.8p52;                        /* round to nearest, k < 2^30 */
        uint32_t n = (uint32_t)(int32_t)k;
        double r1 = xd - k * CPD_PIO2_CW1;       /* exact */
        double r2 = r1 - k * CPD_PIO2_CW2;       /* exact */
        double s, se, s2, se2;
        CP_TWO_SUM(s, se, r2, -(k * CPD_PIO2_CW3));   /* k*P3 exact */
        CP_TWO_SUM(s2, se2, s, -(k * CPD_PIO2_CW4));  /* k*P4 exact */
        double a = (se + se2) - k * CPD_PIO2_CW5;
        CP_TWO_SUM(*rh, *rl, s2, a);
        return n & 3u;
    }
    uint32_t E = (uint32_t)(ax >> 52);
    uint64_t m = (ax & 0x000fffffffffffffull) | 0x0010000000000000ull;
    uint32_t q = E - 1045u;                      /* window start, >= 8 */
    uint32_t wi = q >> 5, sh = q & 31u;
    uint32_t V[6], R[8];
    for (uint32_t j = 0; j < 6u; j++) V[5u - j] = cp_tpo_word(wi + j, sh);
    uint32_t m0 = (uint32_t)m, m1 = (uint32_t)(m >> 32);
    uint64_t c = 0;
    for (uint32_t j = 0; j < 6u; j++) { c += (uint64_t)m0 * V[j]; R[j] = (uint32_t)c; c >>= 32; }
    R[6] = (uint32_t)c;
    c = 0;
    for (uint32_t j = 0; j < 6u; j++) { c += (uint64_t)m1 * V[j] + R[j + 1u]; R[j + 1u] = (uint32_t)c; c >>= 32; }
    R[7] = (uint32_t)c;
    /* x*2/pi = R * 2^-190: bits 190,191 quadrant, 62..189 fraction */
    uint32_t n = R[5] >> 30;
    uint32_t F3 = (R[5] << 2) | (R[4] >> 30), F2 = (R[4] << 2) | (R[3] >> 30);
    uint32_t F1 = (R[3] << 2) | (R[2] >> 30), F0 = (R[2] << 2) | (R[1] >> 30);
    uint32_t neg = F3 >> 31;
    if (neg) {                                   /* negate 128-bit fraction */
        n = (n + 1u) & 3u;
        uint64_t t = (uint64_t)(uint32_t)~F0 + 1u; F0 = (uint32_t)t;
        t = (uint64_t)(uint32_t)~F1 + (t >> 32); F1 = (uint32_t)t;
        t = (uint64_t)(uint32_t)~F2 + (t >> 32); F2 = (uint32_t)t;
        t = (uint64_t)(uint32_t)~F3 + (t >> 32); F3 = (uint32_t)t;
    }
    double d3 = (double)F3 * 0x1p-32, d2 = (double)F2 * 0x1p-64;
    double d1 = (double)F1 * 0x1p-96, d0 = (double)F0 * 0x1p-128;
    double h, l, l2;
    CP_TWO_SUM(h, l, d3, d2);
    CP_TWO_SUM(h, l2, h, d1);
    l = (l + l2) + d0;
    double ph, pe;
    cp_two_prod(h, CPD_PIO2_HI, &ph, &pe);
    double pl = pe + (h * CPD_PIO2_LO + l * CPD_PIO2_HI);
    double sh_, sl_;
    CP_FAST_TWO_SUM(sh_, sl_, ph, pl);
    if (neg) { sh_ = -sh_; sl_ = -sl_; }
    *rh = sh_; *rl = sl_;
    return n;
}

CP_INLINE double cp_sin_k(double r, double rl)
{
    double t = r * r;
    double p = SIND0 + t * (SIND1 + t * (SIND2 + t * (SIND3 + t * (SIND4 + t * (SIND5 + t * SIND6)))));
    return r + ((r * t) * p + rl * (1.0 - 0.5 * t));
}

CP_INLINE double cp_cos_k(double r, double rl)
{
    double t = r * r;
    double hz = 0.5 * t;
    double w = 1.0 - hz;
    double p = COSD0 + t * (COSD1 + t * (COSD2 + t * (COSD3 + t * (COSD4 + t * COSD5))));
    return w + ((((1.0 - w) - hz) + (t * t) * p) - r * rl);
}

CP_INLINE double cp_tan_k(double r, double rl, uint32_t odd)
{
    double t = r * r;
    double p = TAND15;
    p = TAND14 + t * p; p = TAND13 + t * p; p = TAND12 + t * p; p = TAND11 + t * p;
    p = TAND10 + t * p; p = TAND9 + t * p; p = TAND8 + t * p; p = TAND7 + t * p;
    p = TAND6 + t * p; p = TAND5 + t * p; p = TAND4 + t * p; p = TAND3 + t * p;
    p = TAND2 + t * p; p = TAND1 + t * p; p = TAND0 + t * p;
    double c = (r * t) * p + rl * (1.0 + t);
    double th = r + c;
    if (!odd) return th;
    double tl = c - (th - r);
    double q = -1.0 / th;
    double ph, pe;
    cp_two_prod(q, th, &ph, &pe);
    double e = ((1.0 + ph) + pe) + q * tl;
    return q + q * e;
}

double cp_sin(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull, sg = u & 0x8000000000000000ull;
    if (ax >= 0x7ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e50000000000000ull) return x;    /* |x| < 2^-26 */
    double r, rl;
    uint32_t n;
    if (ax <= 0x3fe921fb54442d18ull) { r = cp_u2d(ax); rl = 0.0; n = 0; }
    else n = cp_rem_pio2(cp_u2d(ax), ax, &r, &rl);
    double y = (n & 1u) ? cp_cos_k(r, rl) : cp_sin_k(r, rl);
    return cp_u2d(cp_d2u(y) ^ sg ^ ((uint64_t)(n & 2u) << 62));
}

double cp_cos(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull;
    if (ax >= 0x7ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e40000000000000ull) return 1.0;  /* |x| < 2^-27 */
    double r, rl;
    uint32_t n;
    if (ax <= 0x3fe921fb54442d18ull) { r = cp_u2d(ax); rl = 0.0; n = 0; }
    else n = cp_rem_pio2(cp_u2d(ax), ax, &r, &rl);
    double y = (n & 1u) ? cp_sin_k(r, rl) : cp_cos_k(r, rl);
    return cp_u2d(cp_d2u(y) ^ ((uint64_t)((n + 1u) & 2u) << 62));
}

double cp_tan(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull, sg = u & 0x8000000000000000ull;
    if (ax >= 0x7ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e40000000000000ull) return x;
    double r, rl;
    uint32_t n;
    if (ax <= 0x3fe921fb54442d18ull) { r = cp_u2d(ax); rl = 0.0; n = 0; }
    else n = cp_rem_pio2(cp_u2d(ax), ax, &r, &rl);
    double y = cp_tan_k(r, rl, n & 1u);
    return cp_u2d(cp_d2u(y) ^ sg);
}

#if CP_VMATH
/* ------------------------------------------------------------ block forms
 * The operation sequence of cp_sinf/cp_cosf/cp_sin/cp_cos with selects, on |x|
 * clamped to the Cody-Waite range (so no conversion overflows), both
 * polynomials evaluated; an element that needs the Payne-Hanek reduction
 * (float32: |x| >= 100 or a Cody-Waite r below 2^-20; float64: |x| >= 2^30)
 * or, in float32, an infinite or NaN x, sets bad.  Fewer operations than the
 * scalar kernel, the same bits (each step below says why):
 *   - no direct case |x| <= pi/4: there the Cody-Waite step has k = 0 and
 *     returns r = |x|, rl = +0, quadrant 0, what the direct case takes;
 *   - k = rint(|x| 2/pi) where the vector unit rounds to an integer in one
 *     instruction: the magic-number sum (v + 1.5 2^23) - 1.5 2^23 of the
 *     scalar kernel is that rounding (ties to even, 0 <= v < 2^22);
 *   - x - k*c as one fused multiply-add where the unit has one and k*c is
 *     exact (the split constants' high parts): one rounding either way;
 *   - float32's first error-free sum s + se = r1 - k*C2 as the fast two-sum
 *     (3 operations instead of 6): it is exact when a's exponent in some
 *     representation a = M 2^e, |M| < 2^24, is at least b's, and r1 = x - k*C1
 *     is a multiple of 2^-24 below 1 in magnitude (|x| >= pi/4 where k >= 1,
 *     C1 a multiple of 2^-16) while k*C2 is a multiple of 2^-30 below 2^-10
 *     (k = 0: the sum is exact); the sign of a zero se, which the two sums can
 *     disagree on at k = 0, only reaches l (below);
 *   - float32's last error-free sum h + l = s + tail as the fast two-sum
 *     (3 operations, exact when |s| >= |tail|): an element where |s| < |tail|
 *     has |h| < 2^-20 and is recomputed (bad), and l's sign of zero, the only
 *     thing the two sums can disagree on, never reaches a result;
 *   - float32: an infinite or NaN x is recomputed (bad: x is 0 there, so h is,
 *     and !(|x| <= 1/2) holds) instead of a NaN select per element;
 *   - no float32 case |x| < 2^-12 (sin x = x, cos x = 1): there r = |x|, rl = +0,
 *     and the polynomials give exactly |x| and 1 (the terms they add to r and to
 *     1 are below half an ulp of it), which the signs make x and 1.
 * tools/vmath_exhaustive.c checks the float32 forms against the scalar
 * kernels for every float32 argument. */

/* v rounded to the nearest integer, ties to even (0 <= v < 2^22 or 2^51): one
 * instruction where the unit has it, else the scalar kernel's sum with magic */
#if defined(__SSE4_1__) || defined(__aarch64__)
#define CP_VK_RINT(v, magic) _Generic((v), float: __builtin_rintf, double: __builtin_rint)(v)
#else
#define CP_VK_RINT(v, magic) (((v) + (magic)) - (magic))
#endif
/* c - a*b where the product a*b is exact: one fused multiply-add where the unit has it */
#if defined(__FMA__) || defined(__aarch64__)
#define CP_VK_FNMA(a, b, c) _Generic((c), float: __builtin_fmaf, double: __builtin_fma)(-(a), b, c)
#else
#define CP_VK_FNMA(a, b, c) ((c) - (a) * (b))
#endif

/* r + rl and the quadrant of ax = |x| as cp_sinf/cp_cosf reduce it; bad as above */
CP_INLINE uint32_t cp_vk_reducef(float ax, float *rh, float *rl, uint32_t *bad)
{
    float x = CP_SEL(ax < 100.0f, ax, 0.0f);
    float kf = CP_VK_RINT(x * CPF_INVPIO2, 0x1.8p23f);
    float r1 = CP_VK_FNMA(kf, CPF_PIO2_C1, x);   /* k*C1 exact (k <= 64, 17-bit C1) */
    float w2 = kf * CPF_PIO2_C2;
    float s, se, h, l;
    CP_FAST_TWO_SUM(s, se, r1, -w2);             /* exact: see above */
    float tail = se - kf * CPF_PIO2_C3;
    CP_FAST_TWO_SUM(h, l, s, tail);
    /* |x| >= 100, inf or NaN (then x = 0, h = 0) or a small r, but not a direct
     * |x| <= pi/4 (r = |x| may be small there) */
    *bad = __builtin_fabsf(h) < 0x1p-20f && !(ax <= 0.5f);
    *rh = h;
    *rl = l;
    return (uint32_t)(int32_t)kf & 3u;
}

CP_INLINE float cp_vk_sinf(float x, uint32_t *bad)
{
    uint32_t sg = cp_f2u(x) & 0x80000000u;
    float ax = __builtin_fabsf(x);
    float r, rl;
    uint32_t n = cp_vk_reducef(ax, &r, &rl, bad);
    float y = CP_SEL(n & 1u, cp_cos_kf(r, rl), cp_sin_kf(r, rl));
    return cp_u2f(cp_f2u(y) ^ sg ^ ((n & 2u) << 30));   /* inf, NaN: bad */
}

CP_INLINE float cp_vk_cosf(float x, uint32_t *bad)
{
    float ax = __builtin_fabsf(x);
    float r, rl;
    uint32_t n = cp_vk_reducef(ax, &r, &rl, bad);
    float y = CP_SEL(n & 1u, cp_sin_kf(r, rl), cp_cos_kf(r, rl));
    return cp_u2f(cp_f2u(y) ^ (((n + 1u) & 2u) << 30));   /* inf, NaN: bad */
}

/* float64: |x| < 2^30 is always reduced by Cody-Waite (comparisons of |x| as
 * doubles: the vector units compare 64-bit floats, not always 64-bit integers) */
CP_INLINE uint32_t cp_vk_reduce(double ax, double *rh, double *rl, uint32_t *bad)
{
    uint32_t cw = ax < 0x1p30;
    double xd = CP_SEL(cw, ax, 0.0);
    double k = CP_VK_RINT(xd * CPD_INVPIO2, 0x1.8p52);
    uint32_t n = (uint32_t)(int32_t)k;
    double r1 = CP_VK_FNMA(k, CPD_PIO2_CW1, xd);   /* k*P1, k*P2 exact (k < 2^30, 23-bit parts) */
    double r2 = CP_VK_FNMA(k, CPD_PIO2_CW2, r1);
    double s, se, s2, se2, h, l;
    CP_TWO_SUM(s, se, r2, -(k * CPD_PIO2_CW3));
    CP_TWO_SUM(s2, se2, s, -(k * CPD_PIO2_CW4));
    double a = (se + se2) - k * CPD_PIO2_CW5;
    CP_TWO_SUM(h, l, s2, a);
    *bad = !cw && ax <= 0x1.fffffffffffffp1023;   /* finite, Payne-Hanek */
    *rh = h;
    *rl = l;
    return n & 3u;
}

CP_INLINE double cp_vk_sin(double x, uint32_t *bad)
{
    uint64_t u = cp_d2u(x), sg = u & 0x8000000000000000ull;
    double ax = __builtin_fabs(x);
    double r, rl;
    uint32_t n = cp_vk_reduce(ax, &r, &rl, bad);
    double y = CP_SEL(n & 1u, cp_cos_k(r, rl), cp_sin_k(r, rl));
    double v = cp_u2d(cp_d2u(y) ^ sg ^ ((uint64_t)(n & 2u) << 62));
    v = CP_SEL(ax < 0x1p-26, x, v);
    return CP_SEL(ax <= 0x1.fffffffffffffp1023, v, CP_NAN);   /* inf, NaN */
}

CP_INLINE double cp_vk_cos(double x, uint32_t *bad)
{
    double ax = __builtin_fabs(x);
    double r, rl;
    uint32_t n = cp_vk_reduce(ax, &r, &rl, bad);
    double y = CP_SEL(n & 1u, cp_sin_k(r, rl), cp_cos_k(r, rl));
    double v = cp_u2d(cp_d2u(y) ^ ((uint64_t)((n + 1u) & 2u) << 62));
    v = CP_SEL(ax < 0x1p-27, 1.0, v);
    return CP_SEL(ax <= 0x1.fffffffffffffp1023, v, CP_NAN);
}

CP_VBLOCK_FORM(sin, f32, float, cp_vk_sinf, cp_sinf)
CP_VBLOCK_FORM(cos, f32, float, cp_vk_cosf, cp_cosf)
CP_VBLOCK_FORM(sin, f64, double, cp_vk_sin, cp_sin)
CP_VBLOCK_FORM(cos, f64, double, cp_vk_cos, cp_cos)
#endif
