/* copapy I/O channels on Zephyr's driver APIs. The map from channel numbers to pins lives in
 * the devicetree (a node compatible with copapy,io, dts/bindings/copapy,io.yaml): channel n of
 * a kind is entry n of its list (gpios, pwms, encoders, io-channels, dacs), then the `simulated`
 * ones. Without such a node every channel is simulated (CONFIG_COPAPY_SIM_IO_CHANNELS each).
 *
 * Values are doubles (docs/realtime.md): GPIO 0/1; PWM the duty cycle 0..1 (pulse = duty x the
 * specifier's period); ENCODER counts (rotation x counts-per-revolution / 360 of the sensor
 * API); ADC the reading normalised to 0..1 of full scale; DAC the output level 0..1 of full
 * scale (dac-resolution bits). A simulated channel is a stored
 * value either side may set. Called from the tick thread (bindings) and from the link thread
 * (IO_READ, IO_WRITE); the drivers serialise themselves, stored values take a spinlock. */
#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/kernel.h>
#include <zephyr/spinlock.h>
#include <zephyr/sys/util.h>

#include "cpz.h"

#define IO_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(copapy_io)
#define HAS_IO_NODE DT_NODE_EXISTS(IO_NODE)

/* Per kind (contract.h's CP_IO_KIND_TABLE: the devicetree property of each kind's channels):
 * the real channels the node lists, then the simulated ones (`simulated`: one number per
 * kind, in kind order). N_GPIO ... only select the driver code below. */
#if HAS_IO_NODE
#define N_GPIO DT_PROP_LEN_OR(IO_NODE, gpios, 0)
#define N_PWM DT_PROP_LEN_OR(IO_NODE, pwms, 0)
#define N_ENC DT_PROP_LEN_OR(IO_NODE, encoders, 0)
#define N_ADC DT_PROP_LEN_OR(IO_NODE, io_channels, 0)
#define N_DAC DT_PROP_LEN_OR(IO_NODE, dacs, 0)
#define REAL_COUNT(N, code, dirs, prop) DT_PROP_LEN_OR(IO_NODE, prop, 0),
#if DT_NODE_HAS_PROP(IO_NODE, simulated)
BUILD_ASSERT(DT_PROP_LEN(IO_NODE, simulated) == CP_IO_KIND_COUNT,
             "copapy,io: simulated = <n ...> needs one number per channel kind (GPIO PWM "
             "ENCODER ADC DAC ...: contract.h's CP_IO_KIND_TABLE)");
#define SIM_ADD(node, prop, idx) +DT_PROP_BY_IDX(node, prop, idx)
#define SIM_TOTAL (0 DT_FOREACH_PROP_ELEM(IO_NODE, simulated, SIM_ADD))
static const uint16_t n_sim[CP_IO_KIND_COUNT] = DT_PROP(IO_NODE, simulated);
#else
#define SIM_TOTAL 0
static const uint16_t n_sim[CP_IO_KIND_COUNT];
#endif
#else
#define N_GPIO 0
#define N_PWM 0
#define N_ENC 0
#define N_ADC 0
#define N_DAC 0
#define REAL_COUNT(N, code, dirs, prop) 0,
#define SIM_DEFAULT(N, code, dirs, prop) CONFIG_COPAPY_SIM_IO_CHANNELS,
#define SIM_TOTAL (CP_IO_KIND_COUNT * CONFIG_COPAPY_SIM_IO_CHANNELS)
static const uint16_t n_sim[CP_IO_KIND_COUNT] = {CP_IO_KIND_TABLE(SIM_DEFAULT)};
#endif

static const uint16_t n_real[CP_IO_KIND_COUNT] = {CP_IO_KIND_TABLE(REAL_COUNT)};
#define REAL_ADD(N, code, dirs, prop) +n_real[code - 1]

/* the simulated channels' values, kind after kind (kind k's from sim_base[k]) */
static double sim[MAX(SIM_TOTAL, 1)];
static uint32_t sim_base[CP_IO_KIND_COUNT];
static struct k_spinlock sim_lock;

/* ---- GPIO */
#if N_GPIO > 0
#if !defined(CONFIG_GPIO)
#error "copapy,io has gpios: set CONFIG_GPIO=y"
#endif
#include <zephyr/drivers/gpio.h>
#define GPIO_ENTRY(node, prop, idx) GPIO_DT_SPEC_GET_BY_IDX(node, prop, idx),
static const struct gpio_dt_spec gpios[] = {DT_FOREACH_PROP_ELEM(IO_NODE, gpios, GPIO_ENTRY)};
/* 0 not configured yet, 1 input, 2 output; set on first use in that direction */
static uint8_t gpio_dir[N_GPIO];
static double gpio_out[N_GPIO];

static int gpio_use(uint16_t ch, uint8_t dir)
{
    if (gpio_dir[ch] == dir) {
        return 0;
    }
    int rc = gpio_pin_configure_dt(&gpios[ch], dir == 2 ? GPIO_OUTPUT_INACTIVE : GPIO_INPUT);
    if (rc == 0) {
        gpio_dir[ch] = dir;
    }
    return rc;
}

static double gpio_read(uint16_t ch)
{
    if (gpio_dir[ch] == 2) {
        return gpio_out[ch]; /* an output reads back what drives it */
    }
    if (gpio_use(ch, 1) != 0) {
        return 0.0;
    }
    return gpio_pin_get_dt(&gpios[ch]) > 0 ? 1.0 : 0.0;
}

static int gpio_write(uint16_t ch, double v)
{
    if (gpio_use(ch, 2) != 0) {
        return 1;
    }
    int on = v != 0.0 && v == v; /* NaN: off */
    gpio_out[ch] = on ? 1.0 : 0.0;
    return gpio_pin_set_dt(&gpios[ch], on) != 0;
}
#endif

/* ---- PWM */
#if N_PWM > 0
#if !defined(CONFIG_PWM)
#error "copapy,io has pwms: set CONFIG_PWM=y"
#endif
#include <zephyr/drivers/pwm.h>
#define PWM_ENTRY(node, prop, idx) PWM_DT_SPEC_GET_BY_IDX(node, idx),
static const struct pwm_dt_spec pwms[] = {DT_FOREACH_PROP_ELEM(IO_NODE, pwms, PWM_ENTRY)};
static double pwm_duty[N_PWM];

static int pwm_write(uint16_t ch, double v)
{
    double duty = v > 0.0 ? (v < 1.0 ? v : 1.0) : 0.0; /* NaN: 0 */
    uint32_t period = pwms[ch].period;
    uint32_t pulse = (uint32_t)(duty * (double)period + 0.5);
    pwm_duty[ch] = duty;
    return pwm_set_dt(&pwms[ch], period, pulse > period ? period : pulse) != 0;
}
#endif

/* ---- quadrature encoders (sensor API) */
#if N_ENC > 0
#if !defined(CONFIG_SENSOR)
#error "copapy,io has encoders: set CONFIG_SENSOR=y (and the decoder's driver, e.g. QDEC_MCUX)"
#endif
#include <zephyr/drivers/sensor.h>
#define ENC_NODE(idx) DT_PHANDLE_BY_IDX(IO_NODE, encoders, idx)
#define ENC_DEV(node, prop, idx) DEVICE_DT_GET(ENC_NODE(idx)),
#define ENC_CPR(node, prop, idx) DT_PROP_OR(ENC_NODE(idx), counts_per_revolution, 360),
static const struct device *const encoders[] = {DT_FOREACH_PROP_ELEM(IO_NODE, encoders,
                                                                     ENC_DEV)};
static const uint32_t enc_cpr[] = {DT_FOREACH_PROP_ELEM(IO_NODE, encoders, ENC_CPR)};

static double enc_read(uint16_t ch)
{
    struct sensor_value rot;
    if (sensor_sample_fetch(encoders[ch]) != 0 ||
        sensor_channel_get(encoders[ch], SENSOR_CHAN_ROTATION, &rot) != 0) {
        return 0.0;
    }
    /* degrees -> counts, rounded (the MCUX driver computes degrees in float: exact up to a
     * few million counts) */
    double counts = sensor_value_to_double(&rot) * (double)enc_cpr[ch] / 360.0;
    return (double)(int64_t)(counts + (counts >= 0.0 ? 0.5 : -0.5));
}
#endif

/* ---- ADC */
#if N_ADC > 0
#if !defined(CONFIG_ADC)
#error "copapy,io has io-channels: set CONFIG_ADC=y"
#endif
#include <zephyr/drivers/adc.h>
#define ADC_ENTRY(node, prop, idx) ADC_DT_SPEC_GET_BY_IDX(node, idx),
static const struct adc_dt_spec adcs[] = {DT_FOREACH_PROP_ELEM(IO_NODE, io_channels,
                                                               ADC_ENTRY)};

static double adc_sample(uint16_t ch)
{
    int16_t raw = 0;
    struct adc_sequence seq = {
        .buffer = &raw,
        .buffer_size = sizeof(raw),
    };
    if (adc_sequence_init_dt(&adcs[ch], &seq) != 0 || adc_read(adcs[ch].dev, &seq) != 0) {
        return 0.0;
    }
    uint32_t full = (1u << seq.resolution) - 1u;
    return raw <= 0 ? 0.0 : (double)raw / (double)full;
}
#endif

/* ---- DAC outputs */
#if N_DAC > 0
#if !defined(CONFIG_DAC)
#error "copapy,io has dacs: set CONFIG_DAC=y"
#endif
#include <zephyr/drivers/dac.h>
#define DAC_DEV(node, prop, idx) DEVICE_DT_GET(DT_PHANDLE_BY_IDX(IO_NODE, dacs, idx)),
#define DAC_OUTPUT(node, prop, idx) DT_PHA_BY_IDX(IO_NODE, dacs, idx, output),
static const struct device *const dacs[] = {DT_FOREACH_PROP_ELEM(IO_NODE, dacs, DAC_DEV)};
static const uint8_t dac_output[] = {DT_FOREACH_PROP_ELEM(IO_NODE, dacs, DAC_OUTPUT)};
#define DAC_BITS DT_PROP(IO_NODE, dac_resolution)
static double dac_level[N_DAC];

static int dac_write(uint16_t ch, double v)
{
    double level = v > 0.0 ? (v < 1.0 ? v : 1.0) : 0.0; /* NaN: 0 */
    uint32_t full = (1u << DAC_BITS) - 1u;
    dac_level[ch] = level;
    return dac_write_value(dacs[ch], dac_output[ch], (uint32_t)(level * (double)full + 0.5)) != 0;
}
#endif

/* ---- dispatch */

/* 1: a real channel; 0: a simulated one, its value at sim[*sim_index]; -1: none. */
static int split(uint8_t kind, uint16_t channel, uint16_t *sim_index)
{
    if (kind < 1 || kind > CP_IO_KIND_COUNT) {
        return -1;
    }
    uint32_t k = kind - 1u;
    if (channel < n_real[k]) {
        return 1; /* real */
    }
    if (channel - n_real[k] < n_sim[k]) {
        *sim_index = (uint16_t)(sim_base[k] + channel - n_real[k]);
        return 0; /* simulated */
    }
    return -1;
}

double cpz_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    ARG_UNUSED(ctx);
    uint16_t si = 0;
    int where = split(kind, channel, &si);
    if (where == 0) {
        k_spinlock_key_t key = k_spin_lock(&sim_lock);
        double v = sim[si];
        k_spin_unlock(&sim_lock, key);
        return v;
    }
    if (where < 0) {
        return 0.0;
    }
    switch (kind) {
#if N_GPIO > 0
    case CP_IO_GPIO:
        return gpio_read(channel);
#endif
#if N_PWM > 0
    case CP_IO_PWM:
        return pwm_duty[channel];
#endif
#if N_ENC > 0
    case CP_IO_ENCODER:
        return enc_read(channel);
#endif
#if N_ADC > 0
    case CP_IO_ADC:
        return adc_sample(channel);
#endif
#if N_DAC > 0
    case CP_IO_DAC:
        return dac_level[channel]; /* an output reads back what drives it */
#endif
    default:
        return 0.0;
    }
}

int cpz_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    ARG_UNUSED(ctx);
    uint16_t si = 0;
    int where = split(kind, channel, &si);
    if (where == 0) {
        k_spinlock_key_t key = k_spin_lock(&sim_lock);
        sim[si] = value;
        k_spin_unlock(&sim_lock, key);
        return 0;
    }
    if (where < 0) {
        return 1;
    }
    switch (kind) {
#if N_GPIO > 0
    case CP_IO_GPIO:
        return gpio_write(channel, value);
#endif
#if N_PWM > 0
    case CP_IO_PWM:
        return pwm_write(channel, value);
#endif
#if N_DAC > 0
    case CP_IO_DAC:
        return dac_write(channel, value);
#endif
    default:
        return 1; /* encoders and ADC inputs cannot be driven */
    }
}

/* LOAD_COMMIT: a real channel serves the directions its kind's hardware has (contract.h:
 * PWM and DAC outputs, encoders and ADC inputs, GPIO either way); a simulated plant's bindings
 * (cp.io.plant) need simulated channels. */
#define DIRS_CASE(N, code, dirs, prop) case code: mask = dirs; break;
const char *cpz_io_check(void *ctx, const cp_io_binding *b)
{
    ARG_UNUSED(ctx);
    uint16_t si = 0;
    if (split(b->kind, b->channel, &si) != 1) {
        return NULL; /* simulated (the server checked the count already) */
    }
    uint32_t mask = 0;
    switch (b->kind) {
    CP_IO_KIND_TABLE(DIRS_CASE)
    default: break;
    }
    if ((mask & b->direction) != 0) {
        return NULL;
    }
    switch (b->kind) {
    case CP_IO_PWM:
        return "this board's PWM channels are outputs";
    case CP_IO_ENCODER:
        return "this board's encoders are inputs";
    case CP_IO_ADC:
        return "this board's ADC channels are inputs";
    case CP_IO_DAC:
        return "this board's DAC channels are outputs";
    default:
        return b->direction == CP_DIR_OUTPUT ? "this board's channels of that kind are inputs"
                                             : "this board's channels of that kind are outputs";
    }
}

int cpz_io_init(uint16_t channels[CP_IO_KIND_COUNT], uint8_t *simulated_only)
{
    int rc = 0;
#if N_GPIO > 0
    for (size_t i = 0; i < N_GPIO; i++) {
        if (!gpio_is_ready_dt(&gpios[i])) {
            rc = -ENODEV;
        }
    }
#endif
#if N_PWM > 0
    for (size_t i = 0; i < N_PWM; i++) {
        if (!pwm_is_ready_dt(&pwms[i])) {
            rc = -ENODEV;
        }
    }
#endif
#if N_ENC > 0
    for (size_t i = 0; i < N_ENC; i++) {
        if (!device_is_ready(encoders[i])) {
            rc = -ENODEV;
        }
    }
#endif
#if N_ADC > 0
    for (size_t i = 0; i < N_ADC; i++) {
        if (!adc_is_ready_dt(&adcs[i]) || adc_channel_setup_dt(&adcs[i]) != 0) {
            rc = -ENODEV;
        }
    }
#endif
#if N_DAC > 0
    for (size_t i = 0; i < N_DAC; i++) {
        struct dac_channel_cfg cfg = {.channel_id = dac_output[i], .resolution = DAC_BITS};
        if (!device_is_ready(dacs[i]) || dac_channel_setup(dacs[i], &cfg) != 0) {
            rc = -ENODEV;
        }
    }
#endif
    uint32_t base = 0;
    for (int k = 0; k < CP_IO_KIND_COUNT; k++) {
        channels[k] = (uint16_t)(n_real[k] + n_sim[k]);
        sim_base[k] = base;
        base += n_sim[k];
    }
    *simulated_only = (0 CP_IO_KIND_TABLE(REAL_ADD)) == 0;
    return rc;
}
