/* Elementary functions: thin stencils around the deterministic kernels of stencils/math. */
#include "cp_math.h"
#include "cp_stencil.h"
#include "cp_ops.h"
#include "cp_elements.h"

CP_EL_MATH_F(CP_SCALAR, f32, f)
CP_EL_SIGN_F(CP_SCALAR, f32)
CP_EL_MATH_F(CP_SCALAR, f64, )
CP_EL_SIGN_F(CP_SCALAR, f64)
CP_EL_SIGN_I32(CP_SCALAR)
