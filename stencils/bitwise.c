/* Integer bitwise operations and shifts (shift counts outside 0..31 as NumPy defines them),
 * and the logical operations on bools (0/1 in the int32 class). */
#include "cp_stencil.h"
#include "cp_ops.h"

CP_BINARY(and, i32, i32, a & b)
CP_BINARY(or, i32, i32, a | b)
CP_BINARY(xor, i32, i32, a ^ b)
CP_UNARY(invert, i32, i32, ~a)
CP_BINARY(shl, i32, i32, cp_shl_i32(a, b))
CP_BINARY(shr, i32, i32, cp_shr_i32(a, b))
CP_UNARY(lnot, i32, bool, a ^ 1)
