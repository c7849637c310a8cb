/* Program memory: two slots (the server loads a new program into the one the tick thread does
 * not use, then swaps) in memory the CPU may execute:
 *   * teensy41: the ITCM. Zephyr's MPU regions make OCRAM execute-never (with XIP) and
 *     .ramfunc read-only, but no region covers the ITCM, so the privileged default map (RWX,
 *     never cached, zero wait states) applies. Zephyr links its .itcm section (empty in this
 *     app) at the start of the ITCM; the slots follow it, never at address 0 (a pad of
 *     CONFIG_COPAPY_ITCM_PAD bytes: a code pointer equal to NULL would be legal but fragile).
 *   * the QEMU board: the memory node of chosen copapy,code-area (mps2-an500's PSRAM at
 *     0x60000000, outside every Zephyr MPU region; qemu 7.2 does not implement its Block RAM).
 * Sealing is cache and barrier maintenance: write back the data cache over the region,
 * invalidate the instruction cache, then DSB and ISB before any of it runs. */
#include <zephyr/cache.h>
#include <zephyr/devicetree.h>
#include <zephyr/kernel.h>
#include <zephyr/linker/linker-defs.h>
#include <zephyr/sys/barrier.h>
#include <zephyr/sys/byteorder.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/util.h>

#include <string.h>

#include "cpz.h"

#if defined(CONFIG_CPU_CORTEX_M7)
#define RUNNER_ARCH CP_ARCH_CORTEX_M7
#elif defined(CONFIG_CPU_CORTEX_M55)
#define RUNNER_ARCH CP_ARCH_CORTEX_M55
#elif defined(CONFIG_CPU_CORTEX_M4)
#define RUNNER_ARCH CP_ARCH_CORTEX_M4
#else
#error "copapy has stencils for Cortex-M4, M7 and M55 only"
#endif

#if defined(CONFIG_COPAPY_CODE_AREA_ITCM)
#if !DT_NODE_HAS_STATUS(DT_CHOSEN(zephyr_itcm), okay)
#error "CONFIG_COPAPY_CODE_AREA_ITCM needs a chosen zephyr,itcm"
#endif
#define AREA_NODE DT_CHOSEN(zephyr_itcm)

static uintptr_t area_start(void)
{
    /* through the linker symbol: GCC 12 warns (-Warray-bounds) on small constant addresses */
    uintptr_t start = MAX((uintptr_t)__itcm_end,
                          (uintptr_t)DT_REG_ADDR(AREA_NODE) + CONFIG_COPAPY_ITCM_PAD);
    return ROUND_UP(start, 32);
}

#elif defined(CONFIG_COPAPY_CODE_AREA_DT)
#if !DT_HAS_CHOSEN(copapy_code_area)
#error "CONFIG_COPAPY_CODE_AREA_DT needs a chosen copapy,code-area memory node (board overlay)"
#endif
#define AREA_NODE DT_CHOSEN(copapy_code_area)

static uintptr_t area_start(void)
{
    return ROUND_UP((uintptr_t)DT_REG_ADDR(AREA_NODE), 32);
}
#endif

#define AREA_END ((uintptr_t)DT_REG_ADDR(AREA_NODE) + (uintptr_t)DT_REG_SIZE(AREA_NODE))

size_t cpz_slot_size(void)
{
    size_t half = ROUND_DOWN((AREA_END - area_start()) / 2u, 32);
    return CONFIG_COPAPY_SLOT_SIZE > 0 ? MIN((size_t)CONFIG_COPAPY_SLOT_SIZE, half) : half;
}

int cpz_in_slots(uint32_t address)
{
    uintptr_t start = area_start();
    return address >= start && address - start < 2u * cpz_slot_size();
}

uint8_t *cpz_slot(uint32_t index)
{
    return (uint8_t *)(area_start() + (index != 0 ? cpz_slot_size() : 0u));
}

#if !defined(CONFIG_COPAPY_USERSPACE)
static void *no_alloc(void *ctx, size_t size, size_t align)
{
    ARG_UNUSED(ctx);
    ARG_UNUSED(size);
    ARG_UNUSED(align);
    return NULL; /* the server hands out the slots itself */
}

static void no_free(void *ctx, void *base, size_t size)
{
    ARG_UNUSED(ctx);
    ARG_UNUSED(base);
    ARG_UNUSED(size);
}
#endif

#if defined(CONFIG_COPAPY_USERSPACE)
/* User mode (docs/zephyr.md, "User mode"): the job thread's MPU regions are the program's code
 * (RX) and data region (RW). An ARMv7-M region is a power of two aligned to its size, so the
 * platform places each program itself: the data region starts at B, a multiple of
 * A = max(C, D), with C and D the code and data sizes rounded up to powers of two; the code
 * region is [B - C, B), the data region [B, B + D). What these cover beyond the program is zeroed
 * slot memory, except the runner's tables (tasks, LET copies, I/O bindings) that the loader
 * puts right after the data: those saved here at seal time and checked after every job
 * (cpz_user_tables_check). data_offset and data_size come from the header of the image the
 * server is loading (the staging buffer; docs/image.md); seal checks they were the ones used. */
#define HDR_DATA_OFFSET 20u
#define HDR_DATA_SIZE 24u

struct user_slot {
    uint8_t used;
    uint32_t gen;
    uintptr_t base, code_start, code_size, data_start, data_size;
    uint32_t data_offset, data_bytes;
    uintptr_t tables;
    size_t tables_len;
    uint8_t snapshot[CONFIG_COPAPY_USER_TABLES_MAX];
};
static struct user_slot uslots[2];

static size_t pow2_at_least(size_t n)
{
    size_t p = 32;
    while (p < n) {
        p <<= 1;
    }
    return p;
}

static void *user_alloc(void *ctx, size_t size, size_t align)
{
    ARG_UNUSED(ctx);
    const uint8_t *h = cpz_staging();
    uint32_t data_offset = sys_get_le32(h + HDR_DATA_OFFSET);
    uint32_t data_size = sys_get_le32(h + HDR_DATA_SIZE);
    size_t c = pow2_at_least(MAX(data_offset, 1u)), d = pow2_at_least(MAX(data_size, 1u));
    size_t a = MAX(c, d);
    for (uint32_t i = 0; i < 2u; i++) {
        struct user_slot *u = &uslots[i];
        if (u->used) {
            continue;
        }
        uintptr_t start = (uintptr_t)cpz_slot(i), limit = start + cpz_slot_size();
        uintptr_t b = ROUND_UP(start + c, a);
        uintptr_t base = b - data_offset;
        uintptr_t end = MAX(base + size, b + d);
        if (b < start + c || end > limit || end < b || align == 0 || base % align != 0) {
            return NULL;
        }
        memset((void *)(b - c), 0, end - (b - c));
        u->used = 1;
        u->base = base;
        u->code_start = b - c;
        u->code_size = c;
        u->data_start = b;
        u->data_size = d;
        u->data_offset = data_offset;
        u->data_bytes = data_size;
        u->tables_len = 0;
        return (void *)base;
    }
    return NULL;
}

static struct user_slot *user_slot_at(uintptr_t base)
{
    for (uint32_t i = 0; i < 2u; i++) {
        if (uslots[i].used && uslots[i].base == base) {
            return &uslots[i];
        }
    }
    return NULL;
}

static void user_free(void *ctx, void *base, size_t size)
{
    ARG_UNUSED(ctx);
    ARG_UNUSED(size);
    struct user_slot *u = user_slot_at((uintptr_t)base);
    if (u != NULL) {
        u->used = 0;
        u->gen++;
    }
}

/* the tables inside the data MPU region: [data end, initial data), cut at the
 * region's end (program.c's layout: code | data | tasks | copies | bindings | initial data) */
static int user_snapshot(struct user_slot *u, size_t code_len, size_t size)
{
    if (code_len != u->data_offset || size < u->data_bytes) {
        printk("copapy: user mode: the image header changed during the load\n");
        return -1;
    }
    /* from the data's end: the padding before the tables (CP_DATA_END_ALIGN) is no data either */
    uintptr_t tables = u->base + code_len + u->data_bytes;
    uintptr_t end = MIN(u->base + size - u->data_bytes, u->data_start + u->data_size);
    size_t len = end > tables ? end - tables : 0u;
    if (len > sizeof(u->snapshot)) {
        printk("copapy: user mode: %u bytes of runner tables in the data MPU region, more than "
               "CONFIG_COPAPY_USER_TABLES_MAX=%u\n", (unsigned int)len,
               (unsigned int)sizeof(u->snapshot));
        return -1;
    }
    memcpy(u->snapshot, (const void *)tables, len);
    u->tables = tables;
    u->tables_len = len;
    u->gen++;
    return 0;
}

int cpz_user_slot_of(uintptr_t entry, uint32_t *id, uint32_t *gen, uintptr_t *code,
                     size_t *code_size, uintptr_t *data, size_t *data_size)
{
    for (uint32_t i = 0; i < 2u; i++) {
        struct user_slot *u = &uslots[i];
        if (u->used && entry - u->code_start < u->code_size) {
            *id = i;
            *gen = u->gen;
            *code = u->code_start;
            *code_size = u->code_size;
            *data = u->data_start;
            *data_size = u->data_size;
            return 0;
        }
    }
    return -1;
}

uintptr_t cpz_user_tables_check(uint32_t id)
{
    struct user_slot *u = &uslots[id & 1u];
    const uint8_t *t = (const uint8_t *)u->tables;
    for (size_t i = 0; i < u->tables_len; i++) {
        if (t[i] != u->snapshot[i]) {
            memcpy((void *)u->tables, u->snapshot, u->tables_len);
            return u->tables + i;
        }
    }
    return 0;
}
#endif

static int seal(void *ctx, void *base, size_t code_len, size_t size)
{
    ARG_UNUSED(ctx);
    ARG_UNUSED(code_len);
#if defined(CONFIG_COPAPY_USERSPACE)
    struct user_slot *u = user_slot_at((uintptr_t)base);
    if (u == NULL || user_snapshot(u, code_len, size) != 0) {
        return -1;
    }
#endif
#if defined(CONFIG_CACHE_MANAGEMENT)
    (void)sys_cache_data_flush_range(base, size);
    (void)sys_cache_instr_invd_all();
#else
    ARG_UNUSED(base);
    ARG_UNUSED(size);
#endif
    barrier_dsync_fence_full();
    barrier_isync_fence_full();
    return 0;
}

static const cp_platform platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = RUNNER_ARCH,
    .reserved = 0,
    .ctx = NULL,
#if defined(CONFIG_COPAPY_USERSPACE)
    .region_alloc = user_alloc,
    .region_seal = seal,
    .region_free = user_free,
#else
    .region_alloc = no_alloc,
    .region_seal = seal,
    .region_free = no_free,
#endif
    .max_region_size = 0,
};

const cp_platform *cpz_platform(void)
{
    return &platform;
}
