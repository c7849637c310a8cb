/* The boot record (docs/zephyr.md, "Safety"): the safe values of the loaded program's
 * outputs, kept in .noinit RAM over a reset (the watchdog's, a fatal error's reboot), so the
 * board comes back driving them rather than the pins' power-on level.
 *
 * Written in the protocol context on every state change (COMMIT, START, STOP, RESET,
 * unload), into the older of two copies with a sequence number and a CRC: a reset in the
 * middle of a write leaves the other copy valid. main() drives the newest valid copy's
 * values right after the I/O devices are up, before the link starts. A power-on leaves both
 * copies invalid (RAM contents are random): nothing is driven. */
#include <zephyr/kernel.h>

#include <string.h>

#include "cpz.h"

#define BOOT_MAGIC 0x5a504e49u /* "INPZ" */
#define BOOT_SAFE_MAX 32u

typedef struct boot_safe {
    uint8_t kind;
    uint8_t reserved;
    uint16_t channel;
    uint32_t reserved2;
    double value;
} boot_safe;

typedef struct boot_record {
    uint32_t magic;
    uint32_t seq; /* the newer of two valid copies has the larger (wrapping) */
    uint32_t count;
    boot_safe out[BOOT_SAFE_MAX];
    uint32_t crc; /* cp_crc32 of everything above */
} boot_record;

static boot_record copies[2] __noinit;

static uint32_t boot_crc(const boot_record *r)
{
    return cp_crc32(0, (const uint8_t *)r, offsetof(boot_record, crc));
}

static int boot_valid(const boot_record *r)
{
    return r->magic == BOOT_MAGIC && r->count <= BOOT_SAFE_MAX && boot_crc(r) == r->crc;
}

/* The newest valid copy, or NULL. */
static const boot_record *boot_newest(void)
{
    int v0 = boot_valid(&copies[0]), v1 = boot_valid(&copies[1]);
    if (v0 && v1) {
        return (int32_t)(copies[1].seq - copies[0].seq) > 0 ? &copies[1] : &copies[0];
    }
    return v0 ? &copies[0] : v1 ? &copies[1] : NULL;
}

/* Protocol context (cpz_server's lock held): the safe values of the outputs the loaded
 * program drives, unless the newest copy already holds exactly these. */
void cpz_bootrec_update(void)
{
    boot_safe out[BOOT_SAFE_MAX];
    uint32_t n = 0;
    memset(out, 0, sizeof(out));
    const cp_program *p = cp_server_program(&cpz_server);
    for (uint32_t k = 0; p != NULL && k < p->io_binding_count && n < BOOT_SAFE_MAX; k++) {
        const cp_io_binding *b = &p->io_bindings[k];
        if (b->direction == CP_DIR_OUTPUT) {
            out[n].kind = b->kind;
            out[n].channel = b->channel;
            out[n].value = b->safe;
            n++;
        }
    }
    const boot_record *newest = boot_newest();
    if (newest != NULL && newest->count == n &&
        memcmp(newest->out, out, n * sizeof(out[0])) == 0) {
        return; /* unchanged (START, STOP, RESET of the same program) */
    }
    boot_record *r = newest == &copies[0] ? &copies[1] : &copies[0];
    r->magic = BOOT_MAGIC;
    r->seq = newest != NULL ? newest->seq + 1u : 1u;
    r->count = n;
    memcpy(r->out, out, sizeof(out));
    r->crc = boot_crc(r);
}

/* Boot: drive the newest valid copy's safe values; how many outputs it drove. */
uint32_t cpz_bootrec_apply(void)
{
    const boot_record *r = boot_newest();
    uint32_t driven = 0;
    for (uint32_t k = 0; r != NULL && k < r->count; k++) {
        driven += cpz_io_write(NULL, r->out[k].kind, r->out[k].channel, r->out[k].value) == 0;
    }
    return driven;
}
