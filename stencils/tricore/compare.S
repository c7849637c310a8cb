/* Comparisons: the result is a bool (0/1) in the int32 register class. */
#include "cp_tricore.h"

/* cmp.f result bits: 0 a<b, 1 a==b, 2 a>b, 3 unordered (a NaN: every comparison but != is
 * false). */
#define LT_F(d, a, b) cmp.f %d15, a, b; extr.u d, %d15, 0, 1
#define EQ_F(d, a, b) cmp.f %d15, a, b; extr.u d, %d15, 1, 1
#define GT_F(d, a, b) cmp.f %d15, a, b; extr.u d, %d15, 2, 1
#define LE_F(d, a, b) cmp.f %d15, a, b; and %d15, %d15, 3; ne d, %d15, 0
#define GE_F(d, a, b) cmp.f %d15, a, b; and %d15, %d15, 6; ne d, %d15, 0
#define NE_F(d, a, b) cmp.f %d15, a, b; extr.u %d15, %d15, 1, 1; xor d, %d15, 1

CP_BINARY(lt, f32, bool, LT_F)
CP_BINARY(le, f32, bool, LE_F)
CP_BINARY(gt, f32, bool, GT_F)
CP_BINARY(ge, f32, bool, GE_F)
CP_BINARY(eq, f32, bool, EQ_F)
CP_BINARY(ne, f32, bool, NE_F)

#define LT_I(d, a, b) lt d, a, b
#define LE_I(d, a, b) ge d, b, a
#define GT_I(d, a, b) lt d, b, a
#define GE_I(d, a, b) ge d, a, b
#define EQ_I(d, a, b) eq d, a, b
#define NE_I(d, a, b) ne d, a, b

CP_BINARY(lt, i32, bool, LT_I)
CP_BINARY(le, i32, bool, LE_I)
CP_BINARY(gt, i32, bool, GT_I)
CP_BINARY(ge, i32, bool, GE_I)
CP_BINARY(eq, i32, bool, EQ_I)
CP_BINARY(ne, i32, bool, NE_I)
