/* exp, expm1, log, log1p, pow, tanh (float32 and float64).
 *
 * exp:  x = k ln2 + r (Cody-Waite, ln2 split so k*ln2_hi is exact),
 *       |r| <= ln2/2, e^r = 1 + r + r^2 Q(r) (minimax), scaled by 2^k with a
 *       single rounding (also for subnormal results).
 * log:  x = 2^e m, m in [0.75, 1.5); c = 1 + j/128 nearest to m,
 *       invc = 1/c rounded to 7 significant bits, so r = m*invc - 1 is
 *       computed exactly (|r| < 0.0117); log x = e ln2 - log(invc) + log1p(r),
 *       log1p(r) = r - r^2/2 + r^3 L(r).  Table entries generated with mpmath.
 * pow:  log2|x| in double-word precision from the same table
 *       (hi + lo parts, exact r^2 by Dekker), times y in double-word, then
 *       2^z = 2^k * e^(f ln2) with f in double-word.  C99 Annex F special
 *       cases.
 * expm1: the reduction of exp; k = 0: r + r^2 Q(r) (Q fitted for the
 *       relative error of e^r - 1); |k| <= 24 (53): (2^k - 1) + 2^k (e^r - 1)
 *       with the exact 2^k - 1 (TwoSum); else 2^k (e^r - 2^-k), or e^x - 1.
 * log1p: 1 + x = u_hi + u_lo exactly (TwoSum), log(u_hi) as for log with
 *       u_lo / u_hi added to the low part: no loss near 0.
 * tanh: |x| < 0.55: x + x^3 H(x^2);  otherwise
 *       tanh|x| = 1 - 2/(e^{2|x|} + 1) with e^{2|x|} + 1 = (2^k + 1) + 2^k p,
 *       p = e^r - 1 from the exp polynomial (keeps p's relative accuracy).
 */
#define CP_MATH_IMPL
#include "cp_math.h"

/* EXPF: degree 5, minimax rel. err 2^-31.96 (after rounding coeffs 2^-28.79) */
#define EXPF0 0x1p-1f
#define EXPF1 0x1.555554p-3f
#define EXPF2 0x1.5554b2p-5f
#define EXPF3 0x1.11118ap-7f
#define EXPF4 0x1.6d7226p-10f
#define EXPF5 0x1.a032c2p-13f
/* LOGF: degree 2, minimax rel. err 2^-36.57 (after rounding coeffs 2^-36.30) */
#define LOGF0 0x1.555556p-2f
#define LOGF1 -0x1.0006ecp-2f
#define LOGF2 0x1.99a92cp-3f
/* LOG2F: degree 2, minimax rel. err 2^-36.57 (after rounding coeffs 2^-36.48) */
#define LOG2F0 0x1.ec709ep-2f
#define LOG2F1 -0x1.715e72p-2f
#define LOG2F2 0x1.278202p-2f
/* TANHF: degree 4, minimax rel. err 2^-29.84 (after rounding coeffs 2^-27.76) */
#define TANHF0 -0x1.55554ap-2f
#define TANHF1 0x1.110d26p-3f
#define TANHF2 -0x1.b9287ap-5f
#define TANHF3 0x1.593d08p-6f
#define TANHF4 -0x1.9b3046p-8f
/* EXPD: degree 10, minimax rel. err 2^-61.73 (after rounding coeffs 2^-60.00) */
#define EXPD0 0x1p-1
#define EXPD1 0x1.5555555555559p-3
#define EXPD2 0x1.555555555553fp-5
#define EXPD3 0x1.111111110f6ccp-7
#define EXPD4 0x1.6c16c16c1f0bep-10
#define EXPD5 0x1.a01a01afda4b6p-13
#define EXPD6 0x1.a01a017bb863fp-16
#define EXPD7 0x1.71ddf86cd469ap-19
#define EXPD8 0x1.27e5363aa3d88p-22
#define EXPD9 0x1.af5e97035a67p-26
#define EXPD10 0x1.1ee8894744535p-29
/* LOGD: degree 6, minimax rel. err 2^-66.65 (after rounding coeffs 2^-66.25) */
#define LOGD0 0x1.5555555555555p-2
#define LOGD1 -0x1.0000000000aacp-2
#define LOGD2 0x1.999999999c07cp-3
#define LOGD3 -0x1.555554c034b32p-3
#define LOGD4 0x1.2492486da7eb6p-3
#define LOGD5 -0x1.001397afec59dp-3
#define LOGD6 0x1.c74453129a64bp-4
/* LOG2D: degree 7, minimax rel. err 2^-74.39 (after rounding coeffs 2^-68.76) */
#define LOG2D0 0x1.ec709dc3a03fdp-2
#define LOG2D1 -0x1.71547652b82fep-2
#define LOG2D2 0x1.2776c50efc1d7p-2
#define LOG2D3 -0x1.ec709dc3a6597p-3
#define LOG2D4 0x1.a617617545e9dp-3
#define LOG2D5 -0x1.715475005612ep-3
#define LOG2D6 0x1.48699eedf9a78p-3
#define LOG2D7 -0x1.27951109a514fp-3
/* TANHD: degree 10, minimax rel. err 2^-60.59 (after rounding coeffs 2^-58.50) */
#define TANHD0 -0x1.555555555554fp-2
#define TANHD1 0x1.111111111079fp-3
#define TANHD2 -0x1.ba1ba1b97d88ep-5
#define TANHD3 0x1.664f485970a2bp-6
#define TANHD4 -0x1.226e2f147aa84p-7
#define TANHD5 0x1.d6d29b96d9d49p-9
#define TANHD6 -0x1.7d8fd3acd2feep-10
#define TANHD7 0x1.3483ae8bca1bap-11
#define TANHD8 -0x1.e96fc5bcab90cp-13
#define TANHD9 0x1.5d7459e5c8e24p-14
#define TANHD10 -0x1.47110a2d6eb37p-16
#define CPF_LN2_CW_HI 0x1.62e4p-1f /* 16 bits */
#define CPF_LN2_CW_LO 0x1.7f7d1cp-20f
#define CPF_INVLN2 0x1.715476p+0f
#define CPD_LN2_CW_HI 0x1.62e42fefa38p-1 /* 42 bits */
#define CPD_LN2_CW_LO 0x1.ef35793c7673p-45
#define CPD_INVLN2 0x1.71547652b82fep+0
#define CPF_LN2_HI 0x1.62e43p-1f
#define CPF_LN2_LO -0x1.05c61p-29f
#define CPF_INVLN2_HI 0x1.715476p+0f
#define CPF_INVLN2_LO 0x1.4ae0cp-26f
#define CPD_LN2_HI 0x1.62e42fefa39efp-1
#define CPD_LN2_LO 0x1.abc9e3b39803fp-56
#define CPD_INVLN2_HI 0x1.71547652b82fep+0
#define CPD_INVLN2_LO 0x1.777d0ffda0d24p-56

/* log tables: j=-32..64, c=1+j/128, invc=1/c rounded to 2^-7 (c>=1) or
 * 2^-6 (c<1); ln/l2 = -log(invc), -log2(invc) as hi + lo. */
static const float cp_log_invcf[97] = {
    0x1.54p+0f, 0x1.5p+0f, 0x1.5p+0f, 0x1.4cp+0f, 0x1.48p+0f, 0x1.44p+0f,
    0x1.4p+0f, 0x1.4p+0f, 0x1.3cp+0f, 0x1.38p+0f, 0x1.34p+0f, 0x1.34p+0f,
    0x1.3p+0f, 0x1.2cp+0f, 0x1.28p+0f, 0x1.28p+0f, 0x1.24p+0f, 0x1.2p+0f,
    0x1.2p+0f, 0x1.1cp+0f, 0x1.1cp+0f, 0x1.18p+0f, 0x1.14p+0f, 0x1.14p+0f,
    0x1.1p+0f, 0x1.1p+0f, 0x1.0cp+0f, 0x1.0cp+0f, 0x1.08p+0f, 0x1.08p+0f,
    0x1.04p+0f, 0x1.04p+0f, 0x1p+0f, 0x1.fcp-1f, 0x1.f8p-1f, 0x1.f4p-1f,
    0x1.fp-1f, 0x1.ecp-1f, 0x1.e8p-1f, 0x1.e4p-1f, 0x1.ep-1f, 0x1.ep-1f,
    0x1.dcp-1f, 0x1.d8p-1f, 0x1.d4p-1f, 0x1.dp-1f, 0x1.ccp-1f, 0x1.ccp-1f,
    0x1.c8p-1f, 0x1.c4p-1f, 0x1.cp-1f, 0x1.bcp-1f, 0x1.bcp-1f, 0x1.b8p-1f,
    0x1.b4p-1f, 0x1.b4p-1f, 0x1.bp-1f, 0x1.acp-1f, 0x1.a8p-1f, 0x1.a8p-1f,
    0x1.a4p-1f, 0x1.ap-1f, 0x1.ap-1f, 0x1.9cp-1f, 0x1.98p-1f, 0x1.98p-1f,
    0x1.94p-1f, 0x1.94p-1f, 0x1.9p-1f, 0x1.8cp-1f, 0x1.8cp-1f, 0x1.88p-1f,
    0x1.88p-1f, 0x1.84p-1f, 0x1.8p-1f, 0x1.8p-1f, 0x1.7cp-1f, 0x1.7cp-1f,
    0x1.78p-1f, 0x1.78p-1f, 0x1.74p-1f, 0x1.74p-1f, 0x1.7p-1f, 0x1.7p-1f,
    0x1.6cp-1f, 0x1.6cp-1f, 0x1.68p-1f, 0x1.68p-1f, 0x1.64p-1f, 0x1.64p-1f,
    0x1.6p-1f, 0x1.6p-1f, 0x1.5cp-1f, 0x1.5cp-1f, 0x1.58p-1f, 0x1.58p-1f,
    0x1.54p-1f,
};
static const float cp_log_ln_hif[97] = {
    -0x1.22942p-2f, -0x1.1675cap-2f, -0x1.1675cap-2f, -0x1.0a324ep-2f,
    -0x1.fb9186p-3f, -0x1.e27076p-3f, -0x1.c8ff7cp-3f, -0x1.c8ff7cp-3f,
    -0x1.af3c94p-3f, -0x1.9525aap-3f, -0x1.7ab89p-3f, -0x1.7ab89p-3f,
    -0x1.5ff308p-3f, -0x1.44d2b6p-3f, -0x1.29553p-3f, -0x1.29553p-3f,
    -0x1.0d77e8p-3f, -0x1.e27076p-4f, -0x1.e27076p-4f, -0x1.a926d4p-4f,
    -0x1.a926d4p-4f, -0x1.6f0d28p-4f, -0x1.341d7ap-4f, -0x1.341d7ap-4f,
    -0x1.f0a30cp-5f, -0x1.f0a30cp-5f, -0x1.77459p-5f, -0x1.77459p-5f,
    -0x1.f829bp-6f, -0x1.f829bp-6f, -0x1.fc0a8cp-7f, -0x1.fc0a8cp-7f,
    0x0.0p+0f, 0x1.010158p-7f, 0x1.020566p-6f, 0x1.849252p-6f,
    0x1.0415d8p-5f, 0x1.466aeep-5f, 0x1.894aa2p-5f, 0x1.ccb73cp-5f,
    0x1.08598cp-4f, 0x1.08598cp-4f, 0x1.2aa04ap-4f, 0x1.4d3116p-4f,
    0x1.700d3p-4f, 0x1.9335e6p-4f, 0x1.b6ac88p-4f, 0x1.b6ac88p-4f,
    0x1.da7276p-4f, 0x1.fe8914p-4f, 0x1.1178e8p-3f, 0x1.23d712p-3f,
    0x1.23d712p-3f, 0x1.365fccp-3f, 0x1.4913d8p-3f, 0x1.4913d8p-3f,
    0x1.5bf406p-3f, 0x1.6f0128p-3f, 0x1.823c16p-3f, 0x1.823c16p-3f,
    0x1.95a5aep-3f, 0x1.a93ed4p-3f, 0x1.a93ed4p-3f, 0x1.bd0874p-3f,
    0x1.d1038p-3f, 0x1.d1038p-3f, 0x1.e530fp-3f, 0x1.e530fp-3f,
    0x1.f991c6p-3f, 0x1.071386p-2f, 0x1.071386p-2f, 0x1.1178e8p-2f,
    0x1.1178e8p-2f, 0x1.1bf996p-2f, 0x1.269622p-2f, 0x1.269622p-2f,
    0x1.314f1ep-2f, 0x1.314f1ep-2f, 0x1.3c2528p-2f, 0x1.3c2528p-2f,
    0x1.4718dcp-2f, 0x1.4718dcp-2f, 0x1.522aep-2f, 0x1.522aep-2f,
    0x1.5d5bdep-2f, 0x1.5d5bdep-2f, 0x1.68ac84p-2f, 0x1.68ac84p-2f,
    0x1.741d88p-2f, 0x1.741d88p-2f, 0x1.7fafa4p-2f, 0x1.7fafa4p-2f,
    0x1.8b639ap-2f, 0x1.8b639ap-2f, 0x1.973a34p-2f, 0x1.973a34p-2f,
    0x1.a3344p-2f,
};
static const float cp_log_ln_lof[97] = {
    0x1.0c21a6p-28f, -0x1.7574c2p-27f, -0x1.7574c2p-27f, -0x1.39c872p-29f,
    -0x1.abc7c6p-28f, -0x1.c55e5cp-28f, -0x1.e6a688p-29f, -0x1.e6a688p-29f,
    -0x1.d017fep-28f, 0x1.85d4a6p-30f, -0x1.086c84p-30f, -0x1.086c84p-30f,
    0x1.eb0d86p-28f, -0x1.996fa4p-28f, 0x1.f802b8p-29f, 0x1.f802b8p-29f,
    0x1.97b8d4p-30f, -0x1.c55e5cp-29f, -0x1.c55e5cp-29f, 0x1.6d4aa8p-30f,
    0x1.6d4aa8p-30f, -0x1.5cad6ap-29f, 0x1.3c85c6p-29f, 0x1.3c85c6p-29f,
    -0x1.162a66p-37f, -0x1.162a66p-37f, 0x1.39a46p-30f, 0x1.39a46p-30f,
    -0x1.cf066p-31f, -0x1.cf066p-31f, 0x1.e07f84p-32f, 0x1.e07f84p-32f,
    0x0.0p+0f, -0x1.4ee432p-32f, -0x1.db29eep-32f, 0x1.191958p-31f,
    0x1.3ce888p-30f, -0x1.7a4382p-30f, -0x1.6c0998p-30f, 0x1.bbb65ap-30f,
    -0x1.4c38cp-29f, -0x1.4c38cp-29f, 0x1.11c5eap-30f, -0x1.6fc0aap-31f,
    0x1.5d581cp-29f, -0x1.535b3cp-31f, 0x1.b5ab64p-29f, 0x1.b5ab64p-29f,
    0x1.c22352p-31f, -0x1.890aa6p-30f, 0x1.13f23ep-30f, 0x1.49384p-28f,
    0x1.49384p-28f, -0x1.fd4dfep-28f, 0x1.99dabp-30f, 0x1.99dabp-30f,
    0x1.6a87b6p-28f, 0x1.6ead58p-28f, 0x1.5468fp-29f, 0x1.5468fp-29f,
    -0x1.847f4p-30f, -0x1.ba930ep-30f, -0x1.ba930ep-30f, -0x1.f109d4p-29f,
    -0x1.b3543p-28f, -0x1.b3543p-28f, -0x1.8efedep-35f, -0x1.8efedep-35f,
    0x1.96767p-28f, 0x1.35618ap-32f, 0x1.35618ap-32f, 0x1.13f23ep-29f,
    0x1.13f23ep-29f, 0x1.ad35cap-29f, -0x1.d9648ep-27f, -0x1.d9648ep-27f,
    0x1.d35ce4p-30f, 0x1.d35ce4p-30f, -0x1.1999dp-27f, -0x1.1999dp-27f,
    0x1.38e20ep-29f, 0x1.38e20ep-29f, 0x1.ce28f6p-28f, 0x1.ce28f6p-28f,
    -0x1.4d41ap-31f, -0x1.4d41ap-31f, -0x1.6395ecp-30f, -0x1.6395ecp-30f,
    -0x1.27308ap-27f, -0x1.27308ap-27f, -0x1.09fabap-28f, -0x1.09fabap-28f,
    0x1.1165bep-27f, 0x1.1165bep-27f, 0x1.89ab56p-29f, 0x1.89ab56p-29f,
    0x1.127d3cp-29f,
};
static const float cp_log_l2_hif[97] = {
    -0x1.a3376p-2f, -0x1.91bba8p-2f, -0x1.91bba8p-2f, -0x1.800a56p-2f,
    -0x1.6e221cp-2f, -0x1.5c01a4p-2f, -0x1.49a784p-2f, -0x1.49a784p-2f,
    -0x1.37124cp-2f, -0x1.24407ap-2f, -0x1.11307ep-2f, -0x1.11307ep-2f,
    -0x1.fbc16cp-3f, -0x1.d49ee4p-3f, -0x1.acf5e2p-3f, -0x1.acf5e2p-3f,
    -0x1.84c2bep-3f, -0x1.5c01a4p-3f, -0x1.5c01a4p-3f, -0x1.32ae9ep-3f,
    -0x1.32ae9ep-3f, -0x1.08c588p-3f, -0x1.bc8424p-4f, -0x1.bc8424p-4f,
    -0x1.663f7p-4f, -0x1.663f7p-4f, -0x1.0eb38ap-4f, -0x1.0eb38ap-4f,
    -0x1.6bad38p-5f, -0x1.6bad38p-5f, -0x1.6e7968p-6f, -0x1.6e7968p-6f,
    0x0.0p+0f, 0x1.72c7bap-7f, 0x1.743ee8p-6f, 0x1.184b8ep-5f,
    0x1.77394cp-5f, 0x1.d6ebd2p-5f, 0x1.1bb32ap-4f, 0x1.4c561p-4f,
    0x1.7d604ap-4f, 0x1.7d604ap-4f, 0x1.aed392p-4f, 0x1.e0b1aep-4f,
    0x1.097e38p-3f, 0x1.22dadcp-3f, 0x1.3c6fb6p-3f, 0x1.3c6fb6p-3f,
    0x1.563dc2p-3f, 0x1.704604p-3f, 0x1.8a898p-3f, 0x1.a5094cp-3f,
    0x1.a5094cp-3f, 0x1.bfc67ap-3f, 0x1.dac22ep-3f, 0x1.dac22ep-3f,
    0x1.f5fd8ap-3f, 0x1.08bcep-2f, 0x1.169c06p-2f, 0x1.169c06p-2f,
    0x1.249cd2p-2f, 0x1.32bfeep-2f, 0x1.32bfeep-2f, 0x1.410602p-2f,
    0x1.4f6fbcp-2f, 0x1.4f6fbcp-2f, 0x1.5dfddp-2f, 0x1.5dfddp-2f,
    0x1.6cb0f6p-2f, 0x1.7b89fp-2f, 0x1.7b89fp-2f, 0x1.8a898p-2f,
    0x1.8a898p-2f, 0x1.99b072p-2f, 0x1.a8ff98p-2f, 0x1.a8ff98p-2f,
    0x1.b877c6p-2f, 0x1.b877c6p-2f, 0x1.c819dcp-2f, 0x1.c819dcp-2f,
    0x1.d7e6cp-2f, 0x1.d7e6cp-2f, 0x1.e7df6p-2f, 0x1.e7df6p-2f,
    0x1.f804aep-2f, 0x1.f804aep-2f, 0x1.042bd4p-1f, 0x1.042bd4p-1f,
    0x1.0c6caap-1f, 0x1.0c6caap-1f, 0x1.14c56p-1f, 0x1.14c56p-1f,
    0x1.1d3682p-1f, 0x1.1d3682p-1f, 0x1.25c0ap-1f, 0x1.25c0ap-1f,
    0x1.2e645p-1f,
};
static const float cp_log_l2_lof[97] = {
    -0x1.4fec0ap-27f, -0x1.23e2e2p-27f, -0x1.23e2e2p-27f, -0x1.8b0e2ap-29f,
    -0x1.b3a19cp-27f, 0x1.810a5ep-28f, -0x1.79a372p-27f, -0x1.79a372p-27f,
    -0x1.d499bep-27f, -0x1.61c0e8p-27f, 0x1.4b3d22p-28f, 0x1.4b3d22p-28f,
    0x1.bf65fep-29f, -0x1.864b2ep-28f, -0x1.b69d92p-28f, -0x1.b69d92p-28f,
    0x1.fa1f8ap-28f, 0x1.810a5ep-29f, 0x1.810a5ep-29f, -0x1.3c570ep-30f,
    -0x1.3c570ep-30f, -0x1.9b4f3cp-28f, -0x1.5b5774p-33f, -0x1.5b5774p-33f,
    0x1.4dbb3ap-30f, 0x1.4dbb3ap-30f, 0x1.758196p-34f, 0x1.758196p-34f,
    0x1.4e205p-30f, 0x1.4e205p-30f, -0x1.70b48ap-32f, -0x1.70b48ap-32f,
    0x0.0p+0f, 0x1.07b994p-34f, 0x1.87cd56p-32f, 0x1.315abep-31f,
    0x1.3b2b1ap-30f, -0x1.c02804p-34f, 0x1.801528p-30f, -0x1.975078p-32f,
    -0x1.260896p-29f, -0x1.260896p-29f, -0x1.52662cp-30f, 0x1.1e5faap-29f,
    0x1.9cc0cap-28f, 0x1.559a4cp-30f, 0x1.433794p-29f, 0x1.433794p-29f,
    0x1.3ff596p-28f, -0x1.c70c1p-28f, 0x1.57f7a6p-28f, -0x1.565afap-28f,
    -0x1.565afap-28f, 0x1.fffd34p-29f, -0x1.8377c6p-28f, -0x1.8377c6p-28f,
    0x1.20c7c6p-28f, 0x1.b2bf46p-27f, -0x1.9381d4p-27f, -0x1.9381d4p-27f,
    0x1.6279aep-27f, 0x1.b87734p-29f, 0x1.b87734p-29f, -0x1.07826cp-27f,
    -0x1.a6274cp-27f, -0x1.a6274cp-27f, -0x1.c22a3ep-27f, -0x1.c22a3ep-27f,
    0x1.0cb91ep-27f, 0x1.679556p-29f, 0x1.679556p-29f, 0x1.57f7a6p-27f,
    0x1.57f7a6p-27f, 0x1.52d8d6p-27f, -0x1.cfdeb4p-27f, -0x1.cfdeb4p-27f,
    -0x1.09c9f2p-27f, -0x1.09c9f2p-27f, 0x1.6a2ff2p-29f, 0x1.6a2ff2p-29f,
    0x1.5786bp-27f, 0x1.5786bp-27f, -0x1.ac754cp-30f, -0x1.ac754cp-30f,
    0x1.1a19ap-27f, 0x1.1a19ap-27f, 0x1.734f94p-26f, 0x1.734f94p-26f,
    0x1.e18ab2p-26f, 0x1.e18ab2p-26f, 0x1.fcd16p-26f, 0x1.fcd16p-26f,
    0x1.2d6a4ap-26f, 0x1.2d6a4ap-26f, 0x1.18efacp-27f, 0x1.18efacp-27f,
    -0x1.4fec0ap-27f,
};
static const double cp_log_invc[97] = {
    0x1.54p+0, 0x1.5p+0, 0x1.5p+0, 0x1.4cp+0,
    0x1.48p+0, 0x1.44p+0, 0x1.4p+0, 0x1.4p+0,
    0x1.3cp+0, 0x1.38p+0, 0x1.34p+0, 0x1.34p+0,
    0x1.3p+0, 0x1.2cp+0, 0x1.28p+0, 0x1.28p+0,
    0x1.24p+0, 0x1.2p+0, 0x1.2p+0, 0x1.1cp+0,
    0x1.1cp+0, 0x1.18p+0, 0x1.14p+0, 0x1.14p+0,
    0x1.1p+0, 0x1.1p+0, 0x1.0cp+0, 0x1.0cp+0,
    0x1.08p+0, 0x1.08p+0, 0x1.04p+0, 0x1.04p+0,
    0x1p+0, 0x1.fcp-1, 0x1.f8p-1, 0x1.f4p-1,
    0x1.fp-1, 0x1.ecp-1, 0x1.e8p-1, 0x1.e4p-1,
    0x1.ep-1, 0x1.ep-1, 0x1.dcp-1, 0x1.d8p-1,
    0x1.d4p-1, 0x1.dp-1, 0x1.ccp-1, 0x1.ccp-1,
    0x1.c8p-1, 0x1.c4p-1, 0x1.cp-1, 0x1.bcp-1,
    0x1.bcp-1, 0x1.b8p-1, 0x1.b4p-1, 0x1.b4p-1,
    0x1.bp-1, 0x1.acp-1, 0x1.a8p-1, 0x1.a8p-1,
    0x1.a4p-1, 0x1.ap-1, 0x1.ap-1, 0x1.9cp-1,
    0x1.98p-1, 0x1.98p-1, 0x1.94p-1, 0x1.94p-1,
    0x1.9p-1, 0x1.8cp-1, 0x1.8cp-1, 0x1.88p-1,
    0x1.88p-1, 0x1.84p-1, 0x1.8p-1, 0x1.8p-1,
    0x1.7cp-1, 0x1.7cp-1, 0x1.78p-1, 0x1.78p-1,
    0x1.74p-1, 0x1.74p-1, 0x1.7p-1, 0x1.7p-1,
    0x1.6cp-1, 0x1.6cp-1, 0x1.68p-1, 0x1.68p-1,
    0x1.64p-1, 0x1.64p-1, 0x1.6p-1, 0x1.6p-1,
    0x1.5cp-1, 0x1.5cp-1, 0x1.58p-1, 0x1.58p-1,
    0x1.54p-1,
};
static const double cp_log_ln_hi[97] = {
    -0x1.22941fbcf7966p-2, -0x1.1675cababa60ep-2, -0x1.1675cababa60ep-2,
    -0x1.0a324e27390e3p-2, -0x1.fb9186d5e3e2bp-3, -0x1.e27076e2af2e6p-3,
    -0x1.c8ff7c79a9a22p-3, -0x1.c8ff7c79a9a22p-3, -0x1.af3c94e80bff3p-3,
    -0x1.9525a9cf456b4p-3, -0x1.7ab890210d909p-3, -0x1.7ab890210d909p-3,
    -0x1.5ff3070a793d4p-3, -0x1.44d2b6ccb7d1ep-3, -0x1.29552f81ff523p-3,
    -0x1.29552f81ff523p-3, -0x1.0d77e7cd08e59p-3, -0x1.e27076e2af2e6p-4,
    -0x1.e27076e2af2e6p-4, -0x1.a926d3a4ad563p-4, -0x1.a926d3a4ad563p-4,
    -0x1.6f0d28ae56b4cp-4, -0x1.341d7961bd1d1p-4, -0x1.341d7961bd1d1p-4,
    -0x1.f0a30c01162a6p-5, -0x1.f0a30c01162a6p-5, -0x1.77458f632dcfcp-5,
    -0x1.77458f632dcfcp-5, -0x1.f829b0e7833p-6, -0x1.f829b0e7833p-6,
    -0x1.fc0a8b0fc03e4p-7, -0x1.fc0a8b0fc03e4p-7, 0x0.0p+0,
    0x1.010157588de71p-7, 0x1.0205658935847p-6, 0x1.8492528c8cabfp-6,
    0x1.0415d89e74444p-5, 0x1.466aed42de3eap-5, 0x1.894aa149fb343p-5,
    0x1.ccb73cdddb2ccp-5, 0x1.08598b59e3a07p-4, 0x1.08598b59e3a07p-4,
    0x1.2aa04a44717a5p-4, 0x1.4d3115d207eacp-4, 0x1.700d30aeac0e1p-4,
    0x1.9335e5d594989p-4, 0x1.b6ac88dad5b1cp-4, 0x1.b6ac88dad5b1cp-4,
    0x1.da727638446a2p-4, 0x1.fe89139dbd566p-4, 0x1.1178e8227e47cp-3,
    0x1.23d712a49c202p-3, 0x1.23d712a49c202p-3, 0x1.365fcb0159016p-3,
    0x1.4913d8333b561p-3, 0x1.4913d8333b561p-3, 0x1.5bf406b543db2p-3,
    0x1.6f0128b756abcp-3, 0x1.823c16551a3c2p-3, 0x1.823c16551a3c2p-3,
    0x1.95a5adcf7017fp-3, 0x1.a93ed3c8ad9e3p-3, 0x1.a93ed3c8ad9e3p-3,
    0x1.bd087383bd8adp-3, 0x1.d1037f2655e7bp-3, 0x1.d1037f2655e7bp-3,
    0x1.e530effe71012p-3, 0x1.e530effe71012p-3, 0x1.f991c6cb3b379p-3,
    0x1.07138604d5862p-2, 0x1.07138604d5862p-2, 0x1.1178e8227e47cp-2,
    0x1.1178e8227e47cp-2, 0x1.1bf99635a6b95p-2, 0x1.269621134db92p-2,
    0x1.269621134db92p-2, 0x1.314f1e1d35ce4p-2, 0x1.314f1e1d35ce4p-2,
    0x1.3c25277333184p-2, 0x1.3c25277333184p-2, 0x1.4718dc271c41bp-2,
    0x1.4718dc271c41bp-2, 0x1.522ae0738a3d8p-2, 0x1.522ae0738a3d8p-2,
    0x1.5d5bddf595f3p-2, 0x1.5d5bddf595f3p-2, 0x1.68ac83e9c6a14p-2,
    0x1.68ac83e9c6a14p-2, 0x1.741d876c67bb1p-2, 0x1.741d876c67bb1p-2,
    0x1.7fafa3bd8151cp-2, 0x1.7fafa3bd8151cp-2, 0x1.8b639a88b2df5p-2,
    0x1.8b639a88b2df5p-2, 0x1.973a3431356aep-2, 0x1.973a3431356aep-2,
    0x1.a33440224fa79p-2,
};
static const double cp_log_ln_lo[97] = {
    0x1.76f5eb09628afp-56, -0x1.ce63eab883717p-61, -0x1.ce63eab883717p-61,
    -0x1.7dcfde8061c03p-56, 0x1.caaae64f21acbp-57, 0x1.61578001e0162p-59,
    0x1.4f689f8434012p-57, 0x1.4f689f8434012p-57, 0x1.398cff3641985p-58,
    -0x1.d904c1d4e2e26p-57, -0x1.be36b2d6a0608p-59, -0x1.be36b2d6a0608p-59,
    0x1.bc60efafc6f6ep-58, -0x1.9f4f6543e1f88p-57, -0x1.301771c407dbfp-57,
    -0x1.301771c407dbfp-57, -0x1.9a5dc5e9030acp-57, 0x1.61578001e0162p-60,
    0x1.61578001e0162p-60, -0x1.942f48aa70ea9p-58, -0x1.942f48aa70ea9p-58,
    0x1.906d99184b992p-58, 0x1.b599f227becbbp-58, 0x1.b599f227becbbp-58,
    -0x1.85f325c5bbacdp-59, -0x1.85f325c5bbacdp-59, -0x1.18d3ca87b9296p-59,
    -0x1.18d3ca87b9296p-59, -0x1.33e3f04f1ef23p-60, -0x1.33e3f04f1ef23p-60,
    0x1.83092c59642a1p-62, 0x1.83092c59642a1p-62, 0x0.0p+0,
    0x1.46662d417cedp-62, 0x1.27c8e8416e71fp-60, -0x1.d192d0619fa67p-60,
    0x1.c05cf1d753622p-59, -0x1.cdd6f7f4a137ep-59, 0x1.a8be97660a23dp-60,
    -0x1.e48fb0500efd4p-59, -0x1.dd7009902bf32p-58, -0x1.dd7009902bf32p-58,
    -0x1.d15d38d2fa3f7p-58, 0x1.769f42c7842ccp-58, -0x1.72566212cdd05p-61,
    -0x1.478a85704ccb7p-58, -0x1.0057eed1ca59fp-59, -0x1.0057eed1ca59fp-59,
    0x1.401fa71733019p-58, -0x1.ac9f4215f9393p-58, -0x1.0e63a5f01c691p-58,
    -0x1.6e38161051d69p-57, -0x1.6e38161051d69p-57, 0x1.7d411a5b944adp-58,
    -0x1.0d5604930f135p-58, -0x1.0d5604930f135p-58, -0x1.1f5b44c0df7e7p-61,
    -0x1.8de59c21e166cp-57, -0x1.1232ce70be781p-57, -0x1.1232ce70be781p-57,
    0x1.142c507fb7a3dp-58, 0x1.bcafa9de97203p-57, 0x1.bcafa9de97203p-57,
    0x1.dd355f6a516d7p-60, 0x1.60629242471a2p-57, 0x1.60629242471a2p-57,
    0x1.2276041f43042p-59, 0x1.2276041f43042p-59, 0x1.f665066f980a2p-57,
    0x1.cdb16ed4e9138p-56, 0x1.cdb16ed4e9138p-56, -0x1.0e63a5f01c691p-57,
    -0x1.0e63a5f01c691p-57, -0x1.12aeb84249223p-57, 0x1.e0efadd9db02bp-56,
    0x1.e0efadd9db02bp-56, -0x1.3d69909e5c3dcp-56, -0x1.3d69909e5c3dcp-56,
    -0x1.2ad27e50a8ec6p-56, -0x1.2ad27e50a8ec6p-56, 0x1.8fb4c14c56eefp-60,
    0x1.8fb4c14c56eefp-60, -0x1.8f7e9b38a6979p-57, -0x1.8f7e9b38a6979p-57,
    -0x1.6541148cbb8a2p-56, -0x1.6541148cbb8a2p-56, 0x1.a64eadd740178p-58,
    0x1.a64eadd740178p-58, 0x1.84a4ee3059583p-56, 0x1.84a4ee3059583p-56,
    -0x1.219024acd3b77p-58, -0x1.219024acd3b77p-58, -0x1.70f2f38238303p-56,
    -0x1.70f2f38238303p-56, -0x1.89d2816cf838fp-57, -0x1.89d2816cf838fp-57,
    -0x1.ba8062860ae23p-57,
};
static const double cp_log_l2_hi[97] = {
    -0x1.a33760a7f6051p-2, -0x1.91bba891f1709p-2, -0x1.91bba891f1709p-2,
    -0x1.800a563161c54p-2, -0x1.6e221cd9d0cdep-2, -0x1.5c01a39fbd688p-2,
    -0x1.49a784bcd1b8bp-2, -0x1.49a784bcd1b8bp-2, -0x1.37124cea4cdedp-2,
    -0x1.24407ab0e073ap-2, -0x1.11307dad30b76p-2, -0x1.11307dad30b76p-2,
    -0x1.fbc16b902680ap-3, -0x1.d49ee4c32597p-3, -0x1.acf5e2db4ec94p-3,
    -0x1.acf5e2db4ec94p-3, -0x1.84c2bd02f03b3p-3, -0x1.5c01a39fbd688p-3,
    -0x1.5c01a39fbd688p-3, -0x1.32ae9e278ae1ap-3, -0x1.32ae9e278ae1ap-3,
    -0x1.08c588cda79e4p-3, -0x1.bc84240adabbap-4, -0x1.bc84240adabbap-4,
    -0x1.663f6fac91316p-4, -0x1.663f6fac91316p-4, -0x1.0eb389fa29f9bp-4,
    -0x1.0eb389fa29f9bp-4, -0x1.6bad3758efd87p-5, -0x1.6bad3758efd87p-5,
    -0x1.6e79685c2d22ap-6, -0x1.6e79685c2d22ap-6, 0x0.0p+0,
    0x1.72c7ba20f7327p-7, 0x1.743ee861f3556p-6, 0x1.184b8e4c56af8p-5,
    0x1.77394c9d958d5p-5, 0x1.d6ebd1f1febfep-5, 0x1.1bb32a600549dp-4,
    0x1.4c560fe68af88p-4, 0x1.7d60496cfbb4cp-4, 0x1.7d60496cfbb4cp-4,
    0x1.aed391ab6674ep-4, 0x1.e0b1ae8f2fd56p-4, 0x1.097e38ce60649p-3,
    0x1.22dadc2ab3497p-3, 0x1.3c6fb650cde51p-3, 0x1.3c6fb650cde51p-3,
    0x1.563dc29ffacb2p-3, 0x1.7046031c79f85p-3, 0x1.8a8980abfbd32p-3,
    0x1.a5094b54d2828p-3, 0x1.a5094b54d2828p-3, 0x1.bfc67a7fff4ccp-3,
    0x1.dac22d3e441d3p-3, 0x1.dac22d3e441d3p-3, 0x1.f5fd8a9063e35p-3,
    0x1.08bce0d95fa38p-2, 0x1.169c05363f158p-2, 0x1.169c05363f158p-2,
    0x1.249cd2b13cd6cp-2, 0x1.32bfee370ee68p-2, 0x1.32bfee370ee68p-2,
    0x1.4106017c3eca3p-2, 0x1.4f6fbb2cec598p-2, 0x1.4f6fbb2cec598p-2,
    0x1.5dfdcf1eeae0ep-2, 0x1.5dfdcf1eeae0ep-2, 0x1.6cb0f6865c8eap-2,
    0x1.7b89f02cf2aadp-2, 0x1.7b89f02cf2aadp-2, 0x1.8a8980abfbd32p-2,
    0x1.8a8980abfbd32p-2, 0x1.99b072a96c6b2p-2, 0x1.a8ff971810a5ep-2,
    0x1.a8ff971810a5ep-2, 0x1.b877c57b1b07p-2, 0x1.b877c57b1b07p-2,
    0x1.c819dc2d45fe4p-2, 0x1.c819dc2d45fe4p-2, 0x1.d7e6c0abc3579p-2,
    0x1.d7e6c0abc3579p-2, 0x1.e7df5fe538ab3p-2, 0x1.e7df5fe538ab3p-2,
    0x1.f804ae8d0cd02p-2, 0x1.f804ae8d0cd02p-2, 0x1.042bd4b9a7c99p-1,
    0x1.042bd4b9a7c99p-1, 0x1.0c6caaf0c5597p-1, 0x1.0c6caaf0c5597p-1,
    0x1.14c560fe68af9p-1, 0x1.14c560fe68af9p-1, 0x1.1d368296b5255p-1,
    0x1.1d368296b5255p-1, 0x1.25c0a0463bebp-1, 0x1.25c0a0463bebp-1,
    0x1.2e644fac04fd8p-1,
};
static const double cp_log_l2_lo[97] = {
    0x1.8a0efca1a184fp-56, 0x1.2d352bea51e59p-56, 0x1.2d352bea51e59p-56,
    -0x1.9575b04fa6fbdp-57, -0x1.5e35482d13dc1p-56, 0x1.817fd3b7d7e5dp-56,
    0x1.b6d40900b2502p-62, 0x1.b6d40900b2502p-62, 0x1.3376649b4fc09p-57,
    0x1.f6e91ad16ecffp-56, 0x1.a7b47d2c352d9p-57, 0x1.a7b47d2c352d9p-57,
    -0x1.1d46ccc53c278p-58, 0x1.b85a54d7ee2fdp-58, 0x1.01ee1343fe7cap-59,
    0x1.01ee1343fe7cap-59, 0x1.16edb88c4e2b5p-62, 0x1.817fd3b7d7e5dp-57,
    0x1.817fd3b7d7e5dp-57, -0x1.f51f2c075a74cp-59, -0x1.f51f2c075a74cp-59,
    0x1.a7610e40bd6abp-57, -0x1.8ecb169b9465fp-58, -0x1.8ecb169b9465fp-58,
    -0x1.f3314e0985116p-58, -0x1.f3314e0985116p-58, 0x1.30c22d15199b8p-58,
    0x1.30c22d15199b8p-58, -0x1.89b03784b5be1p-60, -0x1.89b03784b5be1p-60,
    0x1.d6476077b9fbdp-60, 0x1.d6476077b9fbdp-60, 0x0.0p+0,
    0x1.6d746128b1857p-61, 0x1.b2a41b08fbe06p-61, 0x1.491f06c085bc2p-60,
    0x1.77970e03f821cp-59, 0x1.155660710eb2ap-63, 0x1.98c5452bbce74p-61,
    0x1.c141e66faaaadp-61, 0x1.9ced1447e30adp-58, 0x1.9ced1447e30adp-58,
    0x1.40238de7ea9f1p-58, 0x1.92ce9636c90ap-58, 0x1.5d243efd93259p-58,
    -0x1.696e2866c718ep-58, -0x1.7a6ed4e1b0936p-57, -0x1.7a6ed4e1b0936p-57,
    0x1.90e41bca6ef96p-60, -0x1.0798d1aa21694p-57, 0x1.99aa6df8b7d83p-57,
    0x1.013b6eaceb921p-57, 0x1.013b6eaceb921p-57, 0x1.bc0af7b82e7d7p-61,
    -0x1.ba8b1f646ab12p-63, -0x1.ba8b1f646ab12p-63, -0x1.bdc0426c3c274p-57,
    -0x1.3d56efe4338fep-58, 0x1.c8d43e017579bp-56, 0x1.c8d43e017579bp-56,
    0x1.34107c0e54aedp-56, 0x1.968925e378d68p-56, 0x1.968925e378d68p-56,
    -0x1.c658d602e66bp-56, 0x1.e393a16b94b52p-56, 0x1.e393a16b94b52p-56,
    0x1.10b5b643a6ecbp-56, 0x1.10b5b643a6ecbp-56, 0x1.b6d40900b2502p-61,
    0x1.8f89e2eb553b2p-57, 0x1.8f89e2eb553b2p-57, 0x1.99aa6df8b7d83p-56,
    0x1.99aa6df8b7d83p-56, 0x1.bca36fd02defp-56, 0x1.817fd3b7d7e5dp-58,
    0x1.817fd3b7d7e5dp-58, -0x1.01d98c3531027p-58, -0x1.01d98c3531027p-58,
    0x1.c4aec56233279p-57, 0x1.c4aec56233279p-57, -0x1.e15a52a31604ap-57,
    -0x1.e15a52a31604ap-57, 0x1.3bed456b24ed1p-56, 0x1.3bed456b24ed1p-56,
    -0x1.9ca1a3202b3d7p-56, -0x1.9ca1a3202b3d7p-56, -0x1.9c32630008a1fp-55,
    -0x1.9c32630008a1fp-55, -0x1.8a33c25e8e226p-59, -0x1.8a33c25e8e226p-59,
    -0x1.fc7d7c3320aabp-55, -0x1.fc7d7c3320aabp-55, -0x1.f9fb952bbbcccp-56,
    -0x1.f9fb952bbbcccp-56, -0x1.4828ddf1fb145p-55, -0x1.4828ddf1fb145p-55,
    -0x1.3af881af2f3d9p-55,
};

/* ------------------------------------------------------------ float32 */

/* e^r - 1 - r */
CP_INLINE float cp_expm1_tailf(float r)
{
    return (r * r) * (EXPF0 + r * (EXPF1 + r * (EXPF2 + r * (EXPF3 + r * (EXPF4 + r * EXPF5)))));
}

/* x = k ln2 + r + rl (|r| <= ln2/2, rl the rounding error of r); returns k */
CP_INLINE int32_t cp_exp_reducef(float x, float *r, float *rl)
{
    float kf = x * CPF_INVLN2 + 0x1.8p23f;
    kf = kf - 0x1.8p23f;
    int32_t k = (int32_t)kf;
    float r1 = x - kf * CPF_LN2_CW_HI;           /* exact */
    float t2 = kf * CPF_LN2_CW_LO;
    *r = r1 - t2;
    *rl = (r1 - *r) - t2;
    return k;
}

float cp_expf(float x)
{
    uint32_t u = cp_f2u(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return CP_NANF;
    if (x > 89.0f) return CP_INFF;
    if (x < -104.0f) return 0.0f;
    float r, rl;
    int32_t k = cp_exp_reducef(x, &r, &rl);
    float s = 1.0f + r;
    float e = (1.0f - s) + r;
    float y = s + (e + (rl + cp_expm1_tailf(r)));
    return cp_scalef(y, k);
}

float cp_expm1f(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu;
    if (ax > 0x7f800000u) return CP_NANF;
    if (x > 89.0f) return CP_INFF;
    if (x < -18.0f) return -1.0f;                /* e^x < 2^-25: -1 (also -inf) */
    if (ax < 0x33000000u) return x;              /* |x| < 2^-25: x (+-0, subnormals) */
    float r, rl;
    int32_t k = cp_exp_reducef(x, &r, &rl);
    float pl = rl + cp_expm1_tailf(r);           /* e^(r + rl) - 1 = r + pl */
    if (k == 0) return r + pl;
    if (k >= -24 && k <= 24) {                   /* (2^k - 1) + 2^k (r + pl), 2^k - 1 exact */
        float p2 = cp_pow2f(k), s, se;
        CP_TWO_SUM(s, se, p2 - 1.0f, p2 * r);
        return s + (se + p2 * pl);
    }
    float s = 1.0f + r;
    float e = (1.0f - s) + r;
    if (k > 24) return cp_scalef(s + (e + (pl - (k < 64 ? cp_pow2f(-k) : 0.0f))), k);
    return cp_scalef(s + (e + pl), k) - 1.0f;    /* k < -24: e^x < 2^-24 */
}

/* x > 0 finite normal or subnormal, bits u: e, index, exact r */
CP_INLINE uint32_t cp_log_splitf(uint32_t u, int32_t *e, float *r)
{
    int32_t eadj = 0;
    if (u < 0x00800000u) {                       /* subnormal: scale by 2^23 */
        u = cp_f2u(cp_u2f(u) * 0x1p23f);
        eadj = -23;
    }
    uint32_t E = (u + 0x00400000u) >> 23;        /* m in [0.75, 1.5) */
    int32_t ee = (int32_t)E - 127;
    uint32_t mb = u - ((uint32_t)ee << 23);
    uint32_t M = mb & 0x7fffffu;
    uint32_t idx;
    if (mb >= 0x3f800000u) idx = ((M + 0x8000u) >> 16) + 32u;     /* m >= 1 */
    else idx = ((M + 0x10000u) >> 17) - 32u;                     /* m < 1  */
    float m = cp_u2f(mb);
    float mh = cp_hi12(m), ml = m - mh;
    float ic = cp_log_invcf[idx];
    *r = (mh * ic - 1.0f) + ml * ic;             /* exact */
    *e = ee + eadj;
    return idx;
}

/* log x = s + (*mid + *low) for x > 0 finite (bits u): the sum of the high
 * parts, the error terms, the polynomial tail */
/* log x = s + (mid + low) from the split's table index, exponent and reduced argument:
 * the scalar and the vector kernels share it, so they compute the same bits */
CP_INLINE float cp_log_combinef(uint32_t idx, float ef, float r, float *mid, float *low)
{
    float th, tl;
    CP_TWO_SUM(th, tl, ef * CPF_LN2_CW_HI, cp_log_ln_hif[idx]);
    tl = tl + (ef * CPF_LN2_CW_LO + cp_log_ln_lof[idx]);
    float s, se;
    CP_TWO_SUM(s, se, th, r);
    float r2 = r * r;
    float tail = (r2 * r) * (LOGF0 + r * (LOGF1 + r * LOGF2));
    *mid = se + tl;
    *low = tail - 0.5f * r2;
    return s;
}

CP_INLINE float cp_log_partsf(uint32_t u, float *mid, float *low)
{
    int32_t e;
    float r;
    uint32_t idx = cp_log_splitf(u, &e, &r);
    float ef = (float)e;
    return cp_log_combinef(idx, ef, r, mid, low);
}

float cp_logf(float x)
{
    uint32_t u = cp_f2u(x);
    if (u >= 0x7f800000u) {                      /* +inf, NaN, negative */
        if (u == 0x7f800000u) return x;
        if (u == 0x80000000u) return -CP_INFF;   /* -0 */
        return CP_NANF;
    }
    if (u == 0) return -CP_INFF;
    float mid, low, s = cp_log_partsf(u, &mid, &low);
    return s + (mid + low);
}

float cp_log1pf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu;
    if (ax >= 0x7f800000u) return u == 0x7f800000u ? x : CP_NANF;   /* +inf; -inf, NaN */
    if (x <= -1.0f) return x == -1.0f ? -CP_INFF : CP_NANF;
    if (ax < 0x33000000u) return x;              /* |x| < 2^-25: x (+-0, subnormals) */
    float uh, ul;
    CP_TWO_SUM(uh, ul, 1.0f, x);                 /* 1 + x = uh + ul, uh >= 2^-24 */
    float mid, low, s = cp_log_partsf(cp_f2u(uh), &mid, &low);
    return s + (mid + (low + ul / uh));          /* log(uh + ul) = log uh + ul/uh */
}

/* log2(x) as hi + lo, x > 0 finite (bits u) */
CP_INLINE float cp_log2_ddf(uint32_t u, float *lo)
{
    int32_t e;
    float r;
    uint32_t idx = cp_log_splitf(u, &e, &r);
    /* log2(1+r) = K1 (r - r^2/2) + r^3 M(r), r^2 exact */
    float q, qe;
    cp_two_prodf(r, r, &q, &qe);
    float dh = r - 0.5f * q;
    float dl = ((r - dh) - 0.5f * q) - 0.5f * qe;
    float ph, pe;
    cp_two_prodf(dh, CPF_INVLN2_HI, &ph, &pe);
    float pl = pe + (dh * CPF_INVLN2_LO + dl * CPF_INVLN2_HI);
    float tail = (q * r) * (LOG2F0 + r * (LOG2F1 + r * LOG2F2));
    float sh, sl, s2;
    CP_TWO_SUM(sh, sl, (float)e, cp_log_l2_hif[idx]);
    CP_TWO_SUM(sh, s2, sh, ph);
    *lo = (sl + s2) + ((cp_log_l2_lof[idx] + pl) + tail);
    return sh;
}

/* 2^(zh+zl), |zh| < 160; result * sign */
CP_INLINE float cp_exp2_ddf(float zh, float zl, uint32_t sign)
{
    float kf = zh + 0x1.8p23f;
    kf = kf - 0x1.8p23f;
    int32_t k = (int32_t)kf;
    float f0 = zh - kf;                          /* exact */
    float fh, fl;
    CP_TWO_SUM(fh, fl, f0, zl);
    float gh, ge;
    cp_two_prodf(fh, CPF_LN2_HI, &gh, &ge);
    float gl = ge + (fh * CPF_LN2_LO + fl * CPF_LN2_HI);
    float s = 1.0f + gh;
    float e = (1.0f - s) + gh;
    float y = s + (e + (gl + gl * gh + cp_expm1_tailf(gh)));
    y = cp_scalef(y, k);
    return cp_u2f(cp_f2u(y) ^ sign);
}

float cp_powf(float x, float y)
{
    uint32_t ux = cp_f2u(x), uy = cp_f2u(y);
    uint32_t ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
    if (ay == 0) return 1.0f;                    /* pow(x, +-0) = 1 */
    if (ux == 0x3f800000u) return 1.0f;          /* pow(1, y) = 1 */
    if (ax > 0x7f800000u || ay > 0x7f800000u) return CP_NANF;
    /* y integer class: 0 no, 1 odd, 2 even */
    uint32_t yint = 0;
    if (ay >= 0x4b800000u) yint = 2;             /* |y| >= 2^24 (or inf) */
    else if (ay >= 0x3f800000u) {
        uint32_t ey = (ay >> 23) - 127u;         /* 0..23 */
        uint32_t fm = 0x7fffffu >> ey;
        if ((ay & fm) == 0) yint = ((ay >> (23u - ey)) & 1u) ? 1u : 2u;
    }
    uint32_t ylt0 = uy >> 31;
    if (ay == 0x7f800000u) {                     /* y = +-inf */
        if (ax == 0x3f800000u) return 1.0f;      /* (-1)^inf */
        if ((ax < 0x3f800000u) != (ylt0 != 0)) return 0.0f;
        return CP_INFF;
    }
    uint32_t sign = ((ux >> 31) && yint == 1u) ? 0x80000000u : 0u;
    if (ax == 0 || ax == 0x7f800000u) {          /* x = +-0, +-inf */
        uint32_t big = (ax == 0) ? ylt0 : !ylt0;
        return cp_u2f((big ? 0x7f800000u : 0u) | sign);
    }
    if ((ux >> 31) && yint == 0) return CP_NANF; /* negative ^ non-integer */
    float lo, hi = cp_log2_ddf(ax, &lo);
    float zh, ze;
    cp_two_prodf(y, hi, &zh, &ze);
    if (zh > 200.0f) return cp_u2f(0x7f800000u | sign);
    if (zh < -200.0f) return cp_u2f(sign);
    float zl = ze + y * lo;
    return cp_exp2_ddf(zh, zl, sign);
}

float cp_tanhf(float x)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    if (ax > 0x7f800000u) return CP_NANF;
    if (ax < 0x39800000u) return x;              /* |x| < 2^-12 */
    float a = cp_u2f(ax), y;
    if (a < 0.55f) {
        float t = a * a;
        y = a + (a * t) * (TANHF0 + t * (TANHF1 + t * (TANHF2 + t * (TANHF3 + t * TANHF4))));
    } else if (a > 9.5f) {
        y = 1.0f;
    } else {
        float r, rl;
        int32_t k = cp_exp_reducef(2.0f * a, &r, &rl);
        float p = r + (rl + cp_expm1_tailf(r));  /* e^r - 1 */
        float p2 = cp_pow2f(k);
        float d = (p2 + 1.0f) + p2 * p;          /* e^{2a} + 1 */
        y = 1.0f - 2.0f / d;
    }
    return cp_u2f(cp_f2u(y) ^ sg);
}

/* ------------------------------------------------------------ float64 */

CP_INLINE double cp_expm1_tail(double r)
{
    double p = EXPD10;
    p = EXPD9 + r * p; p = EXPD8 + r * p; p = EXPD7 + r * p; p = EXPD6 + r * p;
    p = EXPD5 + r * p; p = EXPD4 + r * p; p = EXPD3 + r * p; p = EXPD2 + r * p;
    p = EXPD1 + r * p; p = EXPD0 + r * p;
    return (r * r) * p;
}

CP_INLINE int32_t cp_exp_reduce(double x, double *r, double *rl)
{
    double kf = x * CPD_INVLN2 + 0x1.8p52;
    kf = kf - 0x1.8p52;
    int32_t k = (int32_t)kf;
    double r1 = x - kf * CPD_LN2_CW_HI;
    double t2 = kf * CPD_LN2_CW_LO;
    *r = r1 - t2;
    *rl = (r1 - *r) - t2;
    return k;
}

double cp_exp(double x)
{
    uint64_t u = cp_d2u(x);
    if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return CP_NAN;
    if (x > 710.0) return CP_INF;
    if (x < -746.0) return 0.0;
    double r, rl;
    int32_t k = cp_exp_reduce(x, &r, &rl);
    double s = 1.0 + r;
    double e = (1.0 - s) + r;
    double y = s + (e + (rl + cp_expm1_tail(r)));
    return cp_scaled(y, k);
}

double cp_expm1(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull;
    if (ax > 0x7ff0000000000000ull) return CP_NAN;
    if (x > 710.0) return CP_INF;
    if (x < -38.0) return -1.0;                  /* e^x < 2^-54: -1 (also -inf) */
    if (ax < 0x3c90000000000000ull) return x;    /* |x| < 2^-54: x (+-0, subnormals) */
    double r, rl;
    int32_t k = cp_exp_reduce(x, &r, &rl);
    double pl = rl + cp_expm1_tail(r);
    if (k == 0) return r + pl;
    if (k >= -53 && k <= 53) {
        double p2 = cp_pow2d(k), s, se;
        CP_TWO_SUM(s, se, p2 - 1.0, p2 * r);
        return s + (se + p2 * pl);
    }
    double s = 1.0 + r;
    double e = (1.0 - s) + r;
    if (k > 53) return cp_scaled(s + (e + (pl - (k < 128 ? cp_pow2d(-k) : 0.0))), k);
    return cp_scaled(s + (e + pl), k) - 1.0;
}

CP_INLINE uint32_t cp_log_split(uint64_t u, int32_t *e, double *r)
{
    int32_t eadj = 0;
    if (u < 0x0010000000000000ull) {
        u = cp_d2u(cp_u2d(u) * 0x1p52);
        eadj = -52;
    }
    uint32_t E = (uint32_t)((u + 0x0008000000000000ull) >> 52);
    int32_t ee = (int32_t)E - 1023;
    uint64_t mb = u - ((uint64_t)(uint32_t)ee << 52);
    uint64_t M = mb & 0x000fffffffffffffull;
    uint32_t idx;
    if (mb >= 0x3ff0000000000000ull) idx = (uint32_t)((M + (1ull << 44)) >> 45) + 32u;
    else idx = (uint32_t)((M + (1ull << 45)) >> 46) - 32u;
    double m = cp_u2d(mb);
    double mh = cp_u2d(mb & 0xfffffffffc000000ull), ml = m - mh;   /* 27 + 26 bits */
    double ic = cp_log_invc[idx];
    *r = (mh * ic - 1.0) + ml * ic;              /* exact */
    *e = ee + eadj;
    return idx;
}

/* the float64 twin of cp_log_combinef */
CP_INLINE double cp_log_combine(uint32_t idx, double ef, double r, double *mid, double *low)
{
    double th, tl;
    CP_TWO_SUM(th, tl, ef * CPD_LN2_CW_HI, cp_log_ln_hi[idx]);
    tl = tl + (ef * CPD_LN2_CW_LO + cp_log_ln_lo[idx]);
    double s, se;
    CP_TWO_SUM(s, se, th, r);
    double r2 = r * r;
    double p = LOGD6;
    p = LOGD5 + r * p; p = LOGD4 + r * p; p = LOGD3 + r * p; p = LOGD2 + r * p;
    p = LOGD1 + r * p; p = LOGD0 + r * p;
    double tail = (r2 * r) * p;
    *mid = se + tl;
    *low = tail - 0.5 * r2;
    return s;
}

CP_INLINE double cp_log_parts(uint64_t u, double *mid, double *low)
{
    int32_t e;
    double r;
    uint32_t idx = cp_log_split(u, &e, &r);
    double ef = (double)e;
    return cp_log_combine(idx, ef, r, mid, low);
}

double cp_log(double x)
{
    uint64_t u = cp_d2u(x);
    if (u >= 0x7ff0000000000000ull) {
        if (u == 0x7ff0000000000000ull) return x;
        if (u == 0x8000000000000000ull) return -CP_INF;
        return CP_NAN;
    }
    if (u == 0) return -CP_INF;
    double mid, low, s = cp_log_parts(u, &mid, &low);
    return s + (mid + low);
}

double cp_log1p(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull;
    if (ax >= 0x7ff0000000000000ull) return u == 0x7ff0000000000000ull ? x : CP_NAN;
    if (x <= -1.0) return x == -1.0 ? -CP_INF : CP_NAN;
    if (ax < 0x3c90000000000000ull) return x;    /* |x| < 2^-54 */
    double uh, ul;
    CP_TWO_SUM(uh, ul, 1.0, x);
    double mid, low, s = cp_log_parts(cp_d2u(uh), &mid, &low);
    return s + (mid + (low + ul / uh));
}

CP_INLINE double cp_log2_dd(uint64_t u, double *lo)
{
    int32_t e;
    double r;
    uint32_t idx = cp_log_split(u, &e, &r);
    double q, qe;
    cp_two_prod(r, r, &q, &qe);
    double dh = r - 0.5 * q;
    double dl = ((r - dh) - 0.5 * q) - 0.5 * qe;
    double ph, pe;
    cp_two_prod(dh, CPD_INVLN2_HI, &ph, &pe);
    double pl = pe + (dh * CPD_INVLN2_LO + dl * CPD_INVLN2_HI);
    double p = LOG2D7;
    p = LOG2D6 + r * p; p = LOG2D5 + r * p; p = LOG2D4 + r * p; p = LOG2D3 + r * p;
    p = LOG2D2 + r * p; p = LOG2D1 + r * p; p = LOG2D0 + r * p;
    double tail = (q * r) * p;
    double sh, sl, s2;
    CP_TWO_SUM(sh, sl, (double)e, cp_log_l2_hi[idx]);
    CP_TWO_SUM(sh, s2, sh, ph);
    *lo = (sl + s2) + ((cp_log_l2_lo[idx] + pl) + tail);
    return sh;
}

CP_INLINE double cp_exp2_dd(double zh, double zl, uint64_t sign)
{
    double kf = zh + 0x1.8p52;
    kf = kf - 0x1.8p52;
    int32_t k = (int32_t)kf;
    double f0 = zh - kf;
    double fh, fl;
    CP_TWO_SUM(fh, fl, f0, zl);
    double gh, ge;
    cp_two_prod(fh, CPD_LN2_HI, &gh, &ge);
    double gl = ge + (fh * CPD_LN2_LO + fl * CPD_LN2_HI);
    double s = 1.0 + gh;
    double e = (1.0 - s) + gh;
    double y = s + (e + (gl + gl * gh + cp_expm1_tail(gh)));
    y = cp_scaled(y, k);
    return cp_u2d(cp_d2u(y) ^ sign);
}

double cp_pow(double x, double y)
{
    uint64_t ux = cp_d2u(x), uy = cp_d2u(y);
    uint64_t ax = ux & 0x7fffffffffffffffull, ay = uy & 0x7fffffffffffffffull;
    const uint64_t ONE = 0x3ff0000000000000ull, INFB = 0x7ff0000000000000ull;
    if (ay == 0) return 1.0;
    if (ux == ONE) return 1.0;
    if (ax > INFB || ay > INFB) return CP_NAN;
    uint32_t yint = 0;
    if (ay >= 0x4340000000000000ull) yint = 2;   /* |y| >= 2^53 */
    else if (ay >= ONE) {
        uint32_t ey = (uint32_t)(ay >> 52) - 1023u;   /* 0..52 */
        uint64_t fm = 0x000fffffffffffffull >> ey;
        if ((ay & fm) == 0) yint = ((ay >> (52u - ey)) & 1u) ? 1u : 2u;
    }
    uint32_t ylt0 = (uint32_t)(uy >> 63);
    if (ay == INFB) {
        if (ax == ONE) return 1.0;
        if ((ax < ONE) != (ylt0 != 0)) return 0.0;
        return CP_INF;
    }
    uint64_t sign = ((ux >> 63) && yint == 1u) ? 0x8000000000000000ull : 0u;
    if (ax == 0 || ax == INFB) {
        uint32_t big = (ax == 0) ? ylt0 : !ylt0;
        return cp_u2d((big ? INFB : 0u) | sign);
    }
    if ((ux >> 63) && yint == 0) return CP_NAN;
    double lo, hi = cp_log2_dd(ax, &lo);
    double zh, ze;
    cp_two_prod(y, hi, &zh, &ze);
    if (zh > 1100.0) return cp_u2d(INFB | sign);
    if (zh < -1200.0) return cp_u2d(sign);
    double zl = ze + y * lo;
    return cp_exp2_dd(zh, zl, sign);
}

double cp_tanh(double x)
{
    uint64_t u = cp_d2u(x), ax = u & 0x7fffffffffffffffull, sg = u & 0x8000000000000000ull;
    if (ax > 0x7ff0000000000000ull) return CP_NAN;
    if (ax < 0x3e40000000000000ull) return x;    /* |x| < 2^-27 */
    double a = cp_u2d(ax), y;
    if (a < 0.55) {
        double t = a * a;
        double p = TANHD10;
        p = TANHD9 + t * p; p = TANHD8 + t * p; p = TANHD7 + t * p; p = TANHD6 + t * p;
        p = TANHD5 + t * p; p = TANHD4 + t * p; p = TANHD3 + t * p; p = TANHD2 + t * p;
        p = TANHD1 + t * p; p = TANHD0 + t * p;
        y = a + (a * t) * p;
    } else if (a > 20.0) {
        y = 1.0;
    } else {
        double r, rl;
        int32_t k = cp_exp_reduce(2.0 * a, &r, &rl);
        double p = r + (rl + cp_expm1_tail(r));
        double p2 = cp_pow2d(k);
        double d = (p2 + 1.0) + p2 * p;
        y = 1.0 - 2.0 / d;
    }
    return cp_u2d(cp_d2u(y) ^ sg);
}

#if CP_VMATH
/* ------------------------------------------------------------ block forms
 * The operation sequences of cp_expf/cp_exp, cp_logf/cp_log, cp_tanhf/cp_tanh
 * with selects: every case is evaluated (on an argument clamped into the
 * range where its conversions and table indices are defined) and the case of
 * the scalar kernel is selected.  They never need the scalar kernel (bad is
 * always 0). */

/* cp_scalef/cp_scaled, every case evaluated */
CP_INLINE float cp_vk_scalef(float x, int32_t k)
{
    int32_t k1 = CP_SEL(k - 127 > 127, 127, k - 127);
    int32_t kc = CP_SEL(k > 127 || k < -126, 0, k);
    int32_t kl = CP_SEL(k < -126, k + 100, 0);
    float hi = (x * cp_pow2f(127)) * cp_pow2f(CP_SEL(k > 127, k1, 0));
    float lo = (x * cp_pow2f(kl)) * cp_pow2f(-100);
    float mid = x * cp_pow2f(kc);
    return CP_SEL(k > 127, hi, CP_SEL(k < -126, lo, mid));
}
CP_INLINE double cp_vk_scaled(double x, int32_t k)
{
    int32_t k1 = CP_SEL(k - 1023 > 1023, 1023, k - 1023);
    int32_t kc = CP_SEL(k > 1023 || k < -1022, 0, k);
    int32_t kl = CP_SEL(k < -1022, k + 600, 0);
    double hi = (x * cp_pow2d(1023)) * cp_pow2d(CP_SEL(k > 1023, k1, 0));
    double lo = (x * cp_pow2d(kl)) * cp_pow2d(-600);
    double mid = x * cp_pow2d(kc);
    return CP_SEL(k > 1023, hi, CP_SEL(k < -1022, lo, mid));
}

CP_INLINE float cp_vk_expf(float x, uint32_t *bad)
{
    float xc = CP_SEL(x <= 89.0f && x >= -104.0f, x, 0.0f);   /* NaN too */
    float r, rl;
    int32_t k = cp_exp_reducef(xc, &r, &rl);
    float s = 1.0f + r;
    float e = (1.0f - s) + r;
    float y = s + (e + (rl + cp_expm1_tailf(r)));
    float v = cp_vk_scalef(y, k);
    v = CP_SEL(x > 89.0f, CP_INFF, CP_SEL(x < -104.0f, 0.0f, v));
    *bad = 0;
    return CP_SEL(x != x, CP_NANF, v);
}
CP_INLINE double cp_vk_exp(double x, uint32_t *bad)
{
    double xc = CP_SEL(x <= 710.0 && x >= -746.0, x, 0.0);
    double r, rl;
    int32_t k = cp_exp_reduce(xc, &r, &rl);
    double s = 1.0 + r;
    double e = (1.0 - s) + r;
    double y = s + (e + (rl + cp_expm1_tail(r)));
    double v = cp_vk_scaled(y, k);
    v = CP_SEL(x > 710.0, CP_INF, CP_SEL(x < -746.0, 0.0, v));
    *bad = 0;
    return CP_SEL(x != x, CP_NAN, v);
}

/* cp_log_partsf/cp_log_parts of a positive finite x (bits u), the subnormal
 * scaling and the index cases selected */
CP_INLINE float cp_vk_log_partsf(uint32_t u, float *mid, float *low)
{
    uint32_t sub = u < 0x00800000u;
    u = CP_SEL(sub, cp_f2u(cp_u2f(u) * 0x1p23f), u);
    int32_t eadj = CP_SEL(sub, -23, 0);
    uint32_t E = (u + 0x00400000u) >> 23;
    int32_t ee = (int32_t)E - 127;
    uint32_t mb = u - ((uint32_t)ee << 23);
    uint32_t M = mb & 0x7fffffu;
    uint32_t idx = CP_SEL(mb >= 0x3f800000u, ((M + 0x8000u) >> 16) + 32u, ((M + 0x10000u) >> 17) - 32u);
    float m = cp_u2f(mb);
    float mh = cp_hi12(m), ml = m - mh;
    float ic = cp_log_invcf[idx];
    float r = (mh * ic - 1.0f) + ml * ic;
    float ef = (float)(ee + eadj);
    return cp_log_combinef(idx, ef, r, mid, low);
}
CP_INLINE double cp_vk_log_parts(uint64_t u, double *mid, double *low)
{
    uint32_t sub = u < 0x0010000000000000ull;
    u = CP_SEL(sub, cp_d2u(cp_u2d(u) * 0x1p52), u);
    int32_t eadj = CP_SEL(sub, -52, 0);
    uint32_t E = (uint32_t)((u + 0x0008000000000000ull) >> 52);
    int32_t ee = (int32_t)E - 1023;
    uint64_t mb = u - ((uint64_t)(uint32_t)ee << 52);
    uint64_t M = mb & 0x000fffffffffffffull;
    uint32_t idx = CP_SEL(mb >= 0x3ff0000000000000ull, (uint32_t)((M + (1ull << 44)) >> 45) + 32u,
                          (uint32_t)((M + (1ull << 45)) >> 46) - 32u);
    double m = cp_u2d(mb);
    double mh = cp_u2d(mb & 0xfffffffffc000000ull), ml = m - mh;
    double ic = cp_log_invc[idx];
    double r = (mh * ic - 1.0) + ml * ic;
    double ef = (double)(ee + eadj);
    return cp_log_combine(idx, ef, r, mid, low);
}

CP_INLINE float cp_vk_logf(float x, uint32_t *bad)
{
    uint32_t u = cp_f2u(x);
    uint32_t fin = u - 1u < 0x7f7fffffu;         /* 0 < x < inf */
    float mid, low, s = cp_vk_log_partsf(CP_SEL(fin, u, 0x3f800000u), &mid, &low);
    float v = s + (mid + low);
    v = CP_SEL(u == 0x7f800000u, x, CP_SEL((u & 0x7fffffffu) == 0u, -CP_INFF, CP_SEL(fin, v, CP_NANF)));
    *bad = 0;
    return v;
}
CP_INLINE double cp_vk_log(double x, uint32_t *bad)
{
    uint64_t u = cp_d2u(x);
    uint32_t fin = u - 1u < 0x7fefffffffffffffull;
    double mid, low, s = cp_vk_log_parts(CP_SEL(fin, u, 0x3ff0000000000000ull), &mid, &low);
    double v = s + (mid + low);
    v = CP_SEL(u == 0x7ff0000000000000ull, x,
               CP_SEL((u & 0x7fffffffffffffffull) == 0u, -CP_INF, CP_SEL(fin, v, CP_NAN)));
    *bad = 0;
    return v;
}

CP_INLINE float cp_vk_tanhf(float x, uint32_t *bad)
{
    uint32_t u = cp_f2u(x), ax = u & 0x7fffffffu, sg = u & 0x80000000u;
    float a = cp_u2f(ax);
    float t = a * a;
    float ys = a + (a * t) * (TANHF0 + t * (TANHF1 + t * (TANHF2 + t * (TANHF3 + t * TANHF4))));
    float ac = CP_SEL(a <= 9.5f, a, 0.0f);      /* NaN too */
    float r, rl;
    int32_t k = cp_exp_reducef(2.0f * ac, &r, &rl);
    float p = r + (rl + cp_expm1_tailf(r));
    float p2 = cp_pow2f(k);
    float d = (p2 + 1.0f) + p2 * p;
    float ym = 1.0f - 2.0f / d;
    float y = CP_SEL(a < 0.55f, ys, CP_SEL(a > 9.5f, 1.0f, ym));
    float v = cp_u2f(cp_f2u(y) ^ sg);
    v = CP_SEL(ax < 0x39800000u, x, v);
    *bad = 0;
    return CP_SEL(ax > 0x7f800000u, CP_NANF, v);
}
CP_INLINE double cp_vk_tanh(double x, uint32_t *bad)
{
    uint64_t u = cp_d2u(x), sg = u & 0x8000000000000000ull;
    double a = __builtin_fabs(x);
    double t = a * a;
    double p = TANHD10;
    p = TANHD9 + t * p; p = TANHD8 + t * p; p = TANHD7 + t * p; p = TANHD6 + t * p;
    p = TANHD5 + t * p; p = TANHD4 + t * p; p = TANHD3 + t * p; p = TANHD2 + t * p;
    p = TANHD1 + t * p; p = TANHD0 + t * p;
    double ys = a + (a * t) * p;
    double ac = CP_SEL(a <= 20.0, a, 0.0);
    double r, rl;
    int32_t k = cp_exp_reduce(2.0 * ac, &r, &rl);
    double q = r + (rl + cp_expm1_tail(r));
    double p2 = cp_pow2d(k);
    double d = (p2 + 1.0) + p2 * q;
    double ym = 1.0 - 2.0 / d;
    double y = CP_SEL(a < 0.55, ys, CP_SEL(a > 20.0, 1.0, ym));
    double v = cp_u2d(cp_d2u(y) ^ sg);
    v = CP_SEL(a < 0x1p-27, x, v);
    *bad = 0;
    return CP_SEL(x != x, CP_NAN, v);
}

CP_VBLOCK_FORM(exp, f32, float, cp_vk_expf, cp_expf)
CP_VBLOCK_FORM(exp, f64, double, cp_vk_exp, cp_exp)
CP_VBLOCK_FORM(log, f32, float, cp_vk_logf, cp_logf)
CP_VBLOCK_FORM(log, f64, double, cp_vk_log, cp_log)
CP_VBLOCK_FORM(tanh, f32, float, cp_vk_tanhf, cp_tanhf)
CP_VBLOCK_FORM(tanh, f64, double, cp_vk_tanh, cp_tanh)
#endif
