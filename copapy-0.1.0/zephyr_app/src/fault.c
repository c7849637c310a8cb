/* Faults. A fault in loaded code (or anywhere) ends in Zephyr's fatal error path; this
 * handler reports it on the console and restarts the board, as the bare-metal runner does:
 * after the restart HELLO reports state 0 (no program), and the host learns of it. */
#include <zephyr/fatal.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/reboot.h>

#include "cpz.h"

void k_sys_fatal_error_handler(unsigned int reason, const z_arch_esf_t *esf)
{
    ARG_UNUSED(esf);
#if defined(CONFIG_COPAPY_USERSPACE)
    if (cpz_user_fatal()) {
        return; /* the job thread's: contained (userjob.c), Zephyr aborts the thread */
    }
#endif
    printk("copapy: fatal error %u: restarting\n", reason);
    sys_reboot(SYS_REBOOT_COLD);
}

void cpz_fault_init(void)
{
}
