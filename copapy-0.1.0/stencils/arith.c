/* Arithmetic stencils: + - * / and negation, min/max, integer floor division and modulo. */
#include "cp_stencil.h"
#include "cp_ops.h"
#include "cp_elements.h"

CP_EL_ARITH_F(CP_SCALAR, f32, f)
CP_EL_ARITH_F(CP_SCALAR, f64, )
CP_EL_ARITH_I32(CP_SCALAR)
