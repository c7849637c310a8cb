/* What the two Cortex-M firmwares' boot records share (runner/baremetal/runner_fw.c and
 * zephyr_app/src/bootrec.c): the safe values of the loaded program's outputs, kept in RAM
 * that start-up does not clear, so the board drives them first thing after a reset. Two
 * copies, each with a sequence number and a CRC; a write goes into the older one, so a reset
 * in the middle of it leaves the other valid. Header-only (static): each firmware places the
 * copies and decides when to write and apply them. CM_BOOT_SAFE_MAX (outputs per record) may
 * be defined before the include. */
#ifndef COPAPY_CM_BOOT_RECORD_H
#define COPAPY_CM_BOOT_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/runner.h"

#define CM_BOOT_MAGIC 0x43504e49u /* "INPC" */
#ifndef CM_BOOT_SAFE_MAX
#define CM_BOOT_SAFE_MAX 24u
#endif

typedef struct cm_boot_safe {
    uint8_t kind;
    uint8_t reserved;
    uint16_t channel;
    uint32_t reserved2;
    double value;
} cm_boot_safe;

typedef struct cm_boot_record {
    uint32_t magic;
    uint32_t seq; /* the newer of two valid copies has the larger (wrapping) */
    uint32_t count;
    cm_boot_safe out[CM_BOOT_SAFE_MAX];
    uint32_t crc; /* cp_crc32 of everything above */
} cm_boot_record;

static inline uint32_t cm_boot_crc(const cm_boot_record *r)
{
    return cp_crc32(0, (const uint8_t *)r, offsetof(cm_boot_record, crc));
}

static inline int cm_boot_valid(const cm_boot_record *r)
{
    return r->magic == CM_BOOT_MAGIC && r->count <= CM_BOOT_SAFE_MAX && cm_boot_crc(r) == r->crc;
}

/* The newest valid of the two copies, or NULL. */
static inline const cm_boot_record *cm_boot_newest(const cm_boot_record copy[2])
{
    int v0 = cm_boot_valid(&copy[0]), v1 = cm_boot_valid(&copy[1]);
    if (v0 && v1) {
        return (int32_t)(copy[1].seq - copy[0].seq) > 0 ? &copy[1] : &copy[0];
    }
    return v0 ? &copy[0] : v1 ? &copy[1] : (const cm_boot_record *)0;
}

/* The safe values of the outputs `p` drives (p may be NULL: none), at most CM_BOOT_SAFE_MAX
 * into `out`; how many. */
static inline uint32_t cm_boot_outputs(const cp_program *p, cm_boot_safe *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; p != (const cp_program *)0 && p->loaded && k < p->io_binding_count &&
                         n < CM_BOOT_SAFE_MAX; k++) {
        const cp_io_binding *b = &p->io_bindings[k];
        if (b->direction == CP_DIR_OUTPUT) {
            out[n].kind = b->kind;
            out[n].reserved = 0;
            out[n].channel = b->channel;
            out[n].reserved2 = 0;
            out[n].value = b->safe;
            n++;
        }
    }
    return n;
}

/* 1 if the newest copy `r` (may be NULL) holds exactly these `n` values. */
static inline int cm_boot_same(const cm_boot_record *r, const cm_boot_safe *out, uint32_t n)
{
    if (r == (const cm_boot_record *)0 || r->count != n) {
        return 0;
    }
    const uint8_t *x = (const uint8_t *)r->out, *y = (const uint8_t *)out;
    for (uint32_t k = 0; k < n * sizeof(out[0]); k++) {
        if (x[k] != y[k]) {
            return 0;
        }
    }
    return 1;
}

/* Starts a write of `count` values: the older copy, its header set for the next sequence
 * number. The caller fills out[0, count), then seals it with cm_boot_seal. */
static inline cm_boot_record *cm_boot_begin(cm_boot_record copy[2], uint32_t count)
{
    const cm_boot_record *newest = cm_boot_newest(copy);
    cm_boot_record *r = newest == &copy[0] ? &copy[1] : &copy[0];
    r->magic = CM_BOOT_MAGIC;
    r->seq = newest != (const cm_boot_record *)0 ? newest->seq + 1u : 1u;
    r->count = count;
    return r;
}

static inline void cm_boot_seal(cm_boot_record *r)
{
    r->crc = cm_boot_crc(r);
}

#endif
