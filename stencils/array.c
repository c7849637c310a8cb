/* Packed-array stencils (cp_array.h): the scalar families applied element-wise, selects and
 * broadcasts, lane-ordered reductions and matrix products. The element semantics are those
 * of the scalar stencils (arith.c, compare.c, bitwise.c, floatdiv.c, mathfn.c, cast.c). */
#include "cp_array.h"
#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

/* ---- element-wise binary: out[i] = op(a_i, b_i), forms v_v, v_m, m_v -------------------- */

#define CP_VARITH_F(T, S)                                                                      \
    CP_VBINARY(add, T, T, a + b)                                                               \
    CP_VBINARY(sub, T, T, a - b)                                                               \
    CP_VBINARY(mul, T, T, a * b)                                                               \
    CP_VBINARY(div, T, T, a / b)                                                               \
    CP_VBINARY(min, T, T, cp_min_##T(a, b))                                                    \
    CP_VBINARY(max, T, T, cp_max_##T(a, b))                                                    \
    CP_VBINARY(floordiv, T, T, cp_floordiv_##T(a, b))                                          \
    CP_VBINARY(mod, T, T, cp_mod_##T(a, b))                                                    \
    CP_VBINARY(pow, T, T, cp_pow##S(a, b))                                                     \
    CP_VBINARY(atan2, T, T, cp_atan2##S(a, b))

CP_VARITH_F(f32, f)
CP_VARITH_F(f64, )

CP_VBINARY(add, i32, i32, cp_wrap_add(a, b))
CP_VBINARY(sub, i32, i32, cp_wrap_sub(a, b))
CP_VBINARY(mul, i32, i32, cp_wrap_mul(a, b))
CP_VBINARY(floordiv, i32, i32, cp_floordiv_i32(a, b))
CP_VBINARY(mod, i32, i32, cp_mod_i32(a, b))
CP_VBINARY(min, i32, i32, a < b ? a : b)
CP_VBINARY(max, i32, i32, a > b ? a : b)
CP_VBINARY(pow, i32, i32, cp_pow_i32(a, b))
CP_VBINARY(and, i32, i32, a & b)
CP_VBINARY(or, i32, i32, a | b)
CP_VBINARY(xor, i32, i32, a ^ b)
CP_VBINARY(shl, i32, i32, cp_shl_i32(a, b))
CP_VBINARY(shr, i32, i32, cp_shr_i32(a, b))

/* Comparisons: operands of type T, result an int32 bool (0/1) array in cp_vout_i32. */
#define CP_VCOMPARISONS(T)                                                                     \
    CP_VBINARY(lt, T, bool, a < b)                                                             \
    CP_VBINARY(le, T, bool, a <= b)                                                            \
    CP_VBINARY(gt, T, bool, a > b)                                                             \
    CP_VBINARY(ge, T, bool, a >= b)                                                            \
    CP_VBINARY(eq, T, bool, a == b)                                                            \
    CP_VBINARY(ne, T, bool, a != b)

CP_VCOMPARISONS(f32)
CP_VCOMPARISONS(f64)
CP_VCOMPARISONS(i32)

/* ---- element-wise unary: out[i] = op(a_i) ------------------------------------------------ */

#define CP_VMATH_F(T, S)                                                                       \
    CP_VUNARY_BITS(neg, T, -a)                                                                 \
    CP_VUNARY_BITS(abs, T, __builtin_fabs##S(a))                                               \
    CP_VUNARY(sign, T, T, cp_sign_##T(a))                                                      \
    CP_VUNARY(relu, T, T, cp_max_##T(a, (CT_##T)0))                                            \
    CP_VUNARY(sqrt, T, T, cp_sqrt##S(a))                                                       \
    CP_VUNARY(sin, T, T, cp_sin##S(a))                                                         \
    CP_VUNARY(cos, T, T, cp_cos##S(a))                                                         \
    CP_VUNARY(tan, T, T, cp_tan##S(a))                                                         \
    CP_VUNARY(asin, T, T, cp_asin##S(a))                                                       \
    CP_VUNARY(acos, T, T, cp_acos##S(a))                                                       \
    CP_VUNARY(atan, T, T, cp_atan##S(a))                                                       \
    CP_VUNARY(exp, T, T, cp_exp##S(a))                                                         \
    CP_VUNARY(log, T, T, cp_log##S(a))                                                         \
    CP_VUNARY(tanh, T, T, cp_tanh##S(a))                                                       \
    CP_VUNARY(floor, T, T, cp_floor##S(a))                                                     \
    CP_VUNARY(ceil, T, T, cp_ceil##S(a))                                                       \
    CP_VUNARY(round, T, T, cp_round##S(a))                                                     \
    CP_VUNARY(trunc, T, T, cp_trunc##S(a))

CP_VMATH_F(f32, f)
CP_VMATH_F(f64, )

CP_VUNARY(neg, i32, i32, cp_wrap_sub(0, a))
CP_VUNARY(abs, i32, i32, a < 0 ? cp_wrap_sub(0, a) : a)
CP_VUNARY(sign, i32, i32, (a > 0) - (a < 0))
CP_VUNARY(relu, i32, i32, a > 0 ? a : 0)
CP_VUNARY(invert, i32, i32, ~a)
CP_VUNARY(lnot, i32, bool, a ^ 1)

/* Conversions (cast.c): float to int saturates, NaN gives 0. */
CP_VUNARY(tof64, f32, f64, (double)a)
CP_VUNARY(tof32, f64, f32, (float)a)
CP_VUNARY(tof32, i32, f32, (float)a)
CP_VUNARY(tof64, i32, f64, (double)a)
CP_VUNARY(toi32, f32, i32, cp_f32_to_i32(a))
CP_VUNARY(toi32, f64, i32, cp_f64_to_i32(a))
CP_VUNARY(tobool, f32, bool, a != 0.0f)
CP_VUNARY(tobool, f64, bool, a != 0.0)
CP_VUNARY(tobool, i32, bool, a != 0)

/* Copies, negation and absolute value only move or flip bits: not fenced (cp_array.h). */
CP_VUNARY_BITS(mov, f32, a)
CP_VUNARY_BITS(mov, f64, a)
CP_VUNARY_BITS(mov, i32, a)

/* ---- select and broadcast ---------------------------------------------------------------- */

CP_VSELECT(f32)
CP_VSELECT(f64)
CP_VSELECT(i32)

CP_VFILL(f32)
CP_VFILL(f64)
CP_VFILL(i32)

/* ---- reductions into a register and matrix products --------------------------------------- */

CP_ARRAY_HELPERS(f32)
CP_ARRAY_HELPERS(f64)
CP_ARRAY_HELPERS(i32)

CP_VREDUCTIONS(f32)
CP_VREDUCTIONS(f64)
CP_VREDUCTIONS(i32)

CP_VMATRIX(f32)
CP_VMATRIX(f64)
CP_VMATRIX(i32)
