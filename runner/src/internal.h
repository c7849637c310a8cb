/* Private interfaces of the runner core, shared by its translation units and the test hooks of
 * the Python module. Not part of the frozen ABI. */
#ifndef COPAPY_INTERNAL_H
#define COPAPY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/runner.h"

/* a value shared between the tick context and the protocol context (server.c, jitter.c) */
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define RELAXED_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define RELAXED_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* ---- explicit little-endian access: image fields are unaligned and host-endian independent */

static inline uint16_t cp_le16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] | (uint16_t)((uint16_t)p[1] << 8));
}

static inline uint32_t cp_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t cp_le64(const uint8_t *p)
{
    return (uint64_t)cp_le32(p) | ((uint64_t)cp_le32(p + 4) << 32);
}

static inline void cp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void cp_put32(uint8_t *p, uint32_t v)
{
    cp_put16(p, (uint16_t)v);
    cp_put16(p + 2, (uint16_t)(v >> 16));
}

static inline void cp_put64(uint8_t *p, uint64_t v)
{
    cp_put32(p, (uint32_t)v);
    cp_put32(p + 4, (uint32_t)(v >> 32));
}

/* The core stays libc-free, so it carries its own byte loops. */
static inline void cp_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i];
    }
}

/* n bytes between two ranges that do not overlap, words through a local (one load and one
 * store each, no aliasing question) and only the tail byte by byte: slots are mostly 4 or 8
 * bytes, merged runs of slots longer (the scheduler's LET copies, the platform's job lists). */
static inline void cp_copy_words(uint8_t *dst, const uint8_t *src, uint32_t n)
{
    while (n >= 16) {
        uint64_t w[2];
        cp_copy((uint8_t *)w, src, 16);
        cp_copy(dst, (const uint8_t *)w, 16);
        dst += 16;
        src += 16;
        n -= 16;
    }
    while (n >= 8) {
        uint64_t w;
        cp_copy((uint8_t *)&w, src, 8);
        cp_copy(dst, (const uint8_t *)&w, 8);
        dst += 8;
        src += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t w;
        cp_copy((uint8_t *)&w, src, 4);
        cp_copy(dst, (const uint8_t *)&w, 4);
        dst += 4;
        src += 4;
        n -= 4;
    }
    cp_copy(dst, src, n);
}

static inline void cp_fill(uint8_t *dst, uint8_t value, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = value;
    }
}

/* Whether n bytes are all zero (8 bytes per step; the words are read with __builtin_memcpy,
 * which the compilers inline, so no alignment is assumed). */
static inline int cp_all_zero(const uint8_t *p, size_t n)
{
    uint64_t any = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, p + i, sizeof w);
        any |= w;
    }
    for (; i < n; i++) {
        any |= p[i];
    }
    return any == 0;
}

/* Zero n bytes, writing only the 64-byte chunks that are not zero yet: the pages of a fresh
 * mapping (which reads as zeros) stay untouched, so a large region costs memory only where it
 * is used (the homes of @cp.jit's in-place arguments and results, issue 31). */
static inline void cp_clear(uint8_t *dst, size_t n)
{
    for (size_t at = 0; at < n; at += 64) {
        size_t len = n - at < 64 ? n - at : 64;
        if (!cp_all_zero(dst + at, len)) {
            cp_fill(dst + at, 0, len);
        }
    }
}

/* Copy n bytes into a zeroed destination, skipping the 64-byte chunks of the source that are
 * all zero (the destination's pages there stay untouched, as cp_clear's). */
static inline void cp_copy_sparse(uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t at = 0; at < n; at += 64) {
        size_t len = n - at < 64 ? n - at : 64;
        if (!cp_all_zero(src + at, len)) {
            cp_copy(dst + at, src + at, len);
        }
    }
}

/* ---- error reporting (message.c) */

/* Fills `err` (if given and large enough) and returns `code`. `fmt` understands
 * %u (unsigned), %d (signed 64-bit), %x (0x-prefixed hex), %a (architecture "name (id)"),
 * %S (section type name), %s (a NUL-terminated string passed as (uint64_t)(uintptr_t)p;
 * NULL prints nothing), each consuming the next element of `args`. */
cp_status cp_fail(cp_error *err, cp_status code, uint32_t detail, const char *fmt,
                  const uint64_t *args, size_t nargs);

#define CP_ARGS(...) (const uint64_t[]){__VA_ARGS__}, \
    (sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define CP_FAIL(err, code, detail, fmt, ...) \
    cp_fail((err), (code), (detail), (fmt), CP_ARGS(__VA_ARGS__))

void cp_ok(cp_error *err);
const char *cp_arch_name(uint32_t arch);
const char *cp_section_name(uint32_t type);
/* Names of the contract.h rows ("GPIO", "LOAD_BEGIN", "BAD_PAYLOAD"); "unknown" if none. */
const char *cp_io_kind_name(uint32_t kind);
const char *cp_command_name(uint32_t command);
const char *cp_protocol_error_name(uint32_t code);

/* ---- image sections and records (image.c) */

enum {
    CP_HEADER_SIZE = 48,
    CP_DIR_ENTRY_SIZE = 16,
    CP_MAX_SECTIONS = 64,
    CP_CRC_SIZE = 4
};

/* Section types CP_SEC_CODE ... (contract.h's CP_SECTION_TABLE; CP_SEC_KNOWN_MAX the last). */
enum {
    /* must-understand rule: a reader may ignore a section type it does not know only if this
     * bit is set; an unknown type without it is rejected (CP_ERR_UNSUPPORTED) */
    CP_SEC_OPTIONAL = 0x8000
};

enum {
    CP_KIND_SIZE = 20,
    CP_PATCH_SIZE = 12,
    CP_TASK_SIZE = 24,
    CP_PORT_SIZE = 16,
    CP_LET_COPY_SIZE = 16,
    CP_IO_BINDING_SIZE = 16,
    CP_CPU_FEATURES_SIZE = 8,
    /* entries with the fields appended in ABI 3 (docs/image.md); shorter entries read them
     * as 0 */
    CP_TASK_SIZE_BUDGET = 40,     /* + u32 budget_ns, u32 reserved, u64 link_timeout_ns */
    CP_IO_BINDING_SIZE_SAFE = 24  /* + f64 safe */
};

typedef struct cp_section {
    uint32_t offset;
    uint32_t entry_size;
    uint32_t count;
    uint32_t size;
} cp_section;

/* A validated view of an image; every section bound in it has been checked. */
typedef struct cp_image {
    const uint8_t *bytes;
    uint32_t total_size;
    uint16_t arch;
    uint32_t code_size;
    uint32_t data_offset;
    uint32_t data_size;
    uint32_t base_align;
    cp_section sec[CP_SEC_KNOWN_MAX + 1]; /* by type; absent sections are all zero */
    uint64_t cpu_features;                /* CPU_FEATURES bits the code needs; 0: baseline */
    uint16_t version;                     /* 1: carries code; 2: stencil ids (BLOCKS) */
    uint8_t allow_code;                   /* a format-1 image may load on a runner with a
                                           * table: @cp.jit's own images (cp_program_load_own) */
} cp_image;

typedef struct cp_patch_record {
    uint32_t site;
    uint16_t kind;
    uint8_t base;
    uint8_t reserved;
    int32_t addend;
} cp_patch_record;

typedef struct cp_task_record {
    uint32_t entry;
    uint32_t period_ns;
    uint32_t offset_ns;
    uint16_t priority;
    uint16_t flags;
    uint32_t wcet_ns;
    uint32_t reserved;
    uint32_t budget_ns;
    uint32_t reserved2;
    uint64_t link_timeout_ns;
} cp_task_record;

/* Full validation of docs/image.md; on success `img` describes the image. */
cp_status cp_image_parse(cp_image *img, const uint8_t *image, size_t len, uint16_t arch,
                         cp_error *err);

/* cp_image_parse for a caller that has already computed crc_prefix = the CRC-32 of
 * image[0, len - 4): when the header's total_size is len, the trailer is checked against it
 * instead of computing the CRC again (same checks, same errors). */
cp_status cp_image_parse_crc(cp_image *img, const uint8_t *image, size_t len, uint16_t arch,
                             uint32_t crc_prefix, cp_error *err);

static inline const uint8_t *cp_image_entry(const cp_image *img, int type, uint32_t index)
{
    const cp_section *s = &img->sec[type];
    return img->bytes + s->offset + (size_t)index * s->entry_size;
}

cp_patch_record cp_image_patch(const cp_image *img, uint32_t index);
cp_task_record cp_image_task(const cp_image *img, uint32_t index);
cp_let_copy cp_image_let_copy(const cp_image *img, uint32_t index);
cp_io_binding cp_image_io_binding(const cp_image *img, uint32_t index);

/* ---- element types of ports and I/O bindings (contract.h's CP_DTYPE_TABLE, docs/image.md)
 * CP_DT_BOOL is stored as int32 0/1. */

#define CP_CONTRACT_DTYPE_SIZE(N, code, bytes, io, py) case code: return bytes;
#define CP_CONTRACT_IO_DTYPE(N, code, bytes, io, py) case code: return io ? bytes : 0u;

/* Bytes of one element of a port dtype; 0 if unknown. */
static inline uint32_t cp_dtype_size(int64_t dtype)
{
    switch (dtype) {
    CP_DTYPE_TABLE(CP_CONTRACT_DTYPE_SIZE)
    default:
        return 0;
    }
}

/* Bytes of a slot of an I/O binding's dtype (the rows with io 1); 0 if unknown. */
static inline uint32_t cp_io_dtype_size(uint8_t dtype)
{
    switch (dtype) {
    CP_DTYPE_TABLE(CP_CONTRACT_IO_DTYPE)
    default:
        return 0;
    }
}

#if defined(__GNUC__) || defined(__clang__)
#define CP_INFINITY_F __builtin_inff()
#else
#include <math.h> /* the macro only; nothing from libm is called */
#define CP_INFINITY_F INFINITY
#endif

/* Round-to-nearest double -> float with overflow to +-inf, as IEEE 754 (Annex F) specifies,
 * without relying on a conversion C leaves undefined for out-of-range values (C11 6.3.1.5).
 * NaN stays NaN. */
static inline float cp_to_f32(double d)
{
    const double inf_threshold = 0x1.ffffffp127; /* halfway between FLT_MAX and 2^128 */
    if (d >= inf_threshold) {
        return CP_INFINITY_F;
    }
    if (d <= -inf_threshold) {
        return -CP_INFINITY_F;
    }
    return (float)d;
}

/* ---- grouping of the LET copy and I/O binding tables (program.c sorts, sched.c slices)
 * Group 2t holds task t's RELEASE copies / INPUT bindings, group 2t + 1 its PUBLISH copies /
 * OUTPUT bindings. */

static inline uint32_t cp_group_key(uint32_t task, int second)
{
    return task * 2u + (second ? 1u : 0u);
}

static inline uint32_t cp_let_copy_group(const cp_let_copy *c)
{
    return cp_group_key(c->task, c->phase != 0);
}

static inline uint32_t cp_io_binding_group(const cp_io_binding *b)
{
    return cp_group_key(b->task, b->direction == CP_DIR_OUTPUT);
}

/* Checks one LET copy / I/O binding (used at parse time and again while loading). */
cp_status cp_image_check_let_copy(const cp_image *img, uint32_t index, cp_error *err);
cp_status cp_image_check_io_binding(const cp_image *img, uint32_t index, cp_error *err);

/* Checks a patch record against the kinds and the code size (used at parse and apply time). */
cp_status cp_image_check_patch(const cp_image *img, uint32_t index, cp_error *err);

/* ---- generic patches (patch.c) */

enum {
    CP_PK_PCREL = 1u << 0,
    CP_PK_PAGE = 1u << 1,
    CP_PK_SIGNED = 1u << 2,
    CP_PK_ROUND = 1u << 3,
    CP_PK_THUMB32 = 1u << 4,
    CP_PK_KNOWN = (1u << 5) - 1u,
    /* only in a stencil table's 32-byte descriptors (blocks.c): XOR the shifted value with
     * flip_mask when it is non-negative (Thumb-2 B.W/BL: J1 = NOT(I1 XOR S)) */
    CP_PK_XOR_NOT_SIGN = 1u << 5,
    CP_PK_KNOWN_WIDE = (1u << 6) - 1u,
    CP_KIND_FIELDS = 4,      /* fields of an image's 20-byte descriptor */
    CP_KIND_FIELDS_WIDE = 6, /* fields of a table's 32-byte descriptor */
    CP_KIND_SIZE_WIDE = 32
};

typedef struct cp_patch_kind {
    uint8_t word_bits;
    uint8_t flags;
    uint8_t shift;
    uint8_t range_bits;
    uint8_t align_log2;
    uint8_t field_count;
    uint8_t field[CP_KIND_FIELDS_WIDE][3]; /* src_lsb, width, dst_lsb */
    uint32_t flip_mask;                    /* CP_PK_XOR_NOT_SIGN */
} cp_patch_kind;

/* Decodes and validates a 20-byte descriptor; `index` names it in messages (CP_ERR_LAYOUT). */
cp_status cp_kind_decode(const uint8_t *raw, uint32_t index, cp_patch_kind *kind, cp_error *err);
/* The same for a stencil table's 32-byte descriptor: up to 6 fields, XOR_NOT_SIGN and its
 * u32 flip mask at bytes 28-31 (src/copapy/arch/patchkind.py pack_wide). */
cp_status cp_kind_decode_wide(const uint8_t *raw, uint32_t index, cp_patch_kind *kind,
                              cp_error *err);

/* Computes the value and rewrites the word at `word` (word_bits/8 bytes, any alignment).
 * Addresses are the run-time addresses of the patched word and of the target. On an alignment
 * or range failure returns CP_ERR_PATCH with `index` as detail and leaves the word unchanged. */
cp_status cp_patch_apply(const cp_patch_kind *kind, uint8_t *word, uint64_t site_addr,
                         uint64_t target_addr, uint32_t index, cp_error *err);

/* ---- CPU features (cpu_features.c) */

/* Where CPUID reports an x86_64 CPU_FEATURES bit, and the XCR0 state bits the operating
 * system must have enabled for its registers (AVX: SSE|YMM, AVX-512: also opmask|ZMM). */
typedef struct cp_cpuid_bit {
    const char *name;   /* the /proc/cpuinfo flag, as targets/x86_64.toml spells it */
    uint32_t leaf;
    uint8_t reg;        /* 0 eax, 1 ebx, 2 ecx, 3 edx */
    uint8_t bit;
    uint8_t xcr0;       /* required XCR0 bits, 0: none */
    uint8_t reserved;
} cp_cpuid_bit;

/* The x86_64 table, indexed by bit; *count receives its length. */
const cp_cpuid_bit *cp_x86_64_features(uint32_t *count);

/* Writes the names of the bits of `mask` ("avx2, fma") into buf (NUL-terminated, cut short
 * with ", ..." when it does not fit); libc-free. */
void cp_cpu_feature_list(uint16_t arch, uint64_t mask, char *buf, size_t cap);

/* CP_ERR_CPU_FEATURES unless the platform's CPU has every feature the image needs. */
cp_status cp_check_cpu_features(const cp_image *img, const cp_platform *platform,
                                cp_error *err);

/* ---- loading (program.c) */

/* cp_program_load from an image already parsed with cp_image_parse (for the platform's
 * arch): allocate, copy, patch and seal; every check that touches the region is repeated.
 * The image bytes must stay unchanged until it returns. */
cp_status cp_program_load_parsed(cp_program *out, const cp_image *img,
                                 const cp_platform *platform, cp_error *err);

/* cp_program_load for code this process compiled itself (@cp.jit, LocalTarget): a format-1
 * image is accepted even where the runner carries a stencil table (the trusted path of
 * docs/decisions/2026-12-04-verified-loading.md, rule 5). Never for images from outside. */
cp_status cp_program_load_own(cp_program *out, const uint8_t *image, size_t len,
                              const cp_platform *platform, cp_error *err);

/* ---- verified loading of format 2 (table.c, blocks.c) */

/* The stencil tables this runner carries (runner/tables/<arch>.c and its variants, linked with
 * -DCP_WITH_TABLE): cp_table_get fills `out` with table `index` and returns 1, or returns 0
 * (no such table; a runner without tables refuses format-2 images, TABLE). */
typedef struct cp_table {
    const uint8_t *blob;
    uint32_t size;
    const uint8_t *sha256; /* 32 bytes: the TABLE_PIN of images built from it */
    /* 1: tools/stencil_cpu_state.py proved that no stencil of this table changes the CPU
     * state (its proof record, runner/tables/cpu_state/<arch>.json, is for these bytes), so
     * a guard may skip the per-job CPU-state check of programs verified against it */
    uint8_t keeps_cpu_state;
    /* the CPU_FEATURES bits its code needs (0: the baseline); an image pinned to it must
     * declare them, or the loader's CPU check would not see them (blocks.c) */
    uint64_t cpu_features;
} cp_table;
uint32_t cp_table_count(void);
int cp_table_get(uint32_t index, cp_table *out);
/* keeps_cpu_state of the carried table whose SHA-256 is `pin` (32 bytes): 0 if none is */
int cp_table_keeps_cpu_state(const uint8_t *pin);

enum {
    CP_MAX_HELPERS = 256, /* distinct helper functions one program calls */
    CP_MAX_RODATA = 128,  /* distinct constant blobs */
    CP_MAX_KINDS = 16,    /* patch kinds of a table */
    CP_MAX_COUNTERS = 128, /* distinct counted-loop counters (cp.fori_loop) of one program */
    CP_PIN_SIZE = 32
};

/* What pass 1 over the manifest computed (blocks.c): pass 2 places code by it. */
typedef struct cp_blocks_plan {
    uint32_t code_size;
    uint32_t chain_count;
    uint32_t chain_start[CP_MAX_TASKS]; /* entry offsets, Thumb bit included */
    uint32_t helper_count, rodata_count;
    uint16_t helper[CP_MAX_HELPERS];
    uint32_t helper_at[CP_MAX_HELPERS];
    uint16_t rodata[CP_MAX_RODATA];
    uint32_t rodata_at[CP_MAX_RODATA];
    uint32_t ops; /* blocks of the manifest */
    /* the counted loops' counters: the one frozen slot a stencil writes, so no length or
     * pointer slot of any block may overlap one (blocks.c check_counters) */
    uint32_t counter_count;
    uint32_t counter[CP_MAX_COUNTERS];
} cp_blocks_plan;

/* Pass 1: picks the table the image's pin names (TABLE if none), checks every rule of docs/image.md's "Verified loading" (STENCIL,
 * SLOTS, DATA_RANGE, STRUCTURE, FROZEN, TABLE) and lays the code out, writing nothing. */
cp_status cp_blocks_plan_make(const cp_image *img, cp_table *table, cp_blocks_plan *plan,
                              cp_error *err);
/* Pass 2: copies and patches every byte of code into base[0, plan->code_size) (the region at
 * `base`, data already initialised), checking every rule again (the image buffer may have
 * changed since pass 1) with the lengths and pointer slots read from the region's data: the
 * bytes the code will use, not the caller's buffer, which it may change meanwhile. */
cp_status cp_blocks_place(const cp_image *img, const cp_table *table,
                          const cp_blocks_plan *plan, uint8_t *base, cp_error *err);

/* The same with a given table (cp_blocks_plan_make picks one of the runner's by the pin):
 * TABLE unless table->sha256 is the image's pin; `untrusted`: the table comes from outside
 * the runner and its records are bounds-checked first (the in-process verifier of other
 * architectures' images, runner/python/module.c verify). */
cp_status cp_blocks_plan_table(const cp_image *img, const cp_table *table, int untrusted,
                               cp_blocks_plan *plan, cp_error *err);
/* Whether [off, off + size) of the data shares a byte with a slot of the image's FROZEN list
 * (a length, pointer slot or loop counter the verifier read from the initial data): a writer
 * the image does not declare (LOAD_COMMIT's KEEP copies) must not touch one. */
int cp_blocks_frozen_overlap(const cp_image *img, uint64_t off, uint64_t size);

#if defined(CP_TEST_HOOKS)
/* Test builds only (runner/tests/test_verify_reload.c): cp_program_load_parsed calls it at
 * step 1, after pass 1 checked the image, and at step 2, after DATA_INIT was copied into the
 * region and before pass 2, so a test can change the caller's buffer in between. */
extern void (*cp_test_load_hook)(int step);
#define CP_TEST_LOAD_HOOK(step)            \
    do {                                   \
        if (cp_test_load_hook != NULL) {   \
            cp_test_load_hook(step);       \
        }                                  \
    } while (0)
#else
#define CP_TEST_LOAD_HOOK(step) ((void)0)
#endif
/* cp_blocks_place patching as if base[0] were at address `vbase` (the code is for another
 * machine's address space, or only checked); it has no data region, so the lengths and
 * pointer slots are read from the image's DATA_INIT. */
cp_status cp_blocks_place_at(const cp_image *img, const cp_table *table,
                             const cp_blocks_plan *plan, uint8_t *base, uint64_t vbase,
                             cp_error *err);

/* ---- calling loaded code (program.c, sched.c) */

/* clang's -fsanitize=function reads a type hash in front of every indirect callee; loaded code
 * has none (and the bytes before the region may be unmapped), so that check must stay off. */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define CP_CALLS_LOADED_CODE __attribute__((no_sanitize("function")))
#endif
#endif
#ifndef CP_CALLS_LOADED_CODE
#define CP_CALLS_LOADED_CODE
#endif

/* A function whose copies specialise it on a constant argument (the job loop, timed or not):
 * inlined into each, whatever the compiler's size heuristics say. */
#if defined(__GNUC__) || defined(__clang__)
#define CP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CP_ALWAYS_INLINE inline
#endif

/* A function kept out of line where inlining it would grow a hot loop's code. */
#if defined(__GNUC__) || defined(__clang__)
#define CP_NOINLINE __attribute__((noinline))
#else
#define CP_NOINLINE
#endif

#endif /* COPAPY_INTERNAL_H */
