/* The budget timer: armed by cpz_guard for each job with its budget (cp_task_budget_ns), it
 * stops a chain that runs longer (CP_FAULT_TIMEOUT) through cpz_guard_abandon. When it
 * expires while the chain is not the interrupted context (the link thread or an interrupt
 * handler runs), it tries again shortly after: a chain is only ever stopped from an exception
 * taken in the tick thread itself.
 *
 *   * CONFIG_COPAPY_BUDGET_DTIMER (qemu's mps2/mps3 boards, chosen copapy,budget-dtimer): a
 *     CMSDK dual timer, one-shot, as a zero-latency interrupt, so it also stops a chain that
 *     runs with interrupts locked (CONFIG_COPAPY_TICK_LOCK_IRQS masks the others);
 *   * else a k_timer (kernel tick resolution, CONFIG_SYS_CLOCK_TICKS_PER_SEC): its expiry runs
 *     in the system timer's interrupt, which a chain with interrupts locked would hold off
 *     (the watchdog then is the last resort). */
#include <zephyr/devicetree.h>
#include <zephyr/irq.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/util.h>

#include "cpz.h"

#define RETRY_NS 50000u /* 50 us */

#if defined(CONFIG_COPAPY_BUDGET_DTIMER)

#define DT_NODE DT_CHOSEN(copapy_budget_dtimer)
#define DT_BASE ((uintptr_t)DT_REG_ADDR(DT_NODE))
#define DT_LOAD (*(volatile uint32_t *)(DT_BASE + 0x00u))
#define DT_CTRL (*(volatile uint32_t *)(DT_BASE + 0x08u))
#define DT_INTCLR (*(volatile uint32_t *)(DT_BASE + 0x0Cu))
/* enable | interrupt enable | 32-bit | one-shot */
#define DT_ONESHOT ((1u << 7) | (1u << 5) | (1u << 1) | (1u << 0))
#define DT_HZ ((uint64_t)CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC) /* PCLK = SYSCLK */

static void dt_start(uint64_t ns)
{
    uint64_t counts = ns * DT_HZ / 1000000000u;
    DT_CTRL = 0u;
    DT_INTCLR = 1u;
    DT_LOAD = counts > 0xffffffffu ? 0xffffffffu : counts == 0 ? 1u : (uint32_t)counts;
    DT_CTRL = DT_ONESHOT;
}

ISR_DIRECT_DECLARE(budget_isr)
{
    DT_CTRL = 0u;
    DT_INTCLR = 1u;
    if (!cpz_guard_abandon(CP_FAULT_TIMEOUT) && cpz_guard_active()) {
        dt_start(RETRY_NS);
    }
    return 0; /* zero latency: no kernel call, no reschedule */
}

void cpz_budget_arm(uint64_t budget_ns)
{
    dt_start(budget_ns);
}

void cpz_budget_disarm(void)
{
    DT_CTRL = 0u;
    DT_INTCLR = 1u;
}

void cpz_budget_init(void)
{
    cpz_budget_disarm();
    IRQ_DIRECT_CONNECT(DT_IRQN(DT_NODE), 0, budget_isr, IRQ_ZERO_LATENCY);
    irq_enable(DT_IRQN(DT_NODE));
}

const char *cpz_budget_source(void)
{
    return "dual timer";
}

#else

static void expiry(struct k_timer *t)
{
    if (!cpz_guard_abandon(CP_FAULT_TIMEOUT) && cpz_guard_active()) {
        k_timer_start(t, K_NSEC(RETRY_NS), K_NO_WAIT);
    }
}

static K_TIMER_DEFINE(budget_timer, expiry, NULL);

void cpz_budget_arm(uint64_t budget_ns)
{
    k_timer_start(&budget_timer, K_NSEC(budget_ns), K_NO_WAIT);
}

void cpz_budget_disarm(void)
{
    k_timer_stop(&budget_timer);
}

void cpz_budget_init(void)
{
}

const char *cpz_budget_source(void)
{
    return "k_timer";
}

#endif
