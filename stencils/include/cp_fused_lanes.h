/* Vector lane forms of binary element lines of kind lane (cp_elements.h) for the fused loops'
 * register stencils (fused.c): cp_fl<op>_<T>(a, b, &bad) computes every lane of a block at
 * once, the same bits as the line's scalar expression wherever it leaves bad 0; a block with
 * a lane it sets bad is recomputed lane by lane by the scalar expression (fused.c,
 * CP_FBIN_LANE1). Issue 33: the motor sweep's noise generator is a float32 %, and one scalar
 * float64 division per lane was 40 % of a lane-batched scenario's time.
 *
 * Written with GCC/clang vector extensions over the block type cp_fv_f32, so each target with
 * fused loops gets its own vector code (x86_64: SSE2, AVX2, AVX-512; AArch64: Advanced SIMD).
 * Only where float64 division is in hardware (CP_HW_F64_DIV, cp_ops.h), as cp_fmodf_fast's
 * common case; elsewhere the line is computed lane by lane. */
#ifndef CP_FUSED_LANES_H
#define CP_FUSED_LANES_H

#if defined(CP_FUSE_BYTES)

#include <stdint.h>

#include "cp_fused.h"
#include "cp_ops.h"

#define CP_FLANES CP_HW_F64_DIV

#if CP_FLANES
typedef double cp_flw_f64 __attribute__((vector_size(CP_FUSE_BYTES * 2))); /* a block, widened */
typedef int64_t cp_flw_i64 __attribute__((vector_size(CP_FUSE_BYTES * 2)));

/* x where m is all ones, else y (m: a comparison's lanes, 0 or -1). */
#define CP_FLSEL(V, I, m, x, y) ((V)(((I)(x) & (m)) | ((I)(y) & ~(m))))

/* cp_mod_f32 (cp_ops.h) of each lane: cp_fmodf_fast's common case (quotient in [1, 2^29)), as
 * there: float64 |a| / |b|, its integer part (the quotient is below 2^29, so the conversion to
 * int32 is exact and defined), r = |a| - q |b| exact, one correction by |b|, the float32 result
 * with a's sign; then cp_mod_f32's sign fix (+ b where the signs differ, +0 with b's sign for a
 * zero). Every other lane (NaN, inf, b = 0, |a| < |b|, a huge quotient) sets bad. A lane out
 * of range is replaced by 1 before the integer conversion: it computes garbage that is not
 * used, never an undefined conversion. */
static inline __attribute__((always_inline)) cp_fv_f32 cp_flmod_f32(cp_fv_f32 a, cp_fv_f32 b,
                                                                   uint32_t *bad)
{
    const cp_fv_i32 ai = (cp_fv_i32)a, bi = (cp_fv_i32)b;
    const cp_fv_i32 mag = ai & 0x7fffffff, sign = ai & INT32_MIN;
    const cp_flw_f64 da = __builtin_convertvector((cp_fv_f32)mag, cp_flw_f64);
    const cp_flw_f64 db = __builtin_convertvector((cp_fv_f32)(bi & 0x7fffffff), cp_flw_f64);
    const cp_flw_f64 q = da / db;
    const cp_flw_i64 ok = (q >= 1.0) & (q < 0x1p29);
    const cp_flw_f64 ones = (cp_flw_f64){0} + 1.0;
    uint32_t off = 0;
    CP_FUNROLL
    for (size_t l = 0; l < CP_FL(f32); l++) off |= (uint32_t)(ok[l] == 0);
    *bad = off;
    const cp_flw_f64 qs = CP_FLSEL(cp_flw_f64, cp_flw_i64, ok, q, ones);
    const cp_flw_f64 qi =
        __builtin_convertvector(__builtin_convertvector(qs, cp_fv_i32), cp_flw_f64);
    const cp_flw_f64 r = da - qi * db;
    const cp_flw_f64 rc = CP_FLSEL(cp_flw_f64, cp_flw_i64, r < 0.0, r + db, r);
    const cp_fv_f32 m = (cp_fv_f32)((cp_fv_i32)__builtin_convertvector(rc, cp_fv_f32) | sign);
    const cp_fv_i32 flip = (b < 0.0f) ^ (m < 0.0f);
    const cp_fv_f32 fixed = CP_FLSEL(cp_fv_f32, cp_fv_i32, flip, m + b, m);
    const cp_fv_f32 zero = (cp_fv_f32)(bi & INT32_MIN);
    return CP_FLSEL(cp_fv_f32, cp_fv_i32, m != 0.0f, fixed, zero);
}
#endif /* CP_FLANES */

#endif /* CP_FUSE_BYTES */
#endif /* CP_FUSED_LANES_H */
