/* SPDX-License-Identifier: Apache-2.0 */
/* MPS2 AN500: register the FPGAIO LED / button / misc registers as GPIO ports. */
#include <zephyr/kernel.h>
#include <soc.h>

#if defined(CONFIG_GPIO_MMIO32)
#include <zephyr/drivers/gpio/gpio_mmio32.h>

#define FPGAIO_NODE(n) DT_INST(n, arm_mps2_fpgaio_gpio)
#define FPGAIO_INIT(n)                                                         \
	GPIO_MMIO32_INIT(FPGAIO_NODE(n), DT_REG_ADDR(FPGAIO_NODE(n)),         \
			 BIT_MASK(DT_PROP(FPGAIO_NODE(n), ngpios)))

/* led0, button and misc, as on the AN385 */
FPGAIO_INIT(0);
FPGAIO_INIT(1);
FPGAIO_INIT(2);
#endif
