/* The protocol runner firmware for qemu -M mps2-an500 -cpu cortex-m7 (see README.md): the
 * protocol server of runner/src/server.c on CMSDK UART0, the scheduler ticked from SysTick.
 *
 * Contexts: thread mode is the protocol context (reads the RX ring, feeds the server, writes
 * responses and queued STREAM events with polled TX, sleeps in WFI); the SysTick handler is the
 * tick context (highest priority; it runs every due tick of the deadline grid and queues
 * events). The server's lock is PRIMASK: a locked section delays a pending SysTick, never
 * loses it. UART0 RX is interrupt driven into a ring (lowest priority) with flow control: when
 * the ring is full the handler stops reading, so qemu's chardev (or a real UART's RTS) holds
 * the bytes.
 *
 * Time: SysTick wraps once per tick (or per fraction of a long tick, so the reload fits 24
 * bits). In qemu 7.2's mps2-an500 SysTick counts the processor clock (CLKSOURCE = 1) at
 * SYSCLK = 25 MHz, the reference clock (CLKSOURCE = 0) at 1 MHz (SYST_CALIB = 0x270F: TENMS
 * 9999); both were measured against TIMER0. The firmware uses the processor clock and falls
 * back to the reference clock if the processor clock does not count. qemu does not model the
 * DWT cycle counter (CYCCNT stays 0), so the 64-bit time base for release jitter, late ticks
 * and job execution times is DWT CYCCNT when it counts, else the CMSDK TIMER0 (25 MHz,
 * 32 bits, extended in software).
 *
 * Fault containment (docs/realtime.md): chains run inside fw_guard, which saves the callee-
 * saved registers; MemManage, BusFault and UsageFault (enabled, priority above SysTick),
 * HardFault, the budget timer (TIMER1, armed per job, priority above SysTick) and the NMI of
 * the CMSDK watchdog all enter fault_contain. When a guarded chain was running it builds a
 * basic exception frame that returns, in the SysTick context, into a stub that restores the
 * guard's registers: the chain is abandoned, the core records the fault (FAULTED, outputs
 * safe) and the tick ends normally. The watchdog is kicked by the main loop (a 10 ms timer
 * wakes it): a chain that masks interrupts and loops is caught by its NMI; a firmware that
 * stops serving its link is reset by its second expiry. */
#include <stdint.h>

#include "cm_guard.h"
#include "copapy/server.h"
#include "internal.h"
#include "startup.h"

#ifndef CP_RUNNER_ARCH
#define CP_RUNNER_ARCH CP_ARCH_CORTEX_M7
#endif
#ifndef CP_SLOT_SIZE
#define CP_SLOT_SIZE 0x100000u
#endif
#ifndef CP_STAGING_SIZE
#define CP_STAGING_SIZE 0x100000u
#endif
#define CPU_HZ 25000000u /* mps2 SYSCLK: the CPU, the CMSDK timers and UARTs */
#define MAX_PAYLOAD 512u
#define PORTS_CAPACITY 8192u
#define RING_SIZE 4096u
#define RX_RING 2048u
#define CHANNELS 8u
#define MAX_CATCHUP 16u

#define REG(a) (*(volatile uint32_t *)(a))

/* CMSDK APB UART0 */
#define UART0 0x40004000u
#define UART_DATA REG(UART0 + 0x00)
#define UART_STATE REG(UART0 + 0x04)
#define UART_CTRL REG(UART0 + 0x08)
#define UART_INT REG(UART0 + 0x0C)
#define UART_BAUDDIV REG(UART0 + 0x10)
#define STATE_TXFULL 1u
#define STATE_RXFULL 2u
#define CTRL_TXEN 1u
#define CTRL_RXEN 2u
#define CTRL_RXINT 8u
#define INT_RX 2u
#define UART0_RX_IRQ 0u
#define BUDGET_IRQ 9u   /* TIMER1 */
#define KICK_IRQ 10u    /* dual timer */

/* CMSDK APB TIMER0: a free-running 32-bit down counter at CPU_HZ */
#define TIMER0 0x40000000u
#define TIMER_CTRL REG(TIMER0 + 0x00)
#define TIMER_VALUE REG(TIMER0 + 0x04)
#define TIMER_RELOAD REG(TIMER0 + 0x08)

/* CMSDK APB TIMER1: the budget timer, armed for each guarded job */
#define TIMER1 0x40001000u
#define T1_CTRL REG(TIMER1 + 0x00)
#define T1_VALUE REG(TIMER1 + 0x04)
#define T1_RELOAD REG(TIMER1 + 0x08)
#define T1_INTCLR REG(TIMER1 + 0x0C)
#define TIMER_ENABLE 1u
#define TIMER_INTEN 8u

/* CMSDK APB dual timer, timer 1: a periodic wake-up of the main loop (watchdog kicks) */
#define DUAL 0x40002000u
#define DUAL_LOAD REG(DUAL + 0x00)
#define DUAL_CTRL REG(DUAL + 0x08)
#define DUAL_INTCLR REG(DUAL + 0x0C)
#define KICK_HZ 100u

/* CMSDK APB watchdog (qemu wires its interrupt to NMI and resets the board at the second
 * expiry when RESEN is set) */
#define WDOG 0x40008000u
#define WDOG_LOAD REG(WDOG + 0x00)
#define WDOG_CTRL REG(WDOG + 0x08)
#define WDOG_INTCLR REG(WDOG + 0x0C)
#define WDOG_LOCK REG(WDOG + 0xC00)
#define WDOG_UNLOCK 0x1ACCE551u
#define WDOG_MS 500u

/* System control */
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define SYST_CALIB REG(0xE000E01Cu)
#define NVIC_ISER0 REG(0xE000E100u)
#define NVIC_ICER0 REG(0xE000E180u)
#define NVIC_ICPR0 REG(0xE000E280u)
#define NVIC_IPR(n) (*(volatile uint8_t *)(0xE000E400u + (n)))
#define SCB_ICSR REG(0xE000ED04u)
#define SCB_AIRCR REG(0xE000ED0Cu)
#define SCB_CCR REG(0xE000ED14u)
#define SCB_SHPR1 REG(0xE000ED18u)
#define SCB_SHPR2 REG(0xE000ED1Cu)
#define SCB_SHPR3 REG(0xE000ED20u)
#define SCB_SHCSR REG(0xE000ED24u)
#define SCB_CFSR REG(0xE000ED28u)
#define SCB_HFSR REG(0xE000ED2Cu)
#define SHCSR_SYSTICKACT (1u << 11)
#define SHCSR_FAULTS_ENA (7u << 16) /* MemManage, BusFault, UsageFault */
#define CCR_DIV_0_TRP (1u << 4)
#define DEMCR REG(0xE000EDFCu)
#define DWT_CTRL REG(0xE0001000u)
#define DWT_CYCCNT REG(0xE0001004u)
#define CSR_ENABLE 1u
#define CSR_TICKINT 2u
#define CSR_CLKSOURCE 4u
#define ICSR_PENDSTCLR (1u << 25)

/* ---- memory: two program slots in executable SSRAM1, the staging buffer in SSRAM2/3 */

__attribute__((section(".arena"), aligned(65536)))
static uint8_t slot_mem[2][CP_SLOT_SIZE];

__attribute__((section(".imagebuf"), aligned(8)))
static uint8_t staging[CP_STAGING_SIZE];

__attribute__((aligned(8)))
static uint8_t work[CP_SERVER_WORK_SIZE(MAX_PAYLOAD, PORTS_CAPACITY, RING_SIZE)];

static cp_server srv;
static cp_server_config cfg;

/* ---- configuration: the budget factor, the runner-wide link timeout and the shared key
 * (make RUNNER_KEY=<hex>: at least 32 hex digits; none: sessions with an empty key) */
#ifndef CP_BUDGET_FACTOR
#define CP_BUDGET_FACTOR 10u
#endif
#ifndef CP_LINK_TIMEOUT_MS
#define CP_LINK_TIMEOUT_MS 0u
#endif
#ifdef CP_RUNNER_KEY_HEX
static const char key_hex[] = CP_RUNNER_KEY_HEX;
#else
static const char key_hex[] = "";
#endif
static uint8_t runner_key[64];
static uint32_t runner_key_len;

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes the configured key; 1 if there is one. */
static int key_init(void)
{
    uint32_t n = 0;
    for (const char *p = key_hex; p[0] != '\0' && p[1] != '\0' && n < sizeof(runner_key);
         p += 2) {
        int hi = hex_digit(p[0]), lo = hex_digit(p[1]);
        if (hi < 0 || lo < 0) {
            return 0;
        }
        runner_key[n++] = (uint8_t)(hi * 16 + lo);
    }
    runner_key_len = n;
    return n >= 16;
}

/* ---- lock: PRIMASK, nestable */

static uint32_t lock_depth;
static uint32_t lock_saved;

static uint32_t irq_save(void)
{
    uint32_t pm;
    __asm__ volatile("mrs %0, primask\n\tcpsid i" : "=r"(pm) : : "memory");
    return pm;
}

static void irq_restore(uint32_t pm)
{
    __asm__ volatile("msr primask, %0" : : "r"(pm) : "memory");
}

static void fw_lock(void *ctx)
{
    (void)ctx;
    uint32_t pm = irq_save();
    if (lock_depth++ == 0) {
        lock_saved = pm;
    }
}

static void fw_unlock(void *ctx)
{
    (void)ctx;
    if (lock_depth > 0 && --lock_depth == 0) {
        irq_restore(lock_saved);
    }
}

/* ---- time base */

static int use_dwt;
static uint32_t tb_last;
static uint64_t tb_high;

static void timebase_init(void)
{
    DEMCR |= 1u << 24; /* TRCENA */
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1u;
    uint32_t a = DWT_CYCCNT;
    for (volatile int i = 0; i < 100; i++) {
    }
    use_dwt = DWT_CYCCNT != a;
    if (!use_dwt) {
        TIMER_CTRL = 0;
        TIMER_RELOAD = 0xffffffffu;
        TIMER_VALUE = 0xffffffffu;
        TIMER_CTRL = 1u;
    }
}

/* Cycles since boot; called often enough (every tick, at START) to see every 32-bit wrap. */
static uint64_t cycles(void)
{
    uint32_t pm = irq_save();
    uint32_t v = use_dwt ? DWT_CYCCNT : 0xffffffffu - TIMER_VALUE;
    if (v < tb_last) {
        tb_high += 1ull << 32;
    }
    tb_last = v;
    uint64_t t = tb_high | v;
    irq_restore(pm);
    return t;
}

static uint64_t fw_clock_ns(void *ctx)
{
    (void)ctx;
    return cycles() * (1000000000u / CPU_HZ);
}

/* ---- UART */

static volatile uint8_t rx_ring[RX_RING];
static volatile uint32_t rx_head, rx_tail; /* head: written by the ISR */
static volatile uint32_t rx_throttled;

static void uart_init(void)
{
    UART_BAUDDIV = 16;
    UART_CTRL = CTRL_TXEN | CTRL_RXEN | CTRL_RXINT;
    NVIC_IPR(UART0_RX_IRQ) = 0xc0; /* below SysTick */
    NVIC_ISER0 = 1u << UART0_RX_IRQ;
}

static void uart_rx_isr(void)
{
    /* clear first, then drain: a byte arriving after the last RXFULL check raises the
     * interrupt again instead of being stranded in DATA (which would block all input) */
    UART_INT = INT_RX;
    while (UART_STATE & STATE_RXFULL) {
        uint32_t head = rx_head;
        if (head - rx_tail >= RX_RING) {
            UART_CTRL &= ~CTRL_RXINT; /* full: leave the byte in the UART (flow control) */
            rx_throttled = 1;
            break;
        }
        rx_ring[head % RX_RING] = (uint8_t)UART_DATA;
        rx_head = head + 1;
    }
}

static void uart_putc(uint8_t c)
{
    while (UART_STATE & STATE_TXFULL) {
    }
    UART_DATA = c;
}

static void fw_write(void *ctx, const uint8_t *bytes, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        uart_putc(bytes[i]);
    }
}

void irq_handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    uint32_t irq = (ipsr & 0x1ffu) - 16u;
    if (irq == UART0_RX_IRQ) {
        uart_rx_isr();
    } else if (irq == KICK_IRQ) {
        DUAL_INTCLR = 1; /* only wakes the main loop, which kicks the watchdog */
    } else if (irq < 32) {
        NVIC_ICER0 = 1u << irq; /* nobody asked for it */
    }
}

/* ---- simulated I/O */

static double io[CP_IO_KIND_COUNT][CHANNELS];

static double fw_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    (void)ctx;
    return kind >= 1 && kind <= CP_IO_KIND_COUNT && channel < CHANNELS ? io[kind - 1][channel]
                                                                       : 0.0;
}

static int fw_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    (void)ctx;
    if (kind < 1 || kind > CP_IO_KIND_COUNT || channel >= CHANNELS) {
        return 1;
    }
    uint32_t pm = irq_save(); /* a double store is two words */
    io[kind - 1][channel] = value;
    irq_restore(pm);
    return 0;
}

/* ---- ticks */

static uint32_t systick_hz;       /* SysTick counter frequency */
static uint32_t systick_cpu_clock;
static uint64_t tick_cycles;      /* the program's tick in time-base cycles */
static uint64_t next_deadline;    /* time-base cycles */
static uint64_t margin;           /* half a SysTick interval */
static cp_jitter_hist hist;
static uint32_t late_ticks;
static volatile uint32_t events_pending;

/* Which clock SysTick counts here: the processor clock if it runs, else the reference clock
 * (frequency from SYST_CALIB: TENMS + 1 counts per 10 ms). */
static void systick_probe(void)
{
    SYST_CSR = 0;
    SYST_RVR = 0xffffffu;
    SYST_CVR = 0;
    SYST_CSR = CSR_ENABLE | CSR_CLKSOURCE;
    uint64_t t0 = cycles();
    while (cycles() - t0 < CPU_HZ / 1000u) { /* 1 ms */
    }
    uint32_t cvr = SYST_CVR;
    SYST_CSR = 0;
    if (cvr != 0 && cvr != 0xffffffu) {
        systick_cpu_clock = 1;
        systick_hz = CPU_HZ;
        return;
    }
    uint32_t tenms = SYST_CALIB & 0xffffffu;
    systick_cpu_clock = 0;
    systick_hz = tenms != 0 ? (tenms + 1u) * 100u : 1000000u;
}

static void fw_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    (void)ctx;
    cp_jitter_rt_stats(out, &hist, &late_ticks);
}

/* Protocol context, lock not held: reprogram SysTick for the new state. */
static void fw_notify(void *ctx, uint32_t what)
{
    (void)ctx;
    if (what == CP_SERVER_NOTIFY_OUTPUT) {
        events_pending = 1; /* from the SysTick handler; the main loop wakes after it */
        return;
    }
    uint32_t pm = irq_save();
    SYST_CSR = 0;
    SCB_ICSR = ICSR_PENDSTCLR;
    if (cp_server_state(&srv) == CP_SERVER_RUNNING) {
        uint64_t tick_ns = cp_server_tick_ns(&srv);
        /* SysTick interval: the tick, divided until it fits the 24-bit counter */
        uint64_t counts = tick_ns * systick_hz / 1000000000u;
        uint64_t parts = 1;
        while (counts / parts > 0x1000000u || (counts % parts) != 0) {
            parts++;
            if (parts > counts) {
                break;
            }
        }
        if (counts != 0 && parts <= counts) { /* else: COMMIT's quantum check failed */
            tick_cycles = tick_ns * CPU_HZ / 1000000000u;
            margin = tick_cycles / parts / 2u;
            cp_jitter_clear(&hist);
            __atomic_store_n(&late_ticks, 0u, __ATOMIC_RELAXED);
            SYST_RVR = (uint32_t)(counts / parts - 1u);
            SYST_CVR = 0;
            next_deadline = cycles() + tick_cycles;
            SYST_CSR = CSR_ENABLE | CSR_TICKINT | (systick_cpu_clock ? CSR_CLKSOURCE : 0u);
        }
    }
    irq_restore(pm);
}

void systick_handler(void)
{
    uint64_t now = cycles();
    if (now + margin < next_deadline || cp_server_state(&srv) != CP_SERVER_RUNNING) {
        return; /* a fraction of a long tick, or a stale interrupt */
    }
    uint64_t jitter = now > next_deadline ? now - next_deadline : 0;
    cp_jitter_record(&hist, jitter * (1000000000u / CPU_HZ));
    uint32_t late = cp_server_catch_up(&srv, &next_deadline, tick_cycles, now, margin,
                                       MAX_CATCHUP);
    late_ticks += late;
}

/* ---- fault containment: the guard around every chain (a cp_guard_fn) */

static cm_jmp guard_env;
static volatile uint32_t guard_active;
static cp_fault guard_fault;    /* filled by fault_contain */
static cp_fault *guard_out;

/* Where an abandoned chain resumes: in the SysTick context, back into fw_guard. */
__attribute__((noreturn)) static void guard_resume(void)
{
    cm_longjmp(&guard_env);
}

/* After a fault (or a late interrupt): stopped, its interrupt cleared. */
static void budget_disarm(void)
{
    T1_CTRL = 0;
    T1_INTCLR = 1;
    NVIC_ICPR0 = 1u << BUDGET_IRQ;
}

/* Per job the timer costs three register writes: VALUE and CTRL to arm (RELOAD only when
 * the budget changes), CTRL to stop; an interrupt that comes after the job ended finds no
 * guard active and is dismissed by fault_contain. */
static uint32_t budget_reload;

static void budget_arm(uint64_t budget_ns)
{
    uint64_t counts = budget_ns * (CPU_HZ / 1000000u) / 1000u;
    uint32_t c = counts > 0xffffffffu ? 0xffffffffu : counts == 0 ? 1u : (uint32_t)counts;
    if (c != budget_reload) {
        T1_RELOAD = c;
        budget_reload = c;
    }
    T1_VALUE = c;
    T1_CTRL = TIMER_ENABLE | TIMER_INTEN;
}

static int fw_guard(void *ctx, void (*entry)(void), uint64_t budget_ns, cp_fault *fault)
{
    (void)ctx;
    guard_out = fault;
    if (cm_setjmp(&guard_env) != 0) {
        budget_disarm();
        cp_fault *out = guard_out;
        out->kind = guard_fault.kind;
        out->address = guard_fault.address;
        out->pc = guard_fault.pc;
        out->code = guard_fault.code;
        return 1;
    }
    if (budget_ns != 0) {
        budget_arm(budget_ns);
    }
    __asm__ volatile("" ::: "memory");
    guard_active = 1;
    entry();
    guard_active = 0;
    __asm__ volatile("" ::: "memory");
    if (budget_ns != 0) {
        T1_CTRL = 0;
    }
    return 0;
}

static void warm_up_chain(void)
{
}

/* One guarded call of an empty chain at boot: under qemu the guard and the timer code are
 * translated now, not inside the first job of the first program (whose time it would add). */
static void guard_warm_up(void)
{
    cp_fault f;
    (void)fw_guard((void *)0, warm_up_chain, 1000000u, &f);
}

/* 1 if `frame` lies in the main stack (a stacking fault leaves it anywhere). */
static int frame_readable(const uint32_t *frame)
{
    uintptr_t f = (uintptr_t)frame;
    return f >= (uintptr_t)__stack_limit && f + 32u <= (uintptr_t)__stack_top;
}

_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return);

/* Every fault, the budget timer and the watchdog's NMI (startup.c, fault_entry). A guarded
 * chain is running iff guard_active is set while the SysTick handler is active: chains run
 * only there, and nothing that preempts it runs guarded code. No FP register is used: a lazy
 * FP save may be pending. */
__attribute__((target("general-regs-only")))
uint32_t *fault_contain(uint32_t *frame, uint32_t exc_return)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    ipsr &= 0x1ffu;
    int guarded = guard_active && (SCB_SHCSR & SHCSR_SYSTICKACT) != 0;
    if (ipsr == 16u + BUDGET_IRQ && !guarded) {
        budget_disarm(); /* late: the job has finished */
        return (uint32_t *)0;
    }
    if (!guarded) {
        cancel_lazy_fp();
        fault_report(frame, exc_return);
    }
    uint32_t cfsr = SCB_CFSR, hfsr = SCB_HFSR;
    cp_fault f = {CP_FAULT_TIMEOUT, 0, 0, 0, 0, 0, 0};
    switch (ipsr) {
    case 2: f.kind = CP_FAULT_WATCHDOG; break;
    case 3: f.kind = CP_FAULT_HARDFAULT; f.code = hfsr; break;
    case 4: f.kind = CP_FAULT_MEMMANAGE; f.code = cfsr; break;
    case 5: f.kind = CP_FAULT_BUSFAULT; f.code = cfsr; break;
    case 6: f.kind = CP_FAULT_USAGEFAULT; f.code = cfsr; break;
    default: break; /* the budget timer */
    }
    f.address = cm_fault_address(f.kind, cfsr);
    uint32_t xpsr = 0x01000000u | 15u; /* Thumb, resuming in the SysTick handler */
    if (frame_readable(frame)) {
        f.pc = frame[6];
    }
    cm_fault_clear(cfsr, hfsr);
    if (ipsr == 2) {
        WDOG_LOCK = WDOG_UNLOCK;
        WDOG_INTCLR = 1; /* the warning is handled: reload */
        WDOG_LOCK = 0;
    }
    budget_disarm();
    guard_fault = f;
    guard_active = 0;
    cancel_lazy_fp();
    /* a chain may have masked interrupts before it looped */
    __asm__ volatile("cpsie i\n\tmsr basepri, %0" : : "r"(0u) : "memory");
    /* a basic frame just below the guard's stack pointer: pc = the stub, the rest 0 */
    uint32_t *resume = (uint32_t *)((CM_JMP_SP(&guard_env) - 32u) & ~7u);
    for (int i = 0; i < 5; i++) {
        resume[i] = 0;
    }
    resume[5] = 0xffffffffu; /* lr: never returned to */
    resume[6] = (uint32_t)(uintptr_t)guard_resume & ~1u;
    resume[7] = xpsr;
    return resume;
}

/* ---- the hardware watchdog, kicked by the main loop */

static void watchdog_start(void)
{
    WDOG_LOCK = WDOG_UNLOCK;
    WDOG_LOAD = CPU_HZ / 1000u * WDOG_MS;
    WDOG_CTRL = 3u; /* INTEN (NMI) | RESEN (reset at the second expiry) */
    WDOG_LOCK = 0;
    DUAL_LOAD = CPU_HZ / KICK_HZ;
    DUAL_CTRL = (1u << 7) | (1u << 6) | (1u << 5) | (1u << 1); /* on, periodic, int, 32 bit */
    NVIC_IPR(KICK_IRQ) = 0xc0;
    NVIC_ISER0 = 1u << KICK_IRQ;
}

static void watchdog_kick(void)
{
    WDOG_LOCK = WDOG_UNLOCK;
    WDOG_INTCLR = 1;
    WDOG_LOCK = 0;
}

/* ---- faults: report as one text line on the UART (a bad frame to a host), then reset */

static void put_hex(uint32_t v)
{
    for (int i = 7; i >= 0; i--) {
        uint32_t d = (v >> (4 * i)) & 15u;
        uart_putc((uint8_t)(d < 10 ? '0' + d : 'a' + d - 10));
    }
}

static void put_str(const char *s)
{
    while (*s != '\0') {
        uart_putc((uint8_t)*s++);
    }
}

_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    put_str("\nFAULT exception ");
    put_hex(ipsr & 0x1ffu);
    put_str(" pc ");
    put_hex(frame[6]);
    put_str(" lr ");
    put_hex(frame[5]);
    put_str(" exc_return ");
    put_hex(exc_return);
    put_str(" cfsr ");
    put_hex(SCB_CFSR);
    put_str(" hfsr ");
    put_hex(SCB_HFSR);
    put_str(": resetting\n");
    uart_putc(0);
    __asm__ volatile("dsb" ::: "memory");
    SCB_AIRCR = (0x5fau << 16) | (1u << 2); /* SYSRESETREQ */
    for (;;) {
        __asm__ volatile("wfi");
    }
}

/* ---- platform: the server hands out the slots; sealing needs only barriers (no caches,
 * no MPU region over the slots) */

static void *no_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    (void)size;
    (void)align;
    return (void *)0;
}

static void no_free(void *ctx, void *base, size_t size)
{
    (void)ctx;
    (void)base;
    (void)size;
}

static const cp_platform platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = CP_RUNNER_ARCH,
    .reserved = 0,
    .ctx = (void *)0,
    .region_alloc = no_alloc,
    .region_seal = barrier_seal,
    .region_free = no_free,
    .max_region_size = CP_SLOT_SIZE,
};

_Noreturn void harness_main(void)
{
    /* the UART first: qemu 7.2's CMSDK UART never calls qemu_chr_fe_accept_input(), so bytes
     * that arrive while RX is still disabled can sit in the chardev for ~300 ms */
    uart_init();
    /* priorities: faults 0 > budget timer 0x20 > SysTick 0x40 > UART, wake-up 0xc0; SVCall
     * lowest, so an SVC in a chain escalates to HardFault */
    SCB_SHPR1 = 0;
    SCB_SHPR2 = 0xffu << 24;
    SCB_SHPR3 = (SCB_SHPR3 & 0x00ffffffu) | (0x40u << 24);
    SCB_SHCSR |= SHCSR_FAULTS_ENA;
    SCB_CCR |= CCR_DIV_0_TRP; /* an integer division by zero traps (the stencils never do) */
    NVIC_IPR(BUDGET_IRQ) = 0x20;
    NVIC_ISER0 = 1u << BUDGET_IRQ;
    timebase_init();
    systick_probe();
    watchdog_start();
    guard_warm_up();

    cfg.struct_size = sizeof(cfg);
    cfg.platform = &platform;
    cfg.slot_mem[0] = slot_mem[0];
    cfg.slot_mem[1] = slot_mem[1];
    cfg.slot_size = CP_SLOT_SIZE;
    cfg.staging = staging;
    cfg.staging_size = CP_STAGING_SIZE;
    cfg.work = work;
    cfg.work_size = sizeof(work);
    cfg.max_payload = MAX_PAYLOAD;
    for (int k = 0; k < CP_IO_KIND_COUNT; k++) {
        cfg.channels[k] = CHANNELS;
    }
    cfg.flags = CP_SERVER_FLAG_REALTIME | CP_SERVER_FLAG_SIMULATED_IO;
    cfg.ports_capacity = PORTS_CAPACITY;
    cfg.ring_size = RING_SIZE;
    /* the tick must be a whole number of SysTick counts (1 us with the reference clock) */
    cfg.min_tick_ns = 20000u;
    cfg.tick_quantum_ns = 1000000000u / systick_hz;
    cfg.name = systick_cpu_clock ? "copapy bare-metal runner (mps2-an500, cortex-m7)"
                                 : "copapy bare-metal runner (mps2-an500, cortex-m7, "
                                   "SysTick on the 1 MHz reference clock)";
    cfg.ctx = (void *)0;
    cfg.write = fw_write;
    cfg.lock = fw_lock;
    cfg.unlock = fw_unlock;
    cfg.notify = fw_notify;
    cfg.clock_ns = fw_clock_ns;
    cfg.io_read = fw_io_read;
    cfg.io_write = fw_io_write;
    cfg.rt_stats = fw_rt_stats;
    cfg.guard = fw_guard;
    cfg.budget_factor = CP_BUDGET_FACTOR;
    cfg.budget_min_ns = 100000u; /* 0.1 ms: the timer resolves 40 ns */
    cfg.link_timeout_ns = CP_LINK_TIMEOUT_MS * 1000000ull;
    if (key_init() != 0) {
        cfg.key = runner_key;
        cfg.key_len = runner_key_len;
        cfg.require_auth = 1;
    }
    if (cp_server_init(&srv, &cfg, (cp_error *)0) != CP_OK) {
        put_str("copapy runner: server configuration rejected\n");
        for (;;) {
            __asm__ volatile("wfi");
        }
    }

    /* ready: one frame delimiter (an empty frame every decoder ignores) tells a host that
     * it may send now (README.md: wait for it, or retry HELLO) */
    uart_putc(0);

    uint8_t batch[256];
    for (;;) {
        watchdog_kick();
        uint32_t n = 0;
        while (rx_tail != rx_head && n < sizeof(batch)) {
            batch[n++] = rx_ring[rx_tail % RX_RING];
            rx_tail++;
        }
        if (rx_throttled && rx_head - rx_tail < RX_RING / 2) {
            uint32_t pm = irq_save();
            rx_throttled = 0;
            UART_CTRL |= CTRL_RXINT;
            uart_rx_isr(); /* the byte that waited raised no new interrupt */
            irq_restore(pm);
        }
        if (n > 0) {
            cp_server_feed(&srv, batch, n);
        }
        if (events_pending) {
            events_pending = 0;
            cp_server_flush(&srv);
        }
        /* sleep with interrupts masked: a pending RX or SysTick interrupt still ends WFI */
        uint32_t pm = irq_save();
        if (rx_tail == rx_head && !events_pending) {
            __asm__ volatile("wfi");
        }
        irq_restore(pm);
    }
}
