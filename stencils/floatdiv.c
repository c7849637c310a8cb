/* Float floor division, modulo (Python/NumPy sign rule) and power: call the math kernels. */
#include "cp_stencil.h"
#include "cp_ops.h"
#include "cp_elements.h"

CP_EL_FLOATDIV_F(CP_SCALAR, f32, f, lane)
CP_EL_FLOATDIV_F(CP_SCALAR, f64, , num)
CP_EL_FLOATDIV_I32(CP_SCALAR)
