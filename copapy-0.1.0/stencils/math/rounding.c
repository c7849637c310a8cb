/* floor, ceil, trunc, round (half to even) and fmod: exact, by integer
 * manipulation of the representation.  -0 is preserved, NaN -> canonical
 * NaN, +-inf pass through. */
#define CP_MATH_IMPL
#include "cp_math.h"

/* ------------------------------------------------------------ float32 */
float cp_truncf(float x)
{
    uint32_t u = cp_f2u(x);
    uint32_t e = (u >> 23) & 0xffu;
    if (e >= 127u + 23u) {                   /* |x| >= 2^23, inf, NaN */
        if ((u & 0x7fffffffu) > 0x7f800000u) return CP_NANF;
        return x;
    }
    if (e < 127u) return cp_u2f(u & 0x80000000u);  /* |x| < 1 -> +-0 */
    uint32_t m = 0x7fffffu >> (e - 127u);
    return cp_u2f(u & ~m);
}

/* away = 1: round magnitudes with a fraction up (used for floor of
 * negatives and ceil of positives) */
static inline __attribute__((always_inline)) float cp_floorceilf(float x, uint32_t up_sign)
{
    uint32_t u = cp_f2u(x);
    uint32_t e = (u >> 23) & 0xffu;
    uint32_t s = u & 0x80000000u;
    if (e >= 127u + 23u) {
        if ((u & 0x7fffffffu) > 0x7f800000u) return CP_NANF;
        return x;
    }
    if (e < 127u) {                          /* |x| < 1 */
        if ((u << 1) == 0) return x;         /* +-0 */
        if (s == up_sign) return cp_u2f(s | 0x3f800000u);  /* +-1 */
        return cp_u2f(s);                    /* +-0 */
    }
    uint32_t m = 0x7fffffu >> (e - 127u);
    if ((u & m) == 0) return x;              /* already integral */
    if (s == up_sign) u += m;                /* carries into the integer part */
    return cp_u2f(u & ~m);
}
float cp_floorf(float x) { return cp_floorceilf(x, 0x80000000u); }
float cp_ceilf(float x) { return cp_floorceilf(x, 0u); }

float cp_roundf(float x)
{
    uint32_t u = cp_f2u(x);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x4b000000u) {                  /* |x| >= 2^23: integral, inf, NaN */
        if (a > 0x7f800000u) return CP_NANF;
        return x;
    }
    /* |x| + 2^23 rounds to an integer, ties to even (IEEE default mode);
     * subtracting 2^23 again is exact. */
    float ax = cp_u2f(a);
    float r = (ax + 0x1p23f) - 0x1p23f;
    return cp_u2f(cp_f2u(r) | (u & 0x80000000u));
}

float cp_fmodf(float x, float y)
{
    uint32_t ux = cp_f2u(x), uy = cp_f2u(y);
    uint32_t sx = ux & 0x80000000u;
    uint32_t ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
    if (ax >= 0x7f800000u || ay > 0x7f800000u || ay == 0) return CP_NANF;
    if (ay == 0x7f800000u) return x;         /* finite x, y = +-inf */
    if (ax < ay) return x;                   /* includes x = +-0 */
    if (ax == ay) return cp_u2f(sx);
    int32_t ex = (int32_t)(ax >> 23), ey = (int32_t)(ay >> 23);
    uint32_t mx, my;
    if (ex == 0) { mx = ax; ex = 1; while (!(mx & 0x800000u)) { mx <<= 1; ex--; } }
    else mx = (ax & 0x7fffffu) | 0x800000u;
    if (ey == 0) { my = ay; ey = 1; while (!(my & 0x800000u)) { my <<= 1; ey--; } }
    else my = (ay & 0x7fffffu) | 0x800000u;
    /* long division, one quotient bit per step; invariant mx < 2*my */
    for (int32_t n = ex - ey; n > 0; n--) {
        if (mx >= my) mx -= my;
        mx <<= 1;
    }
    if (mx >= my) mx -= my;
    if (mx == 0) return cp_u2f(sx);
    while (!(mx & 0x800000u)) { mx <<= 1; ey--; }
    if (ey >= 1) return cp_u2f(sx | ((uint32_t)ey << 23) | (mx & 0x7fffffu));
    /* subnormal result: the shifted-out bits are zero (result is exact) */
    return cp_u2f(sx | (mx >> (uint32_t)(1 - ey)));
}

/* ------------------------------------------------------------ float64 */
double cp_trunc(double x)
{
    uint64_t u = cp_d2u(x);
    uint32_t e = (uint32_t)(u >> 52) & 0x7ffu;
    if (e >= 1023u + 52u) {
        if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return CP_NAN;
        return x;
    }
    if (e < 1023u) return cp_u2d(u & 0x8000000000000000ull);
    uint64_t m = 0x000fffffffffffffull >> (e - 1023u);
    return cp_u2d(u & ~m);
}

static inline __attribute__((always_inline)) double cp_floorceil(double x, uint64_t up_sign)
{
    uint64_t u = cp_d2u(x);
    uint32_t e = (uint32_t)(u >> 52) & 0x7ffu;
    uint64_t s = u & 0x8000000000000000ull;
    if (e >= 1023u + 52u) {
        if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return CP_NAN;
        return x;
    }
    if (e < 1023u) {
        if ((u << 1) == 0) return x;
        if (s == up_sign) return cp_u2d(s | 0x3ff0000000000000ull);
        return cp_u2d(s);
    }
    uint64_t m = 0x000fffffffffffffull >> (e - 1023u);
    if ((u & m) == 0) return x;
    if (s == up_sign) u += m;
    return cp_u2d(u & ~m);
}
double cp_floor(double x) { return cp_floorceil(x, 0x8000000000000000ull); }
double cp_ceil(double x) { return cp_floorceil(x, 0u); }

double cp_round(double x)
{
    uint64_t u = cp_d2u(x);
    uint64_t a = u & 0x7fffffffffffffffull;
    if (a >= 0x4330000000000000ull) {        /* |x| >= 2^52 */
        if (a > 0x7ff0000000000000ull) return CP_NAN;
        return x;
    }
    double ax = cp_u2d(a);
    double r = (ax + 0x1p52) - 0x1p52;
    return cp_u2d(cp_d2u(r) | (u & 0x8000000000000000ull));
}

double cp_fmod(double x, double y)
{
    uint64_t ux = cp_d2u(x), uy = cp_d2u(y);
    uint64_t sx = ux & 0x8000000000000000ull;
    uint64_t ax = ux & 0x7fffffffffffffffull, ay = uy & 0x7fffffffffffffffull;
    const uint64_t IMPL = 0x0010000000000000ull, MANT = 0x000fffffffffffffull;
    if (ax >= 0x7ff0000000000000ull || ay > 0x7ff0000000000000ull || ay == 0) return CP_NAN;
    if (ay == 0x7ff0000000000000ull) return x;
    if (ax < ay) return x;
    if (ax == ay) return cp_u2d(sx);
    int32_t ex = (int32_t)(ax >> 52), ey = (int32_t)(ay >> 52);
    uint64_t mx, my;
    if (ex == 0) { mx = ax; ex = 1; while (!(mx & IMPL)) { mx <<= 1; ex--; } }
    else mx = (ax & MANT) | IMPL;
    if (ey == 0) { my = ay; ey = 1; while (!(my & IMPL)) { my <<= 1; ey--; } }
    else my = (ay & MANT) | IMPL;
    for (int32_t n = ex - ey; n > 0; n--) {
        if (mx >= my) mx -= my;
        mx <<= 1;
    }
    if (mx >= my) mx -= my;
    if (mx == 0) return cp_u2d(sx);
    while (!(mx & IMPL)) { mx <<= 1; ey--; }
    if (ey >= 1) return cp_u2d(sx | ((uint64_t)(uint32_t)ey << 52) | (mx & MANT));
    return cp_u2d(sx | (mx >> (uint32_t)(1 - ey)));
}
