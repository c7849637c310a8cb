/* Fault containment for the chains (docs/zephyr.md, "Safety"): cpz_guard is the cp_guard_fn
 * the core's scheduler runs every chain in. It saves the registers the tick thread relies on
 * (r4-r11, sp, lr, d8-d15, PRIMASK, BASEPRI); whatever stops a guarded chain abandons it by
 * rewriting the tick thread's stacked exception frame so that the exception returns, in the
 * tick thread, into guard_resume, which restores them: the guard returns the fault, the core
 * puts the program into FAULTED with safe outputs, and the tick ends normally. What stops a
 * chain (each an exception taken from the tick thread in thread mode):
 *
 *   * a CPU fault: Zephyr's z_arm_fault, wrapped at link time (--wrap, CMakeLists.txt): a
 *     fault of a guarded chain is contained here, any other goes on to Zephyr's fatal error
 *     path (fault.c: report, reboot);
 *   * SVC: Zephyr's SVC handler takes it (thread mode, no escalation), its oops path
 *     z_do_kernel_oops is wrapped the same way; reported as HardFault, code 0, the kind the
 *     bare-metal firmware reports for it (there it escalates);
 *   * the budget timer (budget.c) and the watchdog's warning (watchdog.c), through
 *     cpz_guard_abandon.
 *
 * User mode (CONFIG_COPAPY_USERSPACE): the chains run in userjob.c's job thread instead; its
 * faults and refused SVCs are recorded here (cpz_user_fault) and end in Zephyr's fatal error
 * path, which aborts that thread (fault.c, userjob.c).
 *
 * No FP register is used on these paths (general-regs-only): a lazy FP save may be pending. */
#include <zephyr/kernel.h>
#include <zephyr/sys/util.h>

#include "cm_guard.h"
#include "cpz.h"

#define ICSR_VECTACTIVE 0x1FFu
/* stacking, unstacking and lazy FP state preservation errors: the frame is not to be trusted */
#define CFSR_STACK_ERRORS ((1u << 3) | (1u << 4) | (1u << 5) | (1u << 11) | (1u << 12) | \
                           (1u << 13))
#define CPZ_EXC_THREAD_PSP 0xCu

static cm_jmp env;
static volatile uint32_t active;  /* a guarded chain runs in the tick thread */
static k_tid_t guarded_thread;    /* the thread that runs the chains */
static cp_fault caught;           /* filled where the chain was stopped */
static uint32_t saved_primask, saved_basepri;

/* Where an abandoned chain resumes: in the tick thread, back into cpz_guard. */
__attribute__((noreturn)) static void guard_resume(void)
{
    cm_longjmp(&env);
}

int cpz_guard(void *ctx, void (*entry)(void), uint64_t budget_ns, cp_fault *fault)
{
    ARG_UNUSED(ctx);
#if defined(CONFIG_COPAPY_USERSPACE)
    return cpz_user_job(entry, budget_ns, fault); /* userjob.c */
#endif
    if (cm_setjmp(&env) != 0) {
        cpz_budget_disarm();
        /* a chain may have masked interrupts (cpsid i, basepri) before it was stopped */
        __asm__ volatile("msr basepri, %0" : : "r"(saved_basepri) : "memory");
        __asm__ volatile("msr primask, %0" : : "r"(saved_primask) : "memory");
        fault->kind = caught.kind;
        fault->address = caught.address;
        fault->pc = caught.pc;
        fault->code = caught.code;
        return 1;
    }
    __asm__ volatile("mrs %0, primask" : "=r"(saved_primask));
    __asm__ volatile("mrs %0, basepri" : "=r"(saved_basepri));
    guarded_thread = k_current_get();
    if (budget_ns != 0) {
        cpz_budget_arm(budget_ns);
    }
    __asm__ volatile("" ::: "memory");
    active = 1;
    entry();
    active = 0;
    __asm__ volatile("" ::: "memory");
    if (budget_ns != 0) {
        cpz_budget_disarm();
    }
    return 0;
}

/* A guarded chain runs in the thread that is current (the exception interrupted it, or an
 * interrupt handler that did). */
__attribute__((target("general-regs-only"))) static int chain_is_current(void)
{
    return active && k_current_get() == guarded_thread;
}

/* Stops the chain whose exception frame is `frame`: the exception returns into guard_resume. */
__attribute__((target("general-regs-only"))) static void abandon(uint32_t *frame, uint32_t kind,
                                                                 uint32_t code, uint64_t address)
{
    caught.kind = kind;
    caught.code = code;
    caught.address = address;
    caught.pc = frame[6];
    active = 0;
    frame[6] = (uint32_t)(uintptr_t)guard_resume & ~1u;
    frame[7] = 0x01000000u; /* Thumb, thread mode, no IT state */
}

int cpz_guard_active(void)
{
    return active != 0;
}

/* From an interrupt: the thread's stacked frame is at PSP (thread mode always runs on PSP under
 * Zephyr, handlers on MSP) whether the interrupt took it from the chain or from a handler that
 * did; it belongs to the chain if its PC lies in a program slot (a context switch in progress,
 * with PSP not yet the current thread's, fails that test). ICSR.RETTOBASE would say so more
 * directly, but Renode does not model it. */
__attribute__((target("general-regs-only"))) int cpz_guard_abandon(uint32_t kind)
{
    if (!chain_is_current()) {
        return 0;
    }
    uint32_t *frame;
    __asm__ volatile("mrs %0, psp" : "=r"(frame));
    if (!cpz_in_slots(frame[6])) {
        return 0;
    }
    abandon(frame, kind, 0, 0);
    return 1;
}

/* ---- Zephyr's fault entries, wrapped (CMakeLists.txt: -Wl,--wrap=...) */

void __real_z_arm_fault(uint32_t msp, uint32_t psp, uint32_t exc_return, void *callee_regs);
void __wrap_z_arm_fault(uint32_t msp, uint32_t psp, uint32_t exc_return, void *callee_regs);
void __real_z_do_kernel_oops(const void *esf, void *callee_regs);
void __wrap_z_do_kernel_oops(const void *esf, void *callee_regs);

/* exception number 3..6 -> fault kind */
static const uint32_t fault_kinds[4] = {CP_FAULT_HARDFAULT, CP_FAULT_MEMMANAGE,
                                        CP_FAULT_BUSFAULT, CP_FAULT_USAGEFAULT};

__attribute__((target("general-regs-only")))
void __wrap_z_arm_fault(uint32_t msp, uint32_t psp, uint32_t exc_return, void *callee_regs)
{
    uint32_t cfsr = CM_SCB_CFSR, hfsr = CM_SCB_HFSR;
    uint32_t vect = CM_SCB_ICSR & ICSR_VECTACTIVE;
#if defined(CONFIG_COPAPY_USERSPACE)
    /* a fault of the job thread (userjob.c): recorded, then Zephyr's path ends the thread */
    if ((exc_return & CPZ_EXC_THREAD_PSP) == CPZ_EXC_THREAD_PSP && cpz_user_job_current() &&
        vect >= 3u && vect <= 6u) {
        uint32_t ukind = fault_kinds[vect - 3u];
        cpz_user_fault(ukind, ukind == CP_FAULT_HARDFAULT ? cfsr | hfsr : cfsr,
                       cm_fault_address(ukind, cfsr), ((const uint32_t *)(uintptr_t)psp)[6]);
    }
#endif
    /* taken from thread mode (EXC_RETURN), in the thread that runs the guarded chain */
    if ((exc_return & CPZ_EXC_THREAD_PSP) != CPZ_EXC_THREAD_PSP || !chain_is_current() ||
        (cfsr & CFSR_STACK_ERRORS) != 0 || vect < 3u || vect > 6u) {
        __real_z_arm_fault(msp, psp, exc_return, callee_regs);
        return;
    }
    uint32_t kind = fault_kinds[vect - 3u];
    uint64_t address = cm_fault_address(kind, cfsr);
    cm_fault_clear(cfsr, hfsr);
    abandon((uint32_t *)(uintptr_t)psp, kind, kind == CP_FAULT_HARDFAULT ? cfsr | hfsr : cfsr,
            address);
}

__attribute__((target("general-regs-only")))
void __wrap_z_do_kernel_oops(const void *esf, void *callee_regs)
{
    uint32_t psp;
    __asm__ volatile("mrs %0, psp" : "=r"(psp));
    const uint32_t *frame = esf;
#if defined(CONFIG_COPAPY_USERSPACE)
    if ((uintptr_t)esf == psp && cpz_user_job_current()) {
        cpz_user_fault(CP_FAULT_HARDFAULT, 0, 0, frame[6]); /* an SVC the kernel refused */
    }
#endif
    if ((uintptr_t)esf != psp || !chain_is_current() || !cpz_in_slots(frame[6])) {
        __real_z_do_kernel_oops(esf, callee_regs);
        return;
    }
    abandon((uint32_t *)(uintptr_t)psp, CP_FAULT_HARDFAULT, 0, 0);
}
