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

/* A block is CP_FUSE_BYTES; it passes from stencil to stencil in one machine vector register
 * (CP_FUSE_REG_BYTES = CP_FUSE_BYTES, the default) or in two (the toml's fuse_register_bytes,
 * half the block: v<d> holds the block's first half, v<d>h its second;
 * docs/decisions/2026-12-05-two-register-blocks.md). Two registers per block pay the loop's
 * per-block work (each operand's address and full-block test, the jump over the partial path,
 * a math kernel's constants, the loop's end) once per twice the lanes, and give a long kernel
 * two independent chains. Every lane computes the same operations either way: the same bits. */
#ifndef CP_FUSE_REG_BYTES
#define CP_FUSE_REG_BYTES CP_FUSE_BYTES
#endif
typedef int32_t cp_vreg __attribute__((vector_size(CP_FUSE_REG_BYTES)));
typedef int32_t cp_vblock __attribute__((vector_size(CP_FUSE_BYTES)));
/* vi: the index of the block's first element; vn: the elements left from vi on (the count
 * minus vi), so that the full-block test of a memory operand is one compare with a constant
 * (2 instructions fewer per operand than recomputing count - vi). */
#if CP_FUSE_REG_BYTES == CP_FUSE_BYTES
#define CP_VREGS CP_REGS, size_t vi, size_t vn, cp_vreg v0, cp_vreg v1
#define CP_VARGS CP_ARGS, vi, vn, v0, v1
#define CP_VGET(D) ((cp_vblock)v##D)
#define CP_VPUT(D, y) (v##D = (cp_vreg)(y))
#elif CP_FUSE_REG_BYTES * 2 == CP_FUSE_BYTES
/* the lane indices of a register part of a block (lo, hi) and of the block (both), by the
 * lanes of one register: 4-byte types (f32, i32, bool: 4b) and 8-byte types (f64: 8b) */
#define CP_FIDX_2 0, 1
#define CP_FIDX_4 CP_FIDX_2, 2, 3
#define CP_FIDX_8 CP_FIDX_4, 4, 5, 6, 7
#define CP_FIDX_16 CP_FIDX_8, 8, 9, 10, 11, 12, 13, 14, 15
#define CP_FIDX_32 CP_FIDX_16, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
#define CP_FIDX_HI_2 2, 3
#define CP_FIDX_HI_4 4, 5, 6, 7
#define CP_FIDX_HI_8 8, 9, 10, 11, 12, 13, 14, 15
#define CP_FIDX_HI_16 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
#if CP_FUSE_REG_BYTES == 16
#define CP_FIDX_lo_4b CP_FIDX_4
#define CP_FIDX_hi_4b CP_FIDX_HI_4
#define CP_FIDX_both_4b CP_FIDX_8
#define CP_FIDX_lo_8b CP_FIDX_2
#define CP_FIDX_hi_8b CP_FIDX_HI_2
#define CP_FIDX_both_8b CP_FIDX_4
#elif CP_FUSE_REG_BYTES == 32
#define CP_FIDX_lo_4b CP_FIDX_8
#define CP_FIDX_hi_4b CP_FIDX_HI_8
#define CP_FIDX_both_4b CP_FIDX_16
#define CP_FIDX_lo_8b CP_FIDX_4
#define CP_FIDX_hi_8b CP_FIDX_HI_4
#define CP_FIDX_both_8b CP_FIDX_8
#elif CP_FUSE_REG_BYTES == 64
#define CP_FIDX_lo_4b CP_FIDX_16
#define CP_FIDX_hi_4b CP_FIDX_HI_16
#define CP_FIDX_both_4b CP_FIDX_32
#define CP_FIDX_lo_8b CP_FIDX_8
#define CP_FIDX_hi_8b CP_FIDX_HI_8
#define CP_FIDX_both_8b CP_FIDX_16
#else
#error "fuse_register_bytes: 16, 32 or 64"
#endif
#define CP_FIDX_SIZE_f32 4b
#define CP_FIDX_SIZE_i32 4b
#define CP_FIDX_SIZE_bool 4b
#define CP_FIDX_SIZE_f64 8b
#define CP_FIDX_(part, size) CP_FIDX_##part##_##size
#define CP_FIDX(part, size) CP_FIDX_(part, size)
/* register part lo or hi of the block x of type T; the block of the parts lo and hi */
#define CP_FPART(T, x, part) __builtin_shufflevector(x, x, CP_FIDX(part, CP_FIDX_SIZE_##T))
#define CP_FJOIN(T, lo, hi) __builtin_shufflevector(lo, hi, CP_FIDX(both, CP_FIDX_SIZE_##T))
#define CP_VREGS CP_REGS, size_t vi, size_t vn, cp_vreg v0, cp_vreg v1, cp_vreg v0h, cp_vreg v1h
#define CP_VARGS CP_ARGS, vi, vn, v0, v1, v0h, v1h
#define CP_VGET(D) ((cp_vblock)CP_FJOIN(i32, v##D, v##D##h))
#define CP_VPUT(D, y)                                                                          \
    do {                                                                                       \
        const cp_vblock vput_ = (cp_vblock)(y);                                                \
        v##D = CP_FPART(i32, vput_, lo);                                                       \
        v##D##h = CP_FPART(i32, vput_, hi);                                                    \
    } while (0)
#else
#error "a fused block is one or two vector registers (fuse_register_bytes)"
#endif
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

/* One register's part of a block (cp_fr_<T>, CP_FRL(T) lanes), and the call of a slow path
 * SLOW (a function of one or two register parts, CP_VSLOW_CC below) on a block: on each part.
 * The slow paths take and return single registers: a block of two would go through memory
 * (the ABI passes no vector wider than the widest register in registers). */
#define CP_FUSE_HALF(T) typedef CT_##T cp_fr_##T __attribute__((vector_size(CP_FUSE_REG_BYTES)));
CP_FUSE_HALF(f32)
CP_FUSE_HALF(f64)
CP_FUSE_HALF(i32)
typedef cp_fr_i32 cp_fr_bool;
#define CP_FRL(T) (CP_FUSE_REG_BYTES / sizeof(CT_##T))
/* CP_FUNROLL before a loop over a block's lanes: with two registers a block has up to 32 lanes,
 * past clang's full-unroll threshold, and the rolled loop goes through memory */
#if CP_FUSE_REG_BYTES == CP_FUSE_BYTES
#define CP_FUNROLL
#define CP_FSLOW1(T, TO, F, x) F(x)
#define CP_FSLOW2(T, TO, F, x, z) F(x, z)
#else
#define CP_FUNROLL _Pragma("clang loop unroll(full)")
#define CP_FSLOW1(T, TO, F, x) CP_FJOIN(TO, F(CP_FPART(T, x, lo)), F(CP_FPART(T, x, hi)))
#define CP_FSLOW2(T, TO, F, x, z)                                                              \
    CP_FJOIN(TO, F(CP_FPART(T, x, lo), CP_FPART(T, z, lo)),                                    \
             F(CP_FPART(T, x, hi), CP_FPART(T, z, hi)))
#endif

/* A partial block of n lanes at p: register part by part (a block of two would be assembled
 * in memory, with a stack frame on every path of the stencil). */
#if CP_FUSE_REG_BYTES == CP_FUSE_BYTES
#define CP_FLOAD_PARTS(T, p, n) cp_fpload_##T(p, n)
#else
#define CP_FLOAD_PARTS(T, p, n)                                                                \
    CP_FJOIN(T, cp_fpload_##T(p, (n) < CP_FRL(T) ? (n) : CP_FRL(T)),                           \
             cp_fpload_##T((p) + ((n) < CP_FRL(T) ? (n) : CP_FRL(T)),                          \
                           (n) < CP_FRL(T) ? 0u : (n) - CP_FRL(T)))
#endif

/* The block of array p at index i with left elements from i on (zeros beyond them), a scalar
 * broadcast, a block stored. left is the loop's register vn (CP_VREGS): the full-block test is
 * one compare of a register with a constant, not a subtraction first.
 * A full block's load also prefetches the array CP_FPREFETCH bytes ahead (an address, never
 * dereferenced: past the array's end it is harmless): a fused loop with a math kernel has
 * too many operations per block for the out-of-order window to reach the next cache lines
 * in time, and at 1e7 elements it waited for memory on top of computing. */
#define CP_FPREFETCH 1024u
/* one prefetch per cache line of a block (64 bytes on every target with fused loops) */
#define CP_FPREFETCH_STEP (CP_FUSE_BYTES < 64u ? CP_FUSE_BYTES : 64u)
#define CP_FUSE_MEMORY(T)                                                                      \
    /* the first n lanes of a register part at p (n at most its lanes), zeros beyond */        \
    static inline __attribute__((always_inline)) cp_fr_##T cp_fpload_##T(const CT_##T *p,      \
                                                                         size_t n)             \
    {                                                                                          \
        cp_fr_##T v = {0};                                                                     \
        CP_SCALAR_LOOP                                                                         \
        for (size_t l = 0; l < n; l++) v[l] = p[l];                                            \
        return v;                                                                              \
    }                                                                                          \
    static inline __attribute__((always_inline)) cp_fv_##T cp_fload_##T(                       \
        const CT_##T *p, size_t i, size_t left)                                                \
    {                                                                                          \
        if (left >= CP_FL(T)) {                                                                \
            for (size_t k_ = 0; k_ < CP_FUSE_BYTES; k_ += CP_FPREFETCH_STEP) {                 \
                __builtin_prefetch((const void *)((uintptr_t)(p + i) + CP_FPREFETCH + k_));    \
            }                                                                                  \
            return *(const cp_fvu_##T *)(p + i);                                               \
        }                                                                                      \
        return CP_FLOAD_PARTS(T, p + i, left);                                                 \
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
#define CP_FSRC_0(T, r) ((cp_fv_##T)CP_VGET(0))
#define CP_FSRC_1(T, r) ((cp_fv_##T)CP_VGET(1))
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
 * scalar kernel's bits either way. SLOW takes and returns one register (CP_FSLOW1: a block of
 * two by two calls) and saves every register it uses (CP_VSLOW_CC), so the common path needs
 * no stack frame for the call: no spill of the chain's registers around it, no block in
 * memory. */
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
        if (__builtin_expect(bad_ != 0, 0)) y_ = CP_FSLOW1(T, T, SLOW, x_);                    \
        CP_VPUT(D, y_);                                                                        \
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
