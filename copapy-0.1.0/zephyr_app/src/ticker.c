/* Ticks: the tick thread runs the scheduler on an absolute deadline grid (the catch-up rule of
 * docs/protocol.md, shared with the host runner and the bare-metal firmware through
 * cp_server_catch_up). What wakes it:
 *   * CONFIG_COPAPY_TICK_COUNTER: a hardware counter's compare alarm (teensy41: GPT2 at
 *     25 MHz), set to each next deadline; the counter is also the time base of the grid and
 *     of the release jitter, so wake-ups and deadlines share one clock. A counter that is
 *     not ready at start-up (Renode does not model GPT2) falls back to the k_timer;
 *   * CONFIG_COPAPY_TICK_CMSDK: qemu's CMSDK APB timers, one free-running as the time base, one
 *     reloaded with the delay to each deadline (the bare-metal runner's time base);
 *   * CONFIG_COPAPY_TICK_KTIMER (or the fallback): a periodic k_timer on the kernel tick grid (every program tick
 *     is a multiple of the kernel tick), its first expiry an absolute kernel tick; the time
 *     base is the 64-bit cycle counter, whose kernel tick boundaries are the grid. (Re-arming
 *     a one-shot timer every tick made Zephyr 3.4's tickless SysTick under qemu lose track of
 *     time: the cycle counter jumped by seconds.)
 * Either way an ISR only gives a semaphore; the thread takes the server's lock for the whole
 * catch-up, so READ/WRITE land between ticks. It is less urgent than the link thread, which
 * overload therefore cannot starve (cpz.h). */
#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/counter.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/util.h>

#include "cpz.h"

#define MAX_CATCHUP 16u

BUILD_ASSERT(CONFIG_COPAPY_LINK_PRIORITY < CONFIG_COPAPY_TICK_PRIORITY,
             "the link thread must be more urgent than the tick thread");
#define NS_PER_S 1000000000ull

static K_SEM_DEFINE(tick_sem, 0, 1);
static K_THREAD_STACK_DEFINE(tick_stack, CONFIG_COPAPY_TICK_STACK_SIZE);
static struct k_thread tick_thread;

static struct {
    uint8_t armed;       /* running, grid set up */
    uint64_t deadline;   /* next deadline, time-base units */
    uint64_t tick_units; /* the program's tick in time-base units */
    uint64_t margin;
} tk;

static cp_jitter_hist hist;
static uint32_t late_ticks;
static uint32_t busy_since; /* k_uptime_get_32() + 1 at the start of the tick in progress; 0 */

uint32_t cpz_ticker_busy_ms(void)
{
    uint32_t since = __atomic_load_n(&busy_since, __ATOMIC_RELAXED);
    return since == 0 ? 0u : k_uptime_get_32() + 1u - since;
}

uint64_t cpz_clock_ns(void *ctx)
{
    ARG_UNUSED(ctx);
    return k_cyc_to_ns_floor64(k_cycle_get_64());
}

void cpz_ticker_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    ARG_UNUSED(ctx);
    cp_jitter_rt_stats(out, &hist, &late_ticks);
}

#if defined(CONFIG_COPAPY_TICK_COUNTER) || defined(CONFIG_COPAPY_TICK_CMSDK)
static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}
#endif

/* ---- k_timer (always available: the fallback when the counter is not ready) */

static void timer_expiry(struct k_timer *t)
{
    ARG_UNUSED(t);
    k_sem_give(&tick_sem);
}

static K_TIMER_DEFINE(tick_timer, timer_expiry, NULL);

static uint64_t ktimer_now_units(void)
{
    return k_cycle_get_64();
}

static uint64_t ktimer_units_to_ns(uint64_t u)
{
    return k_cyc_to_ns_floor64(u);
}

static uint64_t cycles_per_ktick(void)
{
    return (uint64_t)sys_clock_hw_cycles_per_sec() / CONFIG_SYS_CLOCK_TICKS_PER_SEC;
}

/* Lock held: a one-shot k_timer at the kernel tick of tk.deadline (deadlines are whole
 * kernel ticks); one already past wakes the thread at once. */
static void ktimer_arm_next(void)
{
    /* periodic: the timer re-arms itself on the same kernel tick grid (no drift) */
}

static void ktimer_source_start(uint64_t tick_ns)
{
    uint64_t cpk = cycles_per_ktick();
    tk.tick_units = tick_ns * (uint64_t)sys_clock_hw_cycles_per_sec() / NS_PER_S;
    tk.margin = cpk / 2u;
    /* the first deadline one tick after the next kernel tick boundary, then every tick (the
     * kernel's periodic timeouts are added to the previous expiry, not to the wake-up) */
    tk.deadline = (ktimer_now_units() / cpk + 1u) * cpk + tk.tick_units;
    k_timer_start(&tick_timer, K_TIMEOUT_ABS_TICKS(tk.deadline / cpk), K_NSEC(tick_ns));
}

static void ktimer_source_stop(void)
{
    k_timer_stop(&tick_timer);
}

static uint32_t ktimer_tick_quantum_ns(void)
{
    return (uint32_t)(NS_PER_S / CONFIG_SYS_CLOCK_TICKS_PER_SEC);
}

static const char *ktimer_tick_source(void)
{
    return "k_timer";
}

#if defined(CONFIG_COPAPY_TICK_COUNTER)
/* ---- counter alarms */

#define COUNTER_NODE DT_CHOSEN(copapy_tick_counter)
static const struct device *const counter = DEVICE_DT_GET(COUNTER_NODE);
static uint32_t counter_hz;
static uint32_t tb_last;
static uint64_t tb_high;

/* The counter extended to 64 bits; read at least once per wrap while running (every tick). */
static uint64_t counter_now_units(void)
{
    uint32_t v = 0;
    unsigned int key = irq_lock();
    (void)counter_get_value(counter, &v);
    if (v < tb_last) {
        tb_high += 1ull << 32;
    }
    tb_last = v;
    uint64_t t = tb_high | v;
    irq_unlock(key);
    return t;
}

static uint64_t counter_units_to_ns(uint64_t u)
{
    return u * NS_PER_S / counter_hz;
}

static void alarm_cb(const struct device *dev, uint8_t chan, uint32_t ticks, void *user)
{
    ARG_UNUSED(dev);
    ARG_UNUSED(chan);
    ARG_UNUSED(ticks);
    ARG_UNUSED(user);
    k_sem_give(&tick_sem);
}

/* Lock held. The alarm for tk.deadline; a deadline already past wakes the thread at once (a
 * compare value behind the counter would only match after a wrap). */
static void counter_arm_next(void)
{
    (void)counter_cancel_channel_alarm(counter, 0);
    struct counter_alarm_cfg a = {
        .callback = alarm_cb,
        .ticks = (uint32_t)tk.deadline,
        .user_data = NULL,
        .flags = COUNTER_ALARM_CFG_ABSOLUTE,
    };
    if (counter_set_channel_alarm(counter, 0, &a) != 0 || counter_now_units() >= tk.deadline) {
        (void)counter_cancel_channel_alarm(counter, 0);
        k_sem_give(&tick_sem);
    }
}

static void counter_source_start(uint64_t tick_ns)
{
    tk.tick_units = tick_ns * counter_hz / NS_PER_S;
    tk.margin = 0; /* the alarm is on the grid itself */
    tk.deadline = counter_now_units() + tk.tick_units;
    counter_arm_next();
}

static void counter_source_stop(void)
{
    (void)counter_cancel_channel_alarm(counter, 0);
}

static int counter_source_init(void)
{
    if (!device_is_ready(counter)) {
        printk("copapy: tick counter %s is not ready\n", counter->name);
        return -ENODEV;
    }
    counter_hz = counter_get_frequency(counter);
    if (counter_hz == 0 || counter_get_max_top_value(counter) != UINT32_MAX) {
        printk("copapy: tick counter %s: needs a free-running 32-bit counter\n",
               counter->name);
        return -ENOTSUP;
    }
    return counter_start(counter);
}

static uint32_t counter_tick_quantum_ns(void)
{
    return (uint32_t)(NS_PER_S / gcd64(NS_PER_S, counter_hz));
}

static const char *counter_tick_source(void)
{
    return "counter";
}

#endif

#if defined(CONFIG_COPAPY_TICK_CMSDK)
/* ---- two CMSDK APB timers (qemu's mps2/mps3 boards): the first counts down freely from
 * 0xffffffff as the time base, the second is reloaded with the delay to each deadline. Under
 * qemu the time of one long-period timer stays exact, while Zephyr's SysTick-based clock
 * falls behind the host's clock whenever qemu is starved (each late reload loses time). */

#define TB_NODE DT_CHOSEN(copapy_cmsdk_time)
#define AL_NODE DT_CHOSEN(copapy_cmsdk_alarm)
#define TMR_CTRL(base) (*(volatile uint32_t *)((base) + 0x0u))
#define TMR_VALUE(base) (*(volatile uint32_t *)((base) + 0x4u))
#define TMR_RELOAD(base) (*(volatile uint32_t *)((base) + 0x8u))
#define TMR_INT(base) (*(volatile uint32_t *)((base) + 0xcu))
#define TMR_EN 1u
#define TMR_IRQ_EN 8u
#define TB_BASE ((uintptr_t)DT_REG_ADDR(TB_NODE))
#define AL_BASE ((uintptr_t)DT_REG_ADDR(AL_NODE))
#define CMSDK_HZ ((uint64_t)CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC) /* PCLK = SYSCLK */

static uint32_t cm_last;
static uint64_t cm_high;

static uint64_t cmsdk_now_units(void)
{
    unsigned int key = irq_lock();
    uint32_t v = 0xffffffffu - TMR_VALUE(TB_BASE);
    if (v < cm_last) {
        cm_high += 1ull << 32; /* read at least once per 171 s while running (every tick) */
    }
    cm_last = v;
    uint64_t t = cm_high | v;
    irq_unlock(key);
    return t;
}

static uint64_t cmsdk_units_to_ns(uint64_t u)
{
    return u * NS_PER_S / CMSDK_HZ;
}

static void cmsdk_isr(const void *arg)
{
    ARG_UNUSED(arg);
    TMR_CTRL(AL_BASE) = 0u; /* one shot */
    TMR_INT(AL_BASE) = 1u;
    k_sem_give(&tick_sem);
}

static void cmsdk_arm_next(void)
{
    TMR_CTRL(AL_BASE) = 0u;
    TMR_INT(AL_BASE) = 1u;
    uint64_t now = cmsdk_now_units();
    if (now >= tk.deadline) {
        k_sem_give(&tick_sem);
        return;
    }
    uint64_t delay = tk.deadline - now;
    uint32_t d = delay > 0xfffffff0u ? 0xfffffff0u : (uint32_t)delay;
    TMR_RELOAD(AL_BASE) = d;
    TMR_VALUE(AL_BASE) = d;
    TMR_CTRL(AL_BASE) = TMR_EN | TMR_IRQ_EN;
}

static void cmsdk_source_start(uint64_t tick_ns)
{
    tk.tick_units = tick_ns * CMSDK_HZ / NS_PER_S;
    tk.margin = 0;
    tk.deadline = cmsdk_now_units() + tk.tick_units;
    cmsdk_arm_next();
}

static void cmsdk_source_stop(void)
{
    TMR_CTRL(AL_BASE) = 0u;
    TMR_INT(AL_BASE) = 1u;
}

static int cmsdk_source_init(void)
{
    TMR_CTRL(TB_BASE) = 0u;
    TMR_RELOAD(TB_BASE) = 0xffffffffu;
    TMR_VALUE(TB_BASE) = 0xffffffffu;
    TMR_CTRL(TB_BASE) = TMR_EN;
    TMR_CTRL(AL_BASE) = 0u;
    TMR_INT(AL_BASE) = 1u;
    IRQ_CONNECT(DT_IRQN(AL_NODE), DT_IRQ(AL_NODE, priority), cmsdk_isr, NULL, 0);
    irq_enable(DT_IRQN(AL_NODE));
    return 0;
}

static uint32_t cmsdk_tick_quantum_ns(void)
{
    return (uint32_t)(NS_PER_S / gcd64(NS_PER_S, CMSDK_HZ));
}

static const char *cmsdk_tick_source(void)
{
    return "CMSDK timers";
}
#endif

/* The tick source chosen at start-up: the counter or the CMSDK timers when configured (and
 * ready), else k_timer. */
struct tick_source {
    uint64_t (*now_units)(void);
    uint64_t (*units_to_ns)(uint64_t u);
    void (*arm_next)(void);
    void (*start)(uint64_t tick_ns);
    void (*stop)(void);
    uint32_t (*quantum_ns)(void);
    const char *(*name)(void);
};

static const struct tick_source ktimer_source = {
    ktimer_now_units, ktimer_units_to_ns, ktimer_arm_next, ktimer_source_start,
    ktimer_source_stop, ktimer_tick_quantum_ns, ktimer_tick_source,
};

#if defined(CONFIG_COPAPY_TICK_COUNTER)
static const struct tick_source counter_source = {
    counter_now_units, counter_units_to_ns, counter_arm_next, counter_source_start,
    counter_source_stop, counter_tick_quantum_ns, counter_tick_source,
};
#endif

#if defined(CONFIG_COPAPY_TICK_CMSDK)
static const struct tick_source cmsdk_source = {
    cmsdk_now_units, cmsdk_units_to_ns, cmsdk_arm_next, cmsdk_source_start,
    cmsdk_source_stop, cmsdk_tick_quantum_ns, cmsdk_tick_source,
};
#endif

static const struct tick_source *src = &ktimer_source;

uint32_t cpz_tick_quantum_ns(void)
{
    return src->quantum_ns();
}

const char *cpz_tick_source(void)
{
    return src->name();
}


/* Protocol context, lock not held: START, STOP, RESET, COMMIT, unload. */
void cpz_ticker_notify(void *ctx, uint32_t what)
{
    ARG_UNUSED(ctx);
    if (what != CP_SERVER_NOTIFY_STATE) {
        return;
    }
    cpz_lock(NULL);
    src->stop();
    k_sem_reset(&tick_sem);
    tk.armed = 0;
    if (cp_server_state(&cpz_server) == CP_SERVER_RUNNING) {
        cp_jitter_clear(&hist);
        __atomic_store_n(&late_ticks, 0u, __ATOMIC_RELAXED);
        tk.armed = 1;
        src->start(cp_server_tick_ns(&cpz_server));
    }
    cpz_unlock(NULL);
}

/* user mode: the jobs run in another thread, with interrupts on (userjob.c) */
#define LOCK_IRQS \
    (IS_ENABLED(CONFIG_COPAPY_TICK_LOCK_IRQS) && !IS_ENABLED(CONFIG_COPAPY_USERSPACE))

static void tick_loop(void *p1, void *p2, void *p3)
{
    ARG_UNUSED(p1);
    ARG_UNUSED(p2);
    ARG_UNUSED(p3);
    for (;;) {
        (void)k_sem_take(&tick_sem, K_FOREVER);
        cpz_lock(NULL);
        if (!tk.armed || cp_server_state(&cpz_server) != CP_SERVER_RUNNING) {
            cpz_unlock(NULL);
            continue;
        }
        /* optionally the whole tick with interrupts masked, as the bare-metal runner's SysTick
         * handler runs it: execution times then exclude interrupt handlers (under qemu a UART
         * byte's interrupt costs tens of microseconds) */
        __atomic_store_n(&busy_since, k_uptime_get_32() + 1u, __ATOMIC_RELAXED);
        unsigned int key = LOCK_IRQS ? irq_lock() : 0u;
        uint64_t now = src->now_units();
        if (now + tk.margin >= tk.deadline) {
            cp_jitter_record(&hist, src->units_to_ns(now > tk.deadline ? now - tk.deadline : 0));
            uint32_t late = cp_server_catch_up(&cpz_server, &tk.deadline, tk.tick_units, now,
                                               tk.margin, MAX_CATCHUP);
            __atomic_store_n(&late_ticks, late_ticks + late, __ATOMIC_RELAXED);
        }
        if (LOCK_IRQS) {
            irq_unlock(key);
        }
        __atomic_store_n(&busy_since, 0u, __ATOMIC_RELAXED);
        if (cp_server_state(&cpz_server) == CP_SERVER_RUNNING) {
            src->arm_next();
        }
        cpz_unlock(NULL);
    }
}

int cpz_ticker_init(void)
{
#if defined(CONFIG_COPAPY_TICK_CMSDK)
    if (cmsdk_source_init() == 0) {
        src = &cmsdk_source;
    }
#endif
#if defined(CONFIG_COPAPY_TICK_COUNTER)
    if (counter_source_init() == 0) {
        src = &counter_source;
    } else {
        printk("copapy: ticks from k_timer instead\n");
    }
#endif
    k_thread_create(&tick_thread, tick_stack, K_THREAD_STACK_SIZEOF(tick_stack), tick_loop,
                    NULL, NULL, NULL, K_PRIO_PREEMPT(CONFIG_COPAPY_TICK_PRIORITY), K_FP_REGS,
                    K_NO_WAIT);
    k_thread_name_set(&tick_thread, "copapy_tick");
    return 0;
}
