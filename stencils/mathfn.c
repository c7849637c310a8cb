/* Elementary functions: thin stencils around the deterministic kernels of stencils/math. */
#include "cp_math.h"
#include "cp_stencil.h"
#include "cp_ops.h"

#define CP_MATH_F(T, S)                                                                        \
    CP_UNARY(sqrt, T, T, cp_sqrt##S(a))                                                        \
    CP_UNARY(sin, T, T, cp_sin##S(a))                                                          \
    CP_UNARY(cos, T, T, cp_cos##S(a))                                                          \
    CP_UNARY(tan, T, T, cp_tan##S(a))                                                          \
    CP_UNARY(asin, T, T, cp_asin##S(a))                                                        \
    CP_UNARY(acos, T, T, cp_acos##S(a))                                                        \
    CP_UNARY(atan, T, T, cp_atan##S(a))                                                        \
    CP_UNARY(exp, T, T, cp_exp##S(a))                                                          \
    CP_UNARY(log, T, T, cp_log##S(a))                                                          \
    CP_UNARY(tanh, T, T, cp_tanh##S(a))                                                        \
    CP_UNARY(floor, T, T, cp_floor##S(a))                                                      \
    CP_UNARY(ceil, T, T, cp_ceil##S(a))                                                        \
    CP_UNARY(round, T, T, cp_round##S(a))                                                      \
    CP_UNARY(trunc, T, T, cp_trunc##S(a))                                                      \
    CP_UNARY(sign, T, T, cp_sign_##T(a))                                                       \
    CP_UNARY(relu, T, T, cp_max_##T(a, (CT_##T)0))

CP_MATH_F(f32, f)
CP_MATH_F(f64, )

CP_UNARY(sign, i32, i32, (a > 0) - (a < 0))
CP_UNARY(relu, i32, i32, a > 0 ? a : 0)
