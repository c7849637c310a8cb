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

/* cp_platform.seal for both firmwares: no MPU and no caches are enabled, so making written
 * code visible to instruction fetch needs only the barriers (with the M7 caches on, this would
 * also need a D-cache clean and an I-cache invalidate by address). */
int barrier_seal(void *ctx, void *base, size_t code_len, size_t size);

/* Linker script symbols (an500.ld, an547.ld). */
extern uint32_t __stack_limit[];
extern uint32_t __stack_top[];

#endif /* CP_BAREMETAL_STARTUP_H */
