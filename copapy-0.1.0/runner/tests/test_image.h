/* Test helpers: a tiny program-image builder, a standard x86_64 image and a counting platform.
 * Header-only so the unit tests and the fuzzer share them. */
#ifndef COPAPY_TEST_IMAGE_H
#define COPAPY_TEST_IMAGE_H

#include <stdint.h>
#include <string.h>

#include "copapy/platform_posix.h"
#include "copapy/runner.h"

enum { TB_MAX_SECTIONS = 16, TB_CAP = 8192 };

typedef struct tb_section {
    uint16_t type;
    uint16_t entry_size;
    const void *data;
    uint32_t size;
} tb_section;

typedef struct tb_spec {
    uint16_t version;
    uint16_t header_size;
    uint16_t arch;
    uint32_t code_size;
    uint32_t data_offset;
    uint32_t data_size;
    uint32_t base_align;
    size_t nsec;
    tb_section sec[TB_MAX_SECTIONS];
} tb_spec;

typedef struct tb_image {
    uint8_t bytes[TB_CAP];
    size_t len;
    uint32_t sec_offset[TB_MAX_SECTIONS]; /* where each section's content landed */
} tb_image;

static inline void tb_put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void tb_put32(uint8_t *p, uint32_t v)
{
    tb_put16(p, v & 0xffffu);
    tb_put16(p + 2, v >> 16);
}

static inline uint32_t tb_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* Recomputes the CRC trailer after a deliberate edit, so a later check is reached. */
static inline void tb_fix_crc(uint8_t *img, size_t total)
{
    tb_put32(img + total - 4, cp_crc32(0, img, total - 4));
}

static inline void tb_build(const tb_spec *spec, tb_image *out)
{
    uint8_t *b = out->bytes;
    memset(b, 0, sizeof(out->bytes));
    size_t pos = spec->header_size + 16u * spec->nsec;
    for (size_t i = 0; i < spec->nsec; i++) {
        const tb_section *s = &spec->sec[i];
        uint8_t *e = b + spec->header_size + 16u * i;
        tb_put16(e, s->type);
        tb_put16(e + 2, s->entry_size);
        tb_put32(e + 4, s->size / s->entry_size);
        tb_put32(e + 8, (uint32_t)pos);
        tb_put32(e + 12, s->size);
        if (s->size > 0) {
            memcpy(b + pos, s->data, s->size);
        }
        out->sec_offset[i] = (uint32_t)pos;
        pos += s->size;
    }
    out->len = pos + 4;
    memcpy(b, "CPIM", 4);
    tb_put16(b + 4, spec->version);
    tb_put16(b + 6, spec->header_size);
    tb_put16(b + 8, spec->arch);
    tb_put32(b + 12, (uint32_t)out->len);
    tb_put32(b + 16, spec->code_size);
    tb_put32(b + 20, spec->data_offset);
    tb_put32(b + 24, spec->data_size);
    tb_put32(b + 28, spec->base_align);
    tb_put32(b + 32, (uint32_t)spec->nsec);
    tb_fix_crc(b, out->len);
}

/* A 20-byte patch kind. fields: up to 4 x (src_lsb, width, dst_lsb). */
static inline void tb_kind(uint8_t *k, uint8_t word_bits, uint8_t flags, uint8_t shift,
                           uint8_t range_bits, uint8_t align_log2, uint8_t nfields,
                           const uint8_t fields[][3])
{
    memset(k, 0, 20);
    k[0] = word_bits;
    k[1] = flags;
    k[2] = shift;
    k[3] = range_bits;
    k[4] = align_log2;
    k[5] = nfields;
    for (unsigned f = 0; f < nfields && f < 4; f++) {
        memcpy(k + 8 + 3 * f, fields[f], 3);
    }
}

static inline void tb_patch(uint8_t *p, uint32_t site, uint16_t kind, int32_t addend)
{
    memset(p, 0, 12);
    tb_put32(p, site);
    tb_put16(p + 4, kind);
    tb_put32(p + 8, (uint32_t)addend);
}

enum { TB_TASK_SIZE = 24, TB_COPY_SIZE = 16, TB_BINDING_SIZE = 16 };

/* A 24-byte task entry with every field. */
static inline void tb_task_full(uint8_t *t, uint32_t entry, uint32_t period_ns,
                                uint32_t offset_ns, uint16_t priority, uint32_t wcet_ns)
{
    memset(t, 0, TB_TASK_SIZE);
    tb_put32(t, entry);
    tb_put32(t + 4, period_ns);
    tb_put32(t + 8, offset_ns);
    tb_put16(t + 12, priority);
    tb_put32(t + 16, wcet_ns);
}

static inline void tb_task(uint8_t *t, uint32_t entry, uint32_t period_ns, uint16_t priority)
{
    tb_task_full(t, entry, period_ns, 0, priority, 0);
}

/* LET copy: phase 0 release, 1 publish. */
static inline void tb_copy(uint8_t *c, uint16_t task, uint8_t phase, uint32_t size,
                           uint32_t src, uint32_t dst)
{
    memset(c, 0, TB_COPY_SIZE);
    tb_put16(c, task);
    c[2] = phase;
    tb_put32(c + 4, size);
    tb_put32(c + 8, src);
    tb_put32(c + 12, dst);
}

/* I/O binding: direction 1 input, 2 output; kind 1..4; dtype 1 f32, 2 f64, 3 i32, 4 bool. */
static inline void tb_binding(uint8_t *b, uint16_t task, uint8_t direction, uint8_t kind,
                              uint16_t channel, uint8_t dtype, uint32_t offset)
{
    memset(b, 0, TB_BINDING_SIZE);
    tb_put16(b, task);
    b[2] = direction;
    b[3] = kind;
    tb_put16(b + 4, channel);
    b[6] = dtype;
    tb_put32(b + 8, offset);
}

static inline void tb_port(uint8_t *p, uint32_t name, uint32_t offset, uint8_t dtype,
                           uint8_t role, uint16_t task, uint32_t count)
{
    memset(p, 0, 16);
    tb_put32(p, name);
    tb_put32(p + 4, offset);
    p[8] = dtype;
    p[9] = role;
    tb_put16(p + 10, task);
    tb_put32(p + 12, count);
}

/* ---- the standard image: four x86_64 tasks writing into the data region
 *   task 0 @0:  ret
 *   task 1 @8:  movabs rax, &data[0]; mov dword [rax], 42; ret   (64-bit absolute patch)
 *   task 2 @32: movabs rax, &data[4]; add dword [rax], 1; ret    (64-bit absolute patch)
 *   task 3 @48: mov dword [rip + &data[8]], 7; ret                (rel32 patch)
 * and the scheduler tables of task 1 (period 1 ms):
 *   LET copies: release data[12..16) -> data[16..20), publish data[0..4) -> data[20..24)
 *   I/O bindings: input ADC 3 -> f32 data[24], output i32 data[20] -> PWM 1
 */
enum {
    STD_CODE_SIZE = 64,
    STD_DATA_OFFSET = 4096,
    STD_DATA_SIZE = 64,
    STD_SEC_CODE = 0, STD_SEC_DATA_INIT, STD_SEC_KINDS, STD_SEC_PATCHES, STD_SEC_TASKS,
    STD_SEC_PORTS, STD_SEC_STRINGS, STD_SEC_METADATA, STD_SEC_COPIES, STD_SEC_BINDINGS,
    STD_NSEC,
    /* where the sections land in the built image (they follow each other without gaps) */
    STD_DIR_END = 48 + 16 * STD_NSEC,
    STD_AT_CODE = STD_DIR_END,
    STD_AT_DATA_INIT = STD_AT_CODE + STD_CODE_SIZE,
    STD_AT_KINDS = STD_AT_DATA_INIT + 16,
    STD_AT_PATCHES = STD_AT_KINDS + 2 * 20,
    STD_AT_TASKS = STD_AT_PATCHES + 3 * 12,
    STD_AT_PORTS = STD_AT_TASKS + 4 * 24
};

typedef struct std_parts {
    uint8_t code[STD_CODE_SIZE];
    uint8_t data_init[16];
    uint8_t kinds[2][20];
    uint8_t patches[3][12];
    uint8_t tasks[4][24];
    uint8_t ports[2][16];
    char strings[10];
    char metadata[2];
    uint8_t copies[2][16];
    uint8_t bindings[2][16];
} std_parts;

static inline void std_spec(tb_spec *spec, std_parts *p)
{
    static const uint8_t code[STD_CODE_SIZE] = {
        [0] = 0xc3,
        [8] = 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xc7, 0x00, 0x2a, 0x00, 0x00, 0x00, 0xc3,
        [32] = 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0x83, 0x00, 0x01, 0xc3,
        [48] = 0xc7, 0x05, 0, 0, 0, 0, 0x07, 0x00, 0x00, 0x00, 0xc3,
    };
    static const uint8_t abs64[][3] = {{0, 64, 0}};
    static const uint8_t rel32[][3] = {{0, 32, 0}};
    memset(p, 0, sizeof(*p));
    memcpy(p->code, code, sizeof(code));
    tb_put32(p->data_init + 12, 0x11223344u);
    tb_kind(p->kinds[0], 64, 0, 0, 0, 0, 1, abs64);
    tb_kind(p->kinds[1], 32, 1 | 4, 0, 32, 0, 1, rel32); /* PCREL | SIGNED */
    tb_patch(p->patches[0], 10, 0, STD_DATA_OFFSET + 0);
    tb_patch(p->patches[1], 34, 0, STD_DATA_OFFSET + 4);
    /* rip after the 10-byte instruction at 48 is site 50 + 8 */
    tb_patch(p->patches[2], 50, 1, STD_DATA_OFFSET + 8 - 8);
    tb_task(p->tasks[0], 0, 0, 0);
    tb_task(p->tasks[1], 8, 1000000, 1);
    tb_task(p->tasks[2], 32, 0, 2);
    tb_task(p->tasks[3], 48, 0, 3);
    memcpy(p->strings, "out\0count", 10);
    tb_port(p->ports[0], 0, 0, 3, 2, 1, 1);
    tb_port(p->ports[1], 4, 4, 3, 3, 0xffff, 1);
    memcpy(p->metadata, "{}", 2);
    tb_copy(p->copies[0], 1, 0, 4, 12, 16);
    tb_copy(p->copies[1], 1, 1, 4, 0, 20);
    tb_binding(p->bindings[0], 1, 1, 4, 3, 1, 24);
    tb_binding(p->bindings[1], 1, 2, 2, 1, 3, 20);

    memset(spec, 0, sizeof(*spec));
    spec->version = 1;
    spec->header_size = 48;
    spec->arch = CP_ARCH_X86_64;
    spec->code_size = STD_CODE_SIZE;
    spec->data_offset = STD_DATA_OFFSET;
    spec->data_size = STD_DATA_SIZE;
    spec->base_align = 4096;
    spec->nsec = STD_NSEC;
    spec->sec[STD_SEC_CODE] = (tb_section){1, 1, p->code, sizeof(p->code)};
    spec->sec[STD_SEC_DATA_INIT] = (tb_section){2, 1, p->data_init, sizeof(p->data_init)};
    spec->sec[STD_SEC_KINDS] = (tb_section){3, 20, p->kinds, sizeof(p->kinds)};
    spec->sec[STD_SEC_PATCHES] = (tb_section){4, 12, p->patches, sizeof(p->patches)};
    spec->sec[STD_SEC_TASKS] = (tb_section){5, 24, p->tasks, sizeof(p->tasks)};
    spec->sec[STD_SEC_PORTS] = (tb_section){6, 16, p->ports, sizeof(p->ports)};
    spec->sec[STD_SEC_STRINGS] = (tb_section){7, 1, p->strings, sizeof(p->strings)};
    spec->sec[STD_SEC_METADATA] = (tb_section){8, 1, p->metadata, sizeof(p->metadata)};
    spec->sec[STD_SEC_COPIES] = (tb_section){9, 16, p->copies, sizeof(p->copies)};
    spec->sec[STD_SEC_BINDINGS] = (tb_section){10, 16, p->bindings, sizeof(p->bindings)};
}

static inline void std_image(tb_image *img)
{
    tb_spec spec;
    std_parts parts;
    std_spec(&spec, &parts);
    tb_build(&spec, img);
}

/* The standard image with a CPU_FEATURES section (type 11) of `count` entries of `mask`. */
static inline void std_image_features(tb_image *img, uint64_t mask, uint32_t count)
{
    tb_spec spec;
    std_parts parts;
    std_spec(&spec, &parts);
    static uint8_t entries[2][8];
    memset(entries, 0, sizeof(entries));
    for (uint32_t i = 0; i < 2; i++) {
        tb_put32(entries[i], (uint32_t)mask);
        tb_put32(entries[i] + 4, (uint32_t)(mask >> 32));
    }
    spec.sec[spec.nsec++] = (tb_section){11, 8, entries, 8u * (count < 2 ? count : 2)};
    tb_build(&spec, img);
}

/* The standard image with the ABI 3 entries: 40-byte tasks (budget, link timeout) and
 * 24-byte I/O bindings (safe values), plus an optional section of an unknown type (bit 15). */
static inline void std_image_ext(tb_image *img)
{
    tb_spec spec;
    std_parts parts;
    std_spec(&spec, &parts);
    static uint8_t tasks[4][40], bindings[2][24];
    static const uint8_t extra[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    memset(tasks, 0, sizeof(tasks));
    memset(bindings, 0, sizeof(bindings));
    for (int i = 0; i < 4; i++) {
        memcpy(tasks[i], parts.tasks[i], 24);
        tb_put32(tasks[i] + 24, 1000u * (uint32_t)i);       /* budget_ns */
        tb_put32(tasks[i] + 32, 200000000u * (uint32_t)i);  /* link_timeout_ns */
    }
    for (int i = 0; i < 2; i++) {
        memcpy(bindings[i], parts.bindings[i], 16);
    }
    tb_put32(bindings[1] + 20, 0x3fe00000u); /* safe = 0.5 */
    spec.sec[STD_SEC_TASKS] = (tb_section){5, 40, tasks, sizeof(tasks)};
    spec.sec[STD_SEC_BINDINGS] = (tb_section){10, 24, bindings, sizeof(bindings)};
    spec.sec[spec.nsec++] = (tb_section){0x8000 | 42, 1, extra, sizeof(extra)};
    tb_build(&spec, img);
}

/* ---- a platform that forwards to POSIX and counts, or fails on request */

typedef struct tp_ctx {
    const cp_platform *inner;
    int allocs, frees, seals;
    int fail_alloc, fail_seal;
    size_t live_size;
} tp_ctx;

static inline void *tp_alloc(void *ctx, size_t size, size_t align)
{
    tp_ctx *c = ctx;
    if (c->fail_alloc) {
        return NULL;
    }
    void *p = c->inner->region_alloc(c->inner->ctx, size, align);
    if (p != NULL) {
        c->allocs++;
        c->live_size = size;
    }
    return p;
}

static inline int tp_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    tp_ctx *c = ctx;
    c->seals++;
    return c->fail_seal ? -1 : c->inner->region_seal(c->inner->ctx, base, code_len, size);
}

static inline void tp_free(void *ctx, void *base, size_t size)
{
    tp_ctx *c = ctx;
    c->frees++;
    c->inner->region_free(c->inner->ctx, base, size);
}

/* The counting platform claims `arch`, so images of any architecture load (but only host
 * code may be run). */
static inline cp_platform tp_platform(tp_ctx *ctx, uint16_t arch)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->inner = cp_platform_posix();
    cp_platform p = *ctx->inner;
    p.arch = arch;
    p.ctx = ctx;
    p.region_alloc = tp_alloc;
    p.region_seal = tp_seal;
    p.region_free = tp_free;
    return p;
}

static inline cp_error tb_error(void)
{
    cp_error e;
    memset(&e, 0, sizeof(e));
    e.struct_size = sizeof(e);
    return e;
}

static inline cp_program tb_program(void)
{
    cp_program p;
    memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    return p;
}

#endif /* COPAPY_TEST_IMAGE_H */
