/* Integer bitwise operations and the logical operations on bools (0/1 in the int32 class).
 * Shifts are not in the TriCore subset yet. */
#include "cp_tricore.h"

#define AND_I(d, a, b) and d, a, b
#define OR_I(d, a, b) or d, a, b
#define XOR_I(d, a, b) xor d, a, b
#define INVERT_I(d, a) nor d, a, a
#define LNOT_I(d, a) xor d, a, 1

CP_BINARY(and, i32, i32, AND_I)
CP_BINARY(or, i32, i32, OR_I)
CP_BINARY(xor, i32, i32, XOR_I)
CP_UNARY(invert, i32, i32, INVERT_I)
CP_UNARY(lnot, i32, bool, LNOT_I)
