/* copapy runner core: the frozen C ABI shared by every runner (Python module, host process,
 * bare-metal and Zephyr firmware, cppyy kits).
 *
 * Rules of this header: structs carry `struct_size` and are only ever extended at the end;
 * enum values are never renumbered; CP_RUNNER_ABI_VERSION is bumped when something is added.
 * The core never calls libc in the hot path and never allocates by itself: memory comes from
 * the embedder through cp_platform.
 */
#ifndef COPAPY_RUNNER_H
#define COPAPY_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CP_RUNNER_ABI_VERSION 1u
#define CP_IMAGE_FORMAT_VERSION 1u

/* Architecture ids of docs/image.md. */
enum {
    CP_ARCH_X86_64 = 1,
    CP_ARCH_X86 = 2,
    CP_ARCH_AARCH64 = 3,
    CP_ARCH_ARMV6 = 4,
    CP_ARCH_ARMV7A = 5,
    CP_ARCH_CORTEX_M4 = 6,
    CP_ARCH_CORTEX_M7 = 7,
    CP_ARCH_CORTEX_M55 = 8,
    CP_ARCH_RV32 = 9,
    CP_ARCH_RV64 = 10,
    CP_ARCH_TRICORE = 11
};

/* Load errors, in the order they are checked (docs/image.md, "Load errors"). */
typedef enum cp_status {
    CP_OK = 0,
    CP_ERR_TRUNCATED = 1,
    CP_ERR_MAGIC = 2,
    CP_ERR_VERSION = 3,
    CP_ERR_CRC = 4,
    CP_ERR_ARCH = 5,
    CP_ERR_LAYOUT = 6,
    CP_ERR_PATCH = 7,
    CP_ERR_NOMEM = 8,
    CP_ERR_TOO_LARGE = 9,
    CP_ERR_ARGUMENT = 10
} cp_status;

typedef struct cp_error {
    uint32_t struct_size;   /* sizeof(cp_error) as known by the caller */
    uint32_t code;          /* cp_status */
    uint32_t detail;        /* e.g. index of the offending patch or section */
    char message[160];      /* NUL-terminated, human readable */
} cp_error;

/* Services the embedder provides; the core itself knows no operating system. */
typedef struct cp_platform {
    uint32_t struct_size;
    uint32_t abi_version;
    uint16_t arch;          /* the architecture whose images this runner executes */
    uint16_t reserved;
    void *ctx;
    /* A writable block of `size` bytes whose address is a multiple of `align`; NULL if none. */
    void *(*region_alloc)(void *ctx, size_t size, size_t align);
    /* Make [base, base + code_len) executable after patching; data beyond stays writable.
     * Also synchronises instruction caches. Returns 0 on success. */
    int (*region_seal)(void *ctx, void *base, size_t code_len, size_t size);
    void (*region_free)(void *ctx, void *base, size_t size);
    size_t max_region_size; /* 0 = no limit */
} cp_platform;

typedef struct cp_task_entry {
    void (*entry)(void);
    uint32_t period_ns;
    uint32_t offset_ns;
    uint16_t priority;
    uint16_t flags;
} cp_task_entry;

/* A loaded program. Embeddable: no hidden allocation; all memory is the one region. */
typedef struct cp_program {
    uint32_t struct_size;
    uint32_t loaded;        /* 1 once fully loaded */
    uint8_t *base;          /* region base: code at base, data at base + data_offset */
    size_t region_size;
    uint32_t code_size;
    uint32_t data_offset;
    uint32_t data_size;
    uint32_t task_count;
    cp_task_entry *tasks;   /* inside the region, after the data */
    const cp_platform *platform;
} cp_program;

/* Validate a whole image without side effects (every bound, CRC, version, architecture,
 * every patch descriptor and record). */
cp_status cp_image_validate(const uint8_t *image, size_t len, uint16_t arch, cp_error *err);

/* Validate, allocate, copy, patch and seal into `out`. On failure `out` is left untouched,
 * so a program previously held in another cp_program keeps running. */
cp_status cp_program_load(cp_program *out, const uint8_t *image, size_t len,
                          const cp_platform *platform, cp_error *err);

/* Run one task once (task < task_count, checked). Never allocates. */
cp_status cp_program_run(const cp_program *prog, uint32_t task);

/* Release the program's region. Safe on a zeroed or already unloaded program. */
void cp_program_unload(cp_program *prog);

static inline uint8_t *cp_program_data(const cp_program *prog)
{
    return prog->base + prog->data_offset;
}

/* CRC-32 as used by the image trailer (zlib-compatible). */
uint32_t cp_crc32(uint32_t crc, const uint8_t *data, size_t len);

/* Name of a status code, for messages. */
const char *cp_status_name(cp_status status);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_RUNNER_H */
