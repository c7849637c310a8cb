/* copapy runner firmware for Zephyr: the runner core's protocol server (runner/src/server.c,
 * unchanged) wired to the Zephyr platform layer of this directory (cpz.h lists the parts).
 * Thread plan (cpz.h): the tick thread runs the scheduler; the link thread, more urgent, is
 * the protocol context: it feeds received bytes to the server, writes responses and STREAM
 * events, and notices a host that closed the port. */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/util.h>

#include <string.h>

#include "cpz.h"

#define PORTS_CAPACITY CONFIG_COPAPY_PORTS_CAPACITY
#define RING_SIZE CONFIG_COPAPY_EVENT_RING_SIZE
#define MAX_PAYLOAD CONFIG_COPAPY_MAX_PAYLOAD

#if defined(CONFIG_COPAPY_TRANSPORT_USB)
#define TRANSPORT "USB"
#else
#define TRANSPORT "UART"
#endif

BUILD_ASSERT((RING_SIZE & (RING_SIZE - 1)) == 0, "COPAPY_EVENT_RING_SIZE: a power of two");

cp_server cpz_server;
static cp_server_config cfg;
static uint8_t work[CP_SERVER_WORK_SIZE(MAX_PAYLOAD, PORTS_CAPACITY, RING_SIZE)] __aligned(8);
static uint8_t staging[CONFIG_COPAPY_STAGING_SIZE] __aligned(8) __noinit;

const uint8_t *cpz_staging(void)
{
    return staging;
}

/* the shared key (CONFIG_COPAPY_KEY, hex): sessions as on every runner (docs/protocol.md) */
static uint8_t key[64];

static K_MUTEX_DEFINE(server_mutex);
static atomic_t events_pending;

static K_THREAD_STACK_DEFINE(link_stack, CONFIG_COPAPY_LINK_STACK_SIZE);
static struct k_thread link_thread;

void cpz_lock(void *ctx)
{
    ARG_UNUSED(ctx);
    (void)k_mutex_lock(&server_mutex, K_FOREVER);
}

void cpz_unlock(void *ctx)
{
    ARG_UNUSED(ctx);
    (void)k_mutex_unlock(&server_mutex);
}

static void notify(void *ctx, uint32_t what)
{
    if (what == CP_SERVER_NOTIFY_OUTPUT) {
        /* tick context, lock held: the link thread writes the events */
        atomic_set(&events_pending, 1);
        cpz_link_wake();
        return;
    }
    if (what == CP_SERVER_NOTIFY_STATE || what == CP_SERVER_NOTIFY_REPLACED) {
        cpz_lock(NULL); /* protocol context: the program cannot change under us */
        cpz_bootrec_update();
        cpz_unlock(NULL);
    }
    cpz_ticker_notify(ctx, what);
}

static void link_loop(void *p1, void *p2, void *p3)
{
    ARG_UNUSED(p1);
    ARG_UNUSED(p2);
    ARG_UNUSED(p3);
    static uint8_t buf[256];
    static const uint8_t ready = 0;
    /* one frame delimiter (an empty frame every decoder ignores): a host may send now */
    cpz_link_write(NULL, &ready, 1);
    for (;;) {
        size_t n = cpz_link_read(buf, sizeof(buf));
        if (n > 0) {
            cp_server_feed(&cpz_server, buf, n);
        }
        int events = atomic_set(&events_pending, 0) != 0;
        if (events) {
            (void)cp_server_flush(&cpz_server);
        }
        if (cpz_link_take_reset()) {
            cp_server_disconnect(&cpz_server); /* the host closed or reopened the port */
        }
        cpz_watchdog_feed();
        if (n == 0 && !events) {
            (void)cpz_link_wait(100); /* also polls the USB line state */
        }
    }
}

int main(void)
{
    static char name[CP_SERVER_NAME_MAX];
    uint8_t simulated_only = 0;
    int rc = cpz_ticker_init(); /* picks the tick source (its quantum goes into cfg) */
    if (rc != 0) {
        printk("copapy: no tick source (%d)\n", rc);
        return 0;
    }
    rc = cpz_io_init(cfg.channels, &simulated_only);
    if (rc != 0) {
        printk("copapy: an I/O device of copapy,io is not ready (%d); continuing\n", rc);
    }
    /* the outputs first: the safe values of the program before a reset, if there was one */
    uint32_t safe = cpz_bootrec_apply();
    snprintk(name, sizeof(name), "copapy Zephyr runner (%s, %s, %s)", CONFIG_BOARD, TRANSPORT,
             cpz_tick_source());

    cfg.struct_size = sizeof(cfg);
    cfg.platform = cpz_platform();
#if !defined(CONFIG_COPAPY_USERSPACE)
    cfg.slot_mem[0] = cpz_slot(0);
    cfg.slot_mem[1] = cpz_slot(1);
    cfg.slot_size = cpz_slot_size();
#endif /* user mode: the platform places programs in the slots itself (codemem.c) */
    cfg.staging = staging;
    cfg.staging_size = sizeof(staging);
    cfg.work = work;
    cfg.work_size = sizeof(work);
    cfg.max_payload = MAX_PAYLOAD;
    cfg.flags = CP_SERVER_FLAG_REALTIME | (simulated_only ? CP_SERVER_FLAG_SIMULATED_IO : 0u);
#if defined(CONFIG_COPAPY_ALLOW_CODE)
    cfg.flags |= CP_SERVER_FLAG_CODE; /* fault tests only: format-1 images (machine code) */
#endif
    cfg.ports_capacity = PORTS_CAPACITY;
    cfg.ring_size = RING_SIZE;
    cfg.tick_quantum_ns = cpz_tick_quantum_ns();
    cfg.min_tick_ns = MAX((uint32_t)CONFIG_COPAPY_MIN_TICK_US * 1000u, cfg.tick_quantum_ns);
    cfg.name = name;
    cfg.ctx = NULL;
    cfg.write = cpz_link_write;
    cfg.lock = cpz_lock;
    cfg.unlock = cpz_unlock;
    cfg.notify = notify;
    cfg.clock_ns = cpz_clock_ns;
    cfg.io_read = cpz_io_read;
    cfg.io_write = cpz_io_write;
    cfg.rt_stats = cpz_ticker_rt_stats;
    cfg.io_check = cpz_io_check;
    cfg.guard = cpz_guard;
    cfg.budget_factor = CONFIG_COPAPY_BUDGET_FACTOR;
    cfg.budget_min_ns = (uint64_t)CONFIG_COPAPY_BUDGET_MIN_US * 1000u;
    cfg.link_timeout_ns = (uint64_t)CONFIG_COPAPY_LINK_TIMEOUT_MS * 1000000u;
    size_t key_hex = strlen(CONFIG_COPAPY_KEY);
    if (key_hex != 0) {
        size_t n = hex2bin(CONFIG_COPAPY_KEY, key_hex, key, sizeof(key));
        if (n < 16 || n * 2 != key_hex) {
            printk("copapy: CONFIG_COPAPY_KEY: at least 32 hex digits, at most 128\n");
            return 0;
        }
        cfg.key = key;
        cfg.key_len = (uint32_t)n;
        cfg.require_auth = 1;
    }
    cp_error err;
    err.struct_size = sizeof(err);
    if (cp_server_init(&cpz_server, &cfg, &err) != CP_OK) {
        printk("copapy: server configuration rejected: %s\n", err.message);
        return 0;
    }
    cpz_fault_init();
#if defined(CONFIG_COPAPY_USERSPACE)
    cpz_user_init();
#endif
    cpz_budget_init();
    cpz_watchdog_init();
    printk("copapy: %s; slots %p and %p, %u bytes each; link %s; budget %s; watchdog %s%s; "
           "%u outputs safe from the boot record\n",
           name, (void *)cpz_slot(0), (void *)cpz_slot(1), (unsigned int)cpz_slot_size(),
           cpz_link_name(), cpz_budget_source(),
           cpz_watchdog_name(), cfg.require_auth ? "; key required" : "", (unsigned int)safe);
    rc = cpz_link_init();
    if (rc != 0) {
        return 0;
    }
    k_thread_create(&link_thread, link_stack, K_THREAD_STACK_SIZEOF(link_stack), link_loop,
                    NULL, NULL, NULL, K_PRIO_PREEMPT(CONFIG_COPAPY_LINK_PRIORITY), K_FP_REGS,
                    K_NO_WAIT);
    k_thread_name_set(&link_thread, "copapy_link");
    return 0;
}
