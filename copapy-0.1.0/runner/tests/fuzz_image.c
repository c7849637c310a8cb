/* Deterministic mutation fuzzing of validation, loading, the generic patch and the scheduler's
 * use of the loaded tables (LET copies, I/O bindings, feeds, trace), meant to run under
 * ASan/UBSan: any out-of-bounds access or undefined behaviour aborts the run.
 * Usage: fuzz_image [iterations] [seed] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_image.h"
#include "rng.h"

/* Values that sit on the boundaries the validator checks. */
static uint32_t interesting(size_t len)
{
    static const uint32_t values[] = {
        0, 1, 2, 3, 4, 7, 8, 11, 12, 15, 16, 20, 31, 32, 33, 47, 48, 52, 63, 64, 65, 127, 128,
        255, 256, 4095, 4096, 4097, 65535, 65536, 0x7fffffffu, 0x80000000u, 0xfffffffcu,
        0xffffffffu,
    };
    uint32_t pick = below(sizeof(values) / sizeof(values[0]) + 4);
    if (pick >= sizeof(values) / sizeof(values[0])) {
        return (uint32_t)len - below(8);
    }
    return values[pick];
}

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    unsigned n = 1 + below(4);
    for (unsigned m = 0; m < n; m++) {
        size_t at = below((uint32_t)*len);
        switch (below(8)) {
        case 0:
            buf[at] ^= (uint8_t)(1u << below(8));
            break;
        case 1:
            buf[at] = (uint8_t)rng();
            break;
        case 2:
        case 3: { /* a 1-, 2- or 4-byte field set to a boundary value */
            uint32_t v = interesting(*len);
            unsigned width = 1u << below(3);
            for (unsigned i = 0; i < width && at + i < *len; i++) {
                buf[at + i] = (uint8_t)(v >> (8 * i));
            }
            break;
        }
        case 4: /* aim at the header and the directory, where most checks live */
            at = below(48 + 16 * STD_NSEC);
            if (at < *len) {
                buf[at] = (uint8_t)interesting(*len);
            }
            break;
        case 5:
            *len = below((uint32_t)*len + 1);
            break;
        case 6: {
            size_t grow = below(64);
            if (*len + grow <= cap) {
                memset(buf + *len, (int)below(256), grow);
                *len += grow;
            }
            break;
        }
        default: { /* duplicate a chunk elsewhere (table entries, directory entries) */
            size_t from = below((uint32_t)*len), size = 1 + below(32);
            if (from + size <= *len && at + size <= *len) {
                memmove(buf + at, buf + from, size);
            }
            break;
        }
        }
    }
}

/* Keeps the CRC and total_size consistent most of the time, so mutations reach the checks
 * behind them instead of stopping at CRC. */
static void maybe_repair(uint8_t *buf, size_t len)
{
    if (len < 52 || below(16) == 0) {
        return;
    }
    if (below(4) != 0) {
        tb_put32(buf + 12, (uint32_t)len);
    }
    uint32_t total = tb_get32(buf + 12);
    if (total >= 52 && total <= len) {
        tb_fix_crc(buf, total);
    }
}

static int chain_calls;

static void fake_chain(void)
{
    chain_calls++;
}

static double fuzz_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    (void)ctx;
    static const double values[] = {0.0, -0.0, 1.5, -7.9, 3e9, -3e9, 1e300, 0.1};
    return values[(kind + channel + rng()) % (sizeof(values) / sizeof(values[0]))];
}

static void fuzz_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    (void)kind;
    (void)channel;
    *(double *)ctx += value == value ? 0.0 : 1.0;
}

/* Runs the scheduler over a program that loaded. Mutated code must not run, so every task entry
 * is redirected to a C function; copies, bindings, feeds and the trace act on the real tables,
 * and every access they make is checked by ASan (the data region sits inside the region). */
static void fuzz_sched(cp_program *prog)
{
    for (uint32_t i = 0; i < prog->task_count; i++) {
        prog->tasks[i].entry = fake_chain;
    }
    uint64_t tick = 0; /* the largest tick that divides every period and offset */
    for (uint32_t i = 0; i < prog->task_count; i++) {
        uint64_t vals[2] = {prog->tasks[i].period_ns, prog->tasks[i].offset_ns};
        for (int k = 0; k < 2 && prog->tasks[i].period_ns != 0; k++) {
            uint64_t a = tick, b = vals[k];
            while (b != 0) {
                uint64_t r = a % b;
                a = b;
                b = r;
            }
            tick = a;
        }
    }
    if (below(4) == 0) {
        tick = 1 + below(5000); /* mostly an invalid tick: init must refuse it cleanly */
    }
    double nan_writes = 0;
    cp_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.struct_size = sizeof(cfg);
    cfg.deterministic = below(2);
    cfg.tick_ns = tick;
    cfg.io_read = fuzz_io_read;
    cfg.io_write = fuzz_io_write;
    cfg.io_ctx = &nan_writes;
    static cp_sched s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    cp_error err = tb_error();
    if (cp_sched_init(&s, prog, &cfg, &err) != CP_OK) {
        return;
    }
    uint32_t ds = prog->data_size;
    uint8_t samples[16];
    for (int i = 0; i < 16; i++) {
        samples[i] = (uint8_t)rng();
    }
    cp_sched_feed feed = {below(ds + 4), 1 + below(4), samples, 1 + below(4), below(3)};
    (void)cp_sched_add_feed(&s, &feed, &err);
    uint32_t offsets[2] = {below(ds + 2), below(ds + 2)}, sizes[2] = {1 + below(8), 1 + below(3)};
    uint64_t capacity = 1 + below(4);
    uint8_t *ring = malloc((size_t)capacity * (8 + 8 + 3)); /* exact: overruns are caught */
    if (cp_sched_set_trace(&s, offsets, sizes, 1 + below(2), ring, capacity, &err) != CP_OK) {
        free(ring);
        ring = NULL;
    }
    uint32_t ticks = below(12);
    cp_sched_advance(&s, ticks);
    if (below(2)) {
        cp_sched_reset(&s);
        cp_sched_tick(&s);
    }
    free(ring);
}

static void fuzz_patch(void)
{
    uint8_t raw[20];
    for (int i = 0; i < 20; i++) {
        raw[i] = (uint8_t)rng();
    }
    if (below(2)) { /* make most descriptors valid-looking */
        static const uint8_t bits[] = {16, 32, 64};
        raw[0] = bits[below(3)];
        raw[1] &= 0x1f;
        raw[2] &= 0x3f;
        raw[3] = (uint8_t)below(65);
        raw[4] = (uint8_t)below(8);
        raw[5] = (uint8_t)(1 + below(4));
        raw[6] = raw[7] = 0;
        for (unsigned f = 0; f < 4; f++) {
            uint8_t *fd = raw + 8 + 3 * f;
            if (f >= raw[5]) {
                fd[0] = fd[1] = fd[2] = 0;
                continue;
            }
            fd[1] = (uint8_t)(1 + below(raw[0]));
            fd[2] = (uint8_t)below(raw[0] - fd[1] + 1u);
            fd[0] = (uint8_t)below(64u - fd[1] + 1u);
        }
    }
    cp_patch_kind kind;
    cp_error err = tb_error();
    if (cp_kind_decode(raw, 0, &kind, &err) != CP_OK) {
        return;
    }
    uint8_t word[8];
    for (int i = 0; i < 8; i++) {
        word[i] = (uint8_t)rng();
    }
    uint8_t *exact = malloc(kind.word_bits / 8u); /* exact size so ASan sees over-writes */
    memcpy(exact, word, kind.word_bits / 8u);
    (void)cp_patch_apply(&kind, exact, rng(), rng(), 0, &err);
    free(exact);
}

static uint64_t fuzz_cpu(void *ctx, uint16_t arch)
{
    (void)ctx;
    return arch == CP_ARCH_X86_64 ? (1u << CP_X86_64_AVX) | (1u << CP_X86_64_FMA) : 0;
}

int main(int argc, char **argv)
{
    unsigned long iterations = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000ul;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x9e3779b97f4a7c15ull;
    if (rng_state == 0) {
        rng_state = 1;
    }

    /* v1-sized entries, the ABI 3 entries with an optional section, and CPU_FEATURES */
    static tb_image seeds[3];
    std_image(&seeds[0]);
    std_image_ext(&seeds[1]);
    std_image_features(&seeds[2], 0x7, 1); /* avx, avx2, fma */
    tp_ctx ctx;
    cp_platform pf = tp_platform(&ctx, CP_ARCH_X86_64);
    pf.cpu_features = fuzz_cpu; /* a CPU with avx and fma: some mutants lack a feature */
    pf.max_region_size = 1u << 20; /* mutated sizes would otherwise zero gigabytes */
    unsigned long by_status[CP_STATUS_COUNT] = {0};
    enum { CAP = TB_CAP };
    static uint8_t buf[CAP];

    for (unsigned long it = 0; it < iterations; it++) {
        const tb_image *seed = &seeds[it % 3];
        size_t len = seed->len;
        memcpy(buf, seed->bytes, len);
        mutate(buf, &len, CAP);
        maybe_repair(buf, len);

        /* exact-size heap copy: reading one byte past the image is caught by ASan */
        uint8_t *image = malloc(len ? len : 1);
        memcpy(image, buf, len);
        cp_error err = tb_error();
        cp_status vs = cp_image_validate(image, len, CP_ARCH_X86_64, &err);
        if (vs >= CP_STATUS_COUNT || strlen(err.message) >= sizeof(err.message)) {
            fprintf(stderr, "iteration %lu: bad status %d\n", it, (int)vs);
            return 1;
        }
        by_status[vs]++;

        cp_program prog = tb_program();
        cp_status ls = cp_program_load(&prog, image, len, &pf, &err);
        /* load may only add failures that need a base address or the platform's CPU */
        if (ls != vs && !(vs == CP_OK && (ls == CP_ERR_PATCH || ls == CP_ERR_TOO_LARGE ||
                                          ls == CP_ERR_NOMEM || ls == CP_ERR_CPU_FEATURES))) {
            fprintf(stderr, "iteration %lu: validate %s but load %s\n", it,
                    cp_status_name(vs), cp_status_name(ls));
            return 1;
        }
        if (ls == CP_OK) {
            if (prog.data_size > 0) {
                uint8_t *data = cp_program_data(&prog);
                data[0] = data[prog.data_size - 1]; /* data really is writable */
            }
            fuzz_sched(&prog);
            cp_program_unload(&prog);
        }
        free(image);
        fuzz_patch();
    }
    if (ctx.allocs != ctx.frees) {
        fprintf(stderr, "region leak: %d allocs, %d frees\n", ctx.allocs, ctx.frees);
        return 1;
    }
    printf("fuzz_image: %lu iterations, no crash; validate results:", iterations);
    for (int s = 0; s < CP_STATUS_COUNT; s++) {
        if (by_status[s] != 0) {
            printf(" %s=%lu", cp_status_name((cp_status)s), by_status[s]);
        }
    }
    printf("; %d loads, %d chain calls by the scheduler\n", ctx.allocs, chain_calls);
    return 0;
}
