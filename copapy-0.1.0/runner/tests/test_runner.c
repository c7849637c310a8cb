/* Unit tests of the runner core: image validation (every error code), loading, running and the
 * generic patch against hand-computed (and llvm-mc verified) instruction words. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_image.h"
#include "check.h"

#if defined(_WIN32) /* the C runtime's names: an empty value removes the variable */
#define setenv(name, value, overwrite) _putenv_s((name), (value))
#define unsetenv(name) _putenv_s((name), "")
#endif

static int verbose;

static cp_status validate(const uint8_t *img, size_t len, cp_error *err)
{
    return cp_image_validate(img, len, CP_ARCH_X86_64, err);
}

static uint32_t data_i32(const cp_program *p, uint32_t offset)
{
    const uint8_t *d = cp_program_data(p) + offset;
    return (uint32_t)d[0] | ((uint32_t)d[1] << 8) | ((uint32_t)d[2] << 16) |
           ((uint32_t)d[3] << 24);
}

static void test_crc(void)
{
    const uint8_t s[] = "123456789";
    CHECK(cp_crc32(0, s, 9) == 0xcbf43926u);
    CHECK(cp_crc32(cp_crc32(0, s, 4), s + 4, 5) == 0xcbf43926u);
    CHECK(cp_crc32(0, NULL, 0) == 0);
}

static void test_status_names(void)
{
    static const char *const want[] = {"OK", "TRUNCATED", "MAGIC", "VERSION", "CRC", "ARCH",
                                       "LAYOUT", "PATCH", "NOMEM", "TOO_LARGE", "ARGUMENT"};
    for (int i = 0; i <= CP_ERR_ARGUMENT; i++) {
        CHECK(strcmp(cp_status_name((cp_status)i), want[i]) == 0);
    }
    CHECK(strcmp(cp_status_name((cp_status)99), "UNKNOWN") == 0);
}

static void test_happy_path(void)
{
    tb_image img;
    std_image(&img);
    cp_error err = tb_error();
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_OK);
    CHECK(err.code == CP_OK && err.message[0] == '\0');

    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    cp_program prog = tb_program();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    CHECK(prog.loaded == 1 && prog.base != NULL);
    CHECK(((uintptr_t)prog.base & 4095u) == 0);
    CHECK(prog.code_size == STD_CODE_SIZE && prog.data_offset == STD_DATA_OFFSET);
    CHECK(prog.data_size == STD_DATA_SIZE && prog.task_count == 4);
    CHECK(prog.region_size >= STD_DATA_OFFSET + STD_DATA_SIZE + 4 * sizeof(cp_task_entry));
    CHECK(prog.tasks[1].period_ns == 1000000 && prog.tasks[1].priority == 1);
    CHECK(prog.platform == &pf);
    CHECK(ctx.allocs == 1 && ctx.seals == 1 && ctx.frees == 0);
    /* code copied and patched with the absolute address of data[0] */
    CHECK(prog.base[0] == 0xc3 && prog.base[8] == 0x48 && prog.base[9] == 0xb8);
    uint64_t abs = 0;
    for (int i = 7; i >= 0; i--) {
        abs = (abs << 8) | prog.base[10 + i];
    }
    CHECK(abs == (uint64_t)(uintptr_t)cp_program_data(&prog));
    /* gap zero, data init copied, rest zero */
    CHECK(prog.base[STD_CODE_SIZE] == 0 && prog.base[STD_DATA_OFFSET - 1] == 0);
    CHECK(data_i32(&prog, 12) == 0x11223344u);
    CHECK(data_i32(&prog, 0) == 0 && data_i32(&prog, 60) == 0);

#if defined(__x86_64__)
    CHECK_STATUS(cp_program_run(&prog, 0), CP_OK);
    CHECK_STATUS(cp_program_run(&prog, 1), CP_OK);
    CHECK(data_i32(&prog, 0) == 42);
    for (int i = 0; i < 5; i++) {
        CHECK_STATUS(cp_program_run(&prog, 2), CP_OK);
    }
    CHECK(data_i32(&prog, 4) == 5);
    CHECK_STATUS(cp_program_run(&prog, 3), CP_OK);
    CHECK(data_i32(&prog, 8) == 7);
#endif
    CHECK_STATUS(cp_program_run(&prog, 4), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_program_run(NULL, 0), CP_ERR_ARGUMENT);

    /* loading into a struct that still holds a program is refused, not leaked */
    cp_program copy = prog;
    CHECK_STATUS(cp_program_load(&copy, img.bytes, img.len, &pf, &err), CP_ERR_ARGUMENT);

    cp_program_unload(&prog);
    CHECK(prog.loaded == 0 && prog.base == NULL && prog.struct_size == sizeof(prog));
    CHECK(ctx.frees == 1);
    CHECK_STATUS(cp_program_run(&prog, 0), CP_ERR_ARGUMENT);
    cp_program_unload(&prog); /* twice is fine */
    cp_program zero;
    memset(&zero, 0, sizeof(zero));
    cp_program_unload(&zero);
    cp_program_unload(NULL);
    CHECK(ctx.frees == 1);
}

/* The ABI 3 entries (40-byte tasks, 24-byte bindings) and an optional unknown section. */
static void test_extended_entries(void)
{
    tb_image img;
    std_image_ext(&img);
    cp_error err = tb_error();
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    cp_program prog = tb_program();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    CHECK(prog.task_count == 4 && prog.tasks[1].period_ns == 1000000);
    CHECK(prog.tasks[3].budget_ns == 3000 && prog.tasks[2].link_timeout_ns == 400000000);
    CHECK(prog.io_binding_count == 2);
    int seen = 0;
    for (uint32_t i = 0; i < 2; i++) {
        const cp_io_binding *b = &prog.io_bindings[i];
        seen += b->direction == CP_DIR_OUTPUT && b->safe == 0.5;
        seen += b->direction == CP_DIR_INPUT && b->safe == 0.0;
    }
    CHECK(seen == 2);
    cp_program_unload(&prog);
    /* the v1-sized image reads the appended fields as 0 */
    std_image(&img);
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    CHECK(prog.tasks[3].budget_ns == 0 && prog.tasks[2].link_timeout_ns == 0 &&
          prog.io_bindings[0].safe == 0.0 && prog.io_bindings[1].safe == 0.0);
    cp_program_unload(&prog);
    /* the TOO_LARGE error names the platform's option */
    pf.max_region_size = 100;
    pf.memory_option = "--max-memory BYTES";
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_TOO_LARGE);
    CHECK(strstr(err.message, "at most 100") != NULL &&
          strstr(err.message, "(--max-memory BYTES)") != NULL);
}

static void test_posix_platform(void)
{
    const cp_platform *pf = cp_platform_posix();
    CHECK(pf != NULL && pf->struct_size == sizeof(cp_platform));
    CHECK(pf->abi_version == CP_RUNNER_ABI_VERSION);
#if defined(__x86_64__)
    CHECK(pf->arch == CP_ARCH_X86_64);
    tb_image img;
    std_image(&img);
    cp_program prog = tb_program();
    cp_error err = tb_error();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, pf, &err), CP_OK);
    CHECK_STATUS(cp_program_run(&prog, 1), CP_OK);
    CHECK(data_i32(&prog, 0) == 42);
    cp_program_unload(&prog);
#endif
    /* over-aligned allocation (base_align 65536 is larger than a page) */
    uint8_t *p = pf->region_alloc(pf->ctx, 100000, 65536);
    CHECK(p != NULL && ((uintptr_t)p & 65535u) == 0);
    if (p != NULL) {
        p[0] = 1;
        p[99999] = 2;
        CHECK(pf->region_seal(pf->ctx, p, 65536, 100000) == 0);
        p[65536] = 3; /* data beyond code_len stays writable */
        CHECK(pf->region_seal(pf->ctx, p, 100, 100000) != 0); /* not page aligned */
        pf->region_free(pf->ctx, p, 100000);
    }
    CHECK(pf->region_alloc(pf->ctx, 0, 16) == NULL);
    CHECK(pf->region_alloc(pf->ctx, 16, 3) == NULL);
}

static void test_truncated(void)
{
    tb_image img;
    std_image(&img);
    for (size_t len = 0; len < img.len; len++) {
        cp_error err = tb_error();
        uint8_t *copy = malloc(len ? len : 1); /* exact size so ASan sees any over-read */
        memcpy(copy, img.bytes, len);
        CHECK_STATUS(validate(copy, len, &err), CP_ERR_TRUNCATED);
        free(copy);
    }
    cp_error err = tb_error();
    CHECK_STATUS(validate(NULL, 0, &err), CP_ERR_TRUNCATED);
    /* bytes after total_size are rejected, naming the total size */
    CHECK_STATUS(validate(img.bytes, img.len + 7, &err), CP_ERR_LAYOUT);
    CHECK(err.detail == img.len && strstr(err.message, "7 bytes follow the image") != NULL);
}

static int in_field(size_t byte, size_t off, size_t size)
{
    return byte >= off && byte < off + size;
}

static void test_bit_flips(void)
{
    tb_image img;
    std_image(&img);
    uint8_t *copy = malloc(img.len);
    for (size_t i = 0; i < img.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(copy, img.bytes, img.len);
            copy[i] ^= (uint8_t)(1u << bit);
            cp_error err = tb_error();
            cp_status st = validate(copy, img.len, &err);
            CHECK(st != CP_OK);
            if (in_field(i, 0, 4)) {
                CHECK_STATUS(st, CP_ERR_MAGIC);
            } else if (in_field(i, 4, 2)) {
                CHECK_STATUS(st, CP_ERR_VERSION);
            } else if (in_field(i, 12, 4)) {
                CHECK(st == CP_ERR_TRUNCATED || st == CP_ERR_CRC || st == CP_ERR_LAYOUT);
            } else {
                CHECK_STATUS(st, CP_ERR_CRC);
            }
            CHECK(err.code == (uint32_t)st && err.message[0] != '\0');
        }
    }
    free(copy);
}

static void test_envelope_errors(void)
{
    tb_image img;
    cp_error err = tb_error();

    std_image(&img);
    img.bytes[0] = 'X';
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_MAGIC);

    std_image(&img);
    tb_put16(img.bytes + 4, 3); /* formats 1 (code) and 2 (stencil ids) exist */
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_VERSION); /* before the CRC */
    tb_fix_crc(img.bytes, img.len);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_VERSION);
    CHECK(err.detail == 3 && strstr(err.message, "version 3") != NULL);

    std_image(&img);
    tb_put16(img.bytes + 8, CP_ARCH_AARCH64);
    tb_fix_crc(img.bytes, img.len);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_ARCH);
    CHECK(err.detail == CP_ARCH_AARCH64);
    CHECK(strstr(err.message, "aarch64 (3)") != NULL);
    CHECK(strstr(err.message, "x86_64 (1)") != NULL);
    CHECK(strstr(err.message, "LocalTarget(arch=...)") != NULL);
    if (verbose) {
        printf("  ARCH: %s\n", err.message);
    }
    CHECK_STATUS(cp_image_validate(img.bytes, img.len, CP_ARCH_AARCH64, &err), CP_OK);

    std_image(&img);
    img.bytes[img.len - 1] ^= 0x80;
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_CRC);
    CHECK(strstr(err.message, "CRC") != NULL);

    /* total_size too small to hold header and trailer */
    std_image(&img);
    tb_put32(img.bytes + 12, 51);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_LAYOUT);
    tb_put32(img.bytes + 12, 0);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_LAYOUT);
}

/* An edit of the standard image: `width` bytes of `value` at a section-relative offset
 * (section -1 = the header, -2 = a directory entry index given in `offset / 16`). */
typedef struct edit {
    const char *what;
    int section;
    uint32_t offset;
    int width;
    uint32_t value;
    cp_status want;
} edit;

enum { HDR = -1, DIR = -2 };

static const edit edits[] = {
    {"header_size < 48", HDR, 6, 2, 40, CP_ERR_LAYOUT},
    {"header flags", HDR, 10, 2, 1, CP_ERR_LAYOUT},
    {"reserved 36", HDR, 36, 4, 1, CP_ERR_LAYOUT},
    {"reserved 44", HDR, 44, 1, 0x80, CP_ERR_LAYOUT},
    {"base_align not a power of two", HDR, 28, 4, 4095, CP_ERR_LAYOUT},
    {"base_align 8", HDR, 28, 4, 8, CP_ERR_LAYOUT},
    {"base_align 131072", HDR, 28, 4, 131072, CP_ERR_LAYOUT},
    {"base_align 16 is fine", HDR, 28, 4, 16, CP_OK},
    {"data_offset < code_size", HDR, 20, 4, 32, CP_ERR_LAYOUT},
    {"data_offset misaligned", HDR, 20, 4, 4096 + 16, CP_ERR_LAYOUT},
    {"section_count 65", HDR, 32, 4, 65, CP_ERR_LAYOUT},
    {"directory past the end", HDR, 32, 4, 60, CP_ERR_LAYOUT},
    {"fewer sections listed (metadata unreferenced)", HDR, 32, 4, 7, CP_OK},
    {"code_size mismatch", HDR, 16, 4, 60, CP_ERR_LAYOUT},
    {"DATA_INIT > data_size", HDR, 24, 4, 8, CP_ERR_LAYOUT},
    {"section inside the directory", DIR, 0 * 16 + 8, 4, 48, CP_ERR_LAYOUT},
    {"section at the directory end", DIR, 0 * 16 + 8, 4, STD_DIR_END - 1, CP_ERR_LAYOUT},
    {"section before the directory", DIR, 0 * 16 + 8, 4, 0, CP_ERR_LAYOUT},
    {"section past the end", DIR, 7 * 16 + 8, 4, 0x1000, CP_ERR_LAYOUT},
    {"section size overflow", DIR, 7 * 16 + 4, 4, 0xffffffffu, CP_ERR_LAYOUT},
    {"section offset near 4 GiB", DIR, 7 * 16 + 8, 4, 0xfffffff0u, CP_ERR_LAYOUT},
    {"sections overlap (PATCHES inside CODE)", DIR, 3 * 16 + 8, 4, STD_AT_CODE + 4,
     CP_ERR_LAYOUT},
    {"sections overlap (TASKS into PORTS)", DIR, 4 * 16 + 8, 4, STD_AT_PATCHES + 8,
     CP_ERR_LAYOUT},
    {"size != count * entry_size", DIR, 3 * 16 + 4, 4, 2, CP_ERR_LAYOUT},
    {"entry_size below v1", DIR, 3 * 16 + 2, 2, 11, CP_ERR_LAYOUT},
    {"duplicate type", DIR, 7 * 16, 2, 1, CP_ERR_LAYOUT},
    {"unknown required type rejected", DIR, 7 * 16, 2, 200, CP_ERR_UNSUPPORTED},
    {"unknown optional type ignored", DIR, 7 * 16, 2, 0x8000 | 200, CP_OK},
    {"CODE missing", DIR, 0 * 16, 2, 0x8000 | 300, CP_ERR_LAYOUT},
    {"TASKS missing", DIR, 4 * 16, 2, 0x8000 | 301, CP_ERR_LAYOUT},
    {"kind word_bits 24", STD_SEC_KINDS, 0, 1, 24, CP_ERR_LAYOUT},
    {"kind word_bits 0", STD_SEC_KINDS, 0, 1, 0, CP_ERR_LAYOUT},
    {"kind unknown flag", STD_SEC_KINDS, 1, 1, 0x20, CP_ERR_LAYOUT},
    {"kind shift 64", STD_SEC_KINDS, 2, 1, 64, CP_ERR_LAYOUT},
    {"kind range_bits 65", STD_SEC_KINDS, 3, 1, 65, CP_ERR_LAYOUT},
    {"kind range_bits 64", STD_SEC_KINDS, 3, 1, 64, CP_OK},
    {"kind align_log2 64", STD_SEC_KINDS, 4, 1, 64, CP_ERR_LAYOUT},
    {"kind field_count 0", STD_SEC_KINDS, 5, 1, 0, CP_ERR_LAYOUT},
    {"kind field_count 5", STD_SEC_KINDS, 5, 1, 5, CP_ERR_LAYOUT},
    {"kind reserved", STD_SEC_KINDS, 7, 1, 1, CP_ERR_LAYOUT},
    {"kind THUMB32 on a 64-bit word", STD_SEC_KINDS, 1, 1, 16, CP_ERR_LAYOUT},
    {"kind ROUND with shift 0", STD_SEC_KINDS, 1, 1, 8, CP_ERR_LAYOUT},
    {"kind field width 0", STD_SEC_KINDS, 9, 1, 0, CP_ERR_LAYOUT},
    {"kind dst + width > word_bits", STD_SEC_KINDS, 10, 1, 1, CP_ERR_LAYOUT},
    {"kind src + width > 64", STD_SEC_KINDS, 8, 1, 1, CP_ERR_LAYOUT},
    {"kind unused field set", STD_SEC_KINDS, 12, 1, 1, CP_ERR_LAYOUT},
    {"kind 1 field dst 32 (over 32 bits)", STD_SEC_KINDS, 20 + 10, 1, 1, CP_ERR_LAYOUT},
    {"patch kind index out of range", STD_SEC_PATCHES, 4, 2, 2, CP_ERR_LAYOUT},
    {"patch site past code", STD_SEC_PATCHES, 0, 4, 57, CP_ERR_LAYOUT},
    {"patch site at the last word", STD_SEC_PATCHES, 0, 4, 56, CP_OK},
    {"patch site huge", STD_SEC_PATCHES, 0, 4, 0xfffffffcu, CP_ERR_LAYOUT},
    {"patch base 1", STD_SEC_PATCHES, 6, 1, 1, CP_ERR_LAYOUT},
    {"patch reserved", STD_SEC_PATCHES, 7, 1, 1, CP_ERR_LAYOUT},
    {"task entry = code_size", STD_SEC_TASKS, 0, 4, 64, CP_ERR_LAYOUT},
    {"task entry = code_size | 1", STD_SEC_TASKS, 0, 4, 65, CP_ERR_LAYOUT},
    {"task entry last byte", STD_SEC_TASKS, 0, 4, 63, CP_OK},
    {"task flags", STD_SEC_TASKS, 14, 2, 1, CP_ERR_LAYOUT},
    {"task entry_size 16 (below v1 24)", DIR, 4 * 16 + 2, 2, 16, CP_ERR_LAYOUT},
    {"task offset = period", STD_SEC_TASKS, 24 + 8, 4, 1000000, CP_ERR_LAYOUT},
    {"task offset > period", STD_SEC_TASKS, 24 + 8, 4, 0xffffffffu, CP_ERR_LAYOUT},
    {"task offset < period", STD_SEC_TASKS, 24 + 8, 4, 999999, CP_OK},
    {"unscheduled task offset ignored", STD_SEC_TASKS, 8, 4, 5, CP_OK},
    {"task wcet", STD_SEC_TASKS, 24 + 16, 4, 0xffffffffu, CP_OK},
    {"task reserved 20", STD_SEC_TASKS, 20, 1, 1, CP_ERR_LAYOUT},
    {"task reserved 23", STD_SEC_TASKS, 24 + 23, 1, 0x80, CP_ERR_LAYOUT},
    {"copy entry_size 15", DIR, 8 * 16 + 2, 2, 15, CP_ERR_LAYOUT},
    {"copy task 4", STD_SEC_COPIES, 0, 2, 4, CP_ERR_LAYOUT},
    {"copy task 0xffff", STD_SEC_COPIES, 16, 2, 0xffff, CP_ERR_LAYOUT},
    {"copy of an unscheduled task", STD_SEC_COPIES, 0, 2, 0, CP_ERR_LAYOUT},
    {"copy phase 2", STD_SEC_COPIES, 2, 1, 2, CP_ERR_LAYOUT},
    {"copy phase 1", STD_SEC_COPIES, 2, 1, 1, CP_OK},
    {"copy reserved", STD_SEC_COPIES, 3, 1, 1, CP_ERR_LAYOUT},
    {"copy size 0", STD_SEC_COPIES, 4, 4, 0, CP_ERR_LAYOUT},
    {"copy size huge", STD_SEC_COPIES, 4, 4, 0xffffffffu, CP_ERR_LAYOUT},
    {"copy src past data", STD_SEC_COPIES, 8, 4, 61, CP_ERR_LAYOUT},
    {"copy src at the end", STD_SEC_COPIES, 8, 4, 60, CP_OK},
    {"copy src huge", STD_SEC_COPIES, 8, 4, 0xfffffffeu, CP_ERR_LAYOUT},
    {"copy dst past data", STD_SEC_COPIES, 16 + 12, 4, 61, CP_ERR_LAYOUT},
    {"copy dst huge", STD_SEC_COPIES, 16 + 12, 4, 0xfffffffdu, CP_ERR_LAYOUT},
    {"copy overlap (dst inside src)", STD_SEC_COPIES, 12, 4, 14, CP_ERR_LAYOUT},
    {"copy overlap (src inside dst)", STD_SEC_COPIES, 8, 4, 19, CP_ERR_LAYOUT},
    {"copy src = dst", STD_SEC_COPIES, 12, 4, 12, CP_ERR_LAYOUT},
    {"copy adjacent below", STD_SEC_COPIES, 12, 4, 8, CP_OK},
    {"binding entry_size 8", DIR, 9 * 16 + 2, 2, 8, CP_ERR_LAYOUT},
    {"binding task 4", STD_SEC_BINDINGS, 0, 2, 4, CP_ERR_LAYOUT},
    {"binding of an unscheduled task", STD_SEC_BINDINGS, 16, 2, 2, CP_ERR_LAYOUT},
    {"binding direction 0", STD_SEC_BINDINGS, 2, 1, 0, CP_ERR_LAYOUT},
    {"binding direction 3", STD_SEC_BINDINGS, 2, 1, 3, CP_ERR_LAYOUT},
    {"binding kind 0", STD_SEC_BINDINGS, 3, 1, 0, CP_ERR_LAYOUT},
    {"binding kind after the table", STD_SEC_BINDINGS, 3, 1, CP_IO_KIND_COUNT + 1, CP_ERR_LAYOUT},
    {"binding kind GPIO", STD_SEC_BINDINGS, 3, 1, 1, CP_OK},
    {"binding channel 65535", STD_SEC_BINDINGS, 4, 2, 65535, CP_OK},
    {"binding dtype 0", STD_SEC_BINDINGS, 6, 1, 0, CP_ERR_LAYOUT},
    {"binding dtype 5 (u8)", STD_SEC_BINDINGS, 6, 1, 5, CP_ERR_LAYOUT},
    {"binding dtype bool", STD_SEC_BINDINGS, 6, 1, 4, CP_OK},
    {"binding f64 misaligned", STD_SEC_BINDINGS, 16 + 6, 1, 2, CP_ERR_LAYOUT},
    {"binding reserved 7", STD_SEC_BINDINGS, 7, 1, 1, CP_ERR_LAYOUT},
    {"binding reserved 12", STD_SEC_BINDINGS, 12, 4, 1, CP_ERR_LAYOUT},
    {"binding reserved 15", STD_SEC_BINDINGS, 16 + 15, 1, 0x80, CP_ERR_LAYOUT},
    {"binding slot misaligned", STD_SEC_BINDINGS, 8, 4, 26, CP_ERR_LAYOUT},
    {"binding slot past data", STD_SEC_BINDINGS, 8, 4, 64, CP_ERR_LAYOUT},
    {"binding slot huge", STD_SEC_BINDINGS, 8, 4, 0xfffffffcu, CP_ERR_LAYOUT},
    {"binding slot at the end", STD_SEC_BINDINGS, 8, 4, 60, CP_OK},
    {"port misaligned", STD_SEC_PORTS, 4, 4, 62, CP_ERR_LAYOUT},
    {"port past data", STD_SEC_PORTS, 4, 4, 64, CP_ERR_LAYOUT},
    {"port last element", STD_SEC_PORTS, 4, 4, 60, CP_OK},
    {"port count huge", STD_SEC_PORTS, 12, 4, 0x40000000u, CP_ERR_LAYOUT},
    {"port dtype 0", STD_SEC_PORTS, 8, 1, 0, CP_ERR_LAYOUT},
    {"port dtype 7", STD_SEC_PORTS, 8, 1, 7, CP_ERR_LAYOUT},
    {"port role 0", STD_SEC_PORTS, 9, 1, 0, CP_ERR_LAYOUT},
    {"port role 5", STD_SEC_PORTS, 9, 1, 5, CP_ERR_LAYOUT},
    {"port task 4", STD_SEC_PORTS, 10, 2, 4, CP_ERR_LAYOUT},
    {"port name outside STRINGS", STD_SEC_PORTS, 0, 4, 10, CP_ERR_LAYOUT},
    {"port name last NUL", STD_SEC_PORTS, 0, 4, 9, CP_OK},
    {"STRINGS not terminated", STD_SEC_STRINGS, 9, 1, 'x', CP_ERR_LAYOUT},
    {"metadata content ignored", STD_SEC_METADATA, 0, 1, 0xff, CP_OK},
};

static void put(uint8_t *p, int width, uint32_t value)
{
    for (int i = 0; i < width; i++) {
        p[i] = (uint8_t)(value >> (8 * i));
    }
}

static void test_layout_errors(void)
{
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        const edit *e = &edits[i];
        tb_image img;
        std_image(&img);
        uint32_t base = e->section == HDR ? 0u
                        : e->section == DIR ? 48u
                                            : img.sec_offset[e->section];
        put(img.bytes + base + e->offset, e->width, e->value);
        tb_fix_crc(img.bytes, img.len);
        cp_error err = tb_error();
        cp_status st = validate(img.bytes, img.len, &err);
        checks++;
        if (st != e->want) {
            failures++;
            fprintf(stderr, "edit '%s': got %s (%s), expected %s\n", e->what,
                    cp_status_name(st), err.message, cp_status_name(e->want));
        }
        CHECK((st == CP_OK) == (err.message[0] == '\0'));
        if (verbose) {
            printf("  %-45s %-7s %s\n", e->what, cp_status_name(st), err.message);
        }
    }
}

/* A one-kind, one-patch image: code of `code_size` zero bytes plus a ret task. */
static void patch_image(tb_image *img, const uint8_t kind[20], uint32_t site, int32_t addend,
                        uint16_t arch)
{
    static uint8_t code[64];
    static uint8_t kinds[20], patches[12], tasks[24];
    memset(code, 0, sizeof(code));
    code[63] = 0xc3;
    memcpy(kinds, kind, 20);
    tb_patch(patches, site, 0, addend);
    tb_task(tasks, 63, 0, 0);
    tb_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.version = 1;
    spec.header_size = 48;
    spec.arch = arch;
    spec.code_size = sizeof(code);
    spec.data_offset = 4096;
    spec.data_size = 16;
    spec.base_align = 4096;
    spec.nsec = 4;
    spec.sec[0] = (tb_section){1, 1, code, sizeof(code)};
    spec.sec[1] = (tb_section){3, 20, kinds, sizeof(kinds)};
    spec.sec[2] = (tb_section){4, 12, patches, sizeof(patches)};
    spec.sec[3] = (tb_section){5, 24, tasks, sizeof(tasks)};
    tb_build(&spec, img);
}

static cp_status load_patch_image(const uint8_t kind[20], int32_t addend, cp_error *err)
{
    tb_image img;
    patch_image(&img, kind, 0, addend, CP_ARCH_X86_64);
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    cp_program prog = tb_program();
    memset((uint8_t *)&prog + sizeof(uint32_t), 0xab, sizeof(prog) - sizeof(uint32_t));
    prog.loaded = 0;
    cp_program before;
    memcpy(&before, &prog, sizeof(prog));
    cp_status st = cp_program_load(&prog, img.bytes, img.len, &pf, err);
    if (st == CP_OK) {
        cp_program_unload(&prog);
    } else {
        CHECK(memcmp(&before, &prog, sizeof(prog)) == 0); /* out untouched */
    }
    CHECK(ctx.allocs == ctx.frees); /* the failed region was freed */
    return st;
}

static void test_patch_errors(void)
{
    /* AArch64 B/BL style: PCREL | SIGNED, shift 2, 26-bit signed, 4-aligned */
    static const uint8_t b26[][3] = {{0, 26, 0}};
    uint8_t k[20];
    tb_kind(k, 32, 1 | 4, 2, 26, 2, 1, b26);
    cp_error err = tb_error();
    CHECK_STATUS(load_patch_image(k, (1 << 27) - 4, &err), CP_OK);
    CHECK_STATUS(load_patch_image(k, -(1 << 27), &err), CP_OK);
    CHECK_STATUS(load_patch_image(k, 1 << 27, &err), CP_ERR_PATCH);
    CHECK(err.detail == 0 && strstr(err.message, "26 signed bits") != NULL);
    if (verbose) {
        printf("  PATCH range: %s\n", err.message);
    }
    CHECK_STATUS(load_patch_image(k, -(1 << 27) - 4, &err), CP_ERR_PATCH);
    CHECK_STATUS(load_patch_image(k, 4097, &err), CP_ERR_PATCH);
    CHECK(strstr(err.message, "multiple of 4") != NULL);
    if (verbose) {
        printf("  PATCH align: %s\n", err.message);
    }
    /* unsigned 12-bit PC-relative: negative values do not fit */
    static const uint8_t u12[][3] = {{0, 12, 0}};
    tb_kind(k, 32, 1, 0, 12, 0, 1, u12);
    CHECK_STATUS(load_patch_image(k, 4095, &err), CP_OK);
    CHECK_STATUS(load_patch_image(k, 4096, &err), CP_ERR_PATCH);
    CHECK_STATUS(load_patch_image(k, -1, &err), CP_ERR_PATCH);
}

static void test_platform_errors(void)
{
    tb_image img;
    std_image(&img);
    cp_error err = tb_error();
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    cp_program prog = tb_program();

    ctx.fail_alloc = 1;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_NOMEM);
    CHECK(prog.loaded == 0 && prog.base == NULL);
    ctx.fail_alloc = 0;

    ctx.fail_seal = 1;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_NOMEM);
    CHECK(ctx.allocs == 1 && ctx.frees == 1 && prog.loaded == 0);
    ctx.fail_seal = 0;

    pf.max_region_size = STD_DATA_OFFSET + STD_DATA_SIZE; /* no room for the task table */
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_TOO_LARGE);
    if (verbose) {
        printf("  TOO_LARGE: %s\n", err.message);
    }
    pf.max_region_size = 1 << 20;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    cp_program_unload(&prog);

    /* a huge data region is refused before any allocation */
    tb_image big;
    std_image(&big);
    tb_put32(big.bytes + 24, 0xfffffff0u);
    tb_fix_crc(big.bytes, big.len);
    int allocs = ctx.allocs;
    CHECK_STATUS(cp_program_load(&prog, big.bytes, big.len, &pf, &err), CP_ERR_TOO_LARGE);
    CHECK(ctx.allocs == allocs);

    /* arguments */
    CHECK_STATUS(cp_program_load(NULL, img.bytes, img.len, &pf, &err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, NULL, &err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_program_load(&prog, NULL, 10, &pf, &err), CP_ERR_ARGUMENT);
    cp_program unsized = tb_program();
    unsized.struct_size = 0;
    CHECK_STATUS(cp_program_load(&unsized, img.bytes, img.len, &pf, &err), CP_ERR_ARGUMENT);
    CHECK(strstr(err.message, "struct_size") != NULL);
    cp_platform incomplete = pf;
    incomplete.region_seal = NULL;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &incomplete, &err),
                 CP_ERR_ARGUMENT);
    incomplete = pf;
    incomplete.struct_size = 8;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &incomplete, &err),
                 CP_ERR_ARGUMENT);

    /* wrong architecture through load */
    cp_platform arm = tp_platform(&ctx, CP_ARCH_AARCH64);
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &arm, &err), CP_ERR_ARCH);

    /* loading a parsed image: the parse's arch must be the platform's; a CRC computed by the
     * caller replaces the core's (a wrong one is a CRC error, as a stale trailer would be) */
    cp_image parsed;
    CHECK_STATUS(cp_image_parse(&parsed, img.bytes, img.len, pf.arch, &err), CP_OK);
    CHECK_STATUS(cp_program_load_parsed(&prog, &parsed, &arm, &err), CP_ERR_ARCH);
    CHECK_STATUS(cp_program_load_parsed(&prog, NULL, &pf, &err), CP_ERR_ARGUMENT);
    uint32_t prefix = cp_crc32(0, img.bytes, img.len - 4);
    CHECK_STATUS(cp_image_parse_crc(&parsed, img.bytes, img.len, pf.arch, prefix ^ 1u, &err),
                 CP_ERR_CRC);
    CHECK_STATUS(cp_image_parse_crc(&parsed, img.bytes, img.len, pf.arch, prefix, &err), CP_OK);
    CHECK_STATUS(cp_program_load_parsed(&prog, &parsed, &pf, &err), CP_OK);
    CHECK(prog.loaded && prog.task_count == parsed.sec[CP_SEC_TASKS].count);
    cp_program_unload(&prog);

    /* err may be NULL, and a smaller (older) cp_error is never overrun */
    CHECK_STATUS(cp_program_load(&prog, img.bytes, 3, &pf, NULL), CP_ERR_TRUNCATED);
    struct {
        cp_error e;
        char canary[16];
    } small;
    memset(&small, 0x5a, sizeof(small));
    small.e.struct_size = (uint32_t)offsetof(cp_error, message) + 10;
    CHECK_STATUS(validate(img.bytes, 3, &small.e), CP_ERR_TRUNCATED);
    CHECK(small.e.code == CP_ERR_TRUNCATED && small.e.message[9] == '\0');
    CHECK((unsigned char)small.e.message[10] == 0x5a);
    small.e.struct_size = 8; /* not even room for detail */
    small.e.detail = 77;
    CHECK_STATUS(validate(img.bytes, 3, &small.e), CP_ERR_TRUNCATED);
    CHECK(small.e.detail == 77);
}

static void test_failed_load_keeps_previous(void)
{
    tb_image good, bad;
    std_image(&good);
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    cp_error err = tb_error();
    cp_program running = tb_program();
    CHECK_STATUS(cp_program_load(&running, good.bytes, good.len, &pf, &err), CP_OK);
    cp_program snapshot;
    memcpy(&snapshot, &running, sizeof(running));

    static const uint8_t b26[][3] = {{0, 26, 0}};
    uint8_t k[20];
    tb_kind(k, 32, 1 | 4, 2, 26, 2, 1, b26);
    patch_image(&bad, k, 0, 1 << 28, CP_ARCH_X86_64);
    cp_status fails[4];
    cp_program next = tb_program();
    fails[0] = cp_program_load(&next, bad.bytes, bad.len, &pf, &err); /* PATCH */
    fails[1] = cp_program_load(&next, good.bytes, good.len - 1, &pf, &err);
    ctx.fail_alloc = 1;
    fails[2] = cp_program_load(&next, good.bytes, good.len, &pf, &err);
    ctx.fail_alloc = 0;
    ctx.fail_seal = 1;
    fails[3] = cp_program_load(&next, good.bytes, good.len, &pf, &err);
    ctx.fail_seal = 0;
    CHECK_STATUS(fails[0], CP_ERR_PATCH);
    CHECK_STATUS(fails[1], CP_ERR_TRUNCATED);
    CHECK_STATUS(fails[2], CP_ERR_NOMEM);
    CHECK_STATUS(fails[3], CP_ERR_NOMEM);
    CHECK(memcmp(&snapshot, &running, sizeof(running)) == 0);
    CHECK(ctx.allocs == ctx.frees + 1);
#if defined(__x86_64__)
    CHECK_STATUS(cp_program_run(&running, 1), CP_OK);
    CHECK(data_i32(&running, 0) == 42);
#endif
    cp_program_unload(&running);
    CHECK(ctx.allocs == ctx.frees);
}

/* ---- generic patch vectors; expected words verified with llvm-mc-19 -show-encoding */

static uint32_t rd32(const uint8_t *p)
{
    return tb_get32(p);
}

static cp_status patch32(const uint8_t kind_raw[20], uint32_t *word, uint64_t site,
                         uint64_t target, int thumb)
{
    cp_patch_kind kind;
    cp_error err = tb_error();
    cp_status st = cp_kind_decode(kind_raw, 0, &kind, &err);
    CHECK_STATUS(st, CP_OK);
    if (st != CP_OK) {
        return st;
    }
    uint8_t bytes[4];
    if (thumb) { /* memory order: first halfword = high half of the instruction */
        tb_put16(bytes, *word >> 16);
        tb_put16(bytes + 2, *word & 0xffffu);
    } else {
        tb_put32(bytes, *word);
    }
    st = cp_patch_apply(&kind, bytes, site, target, 0, &err);
    if (thumb) {
        *word = (rd32(bytes) << 16) | (rd32(bytes) >> 16);
    } else {
        *word = rd32(bytes);
    }
    return st;
}

static void test_patch_vectors(void)
{
    uint8_t k[20];
    uint32_t w;

    /* x86_64 rel32 (call/jmp/rip-relative): PCREL | SIGNED, 32-bit range */
    static const uint8_t rel32[][3] = {{0, 32, 0}};
    tb_kind(k, 32, 1 | 4, 0, 32, 0, 1, rel32);
    w = 0;
    CHECK_STATUS(patch32(k, &w, 0x401001, 0x400000, 0), CP_OK);
    CHECK(w == 0xffffefffu);
    w = 0;
    CHECK_STATUS(patch32(k, &w, 0x400000, 0x400000 + 0x7fffffffull, 0), CP_OK);
    CHECK(w == 0x7fffffffu);
    w = 0x12345678;
    CHECK_STATUS(patch32(k, &w, 0x400000, 0x400000 + 0x80000000ull, 0), CP_ERR_PATCH);
    CHECK(w == 0x12345678u); /* unchanged on failure */

    /* AArch64 ADRP x0: PCREL | PAGE | SIGNED, shift 12, 21-bit signed,
     * immlo = value[1:0] -> bits 29..30, immhi = value[20:2] -> bits 5..23 */
    static const uint8_t adrp[][3] = {{0, 2, 29}, {2, 19, 5}};
    tb_kind(k, 32, 1 | 2 | 4, 12, 21, 0, 2, adrp);
    w = 0x90000000u; /* adrp x0, #0 */
    CHECK_STATUS(patch32(k, &w, 0x400010, 0x412345, 0), CP_OK);
    CHECK(w == 0xd0000080u); /* adrp x0, #0x12000 */
    w = 0x90000000u;
    CHECK_STATUS(patch32(k, &w, 0x412ffc, 0x400010, 0), CP_OK);
    CHECK(w == 0xd0ffff60u); /* adrp x0, #-0x12000 */
    w = 0x90000000u;
    CHECK_STATUS(patch32(k, &w, 0, 1ull << 32, 0), CP_ERR_PATCH); /* beyond +-4 GiB */

    /* AArch64 LDST32_ABS_LO12_NC (ldr w1, [x0, #:lo12:sym]): absolute, align_log2 2, shift 2,
     * no range check; field (0, 10, 10) takes bits [11:2] of the target, i.e. lo12 / 4, which
     * is how the "& 0xfff" is expressed: the field width does the masking. */
    static const uint8_t ldst32[][3] = {{0, 10, 10}};
    tb_kind(k, 32, 0, 2, 0, 2, 1, ldst32);
    w = 0xb9400001u; /* ldr w1, [x0] */
    CHECK_STATUS(patch32(k, &w, 0x400000, 0x7f0000412344ull, 0), CP_OK);
    CHECK(w == 0xb9434401u); /* ldr w1, [x0, #0x344] */
    w = 0xb9400001u;
    CHECK_STATUS(patch32(k, &w, 0x400000, 0x412346, 0), CP_ERR_PATCH); /* misaligned */

    /* ARM (A32) MOVW/MOVT: imm16 = imm4:imm12, imm12 -> bits 0..11, imm4 -> bits 16..19 */
    static const uint8_t arm_mov[][3] = {{0, 12, 0}, {12, 4, 16}};
    tb_kind(k, 32, 0, 0, 0, 0, 2, arm_mov);
    w = 0xe3000000u; /* movw r0, #0 */
    CHECK_STATUS(patch32(k, &w, 0, 0x12345678, 0), CP_OK);
    CHECK(w == 0xe3050678u); /* movw r0, #0x5678 */
    tb_kind(k, 32, 0, 16, 0, 0, 2, arm_mov);
    w = 0xe3400000u; /* movt r0, #0 */
    CHECK_STATUS(patch32(k, &w, 0, 0x12345678, 0), CP_OK);
    CHECK(w == 0xe3410234u); /* movt r0, #0x1234 */

    /* Thumb-2 MOVW/MOVT (T3/T1), THUMB32: imm16 = imm4:i:imm3:imm8 with imm8 -> 0..7,
     * imm3 -> 12..14, i -> 26, imm4 -> 16..19 of (first halfword << 16 | second) */
    static const uint8_t thumb_mov[][3] = {{0, 8, 0}, {8, 3, 12}, {11, 1, 26}, {12, 4, 16}};
    tb_kind(k, 32, 16, 0, 0, 0, 4, thumb_mov);
    w = 0xf2400000u; /* movw r0, #0 */
    CHECK_STATUS(patch32(k, &w, 0, 0x9abc5abc, 1), CP_OK);
    CHECK(w == 0xf64520bcu); /* movw r0, #0x5abc: bytes 45 f6 bc 20 */
    tb_kind(k, 32, 16, 16, 0, 0, 4, thumb_mov);
    w = 0xf2c00000u; /* movt r0, #0 */
    CHECK_STATUS(patch32(k, &w, 0, 0x9abc5abc, 1), CP_OK);
    CHECK(w == 0xf6c920bcu); /* movt r0, #0x9abc: bytes c9 f6 bc 20 */
    {
        /* byte order in memory really is first-halfword-high */
        cp_patch_kind kind;
        cp_error err = tb_error();
        uint8_t bytes[4] = {0xc0, 0xf2, 0x00, 0x00};
        CHECK_STATUS(cp_kind_decode(k, 0, &kind, &err), CP_OK);
        CHECK_STATUS(cp_patch_apply(&kind, bytes, 0, 0x9abc5abc, 0, &err), CP_OK);
        CHECK(bytes[0] == 0xc9 && bytes[1] == 0xf6 && bytes[2] == 0xbc && bytes[3] == 0x20);
    }

    /* RISC-V %hi (LUI) with ROUND: shift 12, field (0, 20, 12) */
    static const uint8_t hi20[][3] = {{0, 20, 12}};
    tb_kind(k, 32, 8, 12, 0, 0, 1, hi20);
    w = 0x00000537u; /* lui a0, 0 */
    CHECK_STATUS(patch32(k, &w, 0, 0x12345ffc, 0), CP_OK);
    CHECK(w == 0x12346537u); /* lui a0, 0x12346 (rounded up: lo12 is -4) */
    /* %lo S-type (sw a1, lo(a0)): imm[4:0] -> 7..11, imm[11:5] -> 25..31 */
    static const uint8_t lo12s[][3] = {{0, 5, 7}, {5, 7, 25}};
    tb_kind(k, 32, 0, 0, 0, 0, 2, lo12s);
    w = 0x00b52023u; /* sw a1, 0(a0) */
    CHECK_STATUS(patch32(k, &w, 0, 0x12345ffc, 0), CP_OK);
    CHECK(w == 0xfeb52e23u); /* sw a1, -4(a0) */
    /* %pcrel_hi (AUIPC) with ROUND, 20-bit signed */
    tb_kind(k, 32, 1 | 4 | 8, 12, 20, 0, 1, hi20);
    w = 0x00000517u; /* auipc a0, 0 */
    CHECK_STATUS(patch32(k, &w, 0x10000, 0x10800, 0), CP_OK);
    CHECK(w == 0x00001517u); /* auipc a0, 1 (0x800 = 0x1000 - 0x800) */

    /* 16-bit word and 64-bit word with a shift-by-0 full field */
    {
        cp_patch_kind kind;
        cp_error err = tb_error();
        static const uint8_t f16[][3] = {{4, 8, 4}};
        tb_kind(k, 16, 0, 0, 0, 0, 1, f16);
        uint8_t h[2] = {0x0f, 0xf0};
        CHECK_STATUS(cp_kind_decode(k, 0, &kind, &err), CP_OK);
        CHECK_STATUS(cp_patch_apply(&kind, h, 0, 0xab0, 0, &err), CP_OK);
        CHECK(h[0] == 0xbf && h[1] == 0xfa);
        static const uint8_t f64[][3] = {{0, 64, 0}};
        tb_kind(k, 64, 1 | 4, 0, 64, 0, 1, f64);
        uint8_t q[8] = {0};
        CHECK_STATUS(cp_kind_decode(k, 0, &kind, &err), CP_OK);
        CHECK_STATUS(cp_patch_apply(&kind, q, 1, 0, 0, &err), CP_OK); /* -1 */
        CHECK(q[0] == 0xff && q[7] == 0xff);
        /* shift 63 arithmetic, unsigned range 1 on negative fails */
        static const uint8_t f1[][3] = {{0, 1, 0}};
        tb_kind(k, 16, 4, 63, 1, 0, 1, f1);
        CHECK_STATUS(cp_kind_decode(k, 0, &kind, &err), CP_OK);
        uint8_t z[2] = {0, 0};
        CHECK_STATUS(cp_patch_apply(&kind, z, 0, 0x8000000000000000ull, 0, &err), CP_OK);
        CHECK(z[0] == 1); /* -1 fits in 1 signed bit */
        tb_kind(k, 16, 8, 63, 0, 63, 1, f1); /* ROUND with shift 63, align 2^63 */
        CHECK_STATUS(cp_kind_decode(k, 0, &kind, &err), CP_OK);
        CHECK_STATUS(cp_patch_apply(&kind, z, 0, 0x8000000000000000ull, 0, &err), CP_OK);
        CHECK_STATUS(cp_patch_apply(&kind, z, 0, 1, 0, &err), CP_ERR_PATCH);
    }
}

/* Loads an AArch64 image (without running it) to see ADRP patched against the real base. */
static void test_foreign_image_patched(void)
{
    static const uint8_t adrp[][3] = {{0, 2, 29}, {2, 19, 5}};
    uint8_t k[20];
    tb_kind(k, 32, 1 | 2 | 4, 12, 21, 0, 2, adrp);
    tb_image img;
    patch_image(&img, k, 0, 4096 + 0x10, CP_ARCH_AARCH64);
    img.bytes[img.sec_offset[0] + 3] = 0x90; /* code word 0 = adrp x0, #0 */
    tb_fix_crc(img.bytes, img.len);
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_AARCH64);
    cp_program prog = tb_program();
    cp_error err = tb_error();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    CHECK(rd32(prog.base) == 0xb0000000u); /* adrp x0, #0x1000: immlo = 1 */
    cp_program_unload(&prog);
}

/* ---- CPU_FEATURES (docs/image.md): the image says what it needs, the platform what it has */

static uint64_t fake_features;

static uint64_t fake_cpu(void *ctx, uint16_t arch)
{
    (void)ctx;
    return arch == CP_ARCH_X86_64 ? fake_features : 0;
}

static void test_cpu_features(void)
{
    const uint64_t v3 = (1u << CP_X86_64_AVX) | (1u << CP_X86_64_AVX2) | (1u << CP_X86_64_FMA);
    tb_image img;
    cp_error err = tb_error();
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    pf.cpu_features = fake_cpu;

    std_image_features(&img, v3, 1);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_OK); /* well-formed: any CPU */
    fake_features = v3 | (1u << CP_X86_64_BMI1);
    cp_program prog = tb_program();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    CHECK_STATUS(cp_program_run(&prog, 1), CP_OK);
    cp_program_unload(&prog);

    /* a CPU without AVX2: refused before anything is allocated, the missing bits as detail */
    fake_features = v3 & ~(uint64_t)(1u << CP_X86_64_AVX2);
    int allocs = ctx.allocs;
    prog = tb_program();
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_CPU_FEATURES);
    CHECK(err.detail == (1u << CP_X86_64_AVX2) && prog.loaded == 0 && ctx.allocs == allocs);
    CHECK(strstr(err.message, "lacks avx2 that") != NULL);
    CHECK(strstr(err.message, "arch=\"x86_64\"") != NULL);
    if (verbose) {
        printf("  %s\n", err.message);
    }
    /* no hook, or a platform of ABI 3 (struct_size before the hook): the baseline only */
    pf.cpu_features = NULL;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_CPU_FEATURES);
    CHECK(err.detail == v3);
    pf.cpu_features = fake_cpu;
    fake_features = v3;
    pf.struct_size = (uint32_t)CP_PLATFORM_SIZE_ABI3;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_CPU_FEATURES);
    pf.struct_size = (uint32_t)CP_PLATFORM_SIZE_ABI3 - 1u;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_ARGUMENT);
    pf.struct_size = sizeof(pf);

    /* every missing feature of x86_64-v4: the list is cut to fit the wire's 120 bytes */
    uint64_t all = cp_cpu_features_known(CP_ARCH_X86_64);
    CHECK(all == 0x3fffu && cp_cpu_features_known(CP_ARCH_AARCH64) == 0);
    std_image_features(&img, all, 1);
    fake_features = 0;
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_ERR_CPU_FEATURES);
    CHECK(err.detail == all && strlen(err.message) <= 120);
    CHECK(strstr(err.message, ", ...") != NULL && strstr(err.message, "arch=") != NULL);

    /* the baseline image loads with no features at all */
    std_image(&img);
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    cp_program_unload(&prog);

    /* a bit this runner does not know (a corrupted marker): UNSUPPORTED, as a validation */
    std_image_features(&img, v3 | ((uint64_t)1 << 40), 1);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_UNSUPPORTED);
    CHECK(err.detail == 40 && strstr(err.message, "bit 40") != NULL);
    std_image_features(&img, 1, 1);
    CHECK_STATUS(cp_image_validate(img.bytes, img.len, CP_ARCH_AARCH64, &err), CP_ERR_ARCH);
    /* two entries are a layout error; none is an empty section: no requirement */
    std_image_features(&img, v3, 2);
    CHECK_STATUS(validate(img.bytes, img.len, &err), CP_ERR_LAYOUT);
    std_image_features(&img, v3, 0);
    CHECK_STATUS(cp_program_load(&prog, img.bytes, img.len, &pf, &err), CP_OK);
    cp_program_unload(&prog);
    CHECK(strcmp(cp_status_name(CP_ERR_CPU_FEATURES), "CPU_FEATURES") == 0);
    CHECK(strcmp(cp_cpu_feature_name(CP_ARCH_X86_64, CP_X86_64_AVX512VL), "avx512vl") == 0);
    CHECK(cp_cpu_feature_name(CP_ARCH_X86_64, 14) == NULL);
    CHECK(cp_cpu_feature_name(CP_ARCH_RV32, 0) == NULL);
}

static void test_posix_cpu_features(void)
{
    /* the run's own mask (tests/cpu.py simulates a CPU without AVX-512 with it) is put back
     * at the end: this test sets its own */
    const char *run_mask = getenv("COPAPY_CPU_FEATURES_MASK");
    char saved[256] = "";
    if (run_mask != NULL) {
        snprintf(saved, sizeof saved, "%s", run_mask);
    }
    unsetenv("COPAPY_CPU_FEATURES_MASK");
    uint64_t have = cp_posix_cpu_features(NULL, CP_ARCH_X86_64);
    CHECK((have & ~cp_cpu_features_known(CP_ARCH_X86_64)) == 0);
    CHECK(cp_posix_cpu_features(NULL, CP_ARCH_AARCH64) == 0); /* no AArch64 bits exist */
    setenv("COPAPY_CPU_FEATURES_MASK", "avx2, fma,nosuch", 1);
    uint64_t masked = cp_posix_cpu_features(NULL, CP_ARCH_X86_64);
    CHECK(masked == (have & ~(uint64_t)((1u << CP_X86_64_AVX2) | (1u << CP_X86_64_FMA))));
    setenv("COPAPY_CPU_FEATURES_MASK", "all", 1);
    CHECK(cp_posix_cpu_features(NULL, CP_ARCH_X86_64) == 0);
    unsetenv("COPAPY_CPU_FEATURES_MASK");
    CHECK(cp_posix_cpu_features(NULL, CP_ARCH_X86_64) == have);
    if (verbose) {
        printf("  this CPU's x86_64 features: %x\n", (unsigned)have);
    }
    if (run_mask != NULL) {
        setenv("COPAPY_CPU_FEATURES_MASK", saved, 1);
    }
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    test_crc();
    test_status_names();
    test_happy_path();
    test_extended_entries();
    test_posix_platform();
    test_truncated();
    test_bit_flips();
    test_envelope_errors();
    test_layout_errors();
    test_patch_errors();
    test_platform_errors();
    test_failed_load_keeps_previous();
    test_patch_vectors();
    test_foreign_image_patched();
    test_cpu_features();
    test_posix_cpu_features();
    printf("test_runner: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
