/* Packed-array stencils: operand forms, element loops and the lane-ordered reduction.
 *
 * Arrays live in data slots, contiguous, element type f32, f64 or i32 (bool arrays are i32 0/1).
 * The array slot of role r and type T is the extern array cp_v<r>_<T> (roles a, b, c, out);
 * they are distinct objects, so the C compiler may assume they do not overlap (the compiler
 * only ever binds identical or disjoint arrays to them; identical ones are harmless for the
 * element-wise stencils, whose element i is loaded before element i is stored). Scalar
 * operands of array stencils are the scalar slots cp_<r>_<T> of cp_stencil.h. Lengths are
 * int32 slots: cp_n_i32 (element count; rows of a matrix), cp_k_i32 (inner dimension of a
 * matrix product), cp_j_i32 (columns of its result). A length is never 0.
 *
 * Naming: <op>_<type>__<dst>_<a>[_<b>[_<c>]] as for the scalar stencils, with the forms
 * v (array in memory), m (scalar in memory) and 0/1 (scalar register, only as the destination
 * of a reduction). Every stencil passes the six register parameters through unchanged, except
 * the destination register of a reduction, and ends in CP_NEXT().
 *
 * Reduction order (the determinism contract, for every n >= 1): eight lanes; lane l
 * accumulates the elements i == l (mod 8) in increasing i, starting from its first element
 * (lane = first element, then lane = op(lane, next)); with L = min(n, 8) lanes present they are
 * combined by the fixed tree (0,1) (2,3) (4,5) (6,7), then (01,23) (45,67), then (0123,4567),
 * where a pair whose right member is missing passes its left member through unchanged.
 * Written with independent lanes so that the compiler vectorises it without reassociating
 * anything (no -ffast-math needed, every target computes the same bits).
 */
#ifndef CP_ARRAY_H
#define CP_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

#pragma GCC visibility push(hidden)

extern float cp_va_f32[], cp_vb_f32[], cp_vc_f32[], cp_vout_f32[];
extern double cp_va_f64[], cp_vb_f64[], cp_vc_f64[], cp_vout_f64[];
extern int32_t cp_va_i32[], cp_vb_i32[], cp_vc_i32[], cp_vout_i32[];
extern int32_t cp_n_i32, cp_k_i32, cp_j_i32;

#pragma GCC visibility pop

/* Array slot of a role; bool arrays are int32 arrays. */
#define VSLOT_f32(role) cp_v##role##_f32
#define VSLOT_f64(role) cp_v##role##_f64
#define VSLOT_i32(role) cp_v##role##_i32
#define VSLOT_bool(role) cp_v##role##_i32

/* A length slot as an index bound (lengths are positive int32). */
#define CP_LEN(slot) ((size_t)(uint32_t)(slot))

/* Vector units that are not IEEE-754 compliant. ARMv7 Advanced SIMD (NEON) always flushes
 * float32 denormals to zero, in arithmetic and in comparisons (vceq.f32 says 2^-149 == 0), and
 * qemu's MVE (the Cortex-M55 model we test on) does the same, while the scalar VFP follows IEEE.
 * clang vectorises float comparisons for NEON and all float32 operations for MVE, so on these
 * targets every float32 value that enters or leaves a floating-point operation of an array
 * stencil passes an empty asm statement, which keeps it in a scalar register: the
 * vectorisers cannot put such operations into vector registers, and integer and data-movement
 * loops still vectorise. Everywhere else the fences are the identity. */
#if defined(__arm__) && (defined(__ARM_NEON) || defined(__ARM_FEATURE_MVE))
#define CP_FENCE_ASM(x, constraint) __asm__("" : constraint(x))
#else
#define CP_FENCE_ASM(x, constraint) ((void)0)
#endif
static inline __attribute__((always_inline)) float cp_vfence_f32(float x)
{
    CP_FENCE_ASM(x, "+t");
    return x;
}
static inline __attribute__((always_inline)) double cp_vfence_f64(double x)
{
    CP_FENCE_ASM(x, "+w");
    return x;
}
static inline __attribute__((always_inline)) int32_t cp_vfence_i32(int32_t x)
{
    CP_FENCE_ASM(x, "+r");
    return x;
}
#define CP_VFENCE_f32(x) cp_vfence_f32(x)
#define CP_VFENCE_f64(x) cp_vfence_f64(x)
#define CP_VFENCE_i32(x) cp_vfence_i32(x)
#define CP_VFENCE_bool(x) cp_vfence_i32(x)
/* Fence an input of type T, and the result of type TO of an operation on inputs of type T:
 * only float32 operations are fenced (float64 and int32 vectorise exactly). */
#define CP_VFIN_f32(x) cp_vfence_f32(x)
#define CP_VFIN_f64(x) (x)
#define CP_VFIN_i32(x) (x)
#define CP_VFOUT_f32(TO, x) CP_VFENCE_##TO(x)
#define CP_VFOUT_f64(TO, x) (x)
#define CP_VFOUT_i32(TO, x) (x)
#define CP_VNOFENCE(x) (x)

/* Operand forms of the element loops: CP_VH_<form> is placed before the loop (a scalar slot is
 * read once), CP_VE_<form> gives element i. */
#define CP_VH_v(T, role)
#define CP_VH_m(T, role) const CT_##T role##_scalar = SLOT_##T(role);
#define CP_VE_v(T, role, i) VSLOT_##T(role)[i]
#define CP_VE_m(T, role, i) role##_scalar

/* Element-wise unary operation: out[i] = EXPR with a bound to a[i]. CP_VUNARY fences float32
 * (above); CP_VUNARY_BITS is for operations that only move or flip bits (mov, neg, abs), which
 * every vector unit does exactly. */
#define CP_VUN1(op, TI, TO, EXPR, FIN, FOUT)                                                   \
    CP_STENCIL(op##_##TI##__v_v)                                                               \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        for (size_t i = 0; i < n; i++) {                                                       \
            const CT_##TI a = FIN(VSLOT_##TI(a)[i]);                                           \
            VSLOT_##TO(out)[i] = FOUT((CT_##TO)(EXPR));                                        \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }
#define CP_VUNARY_OUT_f32(TO) CP_VFENCE_##TO
#define CP_VUNARY_OUT_f64(TO) CP_VNOFENCE
#define CP_VUNARY_OUT_i32(TO) CP_VNOFENCE
#define CP_VUNARY(op, TI, TO, EXPR)                                                            \
    CP_VUN1(op, TI, TO, EXPR, CP_VFIN_##TI, CP_VUNARY_OUT_##TI(TO))
#define CP_VUNARY_BITS(op, T, EXPR) CP_VUN1(op, T, T, EXPR, CP_VNOFENCE, CP_VNOFENCE)

/* Element-wise math kernel with a block form (cp_math.h, CP_VMATH targets): the loop is the
 * kernel's, vectorised and bit-identical to the scalar kernel per element. */
#define CP_VUNARY_BLOCK(op, T)                                                                 \
    CP_STENCIL(op##_##T##__v_v)                                                                \
    {                                                                                          \
        cp_v##op##_##T(VSLOT_##T(out), VSLOT_##T(a), CP_LEN(cp_n_i32));                        \
        CP_NEXT();                                                                             \
    }

/* Element-wise binary operation, forms (v,v), (v,m), (m,v). */
#define CP_VBIN1(op, TI, TO, EXPR, A, B)                                                       \
    CP_STENCIL(op##_##TI##__v_##A##_##B)                                                       \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        CP_VH_##A(TI, a)                                                                       \
        CP_VH_##B(TI, b)                                                                       \
        for (size_t i = 0; i < n; i++) {                                                       \
            const CT_##TI a = CP_VFIN_##TI(CP_VE_##A(TI, a, i));                               \
            const CT_##TI b = CP_VFIN_##TI(CP_VE_##B(TI, b, i));                               \
            VSLOT_##TO(out)[i] = CP_VFOUT_##TI(TO, (CT_##TO)(EXPR));                           \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

#define CP_VBINARY(op, TI, TO, EXPR)                                                           \
    CP_VBIN1(op, TI, TO, EXPR, v, v) CP_VBIN1(op, TI, TO, EXPR, v, m)                          \
    CP_VBIN1(op, TI, TO, EXPR, m, v)

/* Lines of cp_elements.h as loops: CP_VLOOP_BINARY passes on the binary lines (CP_VBINARY),
 * CP_VLOOP_UNARY the unary ones (CP_VUNARY, or CP_VUNARY_BITS for the kind bits). */
#define CP_VLOOP_BINARY(arity, op, TI, TO, kind, EXPR) CP_VLB_##arity(op, TI, TO, EXPR)
#define CP_VLB_1(op, TI, TO, EXPR)
#define CP_VLB_2 CP_VBINARY
#define CP_VLOOP_UNARY(arity, op, TI, TO, kind, EXPR) CP_VLU_##arity##_##kind(op, TI, TO, EXPR)
#define CP_VLU_1_num CP_VUNARY
#define CP_VLU_1_bits(op, TI, TO, EXPR) CP_VUNARY_BITS(op, TI, EXPR)
#if CP_VMATH
#define CP_VLU_1_vec(op, TI, TO, EXPR) CP_VUNARY_BLOCK(op, TI)
#else
#define CP_VLU_1_vec CP_VUNARY
#endif
#define CP_VLU_2_vec(op, TI, TO, EXPR)
#define CP_VLU_2_num(op, TI, TO, EXPR)
#define CP_VLU_2_bits(op, TI, TO, EXPR)
#define CP_VLU_2_lane(op, TI, TO, EXPR)

/* Select: out[i] = c ? a : b, the condition an int32 bool array or scalar slot; both values are
 * loaded unconditionally (so the loop can be vectorised with a blend). */
#define CP_VSEL1(T, C, A, B)                                                                   \
    CP_STENCIL(where_##T##__v_##C##_##A##_##B)                                                 \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        CP_VH_##C(i32, c)                                                                      \
        CP_VH_##A(T, a)                                                                        \
        CP_VH_##B(T, b)                                                                        \
        for (size_t i = 0; i < n; i++) {                                                       \
            const int32_t c = CP_VE_##C(i32, c, i);                                            \
            const CT_##T a = CP_VE_##A(T, a, i);                                               \
            const CT_##T b = CP_VE_##B(T, b, i);                                               \
            VSLOT_##T(out)[i] = c ? a : b;                                                     \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

#define CP_VSELECT(T)                                                                          \
    CP_VSEL1(T, v, v, v) CP_VSEL1(T, v, v, m) CP_VSEL1(T, v, m, v) CP_VSEL1(T, v, m, m)        \
    CP_VSEL1(T, m, v, v) CP_VSEL1(T, m, v, m) CP_VSEL1(T, m, m, v)

/* Broadcast a scalar slot: out[i] = a. */
#define CP_VFILL(T)                                                                            \
    CP_STENCIL(fill_##T##__v_m)                                                                \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        const CT_##T a = SLOT_##T(a);                                                          \
        for (size_t i = 0; i < n; i++) {                                                       \
            VSLOT_##T(out)[i] = a;                                                             \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* Strided views (issue 31): x[start::step] of any step, also negative, as a copy; and its
 * adjoint, the scatter into an array of zeros. Elements of type T are moved as the unsigned
 * integer W of their width (a move, bit for bit on every CPU: no float load can quiet a NaN).
 *   sgather: out[i] = a[start + i*step], i < n; a has j elements.
 *   sscatter: out[0..j) = 0, then out[start + i*step] = a[i], i < n.
 * start is the int32 scalar slot b, step the int32 scalar slot c. Both ends of the index range
 * are checked against j first (the indices are monotonic in i), so no value of the writable
 * slots b and c makes the stencil touch memory outside its arrays (verified loading); the
 * compiler never emits a range that fails the check (then nothing is moved). */
#define CP_STRIDED_RANGE(n, len)                                                               \
    const int64_t start_ = (int64_t)SLOT_i32(b), step_ = (int64_t)SLOT_i32(c);                 \
    const int64_t last_ = start_ + ((int64_t)(n) - 1) * step_;                                 \
    const int ok_ = start_ >= 0 && start_ < (int64_t)(len) && last_ >= 0 &&                    \
                    last_ < (int64_t)(len);                                                    \
    size_t at_ = (size_t)(ok_ ? start_ : 0);                                                   \
    const size_t by_ = (size_t)step_; /* modulo 2^N: adding it steps backwards too */
#define CP_VSTRIDED(T, W)                                                                      \
    CP_STENCIL(sgather_##T##__v_v_m_m)                                                         \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        CP_STRIDED_RANGE(n, CP_LEN(cp_j_i32))                                                  \
        if (ok_) {                                                                             \
            for (size_t i = 0; i < n; i++, at_ += by_) {                                       \
                W w_;                                                                          \
                __builtin_memcpy(&w_, &VSLOT_##T(a)[at_], sizeof w_);                          \
                __builtin_memcpy(&VSLOT_##T(out)[i], &w_, sizeof w_);                          \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }                                                                                          \
    CP_STENCIL(sscatter_##T##__v_v_m_m)                                                        \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        const size_t len = CP_LEN(cp_j_i32);                                                   \
        const W zero_ = 0;                                                                     \
        for (size_t i = 0; i < len; i++) {                                                     \
            __builtin_memcpy(&VSLOT_##T(out)[i], &zero_, sizeof zero_);                        \
        }                                                                                      \
        CP_STRIDED_RANGE(n, len)                                                               \
        if (ok_) {                                                                             \
            for (size_t i = 0; i < n; i++, at_ += by_) {                                       \
                W w_;                                                                          \
                __builtin_memcpy(&w_, &VSLOT_##T(a)[i], sizeof w_);                            \
                __builtin_memcpy(&VSLOT_##T(out)[at_], &w_, sizeof w_);                        \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* The lane order over n >= 1 elements, for any kind of lane state. Two copies of the state:
 * acc_ (registers) runs through the blocks of eight, q_ (memory) takes the last partial block
 * and the combination tree. The caller supplies function-like macros, each taking X and Y first
 * (passed through; the element and the operation):
 *   INIT(X, Y, S, l, i)    S[l] = element i (S is acc_ or q_)
 *   STAGE(X, Y, l, i)      tmp_[l] = element i
 *   MERGE(X, Y, l)         acc_[l] = op(acc_[l], tmp_[l])
 *   SPILL(X, Y, l)         q_[l] = acc_[l]
 *   ACC(X, Y, l, i)        q_[l] = op(q_[l], element i)
 *   COMBINE(X, Y, x, y)    q_[x] = op(q_[x], q_[y])
 * and the result is q_[0]. Why this shape (the arithmetic is the same in any shape): in the
 * block loop every lane index is a constant, so acc_ lives in registers and the SLP vectoriser
 * turns the eight loads, the eight STAGE operations and the eight MERGE operations into whole
 * vectors; the tail, whose lane count is only known at run time, works on the copy q_ in a
 * scalar loop, and because q_ is indexed at run time it stays in memory and never feeds scalar
 * uses of single lanes back into the block loop (which makes the vectoriser pair lanes badly). */
#if defined(__clang__)
#define CP_SCALAR_LOOP _Pragma("clang loop vectorize(disable) unroll(disable)")
#else
#define CP_SCALAR_LOOP
#endif

#define CP_LANE_TREE(L, COMBINE, X, Y)                                                         \
    do {                                                                                       \
        if ((L) > 1u) COMBINE(X, Y, 0, 1);                                                     \
        if ((L) > 3u) COMBINE(X, Y, 2, 3);                                                     \
        if ((L) > 5u) COMBINE(X, Y, 4, 5);                                                     \
        if ((L) > 7u) COMBINE(X, Y, 6, 7);                                                     \
        if ((L) > 2u) COMBINE(X, Y, 0, 2);                                                     \
        if ((L) > 6u) COMBINE(X, Y, 4, 6);                                                     \
        if ((L) > 4u) COMBINE(X, Y, 0, 4);                                                     \
    } while (0)

#define CP_LANE_ORDER(n, INIT, STAGE, MERGE, SPILL, ACC, COMBINE, X, Y)                        \
    do {                                                                                       \
        const size_t n_ = (n);                                                                 \
        if (n_ >= 8u) {                                                                        \
            for (size_t l_ = 0; l_ < 8u; l_++) {                                               \
                INIT(X, Y, acc_, l_, l_);                                                      \
            }                                                                                  \
            size_t i_ = 8u;                                                                    \
            for (; n_ - i_ >= 8u; i_ += 8u) {                                                  \
                for (size_t l_ = 0; l_ < 8u; l_++) {                                           \
                    STAGE(X, Y, l_, i_ + l_);                                                  \
                }                                                                              \
                for (size_t l_ = 0; l_ < 8u; l_++) {                                           \
                    MERGE(X, Y, l_);                                                           \
                }                                                                              \
            }                                                                                  \
            for (size_t l_ = 0; l_ < 8u; l_++) {                                               \
                SPILL(X, Y, l_);                                                               \
            }                                                                                  \
            CP_SCALAR_LOOP                                                                     \
            for (size_t l_ = 0; l_ < n_ - i_; l_++) {                                          \
                ACC(X, Y, l_, i_ + l_);                                                        \
            }                                                                                  \
        } else {                                                                               \
            for (size_t l_ = 0; l_ < 7u; l_++) {                                               \
                if (l_ < n_) {                                                                 \
                    INIT(X, Y, q_, l_, l_);                                                    \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        CP_LANE_TREE(n_ < 8u ? n_ : 8u, COMBINE, X, Y);                                        \
    } while (0)

/* Binary operations of the reductions, per type (the scalar stencils' semantics; float32
 * results fenced, see above). */
#define CP_RADD_f32(x, y) cp_vfence_f32((x) + (y))
#define CP_RADD_f64(x, y) ((x) + (y))
#define CP_RADD_i32(x, y) cp_wrap_add((x), (y))
#define CP_RSUB_f32(x, y) cp_vfence_f32((x) - (y))
#define CP_RSUB_f64(x, y) ((x) - (y))
#define CP_RSUB_i32(x, y) cp_wrap_sub((x), (y))
#define CP_RMUL_f32(x, y) cp_vfence_f32((x) * (y))
#define CP_RMUL_f64(x, y) ((x) * (y))
#define CP_RMUL_i32(x, y) cp_wrap_mul((x), (y))
#define CP_RMIN_f32(x, y) cp_vfence_f32(cp_min_f32((x), (y)))
#define CP_RMIN_f64(x, y) cp_min_f64((x), (y))
#define CP_RMIN_i32(x, y) ((x) < (y) ? (x) : (y))
#define CP_RMAX_f32(x, y) cp_vfence_f32(cp_max_f32((x), (y)))
#define CP_RMAX_f64(x, y) cp_max_f64((x), (y))
#define CP_RMAX_i32(x, y) ((x) > (y) ? (x) : (y))

/* Scalar lane state (acc_[8], tmp_[8], q_[8]): X is the element, a macro of the index (a and b
 * are the arrays), Y the operation. */
#define CP_RINIT(E, OP, S, l, i) S[l] = E(i)
#define CP_RSTAGE(E, OP, l, i) tmp_[l] = E(i)
#define CP_RMERGE(E, OP, l) acc_[l] = OP(acc_[l], tmp_[l])
#define CP_RSPILL(E, OP, l) q_[l] = acc_[l]
#define CP_RACC(E, OP, l, i) q_[l] = OP(q_[l], E(i))
#define CP_RCOMB(E, OP, x, y) q_[x] = OP(q_[x], q_[y])
#define CP_ELEM_A_f32(i) cp_vfence_f32(a[i])
#define CP_ELEM_A_f64(i) a[i]
#define CP_ELEM_A_i32(i) a[i]
#define CP_ELEM_DOT_f32(i) CP_RMUL_f32(cp_vfence_f32(a[i]), cp_vfence_f32(b[i]))
#define CP_ELEM_DOT_f64(i) CP_RMUL_f64(a[i], b[i])
#define CP_ELEM_DOT_i32(i) CP_RMUL_i32(a[i], b[i])
/* Elements of the fused dot products: (a_i op s) * b_i, each step rounded as the unfused
 * element-wise operation and dot product would (bit-identical, one pass instead of two). */
#define CP_VIN_f32(x) cp_vfence_f32(x)
#define CP_VIN_f64(x) (x)
#define CP_VIN_i32(x) (x)
#define CP_FUSED(T, OPERATION, i) CP_RMUL_##T(OPERATION, CP_VIN_##T(b[i]))
#define CP_ELEM_DOTADD_f32(i) CP_FUSED(f32, CP_RADD_f32(CP_VIN_f32(a[i]), s), i)
#define CP_ELEM_DOTADD_f64(i) CP_FUSED(f64, CP_RADD_f64(a[i], s), i)
#define CP_ELEM_DOTADD_i32(i) CP_FUSED(i32, CP_RADD_i32(a[i], s), i)
#define CP_ELEM_DOTSUB_f32(i) CP_FUSED(f32, CP_RSUB_f32(CP_VIN_f32(a[i]), s), i)
#define CP_ELEM_DOTSUB_f64(i) CP_FUSED(f64, CP_RSUB_f64(a[i], s), i)
#define CP_ELEM_DOTSUB_i32(i) CP_FUSED(i32, CP_RSUB_i32(a[i], s), i)
#define CP_ELEM_DOTRSUB_f32(i) CP_FUSED(f32, CP_RSUB_f32(s, CP_VIN_f32(a[i])), i)
#define CP_ELEM_DOTRSUB_f64(i) CP_FUSED(f64, CP_RSUB_f64(s, a[i]), i)
#define CP_ELEM_DOTRSUB_i32(i) CP_FUSED(i32, CP_RSUB_i32(s, a[i]), i)
#define CP_ELEM_DOTMUL_f32(i) CP_FUSED(f32, CP_RMUL_f32(CP_VIN_f32(a[i]), s), i)
#define CP_ELEM_DOTMUL_f64(i) CP_FUSED(f64, CP_RMUL_f64(a[i], s), i)
#define CP_ELEM_DOTMUL_i32(i) CP_FUSED(i32, CP_RMUL_i32(a[i], s), i)

#define CP_LANES_SCALAR(T, n, ELEM, OP)                                                        \
    CT_##T acc_[8], tmp_[8], q_[8];                                                            \
    CP_LANE_ORDER(n, CP_RINIT, CP_RSTAGE, CP_RMERGE, CP_RSPILL, CP_RACC, CP_RCOMB, ELEM, OP);  \
    return q_[0]

/* Lane state of a block of w columns of a vector-matrix product (acc_[8][W] ...): X is the type;
 * element r is the row slice a[r] * B[r * ld + 0 .. w). */
#define CP_MPROD(T, r, w_) CP_RMUL_##T(CP_VFIN_##T(a[r]), CP_VFIN_##T(B[(r) * ld + (w_)]))
#define CP_MINIT(T, Y, S, l, r)                                                                \
    for (size_t w_ = 0; w_ < w; w_++) S[l][w_] = CP_MPROD(T, r, w_)
#define CP_MSTAGE(T, Y, l, r)                                                                  \
    for (size_t w_ = 0; w_ < w; w_++) tmp_[l][w_] = CP_MPROD(T, r, w_)
#define CP_MMERGE(T, Y, l)                                                                     \
    for (size_t w_ = 0; w_ < w; w_++) acc_[l][w_] = CP_RADD_##T(acc_[l][w_], tmp_[l][w_])
#define CP_MSPILL(T, Y, l)                                                                     \
    for (size_t w_ = 0; w_ < w; w_++) q_[l][w_] = acc_[l][w_]
#define CP_MACC(T, Y, l, r)                                                                    \
    for (size_t w_ = 0; w_ < w; w_++) q_[l][w_] = CP_RADD_##T(q_[l][w_], CP_MPROD(T, r, w_))
#define CP_MCOMB(T, Y, x, y)                                                                   \
    for (size_t w_ = 0; w_ < w; w_++) q_[x][w_] = CP_RADD_##T(q_[x][w_], q_[y][w_])

/* sum over i of (a_i op s) * b_i in the lane order */
#define CP_FUSED_DOT_HELPER(T, name, ELEM8, ELEM)                                              \
    CP_ALWAYS_INLINE CT_##T cp_##name##_##T(const CT_##T *a, CT_##T s, const CT_##T *b,        \
                                            size_t n)                                          \
    {                                                                                          \
        CP_LANES_ADD(T, n, ELEM8, ELEM);                                                       \
    }

/* Columns per block of the vector-matrix product: 16 bytes of lane state per lane. */
#define CP_VECMAT_W_f32 4u
#define CP_VECMAT_W_f64 2u
#define CP_VECMAT_W_i32 4u

#define CP_ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- The lane order in vector registers (targets with an IEEE-exact vector unit) ---------
 *
 * Where the build declares one (CP_FUSE_BYTES: x86_64 and its variants, AArch64, the targets
 * of the fused loops; clang builds them), the sums of the lane order (rsum, dot and the fused
 * dots) keep the eight lanes in one eight-lane vector (two SSE or NEON registers, one AVX
 * register) from the first block to the tree; no lane goes through memory (docs/design.md,
 * "Lane-order sums in vector registers"). Each lane still computes the same operations
 * in the same order (lane l: its elements in increasing index; then the fixed tree), so the
 * bits are those of CP_LANES_SCALAR. For n >= 8:
 *   - blocks of eight: acc = acc + elements[i .. i + 8);
 *   - the r = n mod 8 elements left (lanes 0 .. r-1) are the last r of the block that ends at
 *     n, elements[n - 8 .. n), which are valid because n >= 8: that block rotated by 8 - r
 *     lanes is added to acc in lanes l < r, the other lanes keep acc as it is (a blend, not an
 *     addition of zero, which would turn -0 into +0). One case per r: n is a constant of the
 *     program, so the branch is predicted;
 *   - the tree: the even lanes plus the odd lanes (pairs (0,1) (2,3) (4,5) (6,7), the left
 *     lane the left operand), then lanes 0, 2 plus 1, 3 of that, then lane 0 plus lane 1.
 * Below eight elements each lane holds one element: the scalar tree over the lanes present.
 * Why not let the vectoriser find this in CP_LANES_SCALAR: with the lanes in registers after
 * the block loop it pairs the lanes for the tree's first level, (0,1) (2,3) ..., and then
 * vectorises the block loop in that pairing, with a shuffle per load (measured, x86_64). */
#if !defined(CP_LANE_VECTORS) && defined(CP_FUSE_BYTES) && defined(__clang__)
#define CP_LANE_VECTORS 1 /* the host harness sets it itself (tools/array_harness) */
#endif
#if defined(CP_LANE_VECTORS)
#if !defined(__clang__)
#error "CP_LANE_VECTORS needs clang (__builtin_shufflevector)"
#endif
#if defined(__arm__)
#error "CP_LANE_VECTORS on a flushing vector unit (ARMv7 NEON, MVE): the fences above are needed"
#endif

/* eight lanes of T (int32 as uint32: wrapping arithmetic, the bits of cp_wrap_add/mul) */
typedef float cp_l8_f32 __attribute__((vector_size(32)));
typedef double cp_l8_f64 __attribute__((vector_size(64)));
typedef uint32_t cp_l8_i32 __attribute__((vector_size(32)));
typedef float cp_l8u_f32 __attribute__((vector_size(32), aligned(4)));
typedef double cp_l8u_f64 __attribute__((vector_size(64), aligned(8)));
typedef uint32_t cp_l8u_i32 __attribute__((vector_size(32), aligned(4)));
typedef float cp_l4_f32 __attribute__((vector_size(16)));
typedef double cp_l4_f64 __attribute__((vector_size(32)));
typedef uint32_t cp_l4_i32 __attribute__((vector_size(16)));
typedef float cp_l2_f32 __attribute__((vector_size(8)));
typedef double cp_l2_f64 __attribute__((vector_size(16)));
typedef uint32_t cp_l2_i32 __attribute__((vector_size(8)));
#define CP_LSCALAR_f32 float
#define CP_LSCALAR_f64 double
#define CP_LSCALAR_i32 uint32_t

/* rot: lane l < r takes lane 8 - r + l of w; blend: lanes l < r of x, the others of acc */
#define CP_LTAIL_CASE(r, ...)                                                                  \
    case r: {                                                                                  \
        const __typeof__(acc) x_ = acc + __builtin_shufflevector(w, w, __VA_ARGS__);           \
        return __builtin_shufflevector(acc, x_, CP_LBLEND_##r);                                \
    }
#define CP_LBLEND_1 8, 1, 2, 3, 4, 5, 6, 7
#define CP_LBLEND_2 8, 9, 2, 3, 4, 5, 6, 7
#define CP_LBLEND_3 8, 9, 10, 3, 4, 5, 6, 7
#define CP_LBLEND_4 8, 9, 10, 11, 4, 5, 6, 7
#define CP_LBLEND_5 8, 9, 10, 11, 12, 5, 6, 7
#define CP_LBLEND_6 8, 9, 10, 11, 12, 13, 6, 7
#define CP_LBLEND_7 8, 9, 10, 11, 12, 13, 14, 7

#define CP_LANE_VECTOR_HELPERS(T)                                                              \
    CP_ALWAYS_INLINE cp_l8_##T cp_lload_##T(const CT_##T *p)                                   \
    {                                                                                          \
        return *(const cp_l8u_##T *)(const void *)p;                                           \
    }                                                                                          \
    CP_ALWAYS_INLINE cp_l8_##T cp_lsplat_##T(CT_##T s)                                         \
    {                                                                                          \
        const CP_LSCALAR_##T x = (CP_LSCALAR_##T)s;                                            \
        return (cp_l8_##T){x, x, x, x, x, x, x, x};                                            \
    }                                                                                          \
    /* acc plus the last r (1..7) elements w[8 - r .. 8) in lanes 0 .. r-1 */                  \
    CP_ALWAYS_INLINE cp_l8_##T cp_ltail_##T(cp_l8_##T acc, cp_l8_##T w, size_t r)              \
    {                                                                                          \
        switch (r) {                                                                           \
            CP_LTAIL_CASE(1, 7, -1, -1, -1, -1, -1, -1, -1)                                    \
            CP_LTAIL_CASE(2, 6, 7, -1, -1, -1, -1, -1, -1)                                     \
            CP_LTAIL_CASE(3, 5, 6, 7, -1, -1, -1, -1, -1)                                      \
            CP_LTAIL_CASE(4, 4, 5, 6, 7, -1, -1, -1, -1)                                       \
            CP_LTAIL_CASE(5, 3, 4, 5, 6, 7, -1, -1, -1)                                        \
            CP_LTAIL_CASE(6, 2, 3, 4, 5, 6, 7, -1, -1)                                         \
            CP_LTAIL_CASE(7, 1, 2, 3, 4, 5, 6, 7, -1)                                          \
        default:                                                                               \
            return acc;                                                                        \
        }                                                                                      \
    }                                                                                          \
    /* the fixed tree over eight lanes */                                                      \
    CP_ALWAYS_INLINE CT_##T cp_ltree_##T(cp_l8_##T v)                                          \
    {                                                                                          \
        const cp_l4_##T p = __builtin_shufflevector(v, v, 0, 2, 4, 6) +                        \
                            __builtin_shufflevector(v, v, 1, 3, 5, 7);                         \
        const cp_l2_##T q = __builtin_shufflevector(p, p, 0, 2) +                              \
                            __builtin_shufflevector(p, p, 1, 3);                               \
        return (CT_##T)(CP_LSCALAR_##T)(q[0] + q[1]);                                          \
    }
CP_LANE_VECTOR_HELPERS(f32)
CP_LANE_VECTOR_HELPERS(f64)
CP_LANE_VECTOR_HELPERS(i32)

/* Eight elements from index i as a vector (a, b the arrays, s the fused dots' scalar). */
#define CP_L8_A(T, i) cp_lload_##T(a + (i))
#define CP_L8_DOT(T, i) (cp_lload_##T(a + (i)) * cp_lload_##T(b + (i)))
#define CP_L8_DOTADD(T, i) ((cp_lload_##T(a + (i)) + cp_lsplat_##T(s)) * cp_lload_##T(b + (i)))
#define CP_L8_DOTSUB(T, i) ((cp_lload_##T(a + (i)) - cp_lsplat_##T(s)) * cp_lload_##T(b + (i)))
#define CP_L8_DOTRSUB(T, i) ((cp_lsplat_##T(s) - cp_lload_##T(a + (i))) * cp_lload_##T(b + (i)))
#define CP_L8_DOTMUL(T, i) ((cp_lload_##T(a + (i)) * cp_lsplat_##T(s)) * cp_lload_##T(b + (i)))

/* The lane-order sum of the n elements ELEM8 (vectors) / ELEM (scalars, below 8) describe. */
#define CP_LANES_SUM(T, n, ELEM8, ELEM)                                                        \
    const size_t n_ = (n);                                                                     \
    if (__builtin_expect(n_ < 8u, 0)) {                                                        \
        CT_##T q_[8];                                                                          \
        for (size_t l_ = 0; l_ < 7u; l_++) {                                                   \
            if (l_ < n_) {                                                                     \
                q_[l_] = ELEM(l_);                                                             \
            }                                                                                  \
        }                                                                                      \
        CP_LANE_TREE(n_, CP_RCOMB, ELEM, CP_RADD_##T);                                         \
        return q_[0];                                                                          \
    }                                                                                          \
    cp_l8_##T acc_ = ELEM8(T, 0u);                                                             \
    size_t i_ = 8u;                                                                            \
    CP_SCALAR_LOOP                                                                             \
    for (; n_ - i_ >= 8u; i_ += 8u) {                                                          \
        acc_ = acc_ + ELEM8(T, i_);                                                            \
    }                                                                                          \
    return cp_ltree_##T(cp_ltail_##T(acc_, ELEM8(T, n_ - 8u), n_ - i_))
#endif

/* a lane-order sum (rsum, dot, the fused dots): in vector registers where CP_LANE_VECTORS */
#if defined(CP_LANE_VECTORS)
#define CP_LANES_ADD(T, n, ELEM8, ELEM) CP_LANES_SUM(T, n, ELEM8, ELEM)
#else
#define CP_LANES_ADD(T, n, ELEM8, ELEM) CP_LANES_SCALAR(T, n, ELEM, CP_RADD_##T)
#endif

/* Helpers per type T: lane-ordered sum, min and max of an array, the lane-ordered dot product,
 * and the vector-matrix product (w columns at a time; w is a constant where it is inlined, so
 * each block becomes straight-line code that vectorises across the columns). */
#define CP_ARRAY_HELPERS(T)                                                                    \
    CP_ALWAYS_INLINE CT_##T cp_rsum_##T(const CT_##T *a, size_t n)                             \
    {                                                                                          \
        CP_LANES_ADD(T, n, CP_L8_A, CP_ELEM_A_##T);                                            \
    }                                                                                          \
    CP_ALWAYS_INLINE CT_##T cp_rmin_##T(const CT_##T *a, size_t n)                             \
    {                                                                                          \
        CP_LANES_SCALAR(T, n, CP_ELEM_A_##T, CP_RMIN_##T);                                     \
    }                                                                                          \
    CP_ALWAYS_INLINE CT_##T cp_rmax_##T(const CT_##T *a, size_t n)                             \
    {                                                                                          \
        CP_LANES_SCALAR(T, n, CP_ELEM_A_##T, CP_RMAX_##T);                                     \
    }                                                                                          \
    CP_ALWAYS_INLINE CT_##T cp_dot_##T(const CT_##T *a, const CT_##T *b, size_t n)             \
    {                                                                                          \
        CP_LANES_ADD(T, n, CP_L8_DOT, CP_ELEM_DOT_##T);                                        \
    }                                                                                          \
    CP_FUSED_DOT_HELPER(T, dotadd, CP_L8_DOTADD, CP_ELEM_DOTADD_##T)                           \
    CP_FUSED_DOT_HELPER(T, dotsub, CP_L8_DOTSUB, CP_ELEM_DOTSUB_##T)                           \
    CP_FUSED_DOT_HELPER(T, dotrsub, CP_L8_DOTRSUB, CP_ELEM_DOTRSUB_##T)                        \
    CP_FUSED_DOT_HELPER(T, dotmul, CP_L8_DOTMUL, CP_ELEM_DOTMUL_##T)                           \
    /* out[c] = sum over r < k of a[r] * B[r * ld + c] for c < w, lane order over r */         \
    CP_ALWAYS_INLINE void cp_vecmat_cols_##T(const CT_##T *a, const CT_##T *B, CT_##T *out,    \
                                             size_t k, size_t ld, size_t w)                    \
    {                                                                                          \
        CT_##T acc_[8][CP_VECMAT_W_##T], tmp_[8][CP_VECMAT_W_##T], q_[8][CP_VECMAT_W_##T];     \
        CP_LANE_ORDER(k, CP_MINIT, CP_MSTAGE, CP_MMERGE, CP_MSPILL, CP_MACC, CP_MCOMB, T, _);  \
        for (size_t w_ = 0; w_ < w; w_++) {                                                    \
            out[w_] = q_[0][w_];                                                               \
        }                                                                                      \
    }                                                                                          \
    /* out (ld) = a (k) @ B (k x ld) */                                                        \
    CP_ALWAYS_INLINE void cp_vecmat_##T(const CT_##T *a, const CT_##T *B, CT_##T *out,         \
                                        size_t k, size_t ld)                                   \
    {                                                                                          \
        size_t c = 0;                                                                          \
        for (; ld - c >= CP_VECMAT_W_##T; c += CP_VECMAT_W_##T) {                              \
            cp_vecmat_cols_##T(a, B + c, out + c, k, ld, CP_VECMAT_W_##T);                     \
        }                                                                                      \
        for (; c < ld; c++) {                                                                  \
            cp_vecmat_cols_##T(a, B + c, out + c, k, ld, 1u);                                  \
        }                                                                                      \
    }

/* Reductions into a scalar register D (0 or 1) of type T. */
#define CP_VRED1(op, T, D)                                                                     \
    CP_STENCIL(op##_##T##__##D##_v)                                                            \
    {                                                                                          \
        REG_##T##_##D = cp_##op##_##T(VSLOT_##T(a), CP_LEN(cp_n_i32));                         \
        CP_NEXT();                                                                             \
    }
#define CP_VDOT1(T, D)                                                                         \
    CP_STENCIL(dot_##T##__##D##_v_v)                                                           \
    {                                                                                          \
        REG_##T##_##D = cp_dot_##T(VSLOT_##T(a), VSLOT_##T(b), CP_LEN(cp_n_i32));              \
        CP_NEXT();                                                                             \
    }
/* Fused: dot(a op s, b) with the scalar s in slot c; the compiler uses them when the
 * element-wise array is used only by the dot product (it is then never stored). */
#define CP_VFDOT1(name, T, D)                                                                  \
    CP_STENCIL(name##_##T##__##D##_v_m_v)                                                      \
    {                                                                                          \
        REG_##T##_##D =                                                                        \
            cp_##name##_##T(VSLOT_##T(a), SLOT_##T(c), VSLOT_##T(b), CP_LEN(cp_n_i32));        \
        CP_NEXT();                                                                             \
    }
#define CP_VFDOT(T, D)                                                                         \
    CP_VFDOT1(dotadd, T, D) CP_VFDOT1(dotsub, T, D) CP_VFDOT1(dotrsub, T, D)                   \
    CP_VFDOT1(dotmul, T, D)
#define CP_VREDUCTIONS(T)                                                                      \
    CP_VRED1(rsum, T, 0) CP_VRED1(rsum, T, 1) CP_VRED1(rmin, T, 0) CP_VRED1(rmin, T, 1)        \
    CP_VRED1(rmax, T, 0) CP_VRED1(rmax, T, 1) CP_VDOT1(T, 0) CP_VDOT1(T, 1) CP_VFDOT(T, 0)     \
    CP_VFDOT(T, 1)

/* Matrix products (row-major), every element in the lane order over the inner dimension.
 * out must not overlap a or b. */
#define CP_VMATRIX(T)                                                                          \
    /* out (n) = a (n x k) @ b (k) */                                                          \
    CP_STENCIL(matvec_##T##__v_v_v)                                                            \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), k = CP_LEN(cp_k_i32);                               \
        for (size_t r = 0; r < n; r++) {                                                       \
            VSLOT_##T(out)[r] = cp_dot_##T(VSLOT_##T(a) + r * k, VSLOT_##T(b), k);             \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }                                                                                          \
    /* out (j) = a (k) @ b (k x j) */                                                          \
    CP_STENCIL(vecmat_##T##__v_v_v)                                                            \
    {                                                                                          \
        cp_vecmat_##T(VSLOT_##T(a), VSLOT_##T(b), VSLOT_##T(out), CP_LEN(cp_k_i32),            \
                      CP_LEN(cp_j_i32));                                                       \
        CP_NEXT();                                                                             \
    }                                                                                          \
    /* out (n x j) = a (n x k) @ b (k x j) */                                                  \
    CP_STENCIL(matmul_##T##__v_v_v)                                                            \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), k = CP_LEN(cp_k_i32), j = CP_LEN(cp_j_i32);         \
        for (size_t r = 0; r < n; r++) {                                                       \
            cp_vecmat_##T(VSLOT_##T(a) + r * k, VSLOT_##T(b), VSLOT_##T(out) + r * j, k, j);   \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

#endif /* CP_ARRAY_H */
