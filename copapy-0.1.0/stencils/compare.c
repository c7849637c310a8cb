/* Comparisons: the result is a bool (0/1) in the int32 register class. */
#include "cp_stencil.h"
#include "cp_elements.h"

CP_EL_COMPARE(CP_SCALAR, f32)
CP_EL_COMPARE(CP_SCALAR, f64)
CP_EL_COMPARE(CP_SCALAR, i32)
