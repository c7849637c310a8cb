/* Comparisons: the result is a bool (0/1) in the int32 register class. */
#include "cp_stencil.h"

#define CP_COMPARISONS(T)                                                                      \
    CP_BINARY(lt, T, bool, a < b)                                                              \
    CP_BINARY(le, T, bool, a <= b)                                                             \
    CP_BINARY(gt, T, bool, a > b)                                                              \
    CP_BINARY(ge, T, bool, a >= b)                                                             \
    CP_BINARY(eq, T, bool, a == b)                                                             \
    CP_BINARY(ne, T, bool, a != b)

CP_COMPARISONS(f32)
CP_COMPARISONS(f64)
CP_COMPARISONS(i32)
