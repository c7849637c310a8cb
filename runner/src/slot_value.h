/* A data slot's value as an I/O channel's double, both ways: what the scheduler's bindings
 * (sched.c), the platforms' job lists (guard_common.h, INPUT and OUTPUT entries) and
 * libcopapy's port reads and writes (runner/lib/abi.c) move, so that all convert alike (bits
 * equal on either path). */
#ifndef COPAPY_SLOT_VALUE_H
#define COPAPY_SLOT_VALUE_H

#include <stdint.h>

#include "internal.h"

/* Truncation toward zero, saturated to [lo, hi], NaN -> 0 (cp.cast semantics). */
static inline int64_t cp_to_int(double d, int64_t lo, int64_t hi)
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

/* A channel value into the slot at p of `dtype` (float32 saturating to +-inf, the integers
 * saturating, bool as int32 0/1). The scheduler's bindings have the first four (contract.h's
 * io column); libcopapy's port writes all six. */
static inline void cp_slot_store(uint8_t *p, uint8_t dtype, double v)
{
    switch (dtype) {
    case CP_DT_F32: {
        float f = cp_to_f32(v);
        cp_copy(p, (const uint8_t *)&f, sizeof(f));
        break;
    }
    case CP_DT_F64:
        cp_copy(p, (const uint8_t *)&v, sizeof(v));
        break;
    case CP_DT_I32: {
        int32_t i = (int32_t)cp_to_int(v, INT32_MIN, INT32_MAX);
        cp_copy(p, (const uint8_t *)&i, sizeof(i));
        break;
    }
    case CP_DT_U8:
        p[0] = (uint8_t)cp_to_int(v, 0, UINT8_MAX);
        break;
    case CP_DT_I8: {
        int8_t i = (int8_t)cp_to_int(v, INT8_MIN, INT8_MAX);
        cp_copy(p, (const uint8_t *)&i, sizeof(i));
        break;
    }
    default: { /* CP_DT_BOOL, stored as int32 0/1 */
        int32_t i = v != 0.0;
        cp_copy(p, (const uint8_t *)&i, sizeof(i));
        break;
    }
    }
}

/* The slot at p of `dtype` as a channel value. */
static inline double cp_slot_load(const uint8_t *p, uint8_t dtype)
{
    switch (dtype) {
    case CP_DT_F32: {
        float f;
        cp_copy((uint8_t *)&f, p, sizeof(f));
        return (double)f;
    }
    case CP_DT_F64: {
        double d;
        cp_copy((uint8_t *)&d, p, sizeof(d));
        return d;
    }
    case CP_DT_I32: {
        int32_t i;
        cp_copy((uint8_t *)&i, p, sizeof(i));
        return (double)i;
    }
    case CP_DT_U8:
        return (double)p[0];
    case CP_DT_I8: {
        int8_t i;
        cp_copy((uint8_t *)&i, p, sizeof(i));
        return (double)i;
    }
    default: {
        int32_t i;
        cp_copy((uint8_t *)&i, p, sizeof(i));
        return i != 0 ? 1.0 : 0.0;
    }
    }
}

#endif /* COPAPY_SLOT_VALUE_H */
