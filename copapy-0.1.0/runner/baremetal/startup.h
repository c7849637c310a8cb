/* Interfaces between the start-up code (startup.c) and the job interpreter (harness.c). */
#ifndef CP_BAREMETAL_STARTUP_H
#define CP_BAREMETAL_STARTUP_H

#include <stddef.h>
#include <stdint.h>

/* The firmware's main: the job interpreter (harness.c) or the protocol runner (runner_fw.c);
 * never returns. */
_Noreturn void harness_main(void);

/* Called on the fault stack with the exception frame the CPU pushed and EXC_RETURN. */
_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return);

/* Called by fault_entry on the fault stack for every fault, unexpected exception and the
 * budget timer's interrupt: returns NULL to resume the interrupted code unchanged, or a basic
 * exception frame to resume in handler mode (the runner firmware's way back into the task
 * guard), or does not return (fault_report). Weak default: fault_report. Must use no FP
 * register (a lazy FP save may be pending). */
uint32_t *fault_contain(uint32_t *frame, uint32_t exc_return);

/* Cancels a pending lazy FP state preservation (FPCCR.LSPACT) of the current exception. */
void cancel_lazy_fp(void);

/* cp_platform.seal for both firmwares: no MPU and no caches are enabled, so making written
 * code visible to instruction fetch needs only the barriers (with the M7 caches on, this would
 * also need a D-cache clean and an I-cache invalidate by address). */
int barrier_seal(void *ctx, void *base, size_t code_len, size_t size);

/* Linker script symbols (an500.ld, an547.ld). */
extern uint32_t __stack_limit[];
extern uint32_t __stack_top[];

#endif /* CP_BAREMETAL_STARTUP_H */
