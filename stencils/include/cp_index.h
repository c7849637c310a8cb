/* Index stencils (issue 31): multi-level strided views and sorting, as loops that only compare
 * and move bits (no float arithmetic, so every CPU gives the same bits).
 *
 * Strided views of N-D arrays (ngather/nscatter), elements of type T moved as the unsigned
 * integer W of their width:
 *   levels (c0, s0), (c1, s1), (c2, s2): c0 = n, c1 = k / c2; s0, s1 are the int32 pair in the
 *   8-byte scalar slot b, (s2, c2) the pair in c. a (ngather) is the bounding block of the view
 *   (j elements): the first index is base = sum of (c - 1) * -s over the negative steps, so the
 *   indices span exactly [0, sum of (c - 1) * |s|].
 *   ngather:  out[(i0 * c1 + i1) * c2 + i2] = a[base + i0 * s0 + i1 * s1 + i2 * s2]
 *   nscatter: out[0..j) = 0, then out[base + i0 * s0 + i1 * s1 + i2 * s2] = a[...]
 * The stencil checks c2 >= 1, c2 divides k and the span fits j before it moves anything (the
 * slots b and c are writable: no value in them makes it touch memory outside its arrays).
 *
 * Sorting, along rows: n elements per row, k rows.
 *   argsort: out[r * n + i] = the stable ascending order of row r of a (indices in [0, n)):
 *            NaNs last, -0.0 equal to +0.0, equal keys in index order, as
 *            numpy.argsort(kind="stable"); b is int32 scratch of n * j elements (j = 4 for
 *            4-byte elements, 1 for 8-byte ones). Bottom-up merge sort over runs sorted by
 *            insertion, keys compared as unsigned integers.
 *   pgather:  out[r * n + i] = a[r * n + p[r * n + i]] (p: the int32 array b)
 *   pscatter: out zeroed, then out[r * n + p[r * n + i]] = a[r * n + i] (the adjoint of pgather
 *             for a permutation)
 * An index outside [0, n) moves nothing (pgather leaves a zero). */
#ifndef CP_INDEX_H
#define CP_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "cp_array.h"
#include "cp_fused.h"
#include "cp_ops.h"
#include "cp_stencil.h"

#pragma GCC visibility push(hidden)

/* One element of width W from src[i] to dst[o] (a move of bits). */
#define CP_MOVE_BITS(W, dst, o, src, i)                                                        \
    do {                                                                                       \
        W w_;                                                                                  \
        __builtin_memcpy(&w_, &(src)[i], sizeof w_);                                           \
        __builtin_memcpy(&(dst)[o], &w_, sizeof w_);                                           \
    } while (0)

/* The three levels, their base and whether they fit j elements (ok_). */
#define CP_LEVELS(len)                                                                         \
    const int64_t s0_ = cp_vb_i32[0], s1_ = cp_vb_i32[1];                                      \
    const int64_t s2_ = cp_vc_i32[0], c2s_ = cp_vc_i32[1];                                     \
    const size_t c0_ = CP_LEN(cp_n_i32), kk_ = CP_LEN(cp_k_i32);                               \
    const size_t c2_ = c2s_ >= 1 ? (size_t)c2s_ : 1u;                                          \
    int32_t rem_ = 0; /* cp_div_trunc: no runtime-library call on CPUs without a divide */     \
    const size_t c1_ = kk_ <= 0x7fffffffu ? (size_t)cp_div_trunc((int32_t)kk_, (int32_t)c2_,   \
                                                                 &rem_) : 0u;                  \
    const uint64_t e0_ = (uint64_t)(c0_ ? c0_ - 1u : 0u) * (uint64_t)(s0_ < 0 ? -s0_ : s0_);   \
    const uint64_t e1_ = (uint64_t)(c1_ ? c1_ - 1u : 0u) * (uint64_t)(s1_ < 0 ? -s1_ : s1_);   \
    const uint64_t e2_ = (uint64_t)(c2_ - 1u) * (uint64_t)(s2_ < 0 ? -s2_ : s2_);              \
    const int ok_ = c2s_ >= 1 && kk_ <= 0x7fffffffu && rem_ == 0 &&                            \
                    e0_ < (uint64_t)(len) &&                                                   \
                    e1_ < (uint64_t)(len) && e2_ < (uint64_t)(len) &&                          \
                    e0_ + e1_ + e2_ < (uint64_t)(len);                                         \
    const size_t base_ = (size_t)((s0_ < 0 ? e0_ : 0u) + (s1_ < 0 ? e1_ : 0u) +                \
                                  (s2_ < 0 ? e2_ : 0u));                                       \
    const size_t b0_ = (size_t)s0_, b1_ = (size_t)s1_, b2_ = (size_t)s2_; /* modulo 2^N */

/* Walk the levels when they fit (ok_): element o_ of the vector and p2_ of the block, in the
 * order of the vector; MOVE moves one element between them. */
#define CP_WALK_LEVELS(MOVE)                                                                   \
    if (ok_) {                                                                                 \
        size_t o_ = 0, p0_ = base_;                                                            \
        for (size_t i0 = 0; i0 < c0_; i0++, p0_ += b0_) {                                      \
            size_t p1_ = p0_;                                                                  \
            for (size_t i1 = 0; i1 < c1_; i1++, p1_ += b1_) {                                  \
                size_t p2_ = p1_;                                                              \
                for (size_t i2 = 0; i2 < c2_; i2++, p2_ += b2_, o_++) {                        \
                    MOVE;                                                                      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

#define CP_NSTRIDED(T, W)                                                                      \
    CP_STENCIL(ngather_##T##__v_v_m_m)                                                         \
    {                                                                                          \
        CP_LEVELS(CP_LEN(cp_j_i32))                                                            \
        CP_WALK_LEVELS(CP_MOVE_BITS(W, VSLOT_##T(out), o_, VSLOT_##T(a), p2_))                 \
        CP_NEXT();                                                                             \
    }                                                                                          \
    CP_STENCIL(nscatter_##T##__v_v_m_m)                                                        \
    {                                                                                          \
        const size_t len_ = CP_LEN(cp_j_i32);                                                  \
        const W zero_ = 0;                                                                     \
        for (size_t i = 0; i < len_; i++) {                                                    \
            __builtin_memcpy(&VSLOT_##T(out)[i], &zero_, sizeof zero_);                        \
        }                                                                                      \
        CP_LEVELS(len_)                                                                        \
        CP_WALK_LEVELS(CP_MOVE_BITS(W, VSLOT_##T(out), p2_, VSLOT_##T(a), o_))                 \
        CP_NEXT();                                                                             \
    }

/* Sort keys: unsigned integers in NumPy's order. Floats: the sign-magnitude bits mapped to an
 * increasing unsigned order, -0.0 as +0.0, every NaN the largest key (equal to each other). */
CP_ALWAYS_INLINE uint32_t cp_key_i32(const int32_t *a, size_t i)
{
    uint32_t u;
    __builtin_memcpy(&u, &a[i], sizeof u);
    return u ^ 0x80000000u;
}
/* The float key of element i: U the unsigned integer of the width, SIGN its top bit, INF the
 * bits of +inf. */
#define CP_FLOAT_KEY(T, U, SIGN, INF)                                                          \
    CP_ALWAYS_INLINE U cp_key_##T(const CT_##T *a, size_t i)                                   \
    {                                                                                          \
        U u;                                                                                   \
        __builtin_memcpy(&u, &a[i], sizeof u);                                                 \
        const U mag = u & (U)~(SIGN);                                                          \
        if (mag > (INF)) return (U)~(U)0;                                                      \
        if (mag == 0u) return (SIGN);                                                          \
        return (u & (SIGN)) ? (U)~u : (U)(u | (SIGN));                                         \
    }
CP_FLOAT_KEY(f32, uint32_t, 0x80000000u, 0x7f800000u)
CP_FLOAT_KEY(f64, uint64_t, 0x8000000000000000ull, 0x7ff0000000000000ull)

/* runs of this many elements are sorted by insertion before the merges */
#define CP_SORT_RUN 16u

/* Stable ascending order of the n elements of row: idx receives it, tmp is scratch; both n
 * int32. Insertion sort of runs, then bottom-up merges alternating between idx and tmp. */
#define CP_ARGSORT_ROW(T, K, row, idx, tmp, n)                                                 \
    do {                                                                                       \
        for (size_t i = 0; i < (n); i++) {                                                     \
            (idx)[i] = (int32_t)i;                                                             \
        }                                                                                      \
        for (size_t lo = 0; lo < (n); lo += CP_SORT_RUN) {                                     \
            const size_t hi = (n) - lo < CP_SORT_RUN ? (n) : lo + CP_SORT_RUN;                 \
            for (size_t i = lo + 1u; i < hi; i++) {                                            \
                const int32_t v = (idx)[i];                                                    \
                const K key = cp_key_##T(row, (size_t)v);                                      \
                size_t j = i;                                                                  \
                while (j > lo && cp_key_##T(row, (size_t)(idx)[j - 1u]) > key) {               \
                    (idx)[j] = (idx)[j - 1u];                                                  \
                    j--;                                                                       \
                }                                                                              \
                (idx)[j] = v;                                                                  \
            }                                                                                  \
        }                                                                                      \
        int32_t *src_ = (idx), *dst_ = (tmp);                                                  \
        for (size_t w = CP_SORT_RUN; w < (n); w *= 2u) {                                       \
            for (size_t lo = 0; lo < (n); lo += 2u * w) {                                      \
                const size_t mid = (n) - lo < w ? (n) : lo + w;                                \
                const size_t hi = (n) - mid < w ? (n) : mid + w;                               \
                size_t l = lo, r = mid, o = lo;                                                \
                while (l < mid && r < hi) {                                                    \
                    if (cp_key_##T(row, (size_t)src_[r]) < cp_key_##T(row, (size_t)src_[l])) { \
                        dst_[o++] = src_[r++];                                                 \
                    } else {                                                                   \
                        dst_[o++] = src_[l++];                                                 \
                    }                                                                          \
                }                                                                              \
                while (l < mid) dst_[o++] = src_[l++];                                         \
                while (r < hi) dst_[o++] = src_[r++];                                          \
            }                                                                                  \
            int32_t *t_ = src_;                                                                \
            src_ = dst_;                                                                       \
            dst_ = t_;                                                                         \
        }                                                                                      \
        if (src_ != (idx)) {                                                                   \
            for (size_t i = 0; i < (n); i++) {                                                 \
                (idx)[i] = src_[i];                                                            \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* The indirect sort above, for 8-byte elements: b is one scratch row of n int32 (j >= 1). */
#define CP_ARGSORT(T, K)                                                                       \
    CP_STENCIL(argsort_##T##__v_v_v)                                                           \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), rows = CP_LEN(cp_k_i32);                            \
        for (size_t row_ = 0; row_ < rows && CP_LEN(cp_j_i32) >= 1u; row_++) {                 \
            const CT_##T *values_ = &VSLOT_##T(a)[row_ * n];                                   \
            int32_t *order_ = &VSLOT_i32(out)[row_ * n];                                       \
            CP_ARGSORT_ROW(T, K, values_, order_, VSLOT_i32(b), n);                            \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* 64-bit words in int32 arrays (moved through memcpy: no aliasing of the int32 objects). */
CP_ALWAYS_INLINE uint64_t cp_ld64(const int32_t *p, size_t i)
{
    uint64_t v;
    __builtin_memcpy(&v, &p[2u * i], sizeof v);
    return v;
}
CP_ALWAYS_INLINE void cp_st64(int32_t *p, size_t i, uint64_t v)
{
    __builtin_memcpy(&p[2u * i], &v, sizeof v);
}

/* Sort the n words of s ascending (t: n words of scratch); returns the one holding them.
 * Insertion sort of runs, then bottom-up merges, the left word first among equal ones. */
CP_ALWAYS_INLINE const int32_t *cp_sort_words(int32_t *s, int32_t *t, size_t n)
{
    for (size_t lo = 0; lo < n; lo += CP_SORT_RUN) {
        const size_t hi = n - lo < CP_SORT_RUN ? n : lo + CP_SORT_RUN;
        for (size_t i = lo + 1u; i < hi; i++) {
            const uint64_t v = cp_ld64(s, i);
            size_t j = i;
            while (j > lo && cp_ld64(s, j - 1u) > v) {
                cp_st64(s, j, cp_ld64(s, j - 1u));
                j--;
            }
            cp_st64(s, j, v);
        }
    }
    int32_t *src = s, *dst = t;
    for (size_t w = CP_SORT_RUN; w < n; w *= 2u) {
        for (size_t lo = 0; lo < n; lo += 2u * w) {
            const size_t mid = n - lo < w ? n : lo + w;
            const size_t hi = n - mid < w ? n : mid + w;
            size_t l = lo, r = mid, o = lo;
            while (l < mid && r < hi) {
                const uint64_t x = cp_ld64(src, l), y = cp_ld64(src, r);
                const size_t right = y < x;
                cp_st64(dst, o++, right ? y : x);
                r += right;
                l += 1u - right;
            }
            for (; l < mid; l++) cp_st64(dst, o++, cp_ld64(src, l));
            for (; r < hi; r++) cp_st64(dst, o++, cp_ld64(src, r));
        }
        int32_t *swap = src;
        src = dst;
        dst = swap;
    }
    return src;
}

/* 4-byte elements: the words (key << 32 | index) sort by key, then by index: the same stable
 * order, by plain compares of contiguous words (no indirect loads; 2-3x the indirect sort on
 * x86_64). b holds two rows of n words (4n int32: j >= 4). */
#define CP_ARGSORT_WORDS(T)                                                                    \
    CP_STENCIL(argsort_##T##__v_v_v)                                                           \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), rows = CP_LEN(cp_k_i32);                            \
        if (CP_LEN(cp_j_i32) >= 4u) {                                                          \
            int32_t *s_ = VSLOT_i32(b), *t_ = &VSLOT_i32(b)[2u * n];                           \
            for (size_t row_ = 0; row_ < rows; row_++) {                                       \
                const CT_##T *values_ = &VSLOT_##T(a)[row_ * n];                               \
                for (size_t i = 0; i < n; i++) {                                               \
                    cp_st64(s_, i, ((uint64_t)cp_key_##T(values_, i) << 32) | (uint64_t)i);    \
                }                                                                              \
                const int32_t *sorted_ = cp_sort_words(s_, t_, n);                             \
                for (size_t i = 0; i < n; i++) {                                               \
                    VSLOT_i32(out)[row_ * n + i] = (int32_t)(uint32_t)cp_ld64(sorted_, i);     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* pgather and pscatter move elements of width W (i32: 4 bytes, f64: 8). */
#define CP_PERMUTE(T, W)                                                                       \
    CP_STENCIL(pgather_##T##__v_v_v)                                                           \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), rows = CP_LEN(cp_k_i32);                            \
        const W zero_ = 0;                                                                     \
        for (size_t r = 0; r < rows; r++) {                                                    \
            for (size_t i = 0; i < n; i++) {                                                   \
                const uint32_t p = (uint32_t)VSLOT_i32(b)[r * n + i];                          \
                if (p < n) {                                                                   \
                    CP_MOVE_BITS(W, VSLOT_##T(out), r * n + i, VSLOT_##T(a), r * n + p);       \
                } else {                                                                       \
                    __builtin_memcpy(&VSLOT_##T(out)[r * n + i], &zero_, sizeof zero_);        \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }                                                                                          \
    CP_STENCIL(pscatter_##T##__v_v_v)                                                          \
    {                                                                                          \
        const size_t n = CP_LEN(cp_n_i32), rows = CP_LEN(cp_k_i32);                            \
        const W zero_ = 0;                                                                     \
        for (size_t i = 0; i < n * rows; i++) {                                                \
            __builtin_memcpy(&VSLOT_##T(out)[i], &zero_, sizeof zero_);                        \
        }                                                                                      \
        for (size_t r = 0; r < rows; r++) {                                                    \
            for (size_t i = 0; i < n; i++) {                                                   \
                const uint32_t p = (uint32_t)VSLOT_i32(b)[r * n + i];                          \
                if (p < n) {                                                                   \
                    CP_MOVE_BITS(W, VSLOT_##T(out), r * n + p, VSLOT_##T(a), r * n + i);       \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* The gathers of an array read through its pointer slot a (form p, cp_fused.h): under @cp.jit
 * the slot designates the caller's buffer for one call, so a strided view, transpose or
 * broadcast of an argument reads it in place, as the fused loops do, and the program holds no
 * copy of it (docs/decisions/2026-12-04-gathers-of-jit-arguments.md). Only where fused loops
 * exist (64-bit targets with CP_FUSE_BYTES); the same checks as the v forms, the same bits. */
#if defined(CP_FUSE_BYTES)
/* the array the pointer slot a designates (form p) and the one out designates */
#define CP_PSRC(T) ((const CT_##T *)cp_fbase(&cp_pa_ptr))
#define CP_PDST(T) ((CT_##T *)cp_fbase(&cp_pout_ptr))
/* The level gathers into the array slot out (form v) or, as a @cp.jit result, through the
 * pointer slot out into the caller's new array (form p: the result is no copy in the program);
 * NAME, SRC, DST: the stencil, its source (the argument through the pointer slot a, or the
 * array slot a: a temporary, the first of two gathers of a 4-D permutation) and destination. */
#define CP_PNGATHER(T, W, NAME, SRC, DST)                                                      \
    CP_STENCIL(NAME)                                                                           \
    {                                                                                          \
        const CT_##T *src_ = SRC;                                                              \
        CT_##T *dst_ = DST;                                                                    \
        CP_LEVELS(CP_LEN(cp_j_i32))                                                            \
        CP_WALK_LEVELS(CP_MOVE_BITS(W, dst_, o_, src_, p2_))                                   \
        CP_NEXT();                                                                             \
    }
/* ngatherat: a block that starts at element b[2] of the j the slot designates (a view past an
 * argument's first element: m[::-1, 1::3]); the levels must fit the j - b[2] after it */
#define CP_PNGATHERAT(T, W, NAME, DST)                                                         \
    CP_STENCIL(NAME)                                                                           \
    {                                                                                          \
        const CT_##T *src_ = CP_PSRC(T);                                                       \
        CT_##T *dst_ = DST;                                                                    \
        const int64_t at_ = (int64_t)cp_vb_i32[2];                                             \
        const size_t all_ = CP_LEN(cp_j_i32);                                                  \
        const size_t room_ = at_ >= 0 && (uint64_t)at_ < all_ ? all_ - (size_t)at_ : 0u;       \
        const CT_##T *blk_ = src_ + (room_ ? (size_t)at_ : 0u);                                \
        CP_LEVELS(room_)                                                                       \
        CP_WALK_LEVELS(CP_MOVE_BITS(W, dst_, o_, blk_, p2_))                                   \
        CP_NEXT();                                                                             \
    }
#define CP_PGATHERS(T, W)                                                                      \
    CP_PNGATHER(T, W, ngather_##T##__v_p_m_m, CP_PSRC(T), VSLOT_##T(out))                      \
    CP_PNGATHER(T, W, ngather_##T##__p_p_m_m, CP_PSRC(T), CP_PDST(T))                          \
    CP_PNGATHER(T, W, ngather_##T##__p_v_m_m, VSLOT_##T(a), CP_PDST(T))                        \
    CP_PNGATHERAT(T, W, ngatherat_##T##__v_p_m_m, VSLOT_##T(out))                              \
    CP_PNGATHERAT(T, W, ngatherat_##T##__p_p_m_m, CP_PDST(T))                                  \
    CP_STENCIL(sgather_##T##__v_p_m_m)                                                         \
    {                                                                                          \
        const CT_##T *src_ = CP_PSRC(T);                                                       \
        const size_t n = CP_LEN(cp_n_i32);                                                     \
        CP_STRIDED_RANGE(n, CP_LEN(cp_j_i32))                                                  \
        if (ok_) {                                                                             \
            for (size_t i = 0; i < n; i++, at_ += by_) {                                       \
                CP_MOVE_BITS(W, VSLOT_##T(out), i, src_, at_);                                 \
            }                                                                                  \
        }                                                                                      \
        CP_NEXT();                                                                             \
    }

/* vrsgather_<w>__<d>_p: a strided view of an array read through its pointer slot a as one
 * operand of a fused loop (compiler/fuse.py), so neither the view nor the loop's result is a
 * temporary (docs/decisions/2026-12-04-gather-free-fused-loops.md): lane l of the block at vi
 * is element start + (vi + l) * step of the j elements (start b, step c: int32 slots, as for
 * sgather), its bits moved into register d. Each lane's index is checked against j and the
 * loop's count (a lane outside is 0), so no value of the slots makes it read outside its
 * array; a valid program never has one outside. A whole block inside the array (its first
 * and last lane: the indices are monotonic) is read without the checks, of step 1 (a slice
 * past the first element) by one unaligned load. */
#define CP_VRSGATHER1(T, W, D)                                                                 \
    CP_VSTENCIL(vrsgather_##T##__##D##_p)                                                      \
    {                                                                                          \
        const W *src_ = (const W *)cp_fbase(&cp_pa_ptr);                                       \
        const int64_t len_ = (int64_t)CP_LEN(cp_j_i32), step_ = (int64_t)SLOT_i32(c);          \
        const int64_t at_ = (int64_t)SLOT_i32(b) + (int64_t)vi * step_;                        \
        const size_t left_ = vn; /* the elements left from vi on (cp_fused.h, CP_VREGS) */     \
        enum { L_ = CP_FUSE_BYTES / sizeof(W) };                                               \
        const int64_t last_ = at_ + (int64_t)(L_ - 1) * step_;                                 \
        W lanes_[L_];                                                                          \
        if (left_ >= L_ && at_ >= 0 && at_ < len_ && last_ >= 0 && last_ < len_) {             \
            /* a whole block inside the array (the indices are monotonic) */                   \
            if (step_ == 1) {                                                                  \
                cp_vblock blk_;                                                                \
                __builtin_memcpy(&blk_, &src_[at_], CP_FUSE_BYTES);                            \
                CP_VPUT(D, blk_);                                                              \
                CP_VNEXT();                                                                    \
            }                                                                                  \
            _Pragma("clang loop unroll(full)")                                                 \
            for (size_t l_ = 0; l_ < L_; l_++) {                                               \
                __builtin_memcpy(&lanes_[l_], &src_[at_ + (int64_t)l_ * step_], sizeof(W));    \
            }                                                                                  \
        } else {                                                                               \
            int64_t p_ = at_;                                                                  \
            _Pragma("clang loop unroll(full)")                                                 \
            for (size_t l_ = 0; l_ < L_; l_++, p_ += step_) {                                  \
                W w_ = 0;                                                                      \
                if (l_ < left_ && p_ >= 0 && p_ < len_) {                                      \
                    __builtin_memcpy(&w_, &src_[p_], sizeof w_);                               \
                }                                                                              \
                lanes_[l_] = w_;                                                               \
            }                                                                                  \
        }                                                                                      \
        cp_vblock all_;                                                                        \
        __builtin_memcpy(&all_, lanes_, sizeof lanes_);                                        \
        CP_VPUT(D, all_);                                                                      \
        CP_VNEXT();                                                                            \
    }
#define CP_VRSGATHER(T, W) CP_VRSGATHER1(T, W, 0) CP_VRSGATHER1(T, W, 1)
#endif

#pragma GCC visibility pop

#endif
