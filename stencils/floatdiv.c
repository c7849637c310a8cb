/* Float floor division, modulo (Python/NumPy sign rule) and power: call the math kernels. */
#include "cp_stencil.h"
#include "cp_ops.h"

CP_BINARY(floordiv, f32, f32, cp_floordiv_f32(a, b))
CP_BINARY(mod, f32, f32, cp_mod_f32(a, b))
CP_BINARY(pow, f32, f32, cp_powf(a, b))
CP_BINARY(atan2, f32, f32, cp_atan2f(a, b))

CP_BINARY(floordiv, f64, f64, cp_floordiv_f64(a, b))
CP_BINARY(mod, f64, f64, cp_mod_f64(a, b))
CP_BINARY(pow, f64, f64, cp_pow(a, b))
CP_BINARY(atan2, f64, f64, cp_atan2(a, b))

CP_BINARY(pow, i32, i32, cp_pow_i32(a, b))
