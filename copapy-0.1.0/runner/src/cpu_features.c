/* CPU features an image's code needs (its CPU_FEATURES section, docs/image.md): the names of
 * the bits, and the load-time check against what the platform's CPU executes. The bits are
 * declared by src/copapy/targets/<arch>.toml's [image_features]; this table must list them
 * in that order (tests/test_cpu_features.py). */
#include "internal.h"

/* x86_64: CPUID leaf 1 ecx, leaf 7 (subleaf 0) ebx, leaf 0x80000001 ecx. AVX-state features
 * need XCR0 bits 1-2 (SSE, YMM), AVX-512 also 5-7 (opmask, ZMM_Hi256, Hi16_ZMM). */
enum { R_EBX = 1, R_ECX = 2, XCR0_AVX = 0x06, XCR0_AVX512 = 0xe6 };

static const cp_cpuid_bit x86_64_bits[] = {
    [CP_X86_64_AVX] = {"avx", 1, R_ECX, 28, XCR0_AVX, 0},
    [CP_X86_64_AVX2] = {"avx2", 7, R_EBX, 5, XCR0_AVX, 0},
    [CP_X86_64_FMA] = {"fma", 1, R_ECX, 12, XCR0_AVX, 0},
    [CP_X86_64_BMI1] = {"bmi1", 7, R_EBX, 3, 0, 0},
    [CP_X86_64_BMI2] = {"bmi2", 7, R_EBX, 8, 0, 0},
    [CP_X86_64_F16C] = {"f16c", 1, R_ECX, 29, XCR0_AVX, 0},
    [CP_X86_64_MOVBE] = {"movbe", 1, R_ECX, 22, 0, 0},
    [CP_X86_64_ABM] = {"abm", 0x80000001u, R_ECX, 5, 0, 0},
    [CP_X86_64_XSAVE] = {"xsave", 1, R_ECX, 26, 0, 0},
    [CP_X86_64_AVX512F] = {"avx512f", 7, R_EBX, 16, XCR0_AVX512, 0},
    [CP_X86_64_AVX512BW] = {"avx512bw", 7, R_EBX, 30, XCR0_AVX512, 0},
    [CP_X86_64_AVX512CD] = {"avx512cd", 7, R_EBX, 28, XCR0_AVX512, 0},
    [CP_X86_64_AVX512DQ] = {"avx512dq", 7, R_EBX, 17, XCR0_AVX512, 0},
    [CP_X86_64_AVX512VL] = {"avx512vl", 7, R_EBX, 31, XCR0_AVX512, 0},
};

#define X86_64_COUNT ((uint32_t)(sizeof(x86_64_bits) / sizeof(x86_64_bits[0])))

const cp_cpuid_bit *cp_x86_64_features(uint32_t *count)
{
    *count = X86_64_COUNT;
    return x86_64_bits;
}

const char *cp_cpu_feature_name(uint16_t arch, uint32_t bit)
{
    return arch == CP_ARCH_X86_64 && bit < X86_64_COUNT ? x86_64_bits[bit].name : NULL;
}

uint64_t cp_cpu_features_known(uint16_t arch)
{
    return arch == CP_ARCH_X86_64 ? ((uint64_t)1 << X86_64_COUNT) - 1u : 0;
}

static size_t text_len(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

void cp_cpu_feature_list(uint16_t arch, uint64_t mask, char *buf, size_t cap)
{
    static const char more[] = ", ...";
    size_t len = 0;
    if (cap == 0) {
        return;
    }
    buf[0] = '\0';
    for (uint32_t bit = 0; bit < 64; bit++) {
        if (((mask >> bit) & 1u) == 0) {
            continue;
        }
        const char *name = cp_cpu_feature_name(arch, bit);
        const char *text = name != NULL ? name : "unknown";
        size_t need = (len != 0 ? 2u : 0u) + text_len(text);
        if (len + need + sizeof(more) > cap) { /* keep room for ", ..." and the NUL */
            if (len + sizeof(more) <= cap) {
                cp_copy((uint8_t *)buf + len, (const uint8_t *)more, sizeof(more));
            }
            return;
        }
        if (len != 0) {
            buf[len++] = ',';
            buf[len++] = ' ';
        }
        cp_copy((uint8_t *)buf + len, (const uint8_t *)text, text_len(text) + 1u);
        len += text_len(text);
    }
}

cp_status cp_check_cpu_features(const cp_image *img, const cp_platform *platform,
                                cp_error *err)
{
    if (img->cpu_features == 0) {
        return CP_OK;
    }
    uint64_t have = 0;
    if (platform->struct_size >= CP_PLATFORM_SIZE_ABI3 + sizeof(platform->cpu_features) &&
        platform->cpu_features != NULL) {
        have = platform->cpu_features(platform->ctx, platform->arch);
    }
    uint64_t missing = img->cpu_features & ~have;
    if (missing == 0) {
        return CP_OK;
    }
    /* the wire protocol carries 120 bytes of the message: the list is kept short, and the
     * detail carries every missing bit */
    char names[56];
    cp_cpu_feature_list(img->arch, missing, names, sizeof(names));
    return CP_FAIL(err, CP_ERR_CPU_FEATURES, (uint32_t)missing,
                   "this CPU lacks %s that the image needs: compile with arch=\"%s\"",
                   (uint64_t)(uintptr_t)names, (uint64_t)(uintptr_t)cp_arch_name(img->arch));
}
