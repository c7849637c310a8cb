/* Fused element-wise loops (docs/design.md, "Fused element-wise loops"): the vector-register
 * forms of every element line of cp_elements.h, and the loop skeleton they run in.
 *
 * Only on targets whose toml sets fuse_vector_bytes (the build passes it as CP_FUSE_BYTES, the
 * width of one vector register in bytes); elsewhere this file defines nothing and the compiler
 * keeps the one-pass-per-operation loops of array.c.
 *
 * A fused loop is the chain
 *     vloop_i32__begin   vi = 0, vn = cp_n_i32 (the element count)
 *     <body>             the operations of one block of L = CP_FUSE_BYTES / sizeof(T) elements
 *                        from index vi, intermediate values in the vector registers v0, v1
 *     vrstore_<T>__p_0   the block of register 0 (the tree's root) into the out array
 *     vloop_<T>__end     vi += L; while vi < vn jump back to the body (cp_vloop, patched by
 *                        the linker to the stencil after vloop_i32__begin)
 * Every stencil of it has the signature CP_VREGS: the six scalar registers first (so they pass
 * through the loop unchanged, in the same machine registers as in a scalar chain: the scalar
 * stencil before the loop jumps to vloop_i32__begin, vloop_<T>__end's cp_vnext jumps to the
 * scalar stencil after it), then the index, the count and the two vector registers.
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
 * Only the forms the compiler's register order can reach are defined (below, CP_FUN_D).
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
#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

#if defined(CP_FUSE_BYTES)

#pragma GCC visibility push(hidden)

typedef int32_t cp_vreg __attribute__((vector_size(CP_FUSE_BYTES)));
#define CP_VREGS CP_REGS, size_t vi, size_t vn, cp_vreg v0, cp_vreg v1
#define CP_VARGS CP_ARGS, vi, vn, v0, v1
#define CP_VSTENCIL(name) CP_CC void name(CP_VREGS)
#define CP_VNEXT() CP_MUSTTAIL return cp_vnext(CP_VARGS)

extern CP_CC void cp_vnext(CP_VREGS);
extern CP_CC void cp_vloop(CP_VREGS);
extern int64_t cp_pa_ptr, cp_pb_ptr, cp_pout_ptr;

#pragma GCC visibility pop

/* A block of type T in a vector register, an unaligned block in memory, the lane count. */
#define CP_FUSE_TYPES(T)                                                                       \
    typedef CT_##T cp_fv_##T __attribute__((vector_size(CP_FUSE_BYTES)));                      \
    typedef CT_##T cp_fvu_##T __attribute__((vector_size(CP_FUSE_BYTES), aligned(sizeof(CT_##T))));
CP_FUSE_TYPES(f32)
CP_FUSE_TYPES(f64)
CP_FUSE_TYPES(i32)
typedef cp_fv_i32 cp_fv_bool;
typedef cp_fvu_i32 cp_fvu_bool;
#define CP_FL(T) (CP_FUSE_BYTES / sizeof(CT_##T))

/* The block of array p at index i of n (zeros beyond n), a scalar broadcast, a block stored. */
#define CP_FUSE_MEMORY(T)                                                                      \
    static inline __attribute__((always_inline)) cp_fv_##T cp_fload_##T(const CT_##T *p,        \
                                                                          size_t i, size_t n)  \
    {                                                                                          \
        if (n - i >= CP_FL(T)) {                                                               \
            return *(const cp_fvu_##T *)(p + i);                                               \
        }                                                                                      \
        cp_fv_##T v = {0};                                                                     \
        CP_SCALAR_LOOP                                                                         \
        for (size_t l = 0; l < n - i; l++) v[l] = p[i + l];                                    \
        return v;                                                                              \
    }                                                                                          \
    static inline __attribute__((always_inline)) cp_fv_##T cp_fbcast_##T(CT_##T s)            \
    {                                                                                          \
        cp_fv_##T v;                                                                           \
        for (size_t l = 0; l < CP_FL(T); l++) v[l] = s;                                        \
        return v;                                                                              \
    }                                                                                          \
    static inline __attribute__((always_inline)) void cp_fstore_##T(CT_##T *p, size_t i,       \
                                                                    size_t n, cp_fv_##T v)     \
    {                                                                                          \
        if (n - i >= CP_FL(T)) {                                                               \
            *(cp_fvu_##T *)(p + i) = v;                                                        \
            return;                                                                            \
        }                                                                                      \
        /* lane by lane at constant lanes: register extracts, no stack frame for the block */   \
        _Pragma("clang loop unroll(full)")                                                     \
        for (size_t l = 0; l < CP_FL(T); l++) {                                                \
            if (l < n - i) p[i + l] = v[l];                                                    \
        }                                                                                      \
    }
CP_FUSE_MEMORY(f32)
CP_FUSE_MEMORY(f64)
CP_FUSE_MEMORY(i32)
#define cp_fload_bool cp_fload_i32
#define cp_fbcast_bool cp_fbcast_i32

/* The array a pointer slot designates: the slot's own address plus the offset it holds (in
 * unsigned arithmetic: an integer-to-pointer conversion, never pointer arithmetic beyond an
 * object). Fused tables are 64-bit only. */
_Static_assert(sizeof(void *) == sizeof(int64_t), "fused loops need 64-bit pointers");
static inline __attribute__((always_inline)) void *cp_fbase(const int64_t *slot)
{
    return (void *)((uintptr_t)slot + (uintptr_t)*slot);
}
#define CP_FARRAY(T, r) ((CT_##T *)cp_fbase(&cp_p##r##_ptr))

/* Operand fetch of form 0, 1, p, m (role r, block type T). */
#define CP_FSRC_0(T, r) ((cp_fv_##T)v0)
#define CP_FSRC_1(T, r) ((cp_fv_##T)v1)
#define CP_FSRC_p(T, r) cp_fload_##T(CP_FARRAY(T, r), vi, vn)
#define CP_FSRC_m(T, r) cp_fbcast_##T(SLOT_##T(r))

/* The lanes of a block: y = EXPR of the lanes of x (and z) as a and b. kind vec calls the
 * kernel's lane form (cp_math.h, CP_VBLOCK_LANES), every other kind the expression per lane. */
#define CP_FLANES1_num(op, TI, TO, EXPR, x, y)                                                 \
    for (size_t l_ = 0; l_ < CP_FL(TI); l_++) {                                                \
        const CT_##TI a = x[l_];                                                               \
        y[l_] = (CT_##TO)(EXPR);                                                               \
    }
#define CP_FLANES1_bits CP_FLANES1_num
/* The lane form's block goes through memory (a pointer argument): aligned to the block, so the
 * stencil's store and the kernel's load of it never split a cache line (a split store cannot
 * forward: with a 16-byte aligned stack half the processes ran the AVX-512 loop 2.8x slower). */
#define CP_FALIGN __attribute__((aligned(CP_FUSE_BYTES)))
#define CP_FLANES1_vec(op, TI, TO, EXPR, x, y)                                                 \
    {                                                                                          \
        CT_##TI in_[CP_FL(TI)] CP_FALIGN, out_[CP_FL(TI)] CP_FALIGN;                           \
        __builtin_memcpy(in_, &x, sizeof in_);                                                 \
        cp_v##op##_##TI##_w(out_, in_);                                                        \
        __builtin_memcpy(&y, out_, sizeof out_);                                               \
    }

#define CP_FUN1(op, TI, TO, kind, EXPR, D, A)                                                  \
    CP_VSTENCIL(vr##op##_##TI##__##D##_##A)                                                  \
    {                                                                                          \
        const cp_fv_##TI x_ = CP_FSRC_##A(TI, a);                                              \
        cp_fv_##TO y_;                                                                         \
        CP_FLANES1_##kind(op, TI, TO, EXPR, x_, y_)                                            \
        v##D = (cp_vreg)y_;                                                                    \
        CP_VNEXT();                                                                            \
    }
/* The forms the compiler's register order reaches (compiler/fuse.py): a result goes to the
 * register an operand computed in the loop is in, or to register 1 only while register 0
 * holds a value; so a unary D_D, D_p, a binary D_D_p, D_p_D, D_D_m, D_m_D, D_p_p, D_p_m,
 * D_m_p, and 0_0_1, 0_1_0 (both operands computed in the loop). */
#define CP_FUN_D(op, TI, TO, kind, EXPR, D)                                                    \
    CP_FUN1(op, TI, TO, kind, EXPR, D, D) CP_FUN1(op, TI, TO, kind, EXPR, D, p)

#define CP_FBIN1(op, TI, TO, EXPR, D, A, B)                                                    \
    CP_VSTENCIL(vr##op##_##TI##__##D##_##A##_##B)                                            \
    {                                                                                          \
        const cp_fv_##TI x_ = CP_FSRC_##A(TI, a);                                              \
        const cp_fv_##TI z_ = CP_FSRC_##B(TI, b);                                              \
        cp_fv_##TO y_;                                                                         \
        for (size_t l_ = 0; l_ < CP_FL(TI); l_++) {                                            \
            const CT_##TI a = x_[l_];                                                          \
            const CT_##TI b = z_[l_];                                                          \
            y_[l_] = (CT_##TO)(EXPR);                                                          \
        }                                                                                      \
        v##D = (cp_vreg)y_;                                                                    \
        CP_VNEXT();                                                                            \
    }
#define CP_FBIN_D(op, TI, TO, EXPR, D)                                                         \
    CP_FBIN1(op, TI, TO, EXPR, D, D, p) CP_FBIN1(op, TI, TO, EXPR, D, p, D)                    \
    CP_FBIN1(op, TI, TO, EXPR, D, D, m) CP_FBIN1(op, TI, TO, EXPR, D, m, D)                    \
    CP_FBIN1(op, TI, TO, EXPR, D, p, p) CP_FBIN1(op, TI, TO, EXPR, D, p, m)                    \
    CP_FBIN1(op, TI, TO, EXPR, D, m, p)

/* A line of cp_elements.h as its vector-register forms, if its operand and result have the
 * same size (the same lane count). */
#define CP_FVREG(arity, op, TI, TO, kind, EXPR)                                                \
    CP_FSIZE_##TI##_##TO(CP_FVREG_##arity, op, TI, TO, kind, EXPR)
#define CP_FVREG_1(op, TI, TO, kind, EXPR)                                                     \
    CP_FUN_D(op, TI, TO, kind, EXPR, 0) CP_FUN_D(op, TI, TO, kind, EXPR, 1)
#define CP_FVREG_2(op, TI, TO, kind, EXPR)                                                     \
    CP_FBIN_D(op, TI, TO, EXPR, 0) CP_FBIN_D(op, TI, TO, EXPR, 1)                              \
    CP_FBIN1(op, TI, TO, EXPR, 0, 0, 1) CP_FBIN1(op, TI, TO, EXPR, 0, 1, 0)
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
        cp_fstore_##T(CP_FARRAY(T, out), vi, vn, (cp_fv_##T)v0);                               \
        CP_VNEXT();                                                                            \
    }                                                                                          \
    CP_VSTENCIL(vloop_##T##__end)                                                              \
    {                                                                                          \
        vi += CP_FL(T);                                                                        \
        if (vi < vn) {                                                                         \
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
CP_ELEMENTS(CP_FWHOLE)
#endif

#endif /* CP_FUSE_BYTES */
