/* USB device bring-up behind two functions, so the rest of the firmware sees only a UART-API
 * device. Three cases:
 *   * the legacy device stack (Zephyr 3.x, CONFIG_USB_DEVICE_STACK; the only stack with an
 *     i.MX RT controller driver in 3.4): usb_enable() here; a host that sets 134 baud reboots
 *     the Teensy into its HalfKay loader (teensy_loader_cli -s, Teensyduino's convention);
 *   * the new stack (Zephyr 4.x, CONFIG_USB_DEVICE_STACK_NEXT): the CDC ACM class brings the
 *     device up at boot (CONFIG_CDC_ACM_SERIAL_INITIALIZE_AT_BOOT, usb_next.conf); nothing to
 *     do here (the Teensy reboot on 134 baud is CONFIG_BOOTLOADER_TEENSY of upstream's board);
 *   * a UART transport: nothing at all.
 * Whether a host has the port open is the DTR line on both USB stacks. */
#include <errno.h>
#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>

#include "cpz.h"

#if defined(CONFIG_COPAPY_TRANSPORT_USB)

#if defined(CONFIG_USB_DEVICE_STACK_NEXT)

#if !defined(CONFIG_CDC_ACM_SERIAL_INITIALIZE_AT_BOOT)
#error "USB_DEVICE_STACK_NEXT: set CONFIG_CDC_ACM_SERIAL_INITIALIZE_AT_BOOT=y (usb_next.conf)"
#endif

int cpz_usb_start(const struct device *dev)
{
    ARG_UNUSED(dev);
    return 0;
}

#elif defined(CONFIG_USB_DEVICE_STACK)

#include <zephyr/drivers/uart/cdc_acm.h>
#include <zephyr/usb/usb_device.h>

#if defined(CONFIG_CDC_ACM_DTE_RATE_CALLBACK_SUPPORT) && \
    (defined(CONFIG_BOARD_TEENSY41) || defined(CONFIG_BOARD_TEENSY40))
#define TEENSY_REBOOT 1
/* Teensyduino's reboot request: 134 baud. `bkpt #251` halts the core, which the Teensy's
 * bootloader chip (MKL02) sees as the request to take over. */
static void dte_rate(const struct device *dev, uint32_t rate)
{
    ARG_UNUSED(dev);
    if (rate == 134u) {
        __asm__ volatile("bkpt #251");
    }
}
#endif

int cpz_usb_start(const struct device *dev)
{
    int rc = usb_enable(NULL);
    if (rc != 0 && rc != -EALREADY) {
        return rc;
    }
#if defined(TEENSY_REBOOT)
    (void)cdc_acm_dte_rate_callback_set(dev, dte_rate);
#else
    ARG_UNUSED(dev);
#endif
    return 0;
}

#else
#error "CONFIG_COPAPY_TRANSPORT_USB needs CONFIG_USB_DEVICE_STACK or CONFIG_USB_DEVICE_STACK_NEXT"
#endif

int cpz_usb_host_connected(const struct device *dev)
{
    uint32_t dtr = 0;
    if (uart_line_ctrl_get(dev, UART_LINE_CTRL_DTR, &dtr) != 0) {
        return 1; /* the line state is unknown: assume someone listens */
    }
    return dtr != 0;
}

#else /* a UART transport */

int cpz_usb_start(const struct device *dev)
{
    ARG_UNUSED(dev);
    return 0;
}

int cpz_usb_host_connected(const struct device *dev)
{
    ARG_UNUSED(dev);
    return 1;
}

#endif
