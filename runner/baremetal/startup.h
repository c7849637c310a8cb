/* Interfaces between the start-up code (startup.c) and the job interpreter (harness.c). */
#ifndef CP_BAREMETAL_STARTUP_H
#define CP_BAREMETAL_STARTUP_H

#include <stdint.h>

/* The firmware's main: the job interpreter (harness.c) or the protocol runner (runner_fw.c);
 * never returns. */
_Noreturn void harness_main(void);

/* Called on the fault stack with the exception frame the CPU pushed and EXC_RETURN. */
_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return);

/* Linker script symbols (an500.ld, an547.ld). */
extern uint32_t __stack_limit[];
extern uint32_t __stack_top[];

#endif /* CP_BAREMETAL_STARTUP_H */
