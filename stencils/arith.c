/* Arithmetic stencils: + - * / and negation, min/max, integer floor division and modulo. */
#include "cp_stencil.h"
#include "cp_ops.h"

CP_BINARY(add, f32, f32, a + b)
CP_BINARY(sub, f32, f32, a - b)
CP_BINARY(mul, f32, f32, a * b)
CP_BINARY(div, f32, f32, a / b)
CP_BINARY(min, f32, f32, cp_min_f32(a, b))
CP_BINARY(max, f32, f32, cp_max_f32(a, b))
CP_UNARY(neg, f32, f32, -a)
CP_UNARY(abs, f32, f32, __builtin_fabsf(a))

CP_BINARY(add, f64, f64, a + b)
CP_BINARY(sub, f64, f64, a - b)
CP_BINARY(mul, f64, f64, a * b)
CP_BINARY(div, f64, f64, a / b)
CP_BINARY(min, f64, f64, cp_min_f64(a, b))
CP_BINARY(max, f64, f64, cp_max_f64(a, b))
CP_UNARY(neg, f64, f64, -a)
CP_UNARY(abs, f64, f64, __builtin_fabs(a))

CP_BINARY(add, i32, i32, cp_wrap_add(a, b))
CP_BINARY(sub, i32, i32, cp_wrap_sub(a, b))
CP_BINARY(mul, i32, i32, cp_wrap_mul(a, b))
CP_BINARY(floordiv, i32, i32, cp_floordiv_i32(a, b))
CP_BINARY(mod, i32, i32, cp_mod_i32(a, b))
CP_BINARY(min, i32, i32, a < b ? a : b)
CP_BINARY(max, i32, i32, a > b ? a : b)
CP_UNARY(neg, i32, i32, cp_wrap_sub(0, a))
CP_UNARY(abs, i32, i32, a < 0 ? cp_wrap_sub(0, a) : a)
