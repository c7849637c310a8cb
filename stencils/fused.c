/* Fused element-wise loops (docs/design.md, "Fused element-wise loops"): the vector-register
 * forms of every element line of cp_elements.h, and the loop skeleton they run in.
 *
 * Only on targets whose toml sets fuse_vector_bytes (the build passes it as CP_FUSE_BYTES, the
 * bytes of one block: one vector register, or two where the toml also sets
 * fuse_register_bytes, CP_FUSE_REG_BYTES, to half of it; cp_fused.h); elsewhere this file
 * defines nothing and the compiler keeps the one-pass-per-operation loops of array.c.
 *
 * A fused loop is the chain
 *     vloop_i32__begin   vi = 0, vn = cp_n_i32 (the element count; vn: the elements left)
 *     <body>             the operations of one block of L = CP_FUSE_BYTES / sizeof(T) elements
 *                        from index vi, intermediate values in the block registers 0 and 1
 *                        (v0, v1; with two machine registers per block also v0h, v1h)
 *     vrstore_<T>__p_0   the block of register 0 (the tree's root) into the out array
 *     vloop_<T>__end     while vn > L: vi += L, vn -= L, back to the body (cp_vloop, patched by
 *                        the linker to the stencil after vloop_i32__begin)
 * Every stencil of it has the signature CP_VREGS: the six scalar registers first (so they pass
 * through the loop unchanged, in the same machine registers as in a scalar chain: the scalar
 * stencil before the loop jumps to vloop_i32__begin, vloop_<T>__end's cp_vnext jumps to the
 * scalar stencil after it), then the index, the count and the two block registers.
 *
 * Naming: vr<op>_<type>__<d>_<a>[_<b>] (vr: vector register) with the operand forms 0, 1 (the
 * vector register v0, v1), p (the packed block at index vi of the array that the pointer slot
 * of role a or b designates, below) and m (scalar slot a or b, broadcast); the result goes to
 * register d.
 *
 * Arrays through pointer slots: form p and the store do not address an array slot directly
 * but through an 8-byte pointer slot cp_p<role>_ptr that holds the array's address *relative
 * to the pointer slot itself* (base = &slot + slot). The compiler writes the offset of the
 * array in the data region into the data's initial bytes (position-independent: no load-time
 * patch), and @cp.jit's Program.invoke points the slot of an argument at the caller's buffer
 * for the length of one call and restores it afterwards, so the loop reads the caller's array
 * in place (docs/design.md, "@cp.jit in place"). One load per block and stencil.
 *
 * Only the forms the compiler's register order can reach are defined (CP_FUSED_UNARY_FORMS,
 * CP_FBIN_D).
 * The prefix keeps them apart from the scalar stencils (<op>_<type>__...) and the packed loops
 * (forms v), which the cross-architecture tests enumerate by name. The last
 * block may be partial: loads fill the missing lanes with zeros, the store writes only the
 * lanes present. Each lane computes the element line's expression, so each element sees the
 * operation sequence of the unfused loop and the results are the same bits. Operations whose
 * operand and result sizes differ (float64 comparisons, conversions between float32 and
 * float64) have no vector-register form: they end a fused chain.
 */
#include "cp_array.h"
#include "cp_elements.h"
#include "cp_fused.h"
#include "cp_fused_lanes.h"
#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

#if defined(CP_FUSE_BYTES)

/* vr<op>_<T>__<D>_<A>: y = EXPR of the lanes of the operand as a. The element lines of kind
 * vec (math kernels with a block form) are defined by the kernel's source instead (cp_math.h,
 * CP_VBLOCK_FORM; cp_fused.h, CP_FUSED_VEC), where the kernel's lane form is in scope. */
#define CP_FUN1(D, A, op, TI, TO, EXPR)                                                        \
    CP_VSTENCIL(vr##op##_##TI##__##D##_##A)                                                    \
    {                                                                                          \
        const cp_fv_##TI x_ = CP_FSRC_##A(TI, a);                                              \
        cp_fv_##TO y_;                                                                         \
        CP_FUNROLL                                                                             \
        for (size_t l_ = 0; l_ < CP_FL(TI); l_++) {                                            \
            const CT_##TI a = x_[l_];                                                          \
            y_[l_] = (CT_##TO)(EXPR);                                                          \
        }                                                                                      \
        CP_VPUT(D, y_);                                                                        \
        CP_VNEXT();                                                                            \
    }
/* y_ = EXPR of the lanes a of x_ and b of z_, lane by lane (CP_FBIN1 and the lane forms'
 * slow path) */
#define CP_FLANES2(N, TI, TO, EXPR)                                                            \
    CP_FUNROLL                                                                                 \
    for (size_t l_ = 0; l_ < N; l_++) {                                                        \
        const CT_##TI a = x_[l_];                                                              \
        const CT_##TI b = z_[l_];                                                              \
        y_[l_] = (CT_##TO)(EXPR);                                                              \
    }
/* The binary forms the compiler's register order reaches (compiler/fuse.py; the unary ones:
 * cp_fused.h, CP_FUSED_UNARY_FORMS): D_D_p, D_p_D, D_D_m, D_m_D, D_p_p, D_p_m, D_m_p, and
 * 0_0_1, 0_1_0 (both operands computed in the loop). */
#define CP_FBIN1(op, TI, TO, EXPR, D, A, B)                                                    \
    CP_VSTENCIL(vr##op##_##TI##__##D##_##A##_##B)                                            \
    {                                                                                          \
        const cp_fv_##TI x_ = CP_FSRC_##A(TI, a);                                              \
        const cp_fv_##TI z_ = CP_FSRC_##B(TI, b);                                              \
        cp_fv_##TO y_;                                                                         \
        CP_FLANES2(CP_FL(TI), TI, TO, EXPR);                                                   \
        CP_VPUT(D, y_);                                                                        \
        CP_VNEXT();                                                                            \
    }
#define CP_FBIN_D(op, TI, TO, EXPR, D, F)                                                      \
    F(op, TI, TO, EXPR, D, D, p) F(op, TI, TO, EXPR, D, p, D) F(op, TI, TO, EXPR, D, D, m)     \
    F(op, TI, TO, EXPR, D, m, D) F(op, TI, TO, EXPR, D, p, p) F(op, TI, TO, EXPR, D, p, m)     \
    F(op, TI, TO, EXPR, D, m, p)

/* A line of cp_elements.h as its vector-register forms, if its operand and result have the
 * same size (the same lane count). */
#define CP_FVREG(arity, op, TI, TO, kind, EXPR)                                                \
    CP_FSIZE_##TI##_##TO(CP_FVREG_##arity, op, TI, TO, kind, EXPR)
#define CP_FVREG_1(op, TI, TO, kind, EXPR) CP_FVREG_1_##kind(op, TI, TO, EXPR)
#define CP_FVREG_1_num(op, TI, TO, EXPR) CP_FUSED_UNARY_FORMS(CP_FUN1, op, TI, TO, EXPR)
#define CP_FVREG_1_bits CP_FVREG_1_num
#define CP_FVREG_1_vec(op, TI, TO, EXPR)
#define CP_FVREG_2(op, TI, TO, kind, EXPR) CP_FVREG_2_##kind(op, TI, TO, EXPR, CP_FBIN1)
#define CP_FVREG_2_num(op, TI, TO, EXPR, F)                                                    \
    CP_FBIN_D(op, TI, TO, EXPR, 0, F) CP_FBIN_D(op, TI, TO, EXPR, 1, F)                        \
    F(op, TI, TO, EXPR, 0, 0, 1) F(op, TI, TO, EXPR, 0, 1, 0)
#define CP_FVREG_2_bits CP_FVREG_2_num
#define CP_FSAME(F, op, TI, TO, kind, EXPR) F(op, TI, TO, kind, EXPR)
#define CP_FDIFF(F, op, TI, TO, kind, EXPR)
#define CP_FSIZE_f32_f32 CP_FSAME
#define CP_FSIZE_f32_i32 CP_FSAME
#define CP_FSIZE_f32_bool CP_FSAME
#define CP_FSIZE_f32_f64 CP_FDIFF
#define CP_FSIZE_f64_f64 CP_FSAME
#define CP_FSIZE_f64_f32 CP_FDIFF
#define CP_FSIZE_f64_i32 CP_FDIFF
#define CP_FSIZE_f64_bool CP_FDIFF
#define CP_FSIZE_i32_i32 CP_FSAME
#define CP_FSIZE_i32_f32 CP_FSAME
#define CP_FSIZE_i32_bool CP_FSAME
#define CP_FSIZE_i32_f64 CP_FDIFF

/* ---- lines of kind lane (lanes, issue 33): a vector lane form, the scalar line for a block
 * it leaves (cp_fused_lanes.h) --------------------------------------------------------------- */
#if CP_FLANES
/* The same forms as CP_FBIN1: every lane by cp_fl<op>_<T> inline; a block with a lane it
 * leaves by cp_fl<op>_<T>_w, the scalar expression per lane, which saves every register it
 * uses (CP_VSLOW_CC, cp_fused.h): the common path has no call and no stack frame. */
#define CP_FBIN_LANE1(op, TI, TO, EXPR, D, A, B)                                               \
    CP_VSTENCIL(vr##op##_##TI##__##D##_##A##_##B)                                            \
    {                                                                                          \
        const cp_fv_##TI x_ = CP_FSRC_##A(TI, a);                                              \
        const cp_fv_##TI z_ = CP_FSRC_##B(TI, b);                                              \
        uint32_t bad_;                                                                         \
        cp_fv_##TO y_ = cp_fl##op##_##TI(x_, z_, &bad_);                                       \
        if (__builtin_expect(bad_ != 0, 0)) {                                                  \
            y_ = CP_FSLOW2(TI, TO, cp_fl##op##_##TI##_w, x_, z_);                              \
        }                                                                                      \
        CP_VPUT(D, y_);                                                                        \
        CP_VNEXT();                                                                            \
    }
#define CP_FVREG_2_lane(op, TI, TO, EXPR, F)                                                   \
    CP_VSLOW_CC cp_fr_##TO cp_fl##op##_##TI##_w(cp_fr_##TI x_, cp_fr_##TI z_)                 \
    {                                                                                          \
        cp_fr_##TO y_;                                                                         \
        CP_FLANES2(CP_FRL(TI), TI, TO, EXPR);                                                  \
        return y_;                                                                             \
    }                                                                                          \
    CP_VSLOW_END                                                                               \
    CP_FVREG_2_num(op, TI, TO, EXPR, CP_FBIN_LANE1)
#else
#define CP_FVREG_2_lane CP_FVREG_2_num
#endif
/* ---- end of the lines of kind lane -------------------------------------------------------- */

CP_ELEMENTS(CP_FVREG)

/* ---- the loop skeleton and the store of the result block --------------------------------- */

CP_VSTENCIL(vloop_i32__begin)
{
    vi = 0;
    vn = CP_LEN(cp_n_i32);
    CP_VNEXT();
}

#define CP_FUSE_LOOP(T)                                                                        \
    CP_VSTENCIL(vrstore_##T##__p_0)                                                             \
    {                                                                                          \
        cp_fstore_##T(CP_FARRAY(T, out), vi, vn, (cp_fv_##T)CP_VGET(0));                        \
        CP_VNEXT();                                                                            \
    }                                                                                          \
    CP_VSTENCIL(vloop_##T##__end)                                                              \
    {                                                                                          \
        if (vn > CP_FL(T)) { /* vn: the elements left from vi on (cp_fused.h, CP_VREGS) */     \
            vi += CP_FL(T);                                                                    \
            vn -= CP_FL(T);                                                                    \
            CP_MUSTTAIL return cp_vloop(CP_VARGS);                                             \
        }                                                                                      \
        CP_VNEXT();                                                                            \
    }
CP_FUSE_LOOP(f32)
CP_FUSE_LOOP(f64)
CP_FUSE_LOOP(i32)

/* ---- a lone math kernel over a whole array, through pointer slots ------------------------ */

/* vb<op>_<T>__p_p: a lone operation of kind vec (a math kernel with a block form) on an array
 * that @cp.jit reads in place runs the kernel's block form over the whole array, as array.c's
 * <op>_<T>__v_v does, with the operand and the result through pointer slots. In a fused loop
 * it would call the kernel's lane form once per register, which costs more than the pass of
 * a cheap kernel (sqrt: 2.5x). Same kernel, so the same bits. */
#if CP_VMATH
#define CP_FWHOLE(arity, op, TI, TO, kind, EXPR) CP_FWHOLE_##kind(op, TI)
#define CP_FWHOLE_vec(op, T)                                                                   \
    CP_STENCIL(vb##op##_##T##__p_p)                                                            \
    {                                                                                          \
        cp_v##op##_##T(CP_FARRAY(T, out), CP_FARRAY(T, a), CP_LEN(cp_n_i32));                  \
        CP_NEXT();                                                                             \
    }
#define CP_FWHOLE_num(op, T)
#define CP_FWHOLE_bits(op, T)
#define CP_FWHOLE_lane(op, T)
CP_ELEMENTS(CP_FWHOLE)
#endif

#endif /* CP_FUSE_BYTES */
