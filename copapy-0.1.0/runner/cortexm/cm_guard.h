/* What the two Cortex-M platform layers' fault containment shares (runner/baremetal/runner_fw.c
 * and zephyr_app/src/guard.c): the guard's register save and restore around a chain, the SCB
 * fault registers, and the fault address a CFSR makes valid. Header-only (static): each layer
 * keeps its own guard state. ARMv7-M / ARMv8-M Mainline with an FPU (d8-d15). */
#ifndef COPAPY_CM_GUARD_H
#define COPAPY_CM_GUARD_H

#include <stdint.h>

#include "copapy/runner.h"

#define CM_REG(addr) (*(volatile uint32_t *)(addr))
#define CM_SCB_ICSR CM_REG(0xE000ED04u)
#define CM_SCB_SHCSR CM_REG(0xE000ED24u)
#define CM_SCB_CFSR CM_REG(0xE000ED28u)
#define CM_SCB_HFSR CM_REG(0xE000ED2Cu)
#define CM_SCB_MMFAR CM_REG(0xE000ED34u)
#define CM_SCB_BFAR CM_REG(0xE000ED38u)
#define CM_CFSR_MMARVALID (1u << 7)
#define CM_CFSR_BFARVALID (1u << 15)

/* r4-r11, sp, lr, then d8-d15: what a chain may have changed that its caller relies on */
typedef struct cm_jmp {
    uint32_t r[10];
    uint64_t d[8];
} cm_jmp;

/* r[8]: the stack pointer cm_setjmp saw */
#define CM_JMP_SP(j) ((j)->r[8])

__attribute__((naked, returns_twice, unused)) static int cm_setjmp(cm_jmp *j)
{
    (void)j;
    __asm__ volatile("mov r1, sp\n\t"
                     "stmia r0!, {r4-r11}\n\t"
                     "str r1, [r0], #4\n\t"
                     "str lr, [r0], #4\n\t"
                     "vstmia r0, {d8-d15}\n\t"
                     "movs r0, #0\n\t"
                     "bx lr\n\t");
}

__attribute__((naked, noreturn, unused)) static void cm_longjmp(const cm_jmp *j)
{
    (void)j;
    __asm__ volatile("ldmia r0!, {r4-r11}\n\t"
                     "ldr r2, [r0], #4\n\t"
                     "ldr lr, [r0], #4\n\t"
                     "vldmia r0, {d8-d15}\n\t"
                     "mov sp, r2\n\t"
                     "movs r0, #1\n\t"
                     "bx lr\n\t");
}

/* The faulting address of a MemManage or BusFault when the CFSR says it is valid, else 0. */
__attribute__((target("general-regs-only"), unused))
static uint64_t cm_fault_address(uint32_t kind, uint32_t cfsr)
{
    if (kind == CP_FAULT_MEMMANAGE && (cfsr & CM_CFSR_MMARVALID) != 0) {
        return CM_SCB_MMFAR;
    }
    if (kind == CP_FAULT_BUSFAULT && (cfsr & CM_CFSR_BFARVALID) != 0) {
        return CM_SCB_BFAR;
    }
    return 0;
}

/* Clears the fault status the handler read (write one to clear). */
__attribute__((target("general-regs-only"), unused))
static void cm_fault_clear(uint32_t cfsr, uint32_t hfsr)
{
    CM_SCB_CFSR = cfsr;
    CM_SCB_HFSR = hfsr;
}

#endif
