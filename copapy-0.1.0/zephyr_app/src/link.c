/* The transport: one device with Zephyr's interrupt-driven UART API, which USB CDC ACM, the
 * i.MX RT LPUART and QEMU's CMSDK UART all implement. The IRQ callback moves bytes between
 * the device and two rings (one producer and one consumer each, so no lock); the link thread
 * is the only user of the other ends.
 *
 * Flow control: when the RX ring is full the callback stops reading and disables the RX
 * interrupt (a UART then holds the byte, qemu's chardev keeps the rest); the link thread
 * re-enables it once half the ring is free. Output nobody reads (USB port closed, a stalled
 * line) is dropped after CONFIG_COPAPY_TX_STALL_MS, as the host runner drops it. */
#include <string.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/ring_buffer.h>

#include "cpz.h"

#if defined(CONFIG_COPAPY_TRANSPORT_USB)
#define LINK_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(zephyr_cdc_acm_uart)
#if !DT_NODE_EXISTS(LINK_NODE)
#error "CONFIG_COPAPY_TRANSPORT_USB needs a zephyr,cdc-acm-uart node (boards/teensy41.overlay)"
#endif
#elif DT_HAS_CHOSEN(copapy_uart)
#define LINK_NODE DT_CHOSEN(copapy_uart)
#else
#define LINK_NODE DT_CHOSEN(zephyr_console)
#endif

#define LINK_IS_CONSOLE \
    (DT_HAS_CHOSEN(zephyr_console) && DT_SAME_NODE(LINK_NODE, DT_CHOSEN(zephyr_console)))

static const struct device *const link_dev = DEVICE_DT_GET(LINK_NODE);

RING_BUF_DECLARE(rx_ring, CONFIG_COPAPY_RX_RING_SIZE);
RING_BUF_DECLARE(tx_ring, CONFIG_COPAPY_TX_RING_SIZE);
static K_SEM_DEFINE(link_sem, 0, 1);  /* RX data, events, a link change */
static K_SEM_DEFINE(tx_room, 0, 1);   /* the callback consumed TX bytes */
static volatile uint8_t rx_throttled; /* RX interrupt off: the ring was full */
static volatile uint8_t tx_active;    /* TX interrupt on: bytes are in flight */
static uint32_t tx_dropped;
static int host_was_connected;

static void link_callback(const struct device *dev, void *user_data)
{
    ARG_UNUSED(user_data);
    if (!uart_irq_update(dev)) {
        return;
    }
    int woke = 0;
    while (!rx_throttled && uart_irq_rx_ready(dev)) {
        uint8_t *p;
        uint32_t room = ring_buf_put_claim(&rx_ring, &p, CONFIG_COPAPY_RX_RING_SIZE);
        if (room == 0) {
            ring_buf_put_finish(&rx_ring, 0);
            rx_throttled = 1; /* the byte stays in the device until the thread catches up */
            uart_irq_rx_disable(dev);
            break;
        }
        int n = uart_fifo_read(dev, p, (int)room);
        ring_buf_put_finish(&rx_ring, n > 0 ? (uint32_t)n : 0u);
        if (n <= 0) {
            break;
        }
        /* wake the link thread at a frame's end (the server acts on whole frames only) or
         * when the ring fills up, not for every byte: under qemu a UART delivers one byte per
         * interrupt, and a thread switch per byte halved the upload rate */
        if (memchr(p, 0, (size_t)n) != NULL ||
            ring_buf_size_get(&rx_ring) >= CONFIG_COPAPY_RX_RING_SIZE / 2) {
            woke = 1;
        }
    }
    if (tx_active && uart_irq_tx_ready(dev)) {
        int moved = 0;
        for (;;) {
            unsigned int key = irq_lock(); /* against cpz_link_write's check of tx_active */
            uint8_t *p;
            uint32_t n = ring_buf_get_claim(&tx_ring, &p, CONFIG_COPAPY_TX_RING_SIZE);
            if (n == 0) {
                ring_buf_get_finish(&tx_ring, 0);
                tx_active = 0;
                uart_irq_tx_disable(dev);
                irq_unlock(key);
                break;
            }
            irq_unlock(key);
            int w = uart_fifo_fill(dev, p, (int)n);
            ring_buf_get_finish(&tx_ring, w > 0 ? (uint32_t)w : 0u);
            moved = 1;
            if (w < (int)n) {
                break; /* the device is full: the next TX interrupt continues */
            }
        }
        if (moved) {
            k_sem_give(&tx_room);
        }
    }
    if (woke) {
        k_sem_give(&link_sem);
    }
}

#if LINK_IS_CONSOLE && defined(CONFIG_PRINTK)
extern void __printk_hook_install(int (*fn)(int c));

static int discard_char(int c)
{
    return c;
}
#endif

int cpz_link_init(void)
{
    if (!device_is_ready(link_dev)) {
        printk("copapy: link device %s is not ready\n", link_dev->name);
        return -ENODEV;
    }
    int rc = cpz_usb_start(link_dev);
    if (rc != 0) {
        printk("copapy: USB start failed (%d)\n", rc);
        return rc;
    }
    uart_irq_rx_disable(link_dev);
    uart_irq_tx_disable(link_dev);
    /* drop what arrived before the callback was installed (a half frame at most) */
    uint8_t junk[16];
    while (uart_fifo_read(link_dev, junk, sizeof(junk)) > 0) {
    }
    int cb = uart_irq_callback_user_data_set(link_dev, link_callback, NULL);
    if (cb != 0) {
        printk("copapy: %s has no interrupt-driven UART API (%d)\n", link_dev->name, cb);
        return cb;
    }
#if LINK_IS_CONSOLE && defined(CONFIG_PRINTK)
    /* the link is the console: from now on console text would corrupt frames */
    printk("copapy: console output stops now, the link starts on %s\n", link_dev->name);
    __printk_hook_install(discard_char);
#endif
    uart_irq_rx_enable(link_dev);
    host_was_connected = cpz_usb_host_connected(link_dev);
    return 0;
}

const char *cpz_link_name(void)
{
    return link_dev->name;
}

size_t cpz_link_read(uint8_t *buf, size_t cap)
{
    uint32_t n = ring_buf_get(&rx_ring, buf, (uint32_t)cap);
    if (rx_throttled && ring_buf_space_get(&rx_ring) >= CONFIG_COPAPY_RX_RING_SIZE / 2) {
        unsigned int key = irq_lock();
        rx_throttled = 0;
        uart_irq_rx_enable(link_dev);
        /* a byte that waited in the device raised no new interrupt on every UART (CMSDK's
         * is edge-triggered): take it now */
        link_callback(link_dev, NULL);
        irq_unlock(key);
    }
    return n;
}

void cpz_link_write(void *ctx, const uint8_t *bytes, size_t n)
{
    ARG_UNUSED(ctx);
    if (!cpz_usb_host_connected(link_dev)) {
        tx_dropped += (uint32_t)n; /* nobody listens (USB: the port is closed) */
        return;
    }
    int64_t deadline = k_uptime_get() + CONFIG_COPAPY_TX_STALL_MS;
    while (n > 0) {
        uint32_t put = ring_buf_put(&tx_ring, bytes, (uint32_t)n);
        bytes += put;
        n -= put;
        unsigned int key = irq_lock();
        if (!tx_active && !ring_buf_is_empty(&tx_ring)) {
            tx_active = 1;
            uart_irq_tx_enable(link_dev);
        }
        irq_unlock(key);
        if (n == 0) {
            break;
        }
        int64_t left = deadline - k_uptime_get();
        if (left <= 0 || k_sem_take(&tx_room, K_MSEC(left)) != 0) {
            tx_dropped += (uint32_t)n; /* stalled: drop the rest (the host retries) */
            return;
        }
    }
}

int cpz_link_wait(int32_t timeout_ms)
{
    return k_sem_take(&link_sem, timeout_ms < 0 ? K_FOREVER : K_MSEC(timeout_ms)) == 0;
}

void cpz_link_wake(void)
{
    k_sem_give(&link_sem);
}

int cpz_link_take_reset(void)
{
    /* bytes still queued for a closed port go out when it opens again; the host drops them
     * as responses to no open request */
    int now = cpz_usb_host_connected(link_dev);
    int changed = now != host_was_connected;
    host_was_connected = now;
    return changed;
}
