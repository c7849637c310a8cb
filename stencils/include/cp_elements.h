/* The element expressions of every element-wise operation, written once.
 *
 * Each line X(arity, op, TI, TO, kind, EXPR) says what one element of operation op computes:
 *
 *   arity  1 or 2: the operands are a (and b), C values of type CT_<TI> (cp_stencil.h)
 *   op     the stencil family (OpSpec.stencil in src/copapy/graph/ops.py)
 *   TI TO  operand and result type: f32 f64 i32 bool (bool is int32 0/1)
 *   kind   num: computes; bits: only moves or flips bits (copies, float neg and abs), which
 *          every vector unit does exactly, so the packed loops need not fence it (cp_array.h);
 *          vec: computes a math kernel that has a block form cp_v<op>_<TI> (cp_math.h
 *          CP_VKERNELS), which the packed loop calls where the vector unit is exact
 *          lane: binary, computes; the fused loops' register forms compute it with a vector
 *          lane form cp_fl<op>_<TI> (cp_fused_lanes.h), the scalar EXPR for a block it
 *          leaves (elsewhere it is num)
 *   EXPR   the result, a C expression of a (and b) with the semantics of cp_ops.h/cp_math.h
 *
 * The lines feed, through the consumer's X:
 *   - the scalar stencils, every register form (CP_UNARY/CP_BINARY: arith.c, bitwise.c,
 *     cast.c, compare.c, floatdiv.c, mathfn.c, move.c);
 *   - the packed loop stencils (CP_VUNARY/CP_VBINARY: array.c);
 *   - the host build of the float operations, for constant folding and as the bit-exact test
 *     oracle (stencils/host/kernels_module.c, the Python module copapy._kernels).
 *
 * Lines are grouped in units (a unit is generic over the float type T, f32 or f64, with S the
 * suffix of its math kernels: f or nothing). A scalar stencil file expands the units of its
 * family; CP_ELEMENTS lists every unit, in the order array.c defines its loops.
 * Selects, stores, reductions, products and the fused dots are not element expressions
 * (cp_stencil.h, cp_array.h).
 */
#ifndef CP_ELEMENTS_H
#define CP_ELEMENTS_H

/* ---- arithmetic (arith.c) ---------------------------------------------------------------- */
#define CP_EL_ARITH_F(X, T, S)                                                                 \
    X(2, add, T, T, num, a + b)                                                                \
    X(2, sub, T, T, num, a - b)                                                                \
    X(2, mul, T, T, num, a * b)                                                                \
    X(2, div, T, T, num, a / b)                                                                \
    X(2, min, T, T, num, cp_min_##T(a, b))                                                     \
    X(2, max, T, T, num, cp_max_##T(a, b))                                                     \
    X(1, neg, T, T, bits, -a)                                                                  \
    X(1, abs, T, T, bits, __builtin_fabs##S(a))                                               \
    X(2, copysign, T, T, num, cp_copysign_##T(a, b))

#define CP_EL_ARITH_I32(X)                                                                     \
    X(2, add, i32, i32, num, cp_wrap_add(a, b))                                                \
    X(2, sub, i32, i32, num, cp_wrap_sub(a, b))                                                \
    X(2, mul, i32, i32, num, cp_wrap_mul(a, b))                                                \
    X(2, floordiv, i32, i32, num, cp_floordiv_i32(a, b))                                       \
    X(2, mod, i32, i32, num, cp_mod_i32(a, b))                                                 \
    X(2, min, i32, i32, num, a < b ? a : b)                                                    \
    X(2, max, i32, i32, num, a > b ? a : b)                                                    \
    X(1, neg, i32, i32, num, cp_wrap_sub(0, a))                                                \
    X(1, abs, i32, i32, num, a < 0 ? cp_wrap_sub(0, a) : a)

/* ---- float floor division, modulo, power, atan2; integer power (floatdiv.c) --------------- */
#define CP_EL_FLOATDIV_F(X, T, S, MODKIND)                                                     \
    X(2, floordiv, T, T, num, cp_floordiv_##T(a, b))                                           \
    X(2, mod, T, T, MODKIND, cp_mod_##T(a, b))                                                 \
    X(2, pow, T, T, num, cp_pow##S(a, b))                                                      \
    X(2, atan2, T, T, num, cp_atan2##S(a, b))

#define CP_EL_FLOATDIV_I32(X) X(2, pow, i32, i32, num, cp_pow_i32(a, b))

/* ---- elementary functions (mathfn.c) ----------------------------------------------------- */
#define CP_EL_MATH_F(X, T, S)                                                                  \
    X(1, sqrt, T, T, vec, cp_sqrt##S(a))                                                       \
    X(1, sin, T, T, vec, cp_sin##S(a))                                                         \
    X(1, cos, T, T, vec, cp_cos##S(a))                                                         \
    X(1, tan, T, T, num, cp_tan##S(a))                                                         \
    X(1, asin, T, T, num, cp_asin##S(a))                                                       \
    X(1, acos, T, T, num, cp_acos##S(a))                                                       \
    X(1, atan, T, T, num, cp_atan##S(a))                                                       \
    X(1, exp, T, T, vec, cp_exp##S(a))                                                         \
    X(1, log, T, T, vec, cp_log##S(a))                                                         \
    X(1, tanh, T, T, vec, cp_tanh##S(a))                                                       \
    X(1, floor, T, T, num, cp_floor##S(a))                                                     \
    X(1, ceil, T, T, num, cp_ceil##S(a))                                                       \
    X(1, round, T, T, num, cp_round##S(a))                                                     \
    X(1, trunc, T, T, num, cp_trunc##S(a))                                                     \
    X(2, hypot, T, T, num, cp_hypot##S(a, b))                                                  \
    X(1, log1p, T, T, num, cp_log1p##S(a))                                                     \
    X(1, expm1, T, T, num, cp_expm1##S(a))

/* sign and relu: mathfn.c defines them after the kernels, array.c before */
#define CP_EL_SIGN_F(X, T)                                                                     \
    X(1, sign, T, T, num, cp_sign_##T(a))                                                      \
    X(1, relu, T, T, num, cp_max_##T(a, (CT_##T)0))

#define CP_EL_SIGN_I32(X)                                                                      \
    X(1, sign, i32, i32, num, (a > 0) - (a < 0))                                               \
    X(1, relu, i32, i32, num, a > 0 ? a : 0)

/* ---- integer bitwise operations, shifts, logical not (bitwise.c) -------------------------- */
#define CP_EL_BITWISE(X)                                                                       \
    X(2, and, i32, i32, num, a & b)                                                            \
    X(2, or, i32, i32, num, a | b)                                                             \
    X(2, xor, i32, i32, num, a ^ b)                                                            \
    X(1, invert, i32, i32, num, ~a)                                                            \
    X(2, shl, i32, i32, num, cp_shl_i32(a, b))                                                 \
    X(2, shr, i32, i32, num, cp_shr_i32(a, b))                                                 \
    X(1, lnot, i32, bool, num, a ^ 1)

/* ---- comparisons: the result is a bool (compare.c) --------------------------------------- */
#define CP_EL_COMPARE(X, T)                                                                    \
    X(2, lt, T, bool, num, a < b)                                                              \
    X(2, le, T, bool, num, a <= b)                                                             \
    X(2, gt, T, bool, num, a > b)                                                              \
    X(2, ge, T, bool, num, a >= b)                                                             \
    X(2, eq, T, bool, num, a == b)                                                             \
    X(2, ne, T, bool, num, a != b)

/* ---- conversions: float to int saturates, NaN gives 0 (cast.c) --------------------------- */
#define CP_EL_CAST(X)                                                                          \
    X(1, tof64, f32, f64, num, (double)a)                                                      \
    X(1, tof32, f64, f32, num, (float)a)                                                       \
    X(1, tof32, i32, f32, num, (float)a)                                                       \
    X(1, tof64, i32, f64, num, (double)a)                                                      \
    X(1, toi32, f32, i32, num, cp_f32_to_i32(a))                                               \
    X(1, toi32, f64, i32, num, cp_f64_to_i32(a))                                               \
    X(1, tobool, f32, bool, num, a != 0.0f)                                                    \
    X(1, tobool, f64, bool, num, a != 0.0)                                                     \
    X(1, tobool, i32, bool, num, a != 0)

/* ---- copies (move.c) --------------------------------------------------------------------- */
#define CP_EL_MOVE(X)                                                                          \
    X(1, mov, f32, f32, bits, a)                                                               \
    X(1, mov, f64, f64, bits, a)                                                               \
    X(1, mov, i32, i32, bits, a)

/* Every line. The order is array.c's: its binary loops come from the binary lines in this
 * order, then its unary loops from the unary lines. */
#define CP_ELEMENTS(X)                                                                         \
    CP_EL_ARITH_F(X, f32, f)                                                                   \
    CP_EL_FLOATDIV_F(X, f32, f, lane)                                                          \
    CP_EL_SIGN_F(X, f32)                                                                       \
    CP_EL_MATH_F(X, f32, f)                                                                    \
    CP_EL_ARITH_F(X, f64, )                                                                    \
    CP_EL_FLOATDIV_F(X, f64, , num)                                                            \
    CP_EL_SIGN_F(X, f64)                                                                       \
    CP_EL_MATH_F(X, f64, )                                                                     \
    CP_EL_ARITH_I32(X)                                                                         \
    CP_EL_FLOATDIV_I32(X)                                                                      \
    CP_EL_SIGN_I32(X)                                                                          \
    CP_EL_BITWISE(X)                                                                           \
    CP_EL_COMPARE(X, f32)                                                                      \
    CP_EL_COMPARE(X, f64)                                                                      \
    CP_EL_COMPARE(X, i32)                                                                      \
    CP_EL_CAST(X)                                                                              \
    CP_EL_MOVE(X)

#endif /* CP_ELEMENTS_H */
