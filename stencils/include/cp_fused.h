/* The fused element-wise loops' stencil framework (stencils/fused.c says what a fused loop is):
 * the signature CP_VREGS, the block types, the loads and stores of a block and the operand
 * forms, shared by fused.c (the loop skeleton and the element lines of kinds num and bits) and
 * by the math kernel sources (the element lines of kind vec, CP_FUSED_VEC below: the kernel's
 * branch-free lane form inline in the stencil, its scalar kernel one call away).
 *
 * Only where the target sets fuse_vector_bytes (CP_FUSE_BYTES, the width of one vector register
 * in bytes).
 */
#ifndef CP_FUSED_H
#define CP_FUSED_H

#if defined(CP_FUSE_BYTES)

#include <stddef.h>
#include <stdint.h>

#include "cp_array.h"
#include "cp_stencil.h"

#pragma GCC visibility push(hidden)

typedef int32_t cp_vreg __attribute__((vector_size(CP_FUSE_BYTES)));
/* vi: the index of the block's first element; vn: the elements left from vi on (the count
 * minus vi), so that the full-block test of a memory operand is one compare with a constant
 * (2 instructions fewer per operand than recomputing count - vi). */
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

/* The block of array p at index i with left elements from i on (zeros beyond them), a scalar
 * broadcast, a block stored. left is the loop's register vn (CP_VREGS): the full-block test is
 * one compare of a register with a constant, not a subtraction first.
 * A full block's load also prefetches the array CP_FPREFETCH bytes ahead (an address, never
 * dereferenced: past the array's end it is harmless): a fused loop with a math kernel has
 * too many operations per block for the out-of-order window to reach the next cache lines
 * in time, and at 1e7 elements it waited for memory on top of computing. */
#define CP_FPREFETCH 1024u
#define CP_FUSE_MEMORY(T)                                                                      \
    static inline __attribute__((always_inline)) cp_fv_##T cp_fload_##T(                       \
        const CT_##T *p, size_t i, size_t left)                                                \
    {                                                                                          \
        if (left >= CP_FL(T)) {                                                                \
            __builtin_prefetch((const void *)((uintptr_t)(p + i) + CP_FPREFETCH));             \
            return *(const cp_fvu_##T *)(p + i);                                               \
        }                                                                                      \
        cp_fv_##T v = {0};                                                                     \
        CP_SCALAR_LOOP                                                                         \
        for (size_t l = 0; l < left; l++) v[l] = p[i + l];                                     \
        return v;                                                                              \
    }                                                                                          \
    static inline __attribute__((always_inline)) cp_fv_##T cp_fbcast_##T(CT_##T s)            \
    {                                                                                          \
        cp_fv_##T v;                                                                           \
        for (size_t l = 0; l < CP_FL(T); l++) v[l] = s;                                        \
        return v;                                                                              \
    }                                                                                          \
    static inline __attribute__((always_inline)) void cp_fstore_##T(CT_##T *p, size_t i,       \
                                                                    size_t left, cp_fv_##T v)  \
    {                                                                                          \
        if (left >= CP_FL(T)) {                                                                \
            *(cp_fvu_##T *)(p + i) = v;                                                        \
            return;                                                                            \
        }                                                                                      \
        /* lane by lane at constant lanes: register extracts, no stack frame for the block */   \
        _Pragma("clang loop unroll(full)")                                                     \
        for (size_t l = 0; l < CP_FL(T); l++) {                                                \
            if (l < left) p[i + l] = v[l];                                                     \
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

/* The forms of a unary operation that the compiler's register order reaches
 * (compiler/fuse.py): the result goes to the register its operand is in, or to register 1 only
 * while register 0 holds a value; so D_D and D_p for D = 0, 1. F(D, A, ...) defines one. */
#define CP_FUSED_UNARY_FORMS(F, ...)                                                           \
    F(0, 0, __VA_ARGS__) F(0, p, __VA_ARGS__) F(1, 1, __VA_ARGS__) F(1, p, __VA_ARGS__)

/* vr<op>_<T>__<D>_<A> of a math kernel with a block form (kind vec, cp_math.h): every lane by
 * FAST(x, &bad), the kernel's branch-free copy, inline; if a lane set bad (it needs a path the
 * copy does not have), the whole block by SLOW, the scalar kernel per lane. One vector
 * operation per step of the kernel and no call on the common path: each lane computes the
 * scalar kernel's bits either way. SLOW takes and returns the block in a register and saves
 * every register it uses (CP_VSLOW_CC), so the common path needs no stack frame: no spill of
 * the chain's registers around the call, no block in memory. */
#define CP_FUSED_VEC1(D, A, op, T, FAST, SLOW)                                                 \
    CP_VSTENCIL(vr##op##_##T##__##D##_##A)                                                     \
    {                                                                                          \
        const cp_fv_##T x_ = CP_FSRC_##A(T, a);                                                \
        cp_fv_##T y_;                                                                          \
        CT_##T in_[CP_FL(T)], out_[CP_FL(T)]; /* arrays: the loop vectoriser's form */         \
        __builtin_memcpy(in_, &x_, sizeof in_);                                                \
        uint32_t bad_ = 0;                                                                     \
        for (size_t l_ = 0; l_ < CP_FL(T); l_++) {                                             \
            uint32_t b_;                                                                       \
            out_[l_] = FAST(in_[l_], &b_);                                                     \
            bad_ |= b_;                                                                        \
        }                                                                                      \
        __builtin_memcpy(&y_, out_, sizeof out_);                                              \
        if (__builtin_expect(bad_ != 0, 0)) y_ = SLOW(x_);                                     \
        v##D = (cp_vreg)y_;                                                                    \
        CP_VNEXT();                                                                            \
    }
#define CP_FUSED_VEC(op, T, FAST, SLOW) CP_FUSED_UNARY_FORMS(CP_FUSED_VEC1, op, T, FAST, SLOW)
/* The calling convention of SLOW: the callee saves every register it or its callees may
 * change, the vector registers at their full width (x86-64: no_caller_saved_registers saves
 * zmm0-31 and k0-7 with AVX-512, where preserve_all saves only ymm0-15; AArch64: preserve_all
 * saves q0-q31). The warning says that this saves much: only on the rare path. */
#if defined(__clang__) && defined(__x86_64__)
#define CP_VSLOW_CC                                                                            \
    _Pragma("clang diagnostic push")                                                           \
    _Pragma("clang diagnostic ignored \"-Wexcessive-regsave\"")                                \
    __attribute__((noinline, no_caller_saved_registers))
#define CP_VSLOW_END _Pragma("clang diagnostic pop")
#elif defined(__clang__) && defined(__aarch64__)
#define CP_VSLOW_CC __attribute__((noinline, preserve_all))
#define CP_VSLOW_END
#else
#error "fused loops (CP_FUSE_BYTES) need clang's x86-64 or AArch64 calling conventions"
#endif

#endif /* CP_FUSE_BYTES */
#endif /* CP_FUSED_H */
