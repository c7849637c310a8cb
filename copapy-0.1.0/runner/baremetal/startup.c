/* Vector table, reset and fault entry of the bare-metal harness (Cortex-M7 and Cortex-M55).
 *
 * Order at reset matters: the FPU (and MVE) must be enabled before any code that the compiler
 * may have given FP or vector instructions runs, including vpush in a prologue or an MVE
 * auto-vectorised copy loop (GCC 12 vectorises at -O2). So reset_handler and fpu_enable are
 * built general-regs-only, and everything else runs in separate noinline functions after
 * CPACR is set. */
#include <stdint.h>

#include "startup.h"

#define GENERAL_REGS_ONLY __attribute__((target("general-regs-only")))

#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define MPU_CTRL (*(volatile uint32_t *)0xE000ED94u)
#define MPU_RNR (*(volatile uint32_t *)0xE000ED98u)
#define MPU_RBAR (*(volatile uint32_t *)0xE000ED9Cu)
#define MPU_RASR (*(volatile uint32_t *)0xE000EDA0u)

#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
#define HAVE_STACK_LIMIT 1
#else
#define HAVE_STACK_LIMIT 0
#endif

extern uint32_t __data_start[];
extern uint32_t __data_end[];
extern const uint32_t __data_load[];
extern uint32_t __bss_start[];
extern uint32_t __bss_end[];
extern uint32_t __stack_guard[];

void reset_handler(void);
void fault_entry(void);

/* A firmware that uses SysTick or device interrupts defines these; otherwise they are
 * unexpected exceptions like any other (the job harness enables none). */
void systick_handler(void);
void irq_handler(void);
void pendsv_handler(void);

#define IRQ_VECTORS 32
#define IRQ4 irq_handler, irq_handler, irq_handler, irq_handler
/* IRQ 9 (CMSDK TIMER1): the runner firmware's budget timer; it stops a task that runs too
 * long, so it enters like a fault (fault_contain decides what it means) */
#define BUDGET_IRQ 9

typedef struct vector_table {
    uint32_t *initial_sp;
    void (*handler[15])(void); /* reset, NMI, HardFault, ... SysTick */
    void (*irq[IRQ_VECTORS])(void); /* external interrupts 0..31: irq_handler reads IPSR */
} vector_table;

__attribute__((section(".vectors"), used))
static const vector_table vectors = {
    .initial_sp = __stack_top,
    .handler = {
        reset_handler, /* 1 reset */
        fault_entry,   /* 2 NMI */
        fault_entry,   /* 3 HardFault */
        fault_entry,   /* 4 MemManage */
        fault_entry,   /* 5 BusFault */
        fault_entry,   /* 6 UsageFault */
        fault_entry,   /* 7 SecureFault (ARMv8-M) */
        0, 0, 0,       /* 8-10 reserved */
        fault_entry,   /* 11 SVCall */
        fault_entry,   /* 12 DebugMonitor */
        0,             /* 13 reserved */
        pendsv_handler, /* 14 PendSV: the runner firmware's way into a task */
        systick_handler, /* 15 SysTick */
    },
    .irq = {IRQ4, IRQ4, irq_handler, fault_entry, irq_handler, irq_handler, IRQ4, IRQ4, IRQ4,
            IRQ4, IRQ4},
};
_Static_assert(BUDGET_IRQ == 9, "the budget timer's vector is irq[9] above");

/* CP10/CP11 full access: the FPU, and on ARMv8.1-M also MVE. Touches no FP register. */
GENERAL_REGS_ONLY __attribute__((noinline))
static void fpu_enable(void)
{
    SCB_CPACR |= (3u << 20) | (3u << 22);
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

#if !HAVE_STACK_LIMIT
/* ARMv7-M has no stack limit register: a 256-byte no-access MPU region right below the stack
 * turns an overflow into a fault instead of silently overwriting the harness's data. The
 * default memory map stays in force for everything else (PRIVDEFENA), and the MPU is off in
 * the HardFault handler (HFNMIENA = 0). */
GENERAL_REGS_ONLY __attribute__((noinline))
static void stack_guard(void)
{
    MPU_RNR = 0;
    MPU_RBAR = (uint32_t)(uintptr_t)__stack_guard; /* 256-byte aligned by the linker script */
    MPU_RASR = (1u << 28) /* XN */ | (0u << 24) /* AP: no access */ | (7u << 1) /* 2^(7+1) */ |
               1u /* enable */;
    MPU_CTRL = (1u << 2) /* PRIVDEFENA */ | 1u /* ENABLE */;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}
#endif

__attribute__((noinline))
static void init_memory(void)
{
    const uint32_t *src = __data_load;
    for (uint32_t *dst = __data_start; dst < __data_end; dst++) {
        *dst = *src++;
    }
    for (uint32_t *dst = __bss_start; dst < __bss_end; dst++) {
        *dst = 0;
    }
}

__attribute__((noinline, noreturn))
static void call_main(void)
{
    init_memory();
    harness_main();
}

GENERAL_REGS_ONLY __attribute__((noreturn))
void reset_handler(void)
{
#if HAVE_STACK_LIMIT
    /* a stack overflow in loaded code becomes a UsageFault (STKOF) instead of corrupting RAM */
    __asm__ volatile("msr msplim, %0" : : "r"(__stack_limit));
#else
    stack_guard();
#endif
    fpu_enable();
    call_main();
}

/* Weak defaults: a tail branch, so fault_entry sees the exception frame untouched. */
__attribute__((weak, naked))
void systick_handler(void)
{
    __asm__ volatile("b fault_entry");
}

__attribute__((weak, naked))
void irq_handler(void)
{
    __asm__ volatile("b fault_entry");
}

__attribute__((weak, naked))
void pendsv_handler(void)
{
    __asm__ volatile("b fault_entry");
}

/* The job harness contains nothing: every fault is reported. The runner firmware defines its
 * own fault_contain (runner_fw.c). */
GENERAL_REGS_ONLY __attribute__((weak))
uint32_t *fault_contain(uint32_t *frame, uint32_t exc_return)
{
    cancel_lazy_fp();
    fault_report(frame, exc_return);
}

GENERAL_REGS_ONLY void cancel_lazy_fp(void)
{
    /* a pending lazy FP save would go into the (possibly broken) stack of the fault */
    *(volatile uint32_t *)0xE000EF34u &= ~1u; /* FPCCR.LSPACT */
}

/* Every fault and unexpected exception: leave the (possibly broken) stack for a private one
 * and ask fault_contain what to do (with the frame on the stack EXC_RETURN names): NULL returns to the interrupted code as it was (with the
 * original MSP and EXC_RETURN); a frame on the stack of the context to resume is returned
 * into, in handler mode with a basic frame (EXC_RETURN 0xFFFFFFF1). Naked, so no prologue
 * touches the faulting stack; only basic asm is allowed here. */
__attribute__((naked))
void fault_entry(void)
{
    __asm__ volatile(
        "mrs r3, msp\n\t"
        "mov r1, lr\n\t"
        "tst r1, #4\n\t" /* the frame is on the process stack (an unprivileged task) */
        "ite eq\n\t"
        "mrseq r0, msp\n\t"
        "mrsne r0, psp\n\t"
#if HAVE_STACK_LIMIT
        "movs r2, #0\n\t"
        "msr msplim, r2\n\t"
#endif
        "ldr r2, =__fault_stack_top\n\t"
        "mov sp, r2\n\t"
        "push {r1, r3}\n\t"
        "bl fault_contain\n\t"
        "pop {r1, r2}\n\t"
        "cbz r0, 1f\n\t"
        "msr msp, r0\n\t"
        "ldr lr, =0xFFFFFFF1\n\t"
        "bx lr\n\t"
        "1:\n\t"
        "msr msp, r2\n\t"
        "bx r1\n\t"
        ".ltorg\n\t");
}

int barrier_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    (void)ctx;
    (void)base;
    (void)code_len;
    (void)size;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    return 0;
}
