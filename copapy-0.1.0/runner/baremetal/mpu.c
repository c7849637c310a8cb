/* Exact covers of address ranges with ARMv7-M MPU regions (mpu.h). Pure: no register access,
 * so the host can compile and check it. */
#include "mpu.h"

static uint32_t log2_of(uint32_t pow2)
{
    uint32_t k = 0;
    while ((pow2 >> k) > 1u) {
        k++;
    }
    return k;
}

int mpu_cover(uint32_t floor, uint32_t lo, uint32_t hi, uint32_t attr, mpu_region *out,
              int *n, int max)
{
    if (lo % 32u != 0 || hi % 32u != 0 || lo >= hi || floor > lo) {
        return -1;
    }
    /* a subregion never starts below floor: at most floor's own alignment (and a region of
     * at most 2 GB) */
    uint32_t cap = floor != 0 ? floor & (0u - floor) : 1u << 28;
    if (cap > 1u << 28) {
        cap = 1u << 28;
    }
    while (hi > lo) {
        uint32_t sub = hi & (0u - hi); /* the region ends at hi: subregions hi is a multiple of */
        if (sub > cap) {
            sub = cap;
        }
        uint32_t size = sub * 8u;
        uint32_t base = (hi - 1u) & ~(size - 1u);
        uint32_t start = lo & ~(sub - 1u);
        if (start < base) {
            start = base;
        }
        uint32_t first = (start - base) / sub, end = (hi - base) / sub; /* enabled: [first, end) */
        uint32_t enabled = ((1u << end) - 1u) & ~((1u << first) - 1u);
        if (*n >= max) {
            return -1;
        }
        out[*n].rbar = base;
        out[*n].rasr = attr | ((~enabled & 0xffu) << 8) | ((log2_of(size) - 1u) << 1) |
                       MPU_RASR_ENABLE;
        (*n)++;
        hi = start;
    }
    return 0;
}

int mpu_program(uint32_t s, uint32_t code_end, uint32_t data_end, mpu_region *out, int max)
{
    int n = 0;
    if ((data_end <= code_end ||
         mpu_cover(s, code_end, data_end, MPU_RASR_XN | MPU_AP_FULL | MPU_NORMAL, out, &n,
                   max) == 0) &&
        (code_end <= s ||
         mpu_cover(s, s, code_end, MPU_AP_PRIV_RW_USER_RO | MPU_NORMAL, out, &n, max) == 0)) {
        return n;
    }
    n = 0;
    if (data_end > s && mpu_cover(s, s, data_end, MPU_AP_FULL | MPU_NORMAL, out, &n, max) != 0) {
        return -1;
    }
    return n;
}
