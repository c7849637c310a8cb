/* Private helpers of libcopapy (runner/lib), shared by abi.c, loop.c and the loop's platform parts. Not installed. */
#ifndef COPAPY_ABI_INTERNAL_H
#define COPAPY_ABI_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "copapy/copapy.h"
#include "../src/internal.h"

/* The loop's platform part (loop_rt_posix.c, loop_rt_win32.c): the real-time set-up that
 * copapy_loop_config.flags asks for (the COPAPY_RT_* bits achieved in *rt; the state to undo
 * it, or NULL), its undoing, and a sleep to an absolute deadline of copapy_now_ns(). */
typedef struct copapy_rt_saved copapy_rt_saved;
copapy_rt_saved *copapy_rt_setup(const copapy_loop_config *c, uint32_t *rt);
void copapy_rt_restore(copapy_rt_saved *saved, uint32_t achieved);
void copapy_rt_sleep_until(int64_t deadline);

/* Fills err (only the prefix its struct_size covers) and returns status. */
int copapy_abi_fail(copapy_error *err, int status, uint32_t code, uint32_t detail,
                    const char *name, const char *message);

/* double -> integer: truncation toward zero, saturated, NaN -> 0 (cp.cast semantics). */
static inline int64_t copapy_abi_trunc(double d, int64_t lo, int64_t hi)
{
    if (d != d) {
        return 0;
    }
    if (d >= (double)hi) {
        return hi;
    }
    if (d <= (double)lo) {
        return lo;
    }
    return (int64_t)d;
}

static inline void copapy_abi_store(uint8_t *p, uint8_t dtype, double v)
{
    switch (dtype) {
    case COPAPY_F32: {
        float f = cp_to_f32(v);
        memcpy(p, &f, sizeof(f));
        break;
    }
    case COPAPY_F64:
        memcpy(p, &v, sizeof(v));
        break;
    case COPAPY_I32: {
        int32_t i = (int32_t)copapy_abi_trunc(v, INT32_MIN, INT32_MAX);
        memcpy(p, &i, sizeof(i));
        break;
    }
    case COPAPY_BOOL: {
        int32_t i = v != 0.0;
        memcpy(p, &i, sizeof(i));
        break;
    }
    case COPAPY_U8:
        p[0] = (uint8_t)copapy_abi_trunc(v, 0, UINT8_MAX);
        break;
    default: {
        int8_t i = (int8_t)copapy_abi_trunc(v, INT8_MIN, INT8_MAX);
        memcpy(p, &i, sizeof(i));
        break;
    }
    }
}

static inline double copapy_abi_load(const uint8_t *p, uint8_t dtype)
{
    switch (dtype) {
    case COPAPY_F32: {
        float f;
        memcpy(&f, p, sizeof(f));
        return (double)f;
    }
    case COPAPY_F64: {
        double d;
        memcpy(&d, p, sizeof(d));
        return d;
    }
    case COPAPY_I32: {
        int32_t i;
        memcpy(&i, p, sizeof(i));
        return (double)i;
    }
    case COPAPY_BOOL: {
        int32_t i;
        memcpy(&i, p, sizeof(i));
        return i != 0 ? 1.0 : 0.0;
    }
    case COPAPY_U8:
        return (double)p[0];
    default: {
        int8_t i;
        memcpy(&i, p, sizeof(i));
        return (double)i;
    }
    }
}

#endif /* COPAPY_ABI_INTERNAL_H */
