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
#include <zephyr/sys/util.h>

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

static int seal(void *ctx, void *base, size_t code_len, size_t size)
{
    ARG_UNUSED(ctx);
    ARG_UNUSED(code_len);
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
    .region_alloc = no_alloc,
    .region_seal = seal,
    .region_free = no_free,
    .max_region_size = 0,
};

const cp_platform *cpz_platform(void)
{
    return &platform;
}
