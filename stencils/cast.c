/* Conversions between register classes. Float to int saturates and maps NaN to 0 (C leaves
 * out-of-range conversions undefined; we define them). */
#include "cp_stencil.h"
#include "cp_ops.h"

CP_UNARY(tof64, f32, f64, (double)a)
CP_UNARY(tof32, f64, f32, (float)a)
CP_UNARY(tof32, i32, f32, (float)a)
CP_UNARY(tof64, i32, f64, (double)a)
CP_UNARY(toi32, f32, i32, cp_f32_to_i32(a))
CP_UNARY(toi32, f64, i32, cp_f64_to_i32(a))
CP_UNARY(tobool, f32, bool, a != 0.0f)
CP_UNARY(tobool, f64, bool, a != 0.0)
CP_UNARY(tobool, i32, bool, a != 0)
