/* Host platform on POSIX systems: the region is mmap'd read-write, its code part is switched to
 * read-execute after patching (never writable and executable at once). */
#if defined(__unix__) || defined(__APPLE__)

/* MAP_ANONYMOUS is not POSIX.1-2008; -std=c11 hides it without these. */
#define _DEFAULT_SOURCE 1
#define _DARWIN_C_SOURCE 1

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "copapy/platform_posix.h"

#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif

#if defined(__x86_64__)
#define HOST_ARCH CP_ARCH_X86_64
#elif defined(__i386__)
#define HOST_ARCH CP_ARCH_X86
#elif defined(__aarch64__)
#define HOST_ARCH CP_ARCH_AARCH64
#elif defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 64
#define HOST_ARCH CP_ARCH_RV64
#elif defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 32
#define HOST_ARCH CP_ARCH_RV32
#elif defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7 && \
    defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'A'
#define HOST_ARCH CP_ARCH_ARMV7A
#elif defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH == 6
#define HOST_ARCH CP_ARCH_ARMV6
#else
#define HOST_ARCH 0 /* no image can match: every load fails with ARCH */
#endif

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096u;
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static void *posix_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    size_t page = page_size();
    if (size == 0 || align == 0 || (align & (align - 1)) != 0 || size > SIZE_MAX / 2) {
        return NULL;
    }
    size_t len = round_up(size, page);
    if (align <= page) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* over-map by `align`, then give back the misaligned head and the unused tail */
    size_t span = len + align;
    uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if ((void *)raw == MAP_FAILED) {
        return NULL;
    }
    size_t head = (size_t)((align - (uintptr_t)raw % align) % align);
    if (head > 0) {
        munmap(raw, head);
    }
    size_t tail = span - head - len;
    if (tail > 0) {
        munmap(raw + head + len, tail);
    }
    return raw + head;
}

static int posix_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    (void)ctx;
    size_t page = page_size();
    size_t len = round_up(code_len, page);
    /* rounding past code_len would make data or the task table non-writable */
    if (len != code_len || len > round_up(size, page)) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    __builtin___clear_cache((char *)base, (char *)base + len);
    return mprotect(base, len, PROT_READ | PROT_EXEC) == 0 ? 0 : -1;
}

static void posix_free(void *ctx, void *base, size_t size)
{
    (void)ctx;
    if (base != NULL) {
        munmap(base, round_up(size, page_size()));
    }
}

static const cp_platform posix_platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = HOST_ARCH,
    .reserved = 0,
    .ctx = NULL,
    .region_alloc = posix_alloc,
    .region_seal = posix_seal,
    .region_free = posix_free,
    .max_region_size = 0,
};

const cp_platform *cp_platform_posix(void)
{
    return &posix_platform;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int cp_platform_posix_unavailable;

#endif
