/* Host harness for the array stencils (stencils/array.c): defines the data slots as real
 * objects and a cp_next that records the six register values, so that a stencil can be called
 * as an ordinary C function and its effect inspected (tools/array_harness/harness.py).
 *
 * cp_stencil.h declares the slots and cp_next with hidden visibility, which the linker keeps
 * for their definitions here too, so Python reaches them through cp_harness_slot() and
 * cp_harness_regs(); the stencils themselves are exported. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cp_array.h"

#ifndef CP_HARNESS_CAP
#define CP_HARNESS_CAP 65536
#endif

float cp_va_f32[CP_HARNESS_CAP], cp_vb_f32[CP_HARNESS_CAP], cp_vc_f32[CP_HARNESS_CAP];
double cp_va_f64[CP_HARNESS_CAP], cp_vb_f64[CP_HARNESS_CAP], cp_vc_f64[CP_HARNESS_CAP];
int32_t cp_va_i32[CP_HARNESS_CAP], cp_vb_i32[CP_HARNESS_CAP], cp_vc_i32[CP_HARNESS_CAP];

/* The out arrays are their own objects, or with CP_HARNESS_ALIAS_OUT=a (b, c) the very same
 * memory as the a (b, c) arrays: the in-place case the compiler may produce by binding one slot
 * to two roles, which the stencils (compiled assuming distinct objects) must survive. */
#define CP_PASTE3(x, y, z) x##y##z
#define CP_ALIAS_OF(role, T) CP_STR(CP_PASTE3(cp_v, role, _##T))
#define CP_STR(x) CP_STR_(x)
#define CP_STR_(x) #x
#ifdef CP_HARNESS_ALIAS_OUT
extern float cp_vout_f32[CP_HARNESS_CAP] __attribute__((alias(CP_ALIAS_OF(CP_HARNESS_ALIAS_OUT, f32))));
extern double cp_vout_f64[CP_HARNESS_CAP] __attribute__((alias(CP_ALIAS_OF(CP_HARNESS_ALIAS_OUT, f64))));
extern int32_t cp_vout_i32[CP_HARNESS_CAP] __attribute__((alias(CP_ALIAS_OF(CP_HARNESS_ALIAS_OUT, i32))));
#else
float cp_vout_f32[CP_HARNESS_CAP];
double cp_vout_f64[CP_HARNESS_CAP];
int32_t cp_vout_i32[CP_HARNESS_CAP];
#endif
float cp_a_f32, cp_b_f32, cp_c_f32, cp_out_f32;
double cp_a_f64, cp_b_f64, cp_c_f64, cp_out_f64;
int32_t cp_a_i32, cp_b_i32, cp_c_i32, cp_out_i32;
int32_t cp_n_i32, cp_k_i32, cp_j_i32;

/* What the last stencil passed to cp_next, and how often cp_next was reached. */
typedef struct cp_harness_state {
    float f0, f1;
    double d0, d1;
    int32_t i0, i1;
    int32_t calls;
} cp_harness_state;

static cp_harness_state state;

/* 1 if the reductions were built in vector registers (cp_array.h, CP_LANE_VECTORS) */
int cp_harness_lane_vectors(void)
{
#if defined(CP_LANE_VECTORS)
    return 1;
#else
    return 0;
#endif
}

CP_CC void cp_next(CP_REGS)
{
    state.f0 = f0;
    state.f1 = f1;
    state.d0 = d0;
    state.d1 = d1;
    state.i0 = i0;
    state.i1 = i1;
    state.calls++;
}

#define SLOT(name) {#name, &name, sizeof name}
#define ARRAY_SLOT(name) {#name, name, CP_HARNESS_CAP * sizeof name[0]}

static const struct {
    const char *name;
    void *addr;
    size_t size;
} slots[] = {
    ARRAY_SLOT(cp_va_f32), ARRAY_SLOT(cp_vb_f32), ARRAY_SLOT(cp_vc_f32), ARRAY_SLOT(cp_vout_f32),
    ARRAY_SLOT(cp_va_f64), ARRAY_SLOT(cp_vb_f64), ARRAY_SLOT(cp_vc_f64), ARRAY_SLOT(cp_vout_f64),
    ARRAY_SLOT(cp_va_i32), ARRAY_SLOT(cp_vb_i32), ARRAY_SLOT(cp_vc_i32), ARRAY_SLOT(cp_vout_i32),
    SLOT(cp_a_f32), SLOT(cp_b_f32), SLOT(cp_c_f32), SLOT(cp_out_f32),
    SLOT(cp_a_f64), SLOT(cp_b_f64), SLOT(cp_c_f64), SLOT(cp_out_f64),
    SLOT(cp_a_i32), SLOT(cp_b_i32), SLOT(cp_c_i32), SLOT(cp_out_i32),
    SLOT(cp_n_i32), SLOT(cp_k_i32), SLOT(cp_j_i32),
};

#pragma GCC visibility push(default)

/* Address of the slot called name (its size in bytes in *size), NULL if there is none. */
void *cp_harness_slot(const char *name, size_t *size)
{
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        if (strcmp(slots[i].name, name) == 0) {
            *size = slots[i].size;
            return slots[i].addr;
        }
    }
    return NULL;
}

cp_harness_state *cp_harness_regs(void)
{
    return &state;
}

#pragma GCC visibility pop
