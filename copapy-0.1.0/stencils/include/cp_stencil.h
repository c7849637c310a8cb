/* Stencil framework: the register signature every stencil shares and the operand forms.
 *
 * A stencil is a C function with the signature CP_REGS that ends in a guaranteed tail call
 * (musttail) to the external symbol cp_next; the compiler concatenates stencils and turns
 * that call into a jump to the following stencil (or removes it when the next stencil follows
 * directly). The parameters are the "virtual registers" that stay in machine registers across
 * a whole chain: two per register class (float32 f0/f1, float64 d0/d1, int32 and bool i0/i1).
 *
 * Operands come from a register (form 0 or 1) or from a data slot (form m). Data slots are the
 * external objects cp_<role>_<type>; their addresses are patched by the compiler: role a and
 * b are the first and second source, c the third (the condition of a select), out the
 * destination of a store.
 *
 * Naming (parsed by the compiler): <op>_<type>__<dst>_<a>[_<b>[_<c>]] where dst is 0/1 and each
 * operand is 0, 1 or m. The result class is fixed by the operation (comparisons write i0/i1).
 */
#ifndef CP_STENCIL_H
#define CP_STENCIL_H

#include <stdint.h>

/* Everything a stencil refers to is resolved inside the program image: with -fPIC this keeps
 * references PC-relative and direct (no GOT, no PLT), so x86-64 code runs at any address. */
#pragma GCC visibility push(hidden)

#if defined(__i386__) && defined(__clang__)
/* cdecl passes floats on the stack; vectorcall keeps them in XMM registers. The stencil tables
 * are built with clang; GCC (the host module of an i686 wheel, which calls no stencil) has no
 * vectorcall. */
#define CP_CC __attribute__((vectorcall))
#else
#define CP_CC
#endif

#if defined(__TRICORE__)
/* TriCore (docs/tricore.md): the EABI passes non-pointer arguments in d4..d7 only, so the six
 * registers do not fit, and TC1.6.1 has no float64 unit. The chain passes f0 f1 i0 i1 in
 * d4 d5 d6 d7; the float64 registers are an extern placeholder, so that the float64 stencils
 * still compile (the table build drops them: float64 = false). GCC 11 has no musttail: at -O2
 * the final call is a sibling call (j cp_next), and the table build rejects any other. */
#define CP_REGS float f0, float f1, int32_t i0, int32_t i1
#define CP_ARGS f0, f1, i0, i1
#define CP_ZERO_ARGS 0.0f, 0.0f, 0, 0
#define CP_MUSTTAIL
extern double cp_nof64_d0, cp_nof64_d1;
#define REG_f64_0 cp_nof64_d0
#define REG_f64_1 cp_nof64_d1
#else
#define CP_REGS float f0, float f1, double d0, double d1, int32_t i0, int32_t i1
#define CP_ARGS f0, f1, d0, d1, i0, i1
#define CP_ZERO_ARGS 0.0f, 0.0f, 0.0, 0.0, 0, 0
#define CP_MUSTTAIL __attribute__((musttail))
#define REG_f64_0 d0
#define REG_f64_1 d1
#endif
#define CP_STENCIL(name) CP_CC void name(CP_REGS)
#define CP_NEXT() CP_MUSTTAIL return cp_next(CP_ARGS)

extern CP_CC void cp_next(CP_REGS);

extern float cp_a_f32, cp_b_f32, cp_c_f32, cp_out_f32;
extern double cp_a_f64, cp_b_f64, cp_c_f64, cp_out_f64;
extern int32_t cp_a_i32, cp_b_i32, cp_c_i32, cp_out_i32;

/* C types and registers per type; bool lives in the int32 class as 0/1. */
#define CT_f32 float
#define CT_f64 double
#define CT_i32 int32_t
#define CT_bool int32_t
#define REG_f32_0 f0
#define REG_f32_1 f1
#define REG_i32_0 i0
#define REG_i32_1 i1
#define REG_bool_0 i0
#define REG_bool_1 i1
#define SLOT_f32(role) cp_##role##_f32
#define SLOT_f64(role) cp_##role##_f64
#define SLOT_i32(role) cp_##role##_i32
#define SLOT_bool(role) cp_##role##_i32

/* Operand fetch: form 0/1 reads a register, form m reads the slot of the operand's role. */
#define SRC_0(T, role) REG_##T##_0
#define SRC_1(T, role) REG_##T##_1
#define SRC_m(T, role) SLOT_##T(role)
#define SRC(T, F, role) SRC_##F(T, role)

/* One stencil of a unary operation: a is bound to the operand, EXPR gives the result. */
#define CP_UN1(op, TI, TO, EXPR, D, A)                                                         \
    CP_STENCIL(op##_##TI##__##D##_##A)                                                         \
    {                                                                                          \
        const CT_##TI a = SRC(TI, A, a);                                                       \
        REG_##TO##_##D = (CT_##TO)(EXPR);                                                      \
        CP_NEXT();                                                                             \
    }

#define CP_UNARY(op, TI, TO, EXPR)                                                             \
    CP_UN1(op, TI, TO, EXPR, 0, 0) CP_UN1(op, TI, TO, EXPR, 0, 1) CP_UN1(op, TI, TO, EXPR, 0, m) \
    CP_UN1(op, TI, TO, EXPR, 1, 0) CP_UN1(op, TI, TO, EXPR, 1, 1) CP_UN1(op, TI, TO, EXPR, 1, m)

/* One stencil of a binary operation: a and b bound to the operands. */
#define CP_BIN1(op, TI, TO, EXPR, D, A, B)                                                     \
    CP_STENCIL(op##_##TI##__##D##_##A##_##B)                                                   \
    {                                                                                          \
        const CT_##TI a = SRC(TI, A, a);                                                       \
        const CT_##TI b = SRC(TI, B, b);                                                       \
        REG_##TO##_##D = (CT_##TO)(EXPR);                                                      \
        CP_NEXT();                                                                             \
    }

#define CP_BIN_D(op, TI, TO, EXPR, D)                                                          \
    CP_BIN1(op, TI, TO, EXPR, D, 0, 0) CP_BIN1(op, TI, TO, EXPR, D, 0, 1)                      \
    CP_BIN1(op, TI, TO, EXPR, D, 0, m) CP_BIN1(op, TI, TO, EXPR, D, 1, 0)                      \
    CP_BIN1(op, TI, TO, EXPR, D, 1, 1) CP_BIN1(op, TI, TO, EXPR, D, 1, m)                      \
    CP_BIN1(op, TI, TO, EXPR, D, m, 0) CP_BIN1(op, TI, TO, EXPR, D, m, 1)                      \
    CP_BIN1(op, TI, TO, EXPR, D, m, m)

#define CP_BINARY(op, TI, TO, EXPR) CP_BIN_D(op, TI, TO, EXPR, 0) CP_BIN_D(op, TI, TO, EXPR, 1)

/* A line of cp_elements.h as the scalar stencils of every register form. */
#define CP_SCALAR(arity, op, TI, TO, kind, EXPR) CP_SCALAR_##arity(op, TI, TO, EXPR)
#define CP_SCALAR_1 CP_UNARY
#define CP_SCALAR_2 CP_BINARY

/* Select: c is the bool condition (int32 class), a and b the two values of type T. */
#define CP_SEL1(T, D, C, A, B)                                                                 \
    CP_STENCIL(where_##T##__##D##_##C##_##A##_##B)                                             \
    {                                                                                          \
        const int32_t c = SRC(i32, C, c);                                                      \
        const CT_##T a = SRC(T, A, a);                                                         \
        const CT_##T b = SRC(T, B, b);                                                         \
        REG_##T##_##D = c ? a : b;                                                             \
        CP_NEXT();                                                                             \
    }

#define CP_SEL_AB(T, D, C, A)                                                                  \
    CP_SEL1(T, D, C, A, 0) CP_SEL1(T, D, C, A, 1) CP_SEL1(T, D, C, A, m)
#define CP_SEL_C(T, D, C) CP_SEL_AB(T, D, C, 0) CP_SEL_AB(T, D, C, 1) CP_SEL_AB(T, D, C, m)
#define CP_SEL_D(T, D) CP_SEL_C(T, D, 0) CP_SEL_C(T, D, 1) CP_SEL_C(T, D, m)
#define CP_SELECT(T) CP_SEL_D(T, 0) CP_SEL_D(T, 1)

/* Store a register (or copy a slot) into the out slot. */
#define CP_ST1(T, A)                                                                           \
    CP_STENCIL(store_##T##__m_##A)                                                               \
    {                                                                                          \
        SLOT_##T(out) = SRC(T, A, a);                                                          \
        CP_NEXT();                                                                             \
    }
#define CP_STORE(T) CP_ST1(T, 0) CP_ST1(T, 1) CP_ST1(T, m)

#pragma GCC visibility pop

#endif /* CP_STENCIL_H */
