/* The Zephyr platform layer of the copapy runner: what main.c wires into the runner core's
 * protocol server (runner/include/copapy/server.h). Each part lives in its own file:
 *
 *   link.c      the transport: a UART-API device (USB CDC ACM or a UART), IRQ-driven RX/TX
 *               rings; read and written by the link thread only
 *   usb_shim.c  USB device stack bring-up (legacy 3.x stack or USB_DEVICE_STACK_NEXT)
 *   ticker.c    the tick source (counter alarm or k_timer) and the tick thread, the time base
 *   codemem.c   the program slots (ITCM or a devicetree memory node) and sealing them
 *   io.c        copapy channels -> devicetree copapy,io (GPIO, PWM, QDEC, ADC) or simulated
 *   guard.c     fault containment: the chains' guard, Zephyr's fault entries wrapped
 *   userjob.c   user mode (CONFIG_COPAPY_USERSPACE): the jobs in a user thread, MPU-confined
 *   budget.c    the budget timer that stops a chain running past its budget
 *   watchdog.c  the hardware watchdog (watchdog0), the last resort
 *   fault.c     faults outside a guarded chain: report, reboot
 *
 * Contexts (docs/zephyr.md): the link thread is the server's protocol context, the tick
 * thread its tick context; both preemptive, the link thread the more urgent, so overload (the
 * chains keep the tick thread busy) cannot starve the link. The server's lock is a mutex the
 * tick thread holds for a whole tick (priority inheritance lifts it while a request waits), so
 * a READ or WRITE lands between two ticks. ISRs only move bytes and give semaphores. */
#ifndef COPAPY_ZEPHYR_CPZ_H
#define COPAPY_ZEPHYR_CPZ_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/server.h"

/* ---- main.c */
extern cp_server cpz_server;

/* ---- link.c */
int cpz_link_init(void);                       /* 0, or a negative errno */
const char *cpz_link_name(void);               /* e.g. "cdc_acm_uart0" */
size_t cpz_link_read(uint8_t *buf, size_t cap); /* what has arrived; never blocks */
void cpz_link_write(void *ctx, const uint8_t *bytes, size_t n); /* the server's write */
int cpz_link_wait(int32_t timeout_ms);         /* 1: woken (RX, events, link change) */
void cpz_link_wake(void);                      /* from any context, ISRs included */
int cpz_link_take_reset(void);                 /* 1 once after the host closed/reopened */

/* ---- usb_shim.c (dev: the link device) */
struct device;
int cpz_usb_start(const struct device *dev);   /* 0, or a negative errno */
int cpz_usb_host_connected(const struct device *dev); /* USB: DTR set; else 1 */

/* ---- ticker.c */
int cpz_ticker_init(void);
uint64_t cpz_clock_ns(void *ctx);              /* monotonic ns since boot */
void cpz_ticker_notify(void *ctx, uint32_t what); /* the server's notify */
void cpz_ticker_rt_stats(void *ctx, cp_server_rt_stats *out);
uint32_t cpz_tick_quantum_ns(void);            /* every tick is a multiple of this */
uint32_t cpz_ticker_busy_ms(void);             /* how long the tick in progress lasts; 0 */
const char *cpz_tick_source(void);             /* "counter gpt@401f0000", "k_timer" */

/* ---- codemem.c */
const cp_platform *cpz_platform(void);
uint8_t *cpz_slot(uint32_t index);             /* index 0 or 1 */
size_t cpz_slot_size(void);
int cpz_in_slots(uint32_t address);            /* 1: inside one of the two slots */

/* ---- io.c */
int cpz_io_init(uint16_t channels[CP_IO_KIND_COUNT], uint8_t *simulated_only);
double cpz_io_read(void *ctx, uint8_t kind, uint16_t channel);
int cpz_io_write(void *ctx, uint8_t kind, uint16_t channel, double value);
const char *cpz_io_check(void *ctx, const cp_io_binding *binding);

/* ---- guard.c: a cp_guard_fn; from an exception taken in the tick thread, stops the guarded
 * chain it interrupted (1) with that fault kind, else 0 */
int cpz_guard(void *ctx, void (*entry)(void), uint64_t budget_ns, cp_fault *fault);
int cpz_guard_abandon(uint32_t kind);
int cpz_guard_active(void);

/* ---- budget.c */
void cpz_budget_init(void);
void cpz_budget_arm(uint64_t budget_ns);
void cpz_budget_disarm(void);
const char *cpz_budget_source(void);

/* ---- bootrec.c: the outputs' safe values kept over a reset */
void cpz_bootrec_update(void);                 /* protocol context, lock held */
uint32_t cpz_bootrec_apply(void);              /* boot: drives them; how many */

/* ---- watchdog.c */
void cpz_watchdog_init(void);
void cpz_watchdog_feed(void);                  /* link thread: unless a tick is stuck */
const char *cpz_watchdog_name(void);

/* ---- userjob.c (CONFIG_COPAPY_USERSPACE): the jobs in a user thread */
void cpz_user_init(void);
int cpz_user_job(void (*entry)(void), uint64_t budget_ns, cp_fault *fault); /* as cpz_guard */
int cpz_user_job_current(void);                /* 1: the job thread is the current thread */
void cpz_user_fault(uint32_t kind, uint32_t code, uint64_t address, uint32_t pc);
int cpz_user_fatal(void);                      /* fatal error path: 1 if it was the job's */

/* ---- codemem.c, user mode: the MPU regions of the program whose code holds entry */
int cpz_user_slot_of(uintptr_t entry, uint32_t *id, uint32_t *gen, uintptr_t *code,
                     size_t *code_size, uintptr_t *data, size_t *data_size);
uintptr_t cpz_user_tables_check(uint32_t id); /* 0, or the first changed byte (restored) */

/* ---- main.c */
const uint8_t *cpz_staging(void);              /* the upload buffer: the image being loaded */

/* ---- fault.c */
void cpz_fault_init(void);

/* ---- the server's lock (main.c): a k_mutex */
void cpz_lock(void *ctx);
void cpz_unlock(void *ctx);

#endif /* COPAPY_ZEPHYR_CPZ_H */
