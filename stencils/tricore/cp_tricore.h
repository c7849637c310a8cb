/* TriCore 1.6.1 (AURIX TC2xx) stencil framework, in assembly: the conventions of
 * stencils/include/cp_stencil.h, written by hand because no TriCore C compiler can be installed
 * (docs/tricore.md). tools/build_tricore_stencils.py runs the C preprocessor over the .S files
 * (clang -E -P -x assembler-with-cpp) and assembles every function on its own with GNU as for
 * TriCore (PyPI nyxstone-tricore-gcc). A function starts at its `.globl` statement.
 *
 * Virtual registers: the TriCore EABI argument registers d4..d7 (TC1.6.1 has no float64):
 *     f0 = %d4, f1 = %d5 (float32), i0 = %d6, i1 = %d7 (int32, and bool as 0/1)
 * Scratch: %d0, %d1, %d2 hold operands a, b, c fetched from their slots (form m); %d3 and %d15
 * are temporaries; %a15 holds a slot's address. Nothing needs saving: the runner calls cp_entry
 * with CALL/CALLI, which saves the upper context (d8-d15, a10-a15) in a context save area, and
 * cp_ret's RET restores it; d0-d7 and a2-a7 are caller-saved. No stencil uses the stack.
 *
 * Data slots cp_<role>_<type> are addressed absolutely:
 *     movh.a %a15, hi:slot          R_TRICORE_HIADJ  ((address + 0x8000) >> 16)
 *     ld.w / st.w [%a15]lo:slot     R_TRICORE_LO2    (low 16 bits, sign-extended by the CPU)
 * Both depend on the load address and are left to the runner's generic patch.
 * Every stencil ends in `j cp_next` (R_TRICORE_24REL), dropped when the next stencil follows.
 *
 * Statements inside one macro are separated by `;` (TriCore gas's statement separator). No `#`
 * comments inside macros: `#` is the preprocessor's stringify operator.
 */
#ifndef CP_TRICORE_H
#define CP_TRICORE_H

#define REG_f32_0 %d4
#define REG_f32_1 %d5
#define REG_i32_0 %d6
#define REG_i32_1 %d7
#define REG_bool_0 %d6
#define REG_bool_1 %d7
#define SLOT_f32(role) cp_##role##_f32
#define SLOT_i32(role) cp_##role##_i32
#define SLOT_bool(role) cp_##role##_i32
#define SCRATCH_a %d0
#define SCRATCH_b %d1
#define SCRATCH_c %d2

/* Operand fetch: forms 0 and 1 are registers already; form m loads the role's slot. */
#define FETCH_0(T, role)
#define FETCH_1(T, role)
#define FETCH_m(T, role) movh.a %a15, hi:SLOT_##T(role); ld.w SCRATCH_##role, [%a15]lo:SLOT_##T(role);
#define OPND_0(T, role) REG_##T##_0
#define OPND_1(T, role) REG_##T##_1
#define OPND_m(T, role) SCRATCH_##role

#define CP_FUNC(name) .globl name; name:
#define CP_NEXT j cp_next;

/* Unary operation: INSN(dst, a) writes the result register. */
#define CP_UN1(op, TI, TO, INSN, D, A)                                                         \
    CP_FUNC(op##_##TI##__##D##_##A)                                                            \
    FETCH_##A(TI, a) INSN(REG_##TO##_##D, OPND_##A(TI, a)); CP_NEXT
#define CP_UNARY(op, TI, TO, INSN)                                                             \
    CP_UN1(op, TI, TO, INSN, 0, 0) CP_UN1(op, TI, TO, INSN, 0, 1) CP_UN1(op, TI, TO, INSN, 0, m) \
    CP_UN1(op, TI, TO, INSN, 1, 0) CP_UN1(op, TI, TO, INSN, 1, 1) CP_UN1(op, TI, TO, INSN, 1, m)

/* Binary operation: INSN(dst, a, b); it may use %d3 and %d15 but must read a and b before it
 * writes dst (dst can be the register of a or b). */
#define CP_BIN1(op, TI, TO, INSN, D, A, B)                                                     \
    CP_FUNC(op##_##TI##__##D##_##A##_##B)                                                      \
    FETCH_##A(TI, a) FETCH_##B(TI, b)                                                          \
    INSN(REG_##TO##_##D, OPND_##A(TI, a), OPND_##B(TI, b)); CP_NEXT
#define CP_BIN_D(op, TI, TO, INSN, D)                                                          \
    CP_BIN1(op, TI, TO, INSN, D, 0, 0) CP_BIN1(op, TI, TO, INSN, D, 0, 1)                      \
    CP_BIN1(op, TI, TO, INSN, D, 0, m) CP_BIN1(op, TI, TO, INSN, D, 1, 0)                      \
    CP_BIN1(op, TI, TO, INSN, D, 1, 1) CP_BIN1(op, TI, TO, INSN, D, 1, m)                      \
    CP_BIN1(op, TI, TO, INSN, D, m, 0) CP_BIN1(op, TI, TO, INSN, D, m, 1)                      \
    CP_BIN1(op, TI, TO, INSN, D, m, m)
#define CP_BINARY(op, TI, TO, INSN) CP_BIN_D(op, TI, TO, INSN, 0) CP_BIN_D(op, TI, TO, INSN, 1)

/* Move: form m loads the slot straight into the destination register. */
#define MOVE_0(T, R) mov R, REG_##T##_0;
#define MOVE_1(T, R) mov R, REG_##T##_1;
#define MOVE_m(T, R) movh.a %a15, hi:SLOT_##T(a); ld.w R, [%a15]lo:SLOT_##T(a);
#define CP_MOV1(T, D, A) CP_FUNC(mov_##T##__##D##_##A) MOVE_##A(T, REG_##T##_##D) CP_NEXT
#define CP_MOVE(T)                                                                             \
    CP_MOV1(T, 0, 0) CP_MOV1(T, 0, 1) CP_MOV1(T, 0, m)                                         \
    CP_MOV1(T, 1, 0) CP_MOV1(T, 1, 1) CP_MOV1(T, 1, m)

/* Store a register (or copy a slot) into the out slot. */
#define CP_ST1(T, A)                                                                           \
    CP_FUNC(store_##T##__m_##A) FETCH_##A(T, a)                                                \
    movh.a %a15, hi:SLOT_##T(out); st.w [%a15]lo:SLOT_##T(out), OPND_##A(T, a); CP_NEXT
#define CP_STORE(T) CP_ST1(T, 0) CP_ST1(T, 1) CP_ST1(T, m)

/* Select: c is the bool condition (int32 class), a and b the values. SEL is one instruction. */
#define CP_SEL1(T, D, C, A, B)                                                                 \
    CP_FUNC(where_##T##__##D##_##C##_##A##_##B)                                                \
    FETCH_##C(i32, c) FETCH_##A(T, a) FETCH_##B(T, b)                                          \
    sel REG_##T##_##D, OPND_##C(i32, c), OPND_##A(T, a), OPND_##B(T, b); CP_NEXT
#define CP_SEL_AB(T, D, C, A) CP_SEL1(T, D, C, A, 0) CP_SEL1(T, D, C, A, 1) CP_SEL1(T, D, C, A, m)
#define CP_SEL_C(T, D, C) CP_SEL_AB(T, D, C, 0) CP_SEL_AB(T, D, C, 1) CP_SEL_AB(T, D, C, m)
#define CP_SEL_D(T, D) CP_SEL_C(T, D, 0) CP_SEL_C(T, D, 1) CP_SEL_C(T, D, m)
#define CP_SELECT(T) CP_SEL_D(T, 0) CP_SEL_D(T, 1)

#endif /* CP_TRICORE_H */
