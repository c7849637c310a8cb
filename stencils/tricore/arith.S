/* Arithmetic: float32 + - * / (IEEE single, round to nearest; the TC1.6.1 FPU flushes
 * subnormal inputs and results to zero, see docs/tricore.md), negation and abs as sign-bit
 * operations, NumPy min/max; int32 wrapping arithmetic. */
#include "cp_tricore.h"

#define ADD_F(d, a, b) add.f d, a, b
#define SUB_F(d, a, b) sub.f d, a, b
#define MUL_F(d, a, b) mul.f d, a, b
#define DIV_F(d, a, b) div.f d, a, b
/* insn.t: bit 31 of d = NOT bit 31 of a (the sign flips, NaN payloads stay) */
#define NEG_F(d, a) insn.t d, a, 31, a, 31
#define ABS_F(d, a) insert d, a, 0, 31, 1
/* cmp.f result bits: 0 a<b, 1 a==b, 2 a>b, 3 unordered. NumPy minimum/maximum:
 * a NaN in a gives a, else a<b ? a : b (a NaN in b gives b). */
#define MIN_F(d, a, b) cmp.f %d15, a, b; cmp.f %d3, a, a; or.t %d15, %d15, 0, %d3, 3; sel d, %d15, a, b
#define MAX_F(d, a, b) cmp.f %d15, a, b; cmp.f %d3, a, a; or.t %d15, %d15, 2, %d3, 3; sel d, %d15, a, b

CP_BINARY(add, f32, f32, ADD_F)
CP_BINARY(sub, f32, f32, SUB_F)
CP_BINARY(mul, f32, f32, MUL_F)
CP_BINARY(div, f32, f32, DIV_F)
CP_BINARY(min, f32, f32, MIN_F)
CP_BINARY(max, f32, f32, MAX_F)
CP_UNARY(neg, f32, f32, NEG_F)
CP_UNARY(abs, f32, f32, ABS_F)

/* int32: add/sub/mul keep the low 32 bits (wrap); abs of INT32_MIN is INT32_MIN (abs, not
 * the saturating abss), as cp_wrap_sub(0, a) in C. */
#define ADD_I(d, a, b) add d, a, b
#define SUB_I(d, a, b) sub d, a, b
#define MUL_I(d, a, b) mul d, a, b
#define MIN_I(d, a, b) min d, a, b
#define MAX_I(d, a, b) max d, a, b
#define NEG_I(d, a) rsub d, a, 0
#define ABS_I(d, a) abs d, a

CP_BINARY(add, i32, i32, ADD_I)
CP_BINARY(sub, i32, i32, SUB_I)
CP_BINARY(mul, i32, i32, MUL_I)
CP_BINARY(min, i32, i32, MIN_I)
CP_BINARY(max, i32, i32, MAX_I)
CP_UNARY(neg, i32, i32, NEG_I)
CP_UNARY(abs, i32, i32, ABS_I)
