/* The protocol runner firmware for qemu -M mps2-an500 -cpu cortex-m7 (see README.md): the
 * protocol server of runner/src/server.c on CMSDK UART0, the scheduler ticked from SysTick.
 *
 * Contexts: thread mode is the protocol context (reads the RX ring, feeds the server, writes
 * responses and queued STREAM events with polled TX, sleeps in WFI); the SysTick handler is the
 * tick context (highest priority; it runs every due tick of the deadline grid and queues
 * events). Each job of a loaded program runs unprivileged in thread mode on its own stack,
 * with SysTick still active, inside MPU regions of its program (see "isolation" below). The server's lock is PRIMASK: a locked section delays a pending SysTick, never
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
 * Fault containment (docs/realtime.md): chains run under fw_guard, which saves the callee-
 * saved registers; MemManage, BusFault and UsageFault (enabled, priority above SysTick),
 * HardFault, the budget timer (TIMER1, armed per job, priority above SysTick) and the NMI of
 * the CMSDK watchdog all enter fault_contain. When a guarded chain was running it builds a
 * basic exception frame that returns, in the SysTick context, into a stub that restores the
 * guard's registers: the chain is abandoned, the core records the fault (FAULTED, outputs
 * safe) and the tick ends normally. The watchdog is kicked by the main loop (a 10 ms timer
 * wakes it): an unprivileged chain cannot mask interrupts, so its NMI catches only the
 * firmware's own hangs, reported and reset; if even the NMI handler hangs, its second expiry
 * resets the board. Either way the boot record drives the safe outputs first thing after. */
#include <stdint.h>

#include "cm_boot_record.h"
#include "cm_guard.h"
#include "copapy/server.h"
#include "internal.h"
#include "mpu.h"
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
#define CCR_NONBASETHRDENA 1u /* thread mode may run while SysTick is active (the tasks) */
#define ICSR_PENDSVSET (1u << 28)
#define MPU_TYPE REG(0xE000ED90u)
#define MPU_RNR REG(0xE000ED98u)
#define MPU_RBAR REG(0xE000ED9Cu)
#define MPU_RASR REG(0xE000EDA0u)
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

/* aligned to their size: a slot's base is the floor of its MPU cover (mpu.h) */
__attribute__((section(".arena"), aligned(CP_SLOT_SIZE)))
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

#ifdef CP_TEST_HANG
static volatile uint32_t test_hang_in_nmi;
static volatile uint32_t test_tear_next_record;

/* Test build (make TEST_HANG=1): a runner-level hang with interrupts masked, which no task
 * can cause (tasks are unprivileged): ADC channel CHANNELS-1 set to 1001 hangs the firmware
 * (the watchdog's NMI resets it), to 1002 hangs the NMI handler too (the watchdog's second
 * expiry resets the board), to 1003 hangs in the middle of the next boot record write. */
static void test_hang(uint8_t kind, uint16_t channel, double value)
{
    if (kind != CP_IO_ADC || channel != CHANNELS - 1u) {
        return;
    }
    if (value == 1003.0) { /* hang in the middle of the next boot record write */
        test_tear_next_record = 1;
        return;
    }
    if (value != 1001.0 && value != 1002.0) {
        return;
    }
    test_hang_in_nmi = value == 1002.0;
    __asm__ volatile("cpsid i" ::: "memory");
    for (;;) {
    }
}
#endif

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
#ifdef CP_TEST_HANG
    test_hang(kind, channel, value);
#endif
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

static void boot_record_update(void);

/* Protocol context, lock not held: reprogram SysTick for the new state (and the boot
 * record's safe outputs). */
static void fw_notify(void *ctx, uint32_t what)
{
    (void)ctx;
    if (what == CP_SERVER_NOTIFY_OUTPUT) {
        events_pending = 1; /* from the SysTick handler; the main loop wakes after it */
        return;
    }
    boot_record_update();
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

/* ---- isolation: a task runs unprivileged in thread mode, confined by the MPU
 *
 * fw_guard (SysTick context, privileged) saves its registers, arms the budget timer, builds a
 * basic exception frame on the task stack (pc = the chain, lr = task_return_trap) and pends
 * PendSV (priority 0x30, above SysTick). PendSV returns into thread mode on the task stack
 * (PSP) with CONTROL.nPRIV set; SysTick stays active, so the task runs at SysTick's priority
 * (CCR.NONBASETHRDENA allows thread mode while an exception is active). Unprivileged, the task
 * reaches only its MPU regions (code RX, data RW, its stack RW; PRIVDEFENA keeps the default
 * map for privileged code only), never the System Control Space (a BusFault) and cannot mask
 * interrupts (cpsid, msr primask/basepri/faultmask are ignored). Its return to
 * task_return_trap, which no region makes executable for it, is a MemManage (IACCVIOL) with
 * that pc: fault_contain takes it as the end of the job. Every other fault, the budget timer
 * and the watchdog's NMI are the task's faults. Both ways resume the guard through a basic
 * frame in the SysTick context (privileged again). FPSCR needs no restore: the task's FP
 * context starts from FPDSCR (FPCCR.ASPEN) and is dropped with its frame. */

#ifndef CP_TASK_STACK_SIZE
#define CP_TASK_STACK_SIZE 8192u
#endif
#define MPU_TASK_STACK_REGION 1u /* region 0: the main stack's guard (startup.c) */
#define MPU_FIRST_PROGRAM_REGION 2u
#define MPU_MAX_REGIONS 16u

/* aligned to its size: one MPU region */
__attribute__((aligned(CP_TASK_STACK_SIZE)))
static uint8_t task_stack[CP_TASK_STACK_SIZE];

static uint32_t mpu_program_regions; /* MPU_TYPE.DREGION minus the two above */
static volatile uint32_t iso_stale = 1; /* a program was sealed since the regions were set */
static uintptr_t iso_code_lo, iso_code_hi; /* the code the regions are set for */

/* The return address of every task: never executable for a task, so returning to it is a
 * MemManage with this pc. Privileged code never runs it (it would be a UsageFault). */
__attribute__((naked, noinline)) void task_return_trap(void)
{
    __asm__ volatile("udf #0");
}

static void isolation_init(void)
{
    uint32_t dregion = (MPU_TYPE >> 8) & 0xffu;
    mpu_program_regions = dregion > MPU_MAX_REGIONS ? MPU_MAX_REGIONS - MPU_FIRST_PROGRAM_REGION
                          : dregion > MPU_FIRST_PROGRAM_REGION ? dregion - MPU_FIRST_PROGRAM_REGION
                                                               : 0;
    MPU_RNR = MPU_TASK_STACK_REGION;
    MPU_RBAR = (uint32_t)(uintptr_t)task_stack;
    uint32_t k = 0;
    while ((1u << k) < CP_TASK_STACK_SIZE) {
        k++;
    }
    MPU_RASR = MPU_RASR_XN | MPU_AP_FULL | MPU_NORMAL | ((k - 1u) << 1) | MPU_RASR_ENABLE;
    SCB_CCR |= CCR_NONBASETHRDENA;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

/* The loaded program whose code holds `entry` (the active one, or the other during a
 * swap), or NULL. Reads the server's program table (cp_program is public; the tick context
 * may read the active slot, the protocol context changes it only under the lock). */
static const cp_program *program_of(uintptr_t entry)
{
    for (uint32_t k = 0; k < 2; k++) {
        const cp_program *p = &srv.prog[(srv.active + k) & 1u];
        uintptr_t base = (uintptr_t)p->base;
        if (p->loaded && entry >= base && entry < base + p->data_offset) {
            return p;
        }
    }
    return (const cp_program *)0;
}

/* Sets the MPU regions of the program that holds `entry` (unless they are set): 0, or -1 if
 * its code and data do not fit the MPU's regions (the job is then refused as a fault). */
static int isolation_enter(uintptr_t entry)
{
    if (!iso_stale && entry >= iso_code_lo && entry < iso_code_hi) {
        return 0;
    }
    const cp_program *p = program_of(entry);
    if (p == (const cp_program *)0) {
        return -1;
    }
    uint32_t s = (uint32_t)(uintptr_t)p->base;
    uint32_t code_end = s + p->data_offset;
    uint32_t data_end = code_end + ((p->data_size + 31u) & ~31u);
    mpu_region r[MPU_MAX_REGIONS];
    int n = mpu_program(s, code_end, data_end, r, (int)mpu_program_regions);
    if (n < 0) {
        return -1;
    }
    for (uint32_t k = 0; k < mpu_program_regions; k++) {
        MPU_RNR = MPU_FIRST_PROGRAM_REGION + k;
        MPU_RASR = 0;
        if (k < (uint32_t)n) {
            MPU_RBAR = r[k].rbar;
            MPU_RASR = r[k].rasr;
        }
    }
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    iso_code_lo = s;
    iso_code_hi = code_end;
    iso_stale = 0;
    return 0;
}

/* cp_platform.region_seal: barriers, and the regions are set anew for the next job */
static int fw_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    iso_stale = 1;
    return barrier_seal(ctx, base, code_len, size);
}

/* ---- fault containment: the guard around every chain (a cp_guard_fn) */

static cm_jmp guard_env;
static volatile uint32_t guard_active;
static cp_fault guard_fault;    /* filled by fault_contain; kind NONE: the task returned */
static cp_fault *guard_out;

/* Where a task's end or fault resumes: in the SysTick context, back into fw_guard. */
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

/* PendSV, pended only by fw_guard: into the task, unprivileged, on the task stack. r4-r11
 * and d0-d15 are cleared (they held the runner's pointers and values); the lazy FP save that
 * the first vmov makes goes into this frame, which is never returned into (cm_setjmp's vstmia
 * has already saved any earlier context), and is cleared for good measure. */
__attribute__((naked)) void pendsv_handler(void)
{
    __asm__ volatile("ldr r0, =guard_active\n\t"
                     "ldr r0, [r0]\n\t"
                     "cbnz r0, 1f\n\t"
                     "b fault_entry\n\t" /* nobody asked for it */
                     "1:\n\t"
                     "movs r4, #0\n\t"
                     "vmov d0, r4, r4\n\t"
                     "vmov d1, r4, r4\n\t"
                     "vmov d2, r4, r4\n\t"
                     "vmov d3, r4, r4\n\t"
                     "vmov d4, r4, r4\n\t"
                     "vmov d5, r4, r4\n\t"
                     "vmov d6, r4, r4\n\t"
                     "vmov d7, r4, r4\n\t"
                     "vmov d8, r4, r4\n\t"
                     "vmov d9, r4, r4\n\t"
                     "vmov d10, r4, r4\n\t"
                     "vmov d11, r4, r4\n\t"
                     "vmov d12, r4, r4\n\t"
                     "vmov d13, r4, r4\n\t"
                     "vmov d14, r4, r4\n\t"
                     "vmov d15, r4, r4\n\t"
                     "ldr r0, =0xE000EF34\n\t" /* FPCCR.LSPACT = 0 */
                     "ldr r1, [r0]\n\t"
                     "bic r1, r1, #1\n\t"
                     "str r1, [r0]\n\t"
                     "mrs r0, control\n\t"
                     "orr r0, r0, #1\n\t" /* nPRIV */
                     "msr control, r0\n\t"
                     "isb\n\t"
                     "movs r5, #0\n\t"
                     "movs r6, #0\n\t"
                     "movs r7, #0\n\t"
                     "mov r8, r4\n\t"
                     "mov r9, r4\n\t"
                     "mov r10, r4\n\t"
                     "mov r11, r4\n\t"
                     "ldr lr, =0xFFFFFFFD\n\t" /* thread mode, PSP, basic frame */
                     "bx lr\n\t"
                     ".ltorg\n\t");
}

static int fw_guard(void *ctx, void (*entry)(void), uint64_t budget_ns, cp_fault *fault)
{
    (void)ctx;
    guard_out = fault;
    if (cm_setjmp(&guard_env) != 0) {
        cp_fault *out = guard_out;
        if (guard_fault.kind == CP_FAULT_NONE) {
            T1_CTRL = 0;
            return 0;
        }
        budget_disarm();
        out->kind = guard_fault.kind;
        out->address = guard_fault.address;
        out->pc = guard_fault.pc;
        out->code = guard_fault.code;
        return 1;
    }
    uintptr_t pc = (uintptr_t)entry;
    if (isolation_enter(pc) != 0) {
        /* code outside every loaded program, or a program the MPU cannot confine */
        fault->kind = CP_FAULT_MEMMANAGE;
        fault->address = pc;
        fault->pc = pc;
        fault->code = 0;
        return 1;
    }
    uint32_t *frame = (uint32_t *)(void *)(task_stack + CP_TASK_STACK_SIZE - 32u);
    for (int i = 0; i < 5; i++) {
        frame[i] = 0; /* r0-r3, r12 */
    }
    frame[5] = (uint32_t)(uintptr_t)task_return_trap | 1u; /* lr */
    frame[6] = (uint32_t)pc & ~1u;
    frame[7] = 0x01000000u; /* Thumb */
    __asm__ volatile("msr psp, %0" : : "r"(frame) : "memory");
    if (budget_ns != 0) {
        budget_arm(budget_ns);
    }
    guard_active = 1;
    SCB_ICSR = ICSR_PENDSVSET;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (;;) { /* PendSV is taken before this: the job ends in the longjmp above */
    }
}

/* The budget timer armed and stopped once at boot: under qemu its code is translated now,
 * not inside the first job of the first program (whose time it would add). */
static void guard_warm_up(void)
{
    budget_arm(1000000u);
    T1_CTRL = 0;
}

/* 1 if the exception frame at `frame` (PSP when exc_return says so) lies in the stack it
 * belongs to (a stacking fault leaves it anywhere). */
static int frame_readable(const uint32_t *frame, uint32_t exc_return)
{
    uintptr_t f = (uintptr_t)frame;
    if ((exc_return & 4u) != 0) {
        return f >= (uintptr_t)task_stack && f + 32u <= (uintptr_t)task_stack + CP_TASK_STACK_SIZE;
    }
    return f >= (uintptr_t)__stack_limit && f + 32u <= (uintptr_t)__stack_top;
}

_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return);
static void reset_reason_set(uint32_t reason, uint32_t ipsr, uint32_t pc);
#define REASON_FAULT 1u
#define REASON_WATCHDOG 2u

/* Every fault, the budget timer, the watchdog's NMI and a task's return (startup.c,
 * fault_entry; `frame` is on the stack exc_return names). A guarded chain is running iff
 * guard_active is set while the SysTick handler is active: chains run only there, and nothing
 * that preempts it runs guarded code. No FP register is used: a lazy FP save may be pending. */
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
#ifdef CP_TEST_HANG
        while (ipsr == 2u && test_hang_in_nmi) { /* test build: a blocked NMI handler */
        }
#endif
        reset_reason_set(ipsr == 2u ? REASON_WATCHDOG : REASON_FAULT, ipsr,
                         frame_readable(frame, exc_return) ? frame[6] : 0u);
        fault_report(frame, exc_return);
    }
    uint32_t cfsr = SCB_CFSR, hfsr = SCB_HFSR;
    int readable = frame_readable(frame, exc_return);
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
    if (readable) {
        f.pc = frame[6];
    }
    /* the task returned: an instruction fetch at the trap, from its own stack, nothing else */
    if (ipsr == 4u && cfsr == 1u /* IACCVIOL only */ && (exc_return & 4u) != 0 && readable &&
        f.pc == ((uint32_t)(uintptr_t)task_return_trap & ~1u)) {
        f.kind = CP_FAULT_NONE;
    }
    cm_fault_clear(cfsr, hfsr);
    if (ipsr == 2) {
        WDOG_LOCK = WDOG_UNLOCK;
        WDOG_INTCLR = 1; /* the warning is handled: reload */
        WDOG_LOCK = 0;
    }
    if (f.kind != CP_FAULT_NONE) {
        budget_disarm();
    }
    guard_fault = f;
    guard_active = 0;
    cancel_lazy_fp();
    /* privileged again (thread mode, once SysTick returns to the main loop); a chain cannot
     * mask interrupts, but the guard's own code may have been preempted with them masked */
    uint32_t control;
    __asm__ volatile("mrs %0, control" : "=r"(control));
    __asm__ volatile("msr control, %0\n\tisb\n\tcpsie i\n\tmsr basepri, %1"
                     : : "r"(control & ~1u), "r"(0u) : "memory");
    /* a basic frame just below the guard's stack pointer: pc = the stub, the rest 0 */
    uint32_t *resume = (uint32_t *)((CM_JMP_SP(&guard_env) - 32u) & ~7u);
    for (int i = 0; i < 5; i++) {
        resume[i] = 0;
    }
    resume[5] = 0xffffffffu; /* lr: never returned to */
    resume[6] = (uint32_t)(uintptr_t)guard_resume & ~1u;
    resume[7] = 0x01000000u | 15u; /* Thumb, resuming in the SysTick handler */
    return resume;
}

/* ---- the boot record: the safe outputs and the reason of the last reset, kept over a reset
 *
 * 1 KB at the top of SSRAM2/3 (__noinit_start, an500.ld) that no ELF segment covers, so
 * neither start-up nor qemu's loader (which zero-fills a segment's bss at every reset) clears
 * it. The outputs' safe values of the loaded program are written on every state change
 * (protocol context) with a CRC and a sequence number, into the older of two copies: a reset
 * in the middle of a write leaves the other one valid. The first thing harness_main does is
 * drive the newest valid copy's values. The reason words are written just before a reset the
 * firmware makes itself; a valid record without a reason means the hardware reset the board
 * (the watchdog's second expiry, or external). */

typedef struct boot_area {
    cm_boot_record copy[2];
    /* written by the fault path (no CRC there): reason and its complement */
    uint32_t reason, reason_check, reason_ipsr, reason_pc;
} boot_area;

extern uint32_t __noinit_start[];
_Static_assert(sizeof(boot_area) <= 1024, "the boot record fits the 1 KB noinit area");
_Static_assert(CM_BOOT_SAFE_MAX >= 3u * CHANNELS, "room for every output channel");

static boot_area *boot_rec(void)
{
    return (boot_area *)(void *)__noinit_start;
}

/* Writes `count` safe values into the older copy. */
static void boot_record_write(const cm_boot_safe *out, uint32_t count)
{
    cm_boot_record *r = cm_boot_begin(boot_rec()->copy, count);
    for (uint32_t k = 0; k < count; k++) {
        r->out[k] = out[k];
#ifdef CP_TEST_HANG
        if (test_tear_next_record && k == count / 2u) { /* a reset in the middle of a write */
            test_hang(CP_IO_ADC, CHANNELS - 1u, 1001.0);
        }
#endif
    }
    cm_boot_seal(r);
}

/* Protocol context: the safe values of the outputs the loaded program drives. */
static void boot_record_update(void)
{
    cm_boot_safe out[CM_BOOT_SAFE_MAX];
    uint32_t n = cm_boot_outputs(cp_server_program(&srv), out);
    if (cm_boot_same(cm_boot_newest(boot_rec()->copy), out, n)) {
        return; /* unchanged (START, STOP, RESET of the same program) */
    }
    boot_record_write(out, n);
}

/* Fault path, just before the firmware resets the board. */
__attribute__((target("general-regs-only")))
static void reset_reason_set(uint32_t reason, uint32_t ipsr, uint32_t pc)
{
    boot_area *a = boot_rec();
    a->reason = reason;
    a->reason_check = ~reason;
    a->reason_ipsr = ipsr;
    a->reason_pc = pc;
    __asm__ volatile("dsb" ::: "memory");
}

static const char *reset_cause; /* NULL: power-on */
static char runner_name[128];

static void name_append(uint32_t *at, const char *s)
{
    while (*s != '\0' && *at + 1u < sizeof(runner_name)) {
        runner_name[(*at)++] = *s++;
    }
    runner_name[*at] = '\0';
}

/* The runner's name in HELLO; after a reset a shorter one with its reason:
 * "copapy bare-metal runner (mps2-an500); reset: watchdog NMI". */
static void runner_name_init(const char *name)
{
    uint32_t at = 0;
    if (reset_cause == (const char *)0) {
        name_append(&at, name);
        return;
    }
    name_append(&at, "copapy bare-metal runner (mps2-an500); reset: ");
    name_append(&at, reset_cause);
}

/* At boot, first thing: the outputs go safe if a copy of the record is valid; reset_cause
 * says why the board was reset. */
static void boot_record_apply(void)
{
    boot_area *a = boot_rec();
    const cm_boot_record *r = cm_boot_newest(a->copy);
    if (r != (const cm_boot_record *)0) {
        for (uint32_t k = 0; k < r->count; k++) {
            const cm_boot_safe *s = &r->out[k];
            if (s->kind >= 1 && s->kind <= CP_IO_KIND_COUNT && s->channel < CHANNELS) {
                io[s->kind - 1][s->channel] = s->value;
            }
        }
        /* hardware: the watchdog's second expiry or an external reset (the board has no
         * reset cause register); HELLO's name holds 64 bytes */
        reset_cause = a->reason_check != ~a->reason ? "hardware"
                      : a->reason == REASON_WATCHDOG ? "watchdog NMI"
                      : a->reason == REASON_FAULT    ? "fault"
                                                     : "hardware";
    } else {
        boot_record_write((const cm_boot_safe *)0, 0); /* power-on: a valid empty record */
    }
    a->reason = 0;
    a->reason_check = 0;
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
    .region_seal = fw_seal,
    .region_free = no_free,
    .max_region_size = CP_SLOT_SIZE,
};

_Noreturn void harness_main(void)
{
    /* the outputs safe first (the boot record of the program before a reset) */
    boot_record_apply();
    /* the UART first: qemu 7.2's CMSDK UART never calls qemu_chr_fe_accept_input(), so bytes
     * that arrive while RX is still disabled can sit in the chardev for ~300 ms */
    uart_init();
    /* priorities: faults 0 > budget timer 0x20 > SysTick 0x40 > UART, wake-up 0xc0; SVCall
     * lowest, so an SVC in a chain escalates to HardFault */
    SCB_SHPR1 = 0;
    SCB_SHPR2 = 0xffu << 24;
    SCB_SHPR3 = (SCB_SHPR3 & 0x0000ffffu) | (0x40u << 24) | (0x30u << 16); /* SysTick, PendSV */
    SCB_SHCSR |= SHCSR_FAULTS_ENA;
    SCB_CCR |= CCR_DIV_0_TRP; /* an integer division by zero traps (the stencils never do) */
    NVIC_IPR(BUDGET_IRQ) = 0x20;
    NVIC_ISER0 = 1u << BUDGET_IRQ;
    timebase_init();
    systick_probe();
    watchdog_start();
    isolation_init();
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
#if defined(CP_RUNNER_ALLOW_CODE)
    /* a build for fault-injection tests (make ALLOW_CODE=1): format-1 images (machine code)
     * load too; a normal build runs only what it builds from its stencil table */
    cfg.flags |= CP_SERVER_FLAG_CODE;
#endif
    cfg.ports_capacity = PORTS_CAPACITY;
    cfg.ring_size = RING_SIZE;
    /* the tick must be a whole number of SysTick counts (1 us with the reference clock) */
    cfg.min_tick_ns = 20000u;
    cfg.tick_quantum_ns = 1000000000u / systick_hz;
    runner_name_init(systick_cpu_clock ? "copapy bare-metal runner (mps2-an500, cortex-m7)"
                                       : "copapy bare-metal runner (mps2-an500, cortex-m7, "
                                         "SysTick on the 1 MHz reference clock)");
    cfg.name = runner_name;
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
