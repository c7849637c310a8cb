/* The job interpreter: reads a job file over semihosting, drives the runner core and streams
 * the results into a host file. See README.md for the formats and job.h for the constants. */
#include <stdint.h>

#include "copapy/runner.h"
#include "internal.h"
#include "job.h"
#include "semihost.h"
#include "startup.h"

#ifndef CP_HARNESS_ARCH
#error "CP_HARNESS_ARCH (the architecture id of docs/image.md) must be defined"
#endif
#ifndef CP_ARENA_SIZE
#error "CP_ARENA_SIZE (bytes of executable memory for programs) must be defined"
#endif
#ifndef CP_IMAGE_MAX
#error "CP_IMAGE_MAX (largest image in bytes) must be defined"
#endif

#define DEFAULT_JOB "job.bin"
#define DEFAULT_RESULT "result.bin"
#define CMDLINE_MAX 512u
#define ARG_MAX 4u

/* ---- platform: one bump allocator over a static arena in executable RAM */

/* The linker script puts .arena into memory the default memory map lets the CPU execute
 * from (an500 SSRAM1, an547 ITCM); nothing there is zeroed at boot, the core clears regions. */
__attribute__((section(".arena"), aligned(4096)))
static uint8_t arena[CP_ARENA_SIZE];

/* The image of the current LOAD record; the core copies it into the arena. */
__attribute__((section(".imagebuf"), aligned(8)))
static uint8_t image_buf[CP_IMAGE_MAX];

typedef struct arena_state {
    size_t top;    /* first free byte */
    uint32_t live; /* allocations not yet freed; the arena resets when this drops to 0 */
} arena_state;

static arena_state arena_ctx;

static void *arena_alloc(void *ctx, size_t size, size_t align)
{
    arena_state *a = ctx;
    if (size == 0 || align == 0 || (align & (align - 1)) != 0 || align > sizeof(arena)) {
        return NULL;
    }
    uintptr_t start = (uintptr_t)arena;
    uintptr_t at = start + a->top;
    size_t pad = (size_t)((align - at % align) % align);
    size_t off = a->top + pad;
    if (off > sizeof(arena) || size > sizeof(arena) - off) {
        return NULL;
    }
    a->top = off + size;
    a->live++;
    return arena + off;
}

static void arena_free(void *ctx, void *base, size_t size)
{
    arena_state *a = ctx;
    (void)base;
    (void)size;
    if (a->live > 0 && --a->live == 0) {
        a->top = 0;
    }
}

static const cp_platform platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = CP_HARNESS_ARCH,
    .reserved = 0,
    .ctx = &arena_ctx,
    .region_alloc = arena_alloc,
    .region_seal = barrier_seal,
    .region_free = arena_free,
    .max_region_size = CP_ARENA_SIZE,
};

/* ---- the job being executed; static so the fault handler can report into the result */

typedef struct job_state {
    int32_t in;       /* job file handle */
    int32_t out;      /* result file handle, -1 until open */
    uint32_t pos;     /* read position in the job file */
    uint32_t len;     /* job file length */
    uint32_t record;  /* index of the record being executed */
    cp_program prog;
    cp_error err;
} job_state;

static job_state job = {.in = -1, .out = -1};

static uint32_t str_len(const char *s)
{
    uint32_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

static void put_u32s(uint8_t *dst, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        cp_put32(dst + 4 * i, v[i]);
    }
}

/* One result record: header, then up to two payload parts (written without copying). */
static void emit(uint32_t type, uint32_t status, const void *a, uint32_t alen, const void *b,
                 uint32_t blen)
{
    uint8_t head[12];
    const uint32_t fields[3] = {type, status, alen + blen};
    put_u32s(head, fields, 3);
    /* a failed write cannot be reported anywhere; the host sees a truncated result */
    (void)sh_write(job.out, head, sizeof head);
    if (alen > 0) {
        (void)sh_write(job.out, a, alen);
    }
    if (blen > 0) {
        (void)sh_write(job.out, b, blen);
    }
}

static void emit_message(uint32_t type, uint32_t status)
{
    emit(type, status, job.err.message, str_len(job.err.message), NULL, 0);
}

_Noreturn static void bad_job(void)
{
    emit_message(CP_REC_ERROR, CP_ERR_ARGUMENT);
    sh_exit(CP_EXIT_BAD_JOB);
}

static int job_read(void *dst, uint32_t n)
{
    if (n > job.len - job.pos || sh_read(job.in, dst, n) != 0) {
        return -1;
    }
    job.pos += n;
    return 0;
}

static void job_skip(uint32_t n)
{
    job.pos += n; /* n was checked against the file length by the caller */
    if (sh_seek(job.in, job.pos) != 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "cannot seek the job file to %u", job.pos);
        bad_job();
    }
}

static uint32_t read_u32(void)
{
    uint8_t raw[4];
    if (job_read(raw, 4) != 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0,
                      "job file ends inside record %u at byte %u", job.record, job.pos);
        bad_job();
    }
    return cp_le32(raw);
}

/* ---- records */

static void do_load(uint32_t size)
{
    cp_program_unload(&job.prog);
    if (size > sizeof(image_buf)) {
        job_skip(size);
        cp_status st = CP_FAIL(&job.err, CP_ERR_TOO_LARGE, 0,
                               "image of %u bytes exceeds the harness image buffer of %u bytes",
                               size, sizeof(image_buf));
        emit(CP_REC_LOAD, st, "\0\0\0\0", 4, job.err.message, str_len(job.err.message));
        return;
    }
    if (job_read(image_buf, size) != 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "cannot read the image of record %u",
                      job.record);
        bad_job();
    }
    /* the harness is an emulated back end of the Python process (qemu_backend.py), like
     * unicorn: its jobs come from that process, and qemu contains what they do. A build with
     * a stencil table (CP_WITH_TABLE, Cortex-M7) builds format-2 images from it and still
     * takes format 1 (the fault tests' hand-made code). */
    cp_status st = cp_program_load_own(&job.prog, image_buf, size, &platform, &job.err);
    uint8_t info[20];
    if (st != CP_OK) {
        cp_put32(info, job.err.detail);
        emit(CP_REC_LOAD, st, info, 4, job.err.message, str_len(job.err.message));
        return;
    }
    const uint32_t fields[5] = {
        (uint32_t)(uintptr_t)job.prog.base, job.prog.code_size, job.prog.data_offset,
        job.prog.data_size, job.prog.task_count,
    };
    put_u32s(info, fields, 5);
    emit(CP_REC_LOAD, CP_OK, info, sizeof info, NULL, 0);
}

static int require_program(uint32_t type)
{
    if (job.prog.loaded) {
        return 0;
    }
    (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0,
                  "record %u needs a loaded program, but none is (the last LOAD failed?)",
                  job.record);
    emit_message(type, CP_JOB_NO_PROGRAM);
    return -1;
}

static void do_write(uint32_t size)
{
    if (size < 4) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "WRITE record %u is %u bytes, needs >= 4",
                      job.record, size);
        bad_job();
    }
    uint32_t offset = read_u32();
    uint32_t n = size - 4;
    if (require_program(CP_REC_WRITE) != 0) {
        job_skip(n);
        return;
    }
    if ((uint64_t)offset + n > job.prog.data_size) {
        job_skip(n);
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0,
                      "WRITE of %u bytes at offset %u is outside the %u-byte data region",
                      n, offset, job.prog.data_size);
        emit_message(CP_REC_WRITE, CP_JOB_RANGE);
        return;
    }
    if (job_read(cp_program_data(&job.prog) + offset, n) != 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "cannot read WRITE record %u", job.record);
        bad_job();
    }
    emit(CP_REC_WRITE, CP_OK, NULL, 0, NULL, 0);
}

static void do_run(uint32_t size)
{
    if (size != 4) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "RUN record %u is %u bytes, needs 4",
                      job.record, size);
        bad_job();
    }
    uint32_t task = read_u32();
    if (require_program(CP_REC_RUN) != 0) {
        return;
    }
    if (cp_program_run(&job.prog, task) != CP_OK) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, task, "task %u does not exist (the program "
                      "has %u)", task, job.prog.task_count);
        emit_message(CP_REC_RUN, CP_ERR_ARGUMENT);
        return;
    }
    emit(CP_REC_RUN, CP_OK, NULL, 0, NULL, 0);
}

static void do_dump(uint32_t size)
{
    if (size != 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "DUMP record %u has a payload",
                      job.record);
        bad_job();
    }
    if (require_program(CP_REC_DUMP) != 0) {
        return;
    }
    emit(CP_REC_DUMP, CP_OK, cp_program_data(&job.prog), job.prog.data_size, NULL, 0);
}

/* ---- start-up: file names from the command line, headers */

/* Splits `line` in place at spaces; returns the number of words stored in `argv`. */
static uint32_t split_words(char *line, const char *argv[], uint32_t max)
{
    uint32_t n = 0;
    char *p = line;
    while (*p != '\0' && n < max) {
        while (*p == ' ') {
            *p++ = '\0';
        }
        if (*p == '\0') {
            break;
        }
        argv[n++] = p;
        while (*p != '\0' && *p != ' ') {
            p++;
        }
    }
    return n;
}

static void open_files(void)
{
    static char line[CMDLINE_MAX];
    const char *argv[ARG_MAX] = {0};
    uint32_t argc = sh_cmdline(line, sizeof line) == 0 ? split_words(line, argv, ARG_MAX) : 0;
    /* argv[0] is the program name */
    const char *job_name = argc > 1 ? argv[1] : DEFAULT_JOB;
    const char *result_name = argc > 2 ? argv[2] : DEFAULT_RESULT;
    job.out = sh_open(result_name, SH_MODE_WB);
    if (job.out < 0) {
        sh_exit(CP_EXIT_NO_RESULT);
    }
    static const uint8_t magic[4] = CP_RESULT_MAGIC;
    uint8_t head[12];
    const uint32_t fields[3] = {CP_JOB_VERSION, CP_HARNESS_ARCH, CP_ARENA_SIZE};
    put_u32s(head, fields, 3);
    (void)sh_write(job.out, magic, 4);
    (void)sh_write(job.out, head, sizeof head);
    job.in = sh_open(job_name, SH_MODE_RB);
    int32_t len = job.in < 0 ? -1 : sh_flen(job.in);
    if (len < 0) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "cannot open the job file", 0);
        bad_job();
    }
    job.len = (uint32_t)len;
}

static void check_job_header(void)
{
    uint8_t magic[4];
    if (job_read(magic, 4) != 0 || cp_le32(magic) != cp_le32((const uint8_t *)CP_JOB_MAGIC)) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "the job file does not start with CPJB", 0);
        bad_job();
    }
    uint32_t version = read_u32();
    if (version != CP_JOB_VERSION) {
        (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "job format version %u, harness reads %u",
                      version, CP_JOB_VERSION);
        bad_job();
    }
}

_Noreturn void harness_main(void)
{
    job.prog.struct_size = sizeof(cp_program);
    job.err.struct_size = sizeof(cp_error);
    open_files();
    check_job_header();
    for (job.record = 0;; job.record++) {
        uint32_t type = read_u32();
        uint32_t size = read_u32();
        if (size > job.len - job.pos) {
            (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "record %u claims %u bytes but the "
                          "job file has %u left", job.record, size, job.len - job.pos);
            bad_job();
        }
        switch (type) {
        case CP_REC_END:
            emit(CP_REC_END, CP_OK, NULL, 0, NULL, 0);
            sh_close(job.in);
            sh_close(job.out);
            sh_exit(CP_EXIT_OK);
        case CP_REC_LOAD:
            do_load(size);
            break;
        case CP_REC_WRITE:
            do_write(size);
            break;
        case CP_REC_RUN:
            do_run(size);
            break;
        case CP_REC_DUMP:
            do_dump(size);
            break;
        default:
            (void)CP_FAIL(&job.err, CP_ERR_ARGUMENT, 0, "record %u has unknown type %u",
                          job.record, type);
            bad_job();
        }
    }
}

/* ---- faults */

#define REG(addr) (*(volatile const uint32_t *)(addr))

static uint32_t read_ipsr(void)
{
    uint32_t v;
    __asm__ volatile("mrs %0, ipsr" : "=r"(v));
    return v & 0x1FFu;
}

_Static_assert(sizeof(cp_fault_report) == 12 * sizeof(uint32_t),
               "the FAULT payload below must match cp_fault_report");

_Noreturn void fault_report(const uint32_t *frame, uint32_t exc_return)
{
    uintptr_t f = (uintptr_t)frame;
    /* the basic frame is r0-r3, r12, lr, pc, xpsr; only trust it if it lies on our stack */
    int usable = f % 4 == 0 && f >= (uintptr_t)__stack_limit &&
                 f <= (uintptr_t)__stack_top - 32u;
    uint32_t r[12] = {
        /* in the order of cp_fault_report */
        read_ipsr(),
        usable ? frame[6] : 0xFFFFFFFFu,
        usable ? frame[5] : 0xFFFFFFFFu,
        usable ? frame[7] : 0xFFFFFFFFu,
        exc_return,
        REG(0xE000ED28u), /* CFSR */
        REG(0xE000ED2Cu), /* HFSR */
        REG(0xE000ED34u), /* MMFAR */
        REG(0xE000ED38u), /* BFAR */
#if defined(__ARM_ARCH_8M_MAIN__) || defined(__ARM_ARCH_8_1M_MAIN__)
        REG(0xE000EDE4u), /* SFSR */
#else
        0,
#endif
        job.record,
        job.prog.loaded ? (uint32_t)(uintptr_t)job.prog.base : 0u,
    };
    if (job.out >= 0) {
        uint8_t payload[sizeof r];
        put_u32s(payload, r, 12);
        emit(CP_REC_FAULT, 0, payload, sizeof payload, NULL, 0);
        sh_close(job.out);
    }
    sh_exit(CP_EXIT_FAULT);
}
