/* The hardware watchdog, the last resort (docs/zephyr.md, "Safety"): the devicetree's
 * watchdog0 through Zephyr's watchdog API, fed by the link thread while the tick thread is
 * healthy (no tick has lasted longer than half the watchdog period). A chain the budget timer
 * cannot stop (interrupts masked) or a firmware that stops serving its link lets it expire:
 *
 *   * where the driver calls back before the reset (qemu mps2: the CMSDK watchdog's warning is
 *     the NMI, the reset its second expiry), a guarded chain that is the interrupted context
 *     is stopped as CP_FAULT_WATCHDOG and the watchdog fed; anything else resets the board;
 *   * teensy41: WDOG1 of the i.MX RT1062 resets the SoC (its warning interrupt would come no
 *     earlier than the reset and, being a normal interrupt, not through masked interrupts).
 *
 * After a reset the boot record (bootrec.c) drives the last program's outputs safe, and HELLO
 * reports state 0 (no program): the host learns of it. */
#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/watchdog.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/reboot.h>

#include "cpz.h"

#if defined(CONFIG_COPAPY_WATCHDOG) && DT_NODE_HAS_STATUS(DT_ALIAS(watchdog0), okay)

#define WDT_NODE DT_ALIAS(watchdog0)
#define WDT_MS CONFIG_COPAPY_WATCHDOG_MS
#if DT_NODE_HAS_COMPAT(WDT_NODE, arm_cmsdk_watchdog)
/* Zephyr 3.4's CMSDK driver loads window.max x clock-frequency: it reads the window in
 * seconds. Its warning arrives as the NMI (CONFIG_RUNTIME_NMI). */
#define WINDOW_MAX DIV_ROUND_UP(WDT_MS, 1000)
#define WARNING 1
#else
#define WINDOW_MAX WDT_MS
#define WARNING 0
#endif

static const struct device *const wdt = DEVICE_DT_GET(WDT_NODE);
static int channel = -1;

#if WARNING
#define WARNING_CB warning
static void warning(const struct device *dev, int channel_id)
{
    if (cpz_guard_abandon(CP_FAULT_WATCHDOG)) {
        (void)wdt_feed(dev, channel_id);
        return;
    }
    sys_reboot(SYS_REBOOT_COLD); /* no chain to stop: the firmware itself is stuck */
}
#else
#define WARNING_CB NULL
#endif

void cpz_watchdog_init(void)
{
    if (!device_is_ready(wdt)) {
        printk("copapy: watchdog %s is not ready: running without\n", wdt->name);
        return;
    }
    struct wdt_timeout_cfg cfg = {
        .window = {.min = 0, .max = WINDOW_MAX},
        .callback = WARNING_CB,
        .flags = WDT_FLAG_RESET_SOC,
    };
    channel = wdt_install_timeout(wdt, &cfg);
    if (channel < 0 || wdt_setup(wdt, 0) != 0) {
        printk("copapy: watchdog %s refused its setup (%d): running without\n", wdt->name,
               channel);
        channel = -1;
    }
}

void cpz_watchdog_feed(void)
{
    if (channel >= 0 && cpz_ticker_busy_ms() < WDT_MS / 2u) {
        (void)wdt_feed(wdt, channel);
    }
}

const char *cpz_watchdog_name(void)
{
    return channel >= 0 ? wdt->name : "none";
}

#else

void cpz_watchdog_init(void)
{
}

void cpz_watchdog_feed(void)
{
}

const char *cpz_watchdog_name(void)
{
    return "none";
}

#endif
