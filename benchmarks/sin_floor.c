/* The floor of the fused expression sqrt(a*a+b*b)*0.5+sin(a) on AVX2 (issue 32, item 2): its
 * parts as plain C loops over L1/L2-resident arrays, no copy-and-patch around them, so what
 * remains is the cost of the arithmetic itself. benchmarks/bench_sin_floor.py builds and runs
 * it; three parts, one per -DPART_*:
 *
 *   PART_LANES  built like the x86_64-v3 stencils (ziglang's clang, -march=x86-64-v3,
 *               -ffp-contract=off, freestanding):
 *                 lane      copapy's sin lane form (stencils/math/trig.c, cp_vk_sinf) over
 *                           8-lane blocks, the scalar kernel for a block with a bad lane: the
 *                           fused loop's sin without the loop
 *                 modpi     a cheaper deterministic sin (float32 only, no FMA contraction, the
 *                           same bits on every target): x = k pi + r with pi in three parts
 *                           (k*pi_1, k*pi_2 exact), r in one float (no r_lo), one odd
 *                           polynomial of degree 9 on [-pi/2, pi/2] (this project's Remez fit,
 *                           tools/kernel_fit/fits.py on (pi/2)^2), the sign from k's parity;
 *                           |x| >= 100 or |r| < 2^-20 to the scalar kernel as in the lane form
 *   PART_C      gcc -O3 -ffast-math -march=x86-64-v3, the benchmark's "C O3 fm v3":
 *                 libmvec   sinf vectorised (glibc's _ZGVdN8v_sinf, FMA throughout)
 *                 hyp       sqrtf(x*x+y*y)*0.5f+x with the exact square root (vsqrtps; -ffast-
 *                           math would take rsqrtps + Newton, which copapy cannot: its bits
 *                           differ between CPUs), the rest of the expression
 *                 hyp fm    the same under -ffast-math as the benchmark compiles it
 *                 expr fm   the whole expression, the goal's anchor (its "C O3 fm v3")
 *   PART_MAIN   gcc -O2: timing (this thread's CPU time, best of interleaved rounds) and, with
 *               --accuracy, modpi's and the lane form's largest error in float32 ulps against
 *               the double sin over every float32 in [2^-12, 100] (155 million arguments).
 */
#include <stdint.h>

#define BLOCK 8

#if defined(PART_LANES)
#include "../stencils/math/trig.c"

#define MP_PI1 (2 * CPF_PIO2_C1) /* pi/2's exact 17-bit parts doubled: k*pi_1, k*pi_2 exact */
#define MP_PI2 (2 * CPF_PIO2_C2)
#define MP_PI3 (2 * CPF_PIO2_C3)
#define MP_S0 -0x1.55554cp-3f /* sin r = r + r^3 S(r^2) on |r| <= pi/2: rel. err 2^-26.62 */
#define MP_S1 0x1.110ed4p-7f
#define MP_S2 -0x1.9f6ffep-13f
#define MP_S3 0x1.5dbdeap-19f

static inline __attribute__((always_inline)) float sin_modpi(float x, uint32_t *bad)
{
    float ax = __builtin_fabsf(x);
    float xc = CP_SEL(ax < 100.0f, ax, 0.0f);
    float k = CP_VK_RINT(xc * 0x1.45f306p-2f, 0x1.8p23f); /* round(|x| / pi) */
    float r = CP_VK_FNMA(k, MP_PI1, xc);
    r = CP_VK_FNMA(k, MP_PI2, r);
    r = r - k * MP_PI3;
    *bad = __builtin_fabsf(r) < 0x1p-20f && ax > 0.5f && ax <= 0x1.fffffep127f;
    float t = r * r;
    float p = MP_S0 + t * (MP_S1 + t * (MP_S2 + t * MP_S3));
    float y = r + (r * t) * p;
    float v = cp_u2f(cp_f2u(y) ^ ((uint32_t)(int32_t)k << 31) ^ (cp_f2u(x) & 0x80000000u));
    return CP_SEL(ax <= 0x1.fffffep127f, v, CP_NANF);
}

#define LANE_LOOP(name, FAST)                                                                  \
    void name(float *restrict o, const float *restrict a, int n)                              \
    {                                                                                          \
        for (int i = 0; i + BLOCK <= n; i += BLOCK) {                                          \
            float y[BLOCK];                                                                    \
            uint32_t bad = 0;                                                                  \
            for (int l = 0; l < BLOCK; l++) {                                                  \
                uint32_t b;                                                                    \
                y[l] = FAST(a[i + l], &b);                                                     \
                bad |= b;                                                                      \
            }                                                                                  \
            if (__builtin_expect(bad != 0, 0)) {                                               \
                for (int l = 0; l < BLOCK; l++) y[l] = cp_sinf(a[i + l]);                      \
            }                                                                                  \
            __builtin_memcpy(o + i, y, sizeof y);                                              \
        }                                                                                      \
    }
LANE_LOOP(floor_lane, cp_vk_sinf)
LANE_LOOP(floor_modpi, sin_modpi)

/* one argument, as the scalar kernels: for the accuracy sweep */
float floor_lane1(float x)
{
    uint32_t bad;
    float y = cp_vk_sinf(x, &bad);
    return bad ? cp_sinf(x) : y;
}
float floor_modpi1(float x)
{
    uint32_t bad;
    float y = sin_modpi(x, &bad);
    return bad ? cp_sinf(x) : y;
}

#elif defined(PART_C)
#include <math.h>

void floor_libmvec(float *restrict o, const float *restrict a, int n)
{
    for (int i = 0; i < n; i++) o[i] = sinf(a[i]);
}
void floor_hyp_fm(float *restrict o, const float *restrict a, const float *restrict b, int n)
{
    for (int i = 0; i < n; i++) o[i] = sqrtf(a[i] * a[i] + b[i] * b[i]) * 0.5f + a[i];
}
void floor_expr_fm(float *restrict o, const float *restrict a, const float *restrict b, int n)
{
    for (int i = 0; i < n; i++) o[i] = sqrtf(a[i] * a[i] + b[i] * b[i]) * 0.5f + sinf(a[i]);
}
__attribute__((optimize("no-fast-math"))) void floor_hyp(float *restrict o,
                                                          const float *restrict a,
                                                          const float *restrict b, int n)
{
    for (int i = 0; i < n; i++) o[i] = __builtin_sqrtf(a[i] * a[i] + b[i] * b[i]) * 0.5f + a[i];
}

#elif defined(PART_MAIN)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void floor_lane(float *o, const float *a, int n);
void floor_modpi(float *o, const float *a, int n);
void floor_libmvec(float *o, const float *a, int n);
void floor_hyp(float *o, const float *a, const float *b, int n);
void floor_hyp_fm(float *o, const float *a, const float *b, int n);
void floor_expr_fm(float *o, const float *a, const float *b, int n);
float floor_lane1(float x);
float floor_modpi1(float x);

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *o_, *a_, *b_;
static int n_;
static void run_lane(void) { floor_lane(o_, a_, n_); }
static void run_modpi(void) { floor_modpi(o_, a_, n_); }
static void run_libmvec(void) { floor_libmvec(o_, a_, n_); }
static void run_hyp(void) { floor_hyp(o_, a_, b_, n_); }
static void run_hyp_fm(void) { floor_hyp_fm(o_, a_, b_, n_); }
static void run_expr_fm(void) { floor_expr_fm(o_, a_, b_, n_); }

static double ulp_error(float got, double ref)
{
    float rf = (float)ref;
    int e = ilogbf(rf);
    double ulp = ldexp(1.0, e - 23);
    if (fabs(ref) < ldexp(1.0, e)) ulp = ldexp(1.0, e - 24); /* rounded up to a power of 2 */
    return fabs((double)got - ref) / ulp;
}

static void accuracy(const char *name, float (*f)(float))
{
    double worst = 0.0;
    uint32_t at = 0;
    for (uint32_t u = 0x39800000u; u <= 0x42c80000u; u++) { /* [2^-12, 100] */
        float x;
        memcpy(&x, &u, sizeof x);
        double e = ulp_error(f(x), sin((double)x));
        if (e > worst) { worst = e; at = u; }
    }
    float x;
    memcpy(&x, &at, sizeof x);
    printf("accuracy %-8s max %.3f ulp at x = %a\n", name, worst, (double)x);
}

int main(int argc, char **argv)
{
    n_ = argc > 1 ? atoi(argv[1]) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (argc > 3 && strcmp(argv[3], "--accuracy") == 0) {
        accuracy("lane", floor_lane1);
        accuracy("modpi", floor_modpi1);
        return 0;
    }
    n_ -= n_ % BLOCK;
    a_ = aligned_alloc(64, (size_t)n_ * 4 + 64);
    b_ = aligned_alloc(64, (size_t)n_ * 4 + 64);
    o_ = aligned_alloc(64, (size_t)n_ * 4 + 64);
    srand(1);
    for (int i = 0; i < n_; i++) { /* |a|, |b| < 10, the benchmark's inputs */
        a_[i] = (float)(rand() / (double)RAND_MAX * 20.0 - 10.0);
        b_[i] = (float)(rand() / (double)RAND_MAX * 20.0 - 10.0);
    }
    static const char *names[] = {"lane", "modpi", "libmvec", "hyp", "hyp fm", "expr fm"};
    static void (*const fns[])(void) = {run_lane,  run_modpi,  run_libmvec,
                                        run_hyp,   run_hyp_fm, run_expr_fm};
    enum { K = sizeof fns / sizeof fns[0] };
    double best[K];
    int calls = 20000000 / n_ + 1;
    for (int k = 0; k < K; k++) best[k] = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < K; k++) {
            double t = cpu_seconds();
            for (int c = 0; c < calls; c++) {
                fns[k]();
                __asm__ volatile("" ::: "memory");
            }
            t = (cpu_seconds() - t) / ((double)calls * n_) * 1e9;
            if (t < best[k]) best[k] = t;
        }
    }
    for (int k = 0; k < K; k++) printf("time %s %.4f\n", names[k], best[k]);
    return 0;
}
#endif
