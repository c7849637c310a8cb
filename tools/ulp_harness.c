/* Host-side batch wrappers around the cp_math kernels, loaded with ctypes
 * by tools/measure_ulp.py.  Also wraps the host libm for the speed
 * comparison (the kernels themselves never use libm). */
#include <stddef.h>
#include "cp_math.h"

#define EVAL1(name, T) \
    void eval_##name(const T *x, T *y, size_t n) \
    { for (size_t i = 0; i < n; i++) y[i] = cp_##name(x[i]); }
#define EVAL2(name, T) \
    void eval_##name(const T *x, const T *x2, T *y, size_t n) \
    { for (size_t i = 0; i < n; i++) y[i] = cp_##name(x[i], x2[i]); }
/* eval_<name>f and eval_<name> for every kernel of cp_math.h */
#define EVAL(name, arity, accuracy) EVAL##arity(name##f, float) EVAL##arity(name, double)
CP_KERNELS(EVAL)
EVAL1(sqrtf_soft, float) EVAL1(sqrt_soft, double)

/* ---- host libm, for the speed comparison only ---- */
float sinf(float); float cosf(float); float tanf(float); float asinf(float);
float acosf(float); float atanf(float); float atan2f(float, float);
float expf(float); float logf(float); float powf(float, float); float tanhf(float);
double sin(double); double cos(double); double tan(double); double exp(double);
double log(double); double pow(double, double); double atan(double); double tanh(double);
double asin(double); double acos(double); double atan2(double, double);

#define LIBM1(name, T) \
    void libm_##name(const T *x, T *y, size_t n) \
    { for (size_t i = 0; i < n; i++) y[i] = name(x[i]); }
#define LIBM2(name, T) \
    void libm_##name(const T *x, const T *x2, T *y, size_t n) \
    { for (size_t i = 0; i < n; i++) y[i] = name(x[i], x2[i]); }
LIBM1(sinf, float) LIBM1(cosf, float) LIBM1(tanf, float) LIBM1(asinf, float)
LIBM1(acosf, float) LIBM1(atanf, float) LIBM2(atan2f, float) LIBM1(expf, float)
LIBM1(logf, float) LIBM2(powf, float) LIBM1(tanhf, float)
LIBM1(sin, double) LIBM1(cos, double) LIBM1(tan, double) LIBM1(asin, double)
LIBM1(acos, double) LIBM1(atan, double) LIBM2(atan2, double) LIBM1(exp, double)
LIBM1(log, double) LIBM2(pow, double) LIBM1(tanh, double)
