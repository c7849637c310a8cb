/* The boot record (docs/zephyr.md, "Safety"): the safe values of the loaded program's
 * outputs, kept in .noinit RAM over a reset (the watchdog's, a fatal error's reboot), so the
 * board comes back driving them rather than the pins' power-on level. The record's layout and
 * its two CRC'd copies are the bare-metal firmware's (runner/cortexm/cm_boot_record.h).
 *
 * Written in the protocol context on every state change (COMMIT, START, STOP, RESET,
 * unload); main() drives the newest valid copy's values right after the I/O devices are up,
 * before the link starts. A power-on leaves both copies invalid (RAM contents are random):
 * nothing is driven. */
#include <zephyr/kernel.h>

#include <string.h>

#define CM_BOOT_SAFE_MAX 32u
#include "cm_boot_record.h"
#include "cpz.h"

static cm_boot_record copies[2] __noinit;

/* Protocol context (cpz_server's lock held): the safe values of the outputs the loaded
 * program drives, unless the newest copy already holds exactly these. */
void cpz_bootrec_update(void)
{
    cm_boot_safe out[CM_BOOT_SAFE_MAX];
    uint32_t n = cm_boot_outputs(cp_server_program(&cpz_server), out);
    if (cm_boot_same(cm_boot_newest(copies), out, n)) {
        return; /* unchanged (START, STOP, RESET of the same program) */
    }
    cm_boot_record *r = cm_boot_begin(copies, n);
    memcpy(r->out, out, n * sizeof(out[0]));
    cm_boot_seal(r);
}

/* Boot: drive the newest valid copy's safe values; how many outputs it drove. */
uint32_t cpz_bootrec_apply(void)
{
    const cm_boot_record *r = cm_boot_newest(copies);
    uint32_t driven = 0;
    for (uint32_t k = 0; r != NULL && k < r->count; k++) {
        driven += cpz_io_write(NULL, r->out[k].kind, r->out[k].channel, r->out[k].value) == 0;
    }
    return driven;
}
