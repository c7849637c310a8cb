/* Conversions between register classes. Float to int truncates, saturates and maps NaN to 0
 * (ftoiz does all three), as cp_f32_to_i32 in C; int to float rounds to nearest. */
#include "cp_tricore.h"

#define TOF32_I(d, a) itof d, a
#define TOI32_F(d, a) ftoiz d, a
#define TOBOOL_I(d, a) ne d, a, 0
#define TOBOOL_F(d, a) mov %d15, 0; cmp.f %d15, a, %d15; extr.u %d15, %d15, 1, 1; xor d, %d15, 1

CP_UNARY(tof32, i32, f32, TOF32_I)
CP_UNARY(toi32, f32, i32, TOI32_F)
CP_UNARY(tobool, f32, bool, TOBOOL_F)
CP_UNARY(tobool, i32, bool, TOBOOL_I)
