/* SINF: degree 3, minimax rel. err 2^-37.49 (after rounding coeffs 2^-28.03) */
#define SINF0 -0x1.5555560000000p-3f
#define SINF1 0x1.1111080000000p-7f
#define SINF2 -0x1.a00f760000000p-13f
#define SINF3 0x1.6ccff80000000p-19f
/* COSF: degree 2, minimax rel. err 2^-33.00 (after rounding coeffs 2^-32.75) */
#define COSF0 0x1.55554a0000000p-5f
#define COSF1 -0x1.6c0c2c0000000p-10f
#define COSF2 0x1.99e92a0000000p-16f
/* TANF: degree 6, minimax rel. err 2^-29.55 (after rounding coeffs 2^-27.82) */
#define TANF0 0x1.5555600000000p-2f
#define TANF1 0x1.110d840000000p-3f
#define TANF2 0x1.baddb60000000p-5f
#define TANF3 0x1.5c9c420000000p-6f
#define TANF4 0x1.637a9e0000000p-7f
#define TANF5 0x1.32f5a80000000p-14f
#define TANF6 0x1.1f58a00000000p-8f
/* ASINF: degree 5, minimax rel. err 2^-31.76 (after rounding coeffs 2^-29.79) */
#define ASINF0 0x1.55554c0000000p-3f
#define ASINF1 0x1.33387c0000000p-4f
#define ASINF2 0x1.6caed20000000p-5f
#define ASINF3 0x1.0491a20000000p-5f
#define ASINF4 0x1.d91fa20000000p-7f
#define ASINF5 0x1.3355c20000000p-5f
/* ATANF: degree 4, minimax rel. err 2^-29.59 (after rounding coeffs 2^-28.16) */
#define ATANF0 -0x1.5555420000000p-2f
#define ATANF1 0x1.998dbe0000000p-3f
#define ATANF2 -0x1.236bfe0000000p-3f
#define ATANF3 0x1.adb4180000000p-4f
#define ATANF4 -0x1.dcb3700000000p-5f
/* TANHF: degree 4, minimax rel. err 2^-29.84 (after rounding coeffs 2^-27.76) */
#define TANHF0 -0x1.55554a0000000p-2f
#define TANHF1 0x1.110d260000000p-3f
#define TANHF2 -0x1.b9287a0000000p-5f
#define TANHF3 0x1.593d080000000p-6f
#define TANHF4 -0x1.9b30460000000p-8f
/* EXPF: degree 5, minimax rel. err 2^-31.96 (after rounding coeffs 2^-28.79) */
#define EXPF0 0x1.0000000000000p-1f
#define EXPF1 0x1.5555540000000p-3f
#define EXPF2 0x1.5554b20000000p-5f
#define EXPF3 0x1.11118a0000000p-7f
#define EXPF4 0x1.6d72260000000p-10f
#define EXPF5 0x1.a032c20000000p-13f
/* LOGF: degree 2, minimax rel. err 2^-36.57 (after rounding coeffs 2^-36.30) */
#define LOGF0 0x1.5555560000000p-2f
#define LOGF1 -0x1.0006ec0000000p-2f
#define LOGF2 0x1.99a92c0000000p-3f
/* LOG2F: degree 2, minimax rel. err 2^-36.57 (after rounding coeffs 2^-36.48) */
#define LOG2F0 0x1.ec709e0000000p-2f
#define LOG2F1 -0x1.715e720000000p-2f
#define LOG2F2 0x1.2782020000000p-2f
/* SIND: degree 6, minimax rel. err 2^-68.72 (after rounding coeffs 2^-57.13) */
#define SIND0 -0x1.5555555555555p-3
#define SIND1 0x1.111111111110bp-7
#define SIND2 -0x1.a01a01a018a42p-13
#define SIND3 0x1.71de3a532d056p-19
#define SIND4 -0x1.ae645288d5816p-26
#define SIND5 0x1.61208944a8760p-33
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
#define TAND12 -0x1.34a52634fdd00p-16
#define TAND13 0x1.b0d74c99f783ap-16
#define TAND14 -0x1.a6fd55342249cp-17
#define TAND15 0x1.30b9fb1b48bbap-18
/* ASIND: degree 12, minimax rel. err 2^-59.86 (after rounding coeffs 2^-59.18) */
#define ASIND0 0x1.5555555555577p-3
#define ASIND1 0x1.333333332e101p-4
#define ASIND2 0x1.6db6db72142fcp-5
#define ASIND3 0x1.f1c71a9463e0dp-6
#define ASIND4 0x1.6e8bdeede944cp-6
#define ASIND5 0x1.1c49ef829d5bcp-6
#define ASIND6 0x1.ca1f9ff17d9e3p-7
#define ASIND7 0x1.7584febd430b0p-7
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
#define ATAND6 -0x1.11090319238c0p-4
#define ATAND7 0x1.e13268bd36fabp-5
#define ATAND8 -0x1.a9fa50a54377ap-5
#define ATAND9 0x1.6b1a89576b489p-5
#define ATAND10 -0x1.055deccf0644ep-5
#define ATAND11 0x1.c05e2a12b8c9dp-7
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
/* EXPD: degree 10, minimax rel. err 2^-61.73 (after rounding coeffs 2^-60.00) */
#define EXPD0 0x1.0000000000000p-1
#define EXPD1 0x1.5555555555559p-3
#define EXPD2 0x1.555555555553fp-5
#define EXPD3 0x1.111111110f6ccp-7
#define EXPD4 0x1.6c16c16c1f0bep-10
#define EXPD5 0x1.a01a01afda4b6p-13
#define EXPD6 0x1.a01a017bb863fp-16
#define EXPD7 0x1.71ddf86cd469ap-19
#define EXPD8 0x1.27e5363aa3d88p-22
#define EXPD9 0x1.af5e97035a670p-26
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
