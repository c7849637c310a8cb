/* The ARMv7-M MPU regions that confine an unprivileged task to its program (runner_fw.c):
 * code RX, data RW and execute-never, the task stack RW and execute-never, nothing else.
 *
 * ARMv7-M (PMSAv7) regions are a power of two in size (32 bytes .. 4 GB), aligned to their
 * size, with 8 equal subregions (regions of 256 bytes or more) that can be disabled one by
 * one. A range of 32-byte granules is covered exactly by a few regions, finest last: the
 * region that ends at `hi` has subregions of the largest power of two dividing `hi`, so each
 * further region is 8 times coarser (about log8(size / 32) regions, 5 for 1 MB). Where
 * regions overlap the higher number wins: the code regions come after the data regions, so a
 * data region may reach down into the code (never below `floor`).
 *
 * ARMv8-M (PMSAv8, Cortex-M55) needs none of this: a region is a base and a limit at 32-byte
 * granularity, one region per range. mpu_cover is ARMv7-M only; it is pure (host-testable:
 * tests/test_fw_isolation.py compiles it for the host and checks every cover it makes). */
#ifndef CP_BAREMETAL_MPU_H
#define CP_BAREMETAL_MPU_H

#include <stdint.h>

/* RASR bits */
#define MPU_RASR_ENABLE 1u
#define MPU_RASR_XN (1u << 28)
#define MPU_AP_PRIV_RW (1u << 24)        /* privileged RW, unprivileged no access */
#define MPU_AP_PRIV_RW_USER_RO (2u << 24) /* privileged RW, unprivileged read-only */
#define MPU_AP_FULL (3u << 24)           /* read-write for both */
#define MPU_NORMAL (1u << 19)            /* TEX 001, C 0, B 0: normal, non-cacheable */

typedef struct mpu_region {
    uint32_t rbar; /* base address (the region number goes into RNR) */
    uint32_t rasr; /* size, subregion disables, attributes, enable */
} mpu_region;

/* Covers [lo, hi) (both multiples of 32, lo < hi) exactly with regions of attributes
 * `attr` (AP, XN, TEX/C/B bits of RASR), appended to out[*n..max). A region may also cover
 * [floor, lo) when that is coarser (the caller overrides it with higher regions); floor must
 * be aligned to 8 times the largest subregion used, i.e. to the power of two above hi - floor.
 * Returns 0, or -1 if more than `max` regions would be needed (*n is then unspecified). */
int mpu_cover(uint32_t floor, uint32_t lo, uint32_t hi, uint32_t attr, mpu_region *out,
              int *n, int max);

/* The regions of a program at slot base s (aligned to the power of two above data_end - s):
 * code [s, code_end) read-only and executable for a task, data [code_end, data_end)
 * read-write and execute-never, data first so the code regions win where they overlap. When
 * that takes more than `max` regions (the cost is about the octal digits of both sizes), the
 * whole [s, data_end) read-write-execute for the task: still nothing outside the program (a
 * task's own code is no secret and no privilege: its image brought it). Returns the number
 * of regions in out, or -1 if even that does not fit. */
int mpu_program(uint32_t s, uint32_t code_end, uint32_t data_end, mpu_region *out, int max);

#endif
