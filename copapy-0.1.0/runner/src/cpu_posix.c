/* The POSIX platform's answer to "which CPU_FEATURES does this CPU execute" (cp_platform's
 * cpu_features hook, docs/image.md): x86_64 asks CPUID and, for the AVX and AVX-512 register
 * state, XGETBV (the operating system must save those registers, else the instructions
 * fault); other architectures have no optional features. COPAPY_CPU_FEATURES_MASK hides
 * features from the answer (tests, and checking that a program runs on an older CPU). */
#if defined(__unix__) || defined(__APPLE__) || defined(_WIN32) /* Windows: the same CPUID */

#include <stdlib.h>

#include "copapy/platform_posix.h"
#include "internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t detect(void)
{
    uint32_t leaf1[4] = {0, 0, 0, 0}, leaf7[4] = {0, 0, 0, 0}, ext1[4] = {0, 0, 0, 0};
    uint32_t max = __get_cpuid_max(0, NULL);
    if (max >= 1) {
        __cpuid_count(1, 0, leaf1[0], leaf1[1], leaf1[2], leaf1[3]);
    }
    if (max >= 7) {
        __cpuid_count(7, 0, leaf7[0], leaf7[1], leaf7[2], leaf7[3]);
    }
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) {
        __cpuid_count(0x80000001u, 0, ext1[0], ext1[1], ext1[2], ext1[3]);
    }
    /* OSXSAVE (leaf 1 ecx bit 27): XGETBV exists and tells which register state the OS saves */
    uint64_t xcr0 = (leaf1[2] >> 27) & 1u ? read_xcr0() : 0;
    uint32_t count;
    const cp_cpuid_bit *bits = cp_x86_64_features(&count);
    uint64_t have = 0;
    for (uint32_t i = 0; i < count; i++) {
        const uint32_t *regs = bits[i].leaf == 1 ? leaf1 : bits[i].leaf == 7 ? leaf7 : ext1;
        int present = (regs[bits[i].reg] >> bits[i].bit) & 1u;
        if (present && (xcr0 & bits[i].xcr0) == bits[i].xcr0) {
            have |= (uint64_t)1 << i;
        }
    }
    return have;
}
#define HOST_CPU_ARCH CP_ARCH_X86_64
#else
static uint64_t detect(void)
{
    return 0;
}
#define HOST_CPU_ARCH 0
#endif

static int is_separator(char c)
{
    return c == ',' || c == ' ' || c == '\t';
}

/* The bits COPAPY_CPU_FEATURES_MASK names: feature names separated by commas or spaces, or
 * "all". Names this runner does not know are ignored. */
static uint64_t masked_off(uint16_t arch)
{
    const char *env = getenv("COPAPY_CPU_FEATURES_MASK");
    uint64_t mask = 0;
    if (env == NULL) {
        return 0;
    }
    const char *p = env;
    while (*p != '\0') {
        while (is_separator(*p)) {
            p++;
        }
        size_t n = 0;
        while (p[n] != '\0' && !is_separator(p[n])) {
            n++;
        }
        if (n == 3 && p[0] == 'a' && p[1] == 'l' && p[2] == 'l') {
            return ~(uint64_t)0;
        }
        for (uint32_t bit = 0; n != 0 && bit < 64; bit++) {
            const char *name = cp_cpu_feature_name(arch, bit);
            size_t k = 0;
            while (name != NULL && k < n && name[k] == p[k]) {
                k++;
            }
            if (name != NULL && k == n && name[n] == '\0') {
                mask |= (uint64_t)1 << bit;
            }
        }
        p += n;
    }
    return mask;
}

uint64_t cp_posix_cpu_features(void *ctx, uint16_t arch)
{
    (void)ctx;
    if (arch != HOST_CPU_ARCH || arch == 0) {
        return 0; /* the features of another architecture's CPU: none here */
    }
    return detect() & ~masked_off(arch);
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int cp_cpu_posix_unavailable;

#endif
