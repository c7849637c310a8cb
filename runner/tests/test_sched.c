/* Unit tests of the scheduler (docs/realtime.md) with hand-built multi-task x86_64 images: LET
 * visibility, multi-rate, priority order, deterministic overload, overruns, I/O bindings and
 * their conversions, feeds, the trace ring, reset, real-time mode with a fake clock, init
 * errors, and a randomised comparison with a naive reference model of the tick rules. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_image.h"
#include "check.h"

static int verbose;

/* ---- an image builder with a tiny x86_64 assembler: chains move 32/64-bit values between
 * data slots through RIP-relative operands, each resolved by a PC-relative rel32 patch */

enum {
    SB_DATA_OFFSET = 4096,
    SB_MAX_CODE = 2048,
    SB_MAX_PATCHES = 160,
    SB_MAX_TASKS = 33,
    SB_MAX_COPIES = 120,
    SB_MAX_BINDINGS = 32,
    SB_MAX_DATA_INIT = 64
};

typedef struct sb {
    uint8_t code[SB_MAX_CODE];
    uint32_t code_size;
    uint8_t kind[20];
    uint8_t patches[SB_MAX_PATCHES][12];
    uint32_t npatches;
    uint8_t tasks[SB_MAX_TASKS][40];
    uint32_t ntasks;
    uint8_t copies[SB_MAX_COPIES][16];
    uint32_t ncopies;
    uint8_t bindings[SB_MAX_BINDINGS][24];
    uint32_t nbindings;
    int ext;  /* 40-byte task entries and 24-byte bindings (budget, link timeout, safe) */
    uint8_t data_init[SB_MAX_DATA_INIT];
    uint32_t data_init_size;
    uint32_t data_size;
} sb;

static void sb_init(sb *b, uint32_t data_size)
{
    static const uint8_t rel32[][3] = {{0, 32, 0}};
    memset(b, 0, sizeof(*b));
    tb_kind(b->kind, 32, 1 | 4, 0, 32, 0, 1, rel32); /* PCREL | SIGNED */
    b->data_size = data_size;
}

static void emit(sb *b, const uint8_t *bytes, size_t n)
{
    if (b->code_size + n > SB_MAX_CODE) {
        fprintf(stderr, "test image: code full\n");
        exit(2);
    }
    memcpy(b->code + b->code_size, bytes, n);
    b->code_size += (uint32_t)n;
}

/* An instruction whose last 4 bytes are a disp32 relative to the next instruction. */
static void emit_rip(sb *b, const uint8_t *op, size_t n, uint32_t slot)
{
    static const uint8_t zero[4] = {0};
    emit(b, op, n);
    if (b->npatches >= SB_MAX_PATCHES) {
        fprintf(stderr, "test image: patches full\n");
        exit(2);
    }
    /* rip = site + 4, so the target slot is data_offset + slot = site + 4 + disp */
    tb_patch(b->patches[b->npatches++], b->code_size, 0, SB_DATA_OFFSET + (int32_t)slot - 4);
    emit(b, zero, 4);
}

static void a_load32(sb *b, uint32_t slot) /* mov eax, [rip + slot] */
{
    static const uint8_t op[] = {0x8b, 0x05};
    emit_rip(b, op, sizeof(op), slot);
}

static void a_store32(sb *b, uint32_t slot) /* mov [rip + slot], eax */
{
    static const uint8_t op[] = {0x89, 0x05};
    emit_rip(b, op, sizeof(op), slot);
}

static void a_load64(sb *b, uint32_t slot) /* mov rax, [rip + slot] */
{
    static const uint8_t op[] = {0x48, 0x8b, 0x05};
    emit_rip(b, op, sizeof(op), slot);
}

static void a_store64(sb *b, uint32_t slot) /* mov [rip + slot], rax */
{
    static const uint8_t op[] = {0x48, 0x89, 0x05};
    emit_rip(b, op, sizeof(op), slot);
}

static void a_add(sb *b, int8_t k) /* add eax, k */
{
    const uint8_t op[] = {0x83, 0xc0, (uint8_t)k};
    emit(b, op, sizeof(op));
}

static void a_mul(sb *b, int8_t k) /* imul eax, eax, k */
{
    const uint8_t op[] = {0x6b, 0xc0, (uint8_t)k};
    emit(b, op, sizeof(op));
}

static void a_ret(sb *b)
{
    static const uint8_t op[] = {0xc3};
    emit(b, op, sizeof(op));
}

static uint32_t sb_task(sb *b, uint32_t entry, uint32_t period, uint32_t offset,
                        uint16_t prio, uint32_t wcet)
{
    if (b->ntasks >= SB_MAX_TASKS) {
        fprintf(stderr, "test image: tasks full\n");
        exit(2);
    }
    tb_task_full(b->tasks[b->ntasks], entry, period, offset, prio, wcet);
    return b->ntasks++;
}

/* A task whose chain is `y = x + k` (int32). */
static uint32_t inc_task(sb *b, uint32_t x, uint32_t y, int8_t k, uint32_t period,
                         uint32_t offset, uint16_t prio, uint32_t wcet)
{
    uint32_t entry = b->code_size;
    a_load32(b, x);
    a_add(b, k);
    a_store32(b, y);
    a_ret(b);
    return sb_task(b, entry, period, offset, prio, wcet);
}

static void sb_copy(sb *b, uint16_t task, uint8_t phase, uint32_t size, uint32_t src,
                    uint32_t dst)
{
    tb_copy(b->copies[b->ncopies++], task, phase, size, src, dst);
}

static void sb_binding(sb *b, uint16_t task, uint8_t direction, uint8_t kind,
                       uint16_t channel, uint8_t dtype, uint32_t offset)
{
    tb_binding(b->bindings[b->nbindings++], task, direction, kind, channel, dtype, offset);
}

static void sb_init32(sb *b, uint32_t offset, uint32_t value)
{
    if (offset + 4 > b->data_init_size) {
        b->data_init_size = offset + 4;
    }
    tb_put32(b->data_init + offset, value);
}

static void sb_build(const sb *b, tb_image *img)
{
    tb_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.version = 1;
    spec.header_size = 48;
    spec.arch = CP_ARCH_X86_64;
    spec.code_size = b->code_size;
    spec.data_offset = SB_DATA_OFFSET;
    spec.data_size = b->data_size;
    spec.base_align = 4096;
    size_t n = 0;
    /* the arrays hold 40-byte tasks and 24-byte bindings; 24/16 are their v1 prefixes */
    static uint8_t tasks[SB_MAX_TASKS * 40], bindings[SB_MAX_BINDINGS * 24];
    uint32_t tsize = b->ext ? 40u : 24u, bsize = b->ext ? 24u : 16u;
    for (uint32_t i = 0; i < b->ntasks; i++) {
        memcpy(tasks + i * tsize, b->tasks[i], tsize);
    }
    for (uint32_t i = 0; i < b->nbindings; i++) {
        memcpy(bindings + i * bsize, b->bindings[i], bsize);
    }
    spec.sec[n++] = (tb_section){1, 1, b->code, b->code_size};
    spec.sec[n++] = (tb_section){5, (uint16_t)tsize, tasks, tsize * b->ntasks};
    if (b->data_init_size > 0) {
        spec.sec[n++] = (tb_section){2, 1, b->data_init, b->data_init_size};
    }
    if (b->npatches > 0) {
        spec.sec[n++] = (tb_section){3, 20, b->kind, 20};
        spec.sec[n++] = (tb_section){4, 12, b->patches, 12 * b->npatches};
    }
    if (b->ncopies > 0) {
        spec.sec[n++] = (tb_section){9, 16, b->copies, 16 * b->ncopies};
    }
    if (b->nbindings > 0) {
        spec.sec[n++] = (tb_section){10, (uint16_t)bsize, bindings, bsize * b->nbindings};
    }
    spec.nsec = n;
    tb_build(&spec, img);
}

/* ---- fixture: a loaded program with a scheduler */

typedef struct fx {
    cp_program prog;
    cp_sched s;
    cp_sched_config cfg;
    cp_error err;
} fx;

static cp_sched_config default_config(uint64_t tick_ns)
{
    cp_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.struct_size = sizeof(cfg);
    cfg.deterministic = 1;
    cfg.tick_ns = tick_ns;
    return cfg;
}

static cp_status fx_load(fx *f, const sb *b)
{
    tb_image img;
    sb_build(b, &img);
    memset(f, 0, sizeof(*f));
    f->prog = tb_program();
    f->err = tb_error();
    f->s.struct_size = sizeof(f->s);
    return cp_program_load(&f->prog, img.bytes, img.len, cp_platform_posix(), &f->err);
}

/* Loads and initialises with `cfg`; both must succeed. */
static int fx_start(fx *f, const sb *b, const cp_sched_config *cfg)
{
    cp_status st = fx_load(f, b);
    CHECK_STATUS(st, CP_OK);
    if (st != CP_OK) {
        fprintf(stderr, "  load: %s\n", f->err.message);
        return -1;
    }
    f->cfg = *cfg;
    st = cp_sched_init(&f->s, &f->prog, &f->cfg, &f->err);
    CHECK_STATUS(st, CP_OK);
    if (st != CP_OK) {
        fprintf(stderr, "  init: %s\n", f->err.message);
        cp_program_unload(&f->prog);
        return -1;
    }
    return 0;
}

static void fx_end(fx *f)
{
    cp_program_unload(&f->prog);
}

static int32_t rd32(const fx *f, uint32_t offset)
{
    int32_t v;
    memcpy(&v, cp_program_data(&f->prog) + offset, 4);
    return v;
}

static void wr32(fx *f, uint32_t offset, int32_t v)
{
    memcpy(cp_program_data(&f->prog) + offset, &v, 4);
}

static float rdf32(const fx *f, uint32_t offset)
{
    float v;
    memcpy(&v, cp_program_data(&f->prog) + offset, 4);
    return v;
}

static double rdf64(const fx *f, uint32_t offset)
{
    double v;
    memcpy(&v, cp_program_data(&f->prog) + offset, 8);
    return v;
}

static void wrf32(fx *f, uint32_t offset, float v)
{
    memcpy(cp_program_data(&f->prog) + offset, &v, 4);
}

static void wrf64(fx *f, uint32_t offset, double v)
{
    memcpy(cp_program_data(&f->prog) + offset, &v, 8);
}

/* ---- tests */

/* A producer (period 3 ticks) counts its runs privately and publishes the count; a consumer
 * (period 1 tick) reads the shared count at its release and publishes count + 100. The shared
 * count changes only at the producer's period ends, the consumer's output one tick after. */
static void test_let_visibility(void)
{
    enum { S = 0, OUT = 4, P_PRIV = 16, C_IN = 20, C_OUT = 24 };
    sb b;
    sb_init(&b, 64);
    uint32_t p = inc_task(&b, P_PRIV, P_PRIV, 1, 3000000, 0, 1, 0);
    uint32_t c = inc_task(&b, C_IN, C_OUT, 100, 1000000, 0, 0, 0);
    sb_copy(&b, (uint16_t)p, 1, 4, P_PRIV, S);
    sb_copy(&b, (uint16_t)c, 0, 4, S, C_IN);
    sb_copy(&b, (uint16_t)c, 1, 4, C_OUT, OUT);
    fx f;
    cp_sched_config cfg = default_config(1000000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_tick(&f.s); /* t = 0: the producer ran once */
    CHECK(rd32(&f, P_PRIV) == 1);
    CHECK(rd32(&f, S) == 0); /* not visible before the period end */
    CHECK(f.s.state[p].pending == 1);
    for (uint64_t t = 1; t < 30; t++) {
        cp_sched_tick(&f.s);
        CHECK(rd32(&f, S) == (int32_t)(t / 3));
        CHECK(rd32(&f, OUT) == (int32_t)((t - 1) / 3) + 100);
        CHECK(rd32(&f, P_PRIV) == (int32_t)(t / 3) + 1);
    }
    CHECK(f.s.tick == 30 && f.s.now_ns == 30000000);
    CHECK(f.s.stats[p].runs == 10 && f.s.stats[c].runs == 30);
    CHECK(f.s.stats[p].skipped == 0 && f.s.stats[c].overruns == 0);
    CHECK(f.s.stats[p].exec_ns_sum == 0 && f.s.stats[p].exec_ns_max == 0); /* no clock */
    fx_end(&f);
}

/* Each task counts its runs; periods 1, 3, 2 and 5 ticks with offsets. */
static void test_multi_rate(void)
{
    sb b;
    sb_init(&b, 64);
    static const uint32_t period[4] = {1, 3, 2, 5}, offset[4] = {0, 1, 1, 4};
    for (uint32_t i = 0; i < 4; i++) {
        inc_task(&b, 4 * i, 4 * i, 1, period[i] * 500, offset[i] * 500, (uint16_t)i, 0);
    }
    inc_task(&b, 32, 32, 1, 0, 0, 0, 0); /* on request only: never released */
    fx f;
    cp_sched_config cfg = default_config(500);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    for (uint64_t t = 0; t < 40; t++) {
        cp_sched_tick(&f.s);
        for (uint32_t i = 0; i < 4; i++) {
            uint64_t want = t >= offset[i] ? (t - offset[i]) / period[i] + 1 : 0;
            CHECK((uint64_t)rd32(&f, 4 * i) == want);
            CHECK(f.s.stats[i].runs == want);
        }
    }
    CHECK(rd32(&f, 32) == 0 && f.s.stats[4].runs == 0);
    CHECK_STATUS(cp_program_run(&f.prog, 4), CP_OK);
    CHECK(rd32(&f, 32) == 1);
    fx_end(&f);
}

/* Tasks released at the same instant run by priority, ties by index: seq = seq * 10 + id. */
static void test_priority_order(void)
{
    enum { SEQ = 0 };
    static const uint16_t prio[5] = {5, 1, 3, 1, 0};
    sb b;
    sb_init(&b, 16);
    for (uint32_t i = 0; i < 5; i++) {
        uint32_t entry = b.code_size;
        a_load32(&b, SEQ);
        a_mul(&b, 10);
        a_add(&b, (int8_t)(i + 1));
        a_store32(&b, SEQ);
        a_ret(&b);
        sb_task(&b, entry, i == 4 ? 2000 : 1000, i == 4 ? 1000 : 0, prio[i], 0);
    }
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    CHECK(f.s.order[0] == 4 && f.s.order[1] == 1 && f.s.order[2] == 3 && f.s.order[3] == 2 &&
          f.s.order[4] == 0);
    cp_sched_tick(&f.s); /* task 4 starts at offset 1 */
    CHECK(rd32(&f, SEQ) == 2431);
    wr32(&f, SEQ, 0);
    cp_sched_tick(&f.s);
    CHECK(rd32(&f, SEQ) == 52431);
    fx_end(&f);
}

/* Overload in deterministic mode: H (600 ns) and M (300 ns) every 1000-ns tick leave 100 ns a
 * tick for L (500 ns per 2 ticks): L misses, is skipped and overruns; H and M never are. */
static void test_overload(void)
{
    enum { H_OUT = 0, M_OUT = 4, L_OUT = 8 };
    sb b;
    sb_init(&b, 64);
    uint32_t l = inc_task(&b, 24, 24, 1, 2000, 0, 2, 500);
    uint32_t h = inc_task(&b, 16, 16, 1, 1000, 0, 0, 600);
    uint32_t m = inc_task(&b, 20, 20, 1, 1000, 0, 1, 300);
    sb_copy(&b, (uint16_t)h, 1, 4, 16, H_OUT);
    sb_copy(&b, (uint16_t)m, 1, 4, 20, M_OUT);
    sb_copy(&b, (uint16_t)l, 1, 4, 24, L_OUT);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_tick(&f.s);
    CHECK(f.s.state[l].remaining_ns == 400 && f.s.state[h].remaining_ns == 0);
    for (int t = 1; t < 60; t++) {
        cp_sched_tick(&f.s);
        /* L releases at 0, 6, 12, ... and publishes at the next multiple of 6 */
        CHECK(rd32(&f, L_OUT) == t / 6);
        CHECK(rd32(&f, H_OUT) == t);
    }
    CHECK(f.s.stats[h].runs == 60 && f.s.stats[h].skipped == 0 && f.s.stats[h].overruns == 0);
    CHECK(f.s.stats[m].runs == 60 && f.s.stats[m].skipped == 0 && f.s.stats[m].overruns == 0);
    CHECK(f.s.stats[l].runs == 10 && f.s.stats[l].skipped == 20 &&
          f.s.stats[l].overruns == 20);
    fx_end(&f);

    /* a highest-priority task whose own cost exceeds its period is skipped too */
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 1500);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_advance(&f.s, 6);
    /* runs at 0 (done at 1.5: publishes at 2), 2, 4 */
    CHECK(f.s.stats[0].runs == 3 && f.s.stats[0].skipped == 3 && f.s.stats[0].overruns == 3);
    fx_end(&f);
}

/* A job longer than its period publishes at the first boundary after it finishes. */
static void test_overrun(void)
{
    enum { OUT = 0, PRIV = 8 };
    sb b;
    sb_init(&b, 16);
    inc_task(&b, PRIV, PRIV, 1, 2000, 0, 0, 2500);
    sb_copy(&b, 0, 1, 4, PRIV, OUT);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    static const int32_t want_out[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2};
    static const uint64_t want_overruns[] = {0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    for (int t = 0; t < 10; t++) {
        cp_sched_tick(&f.s);
        CHECK(rd32(&f, OUT) == want_out[t]);
        CHECK(f.s.stats[0].overruns == want_overruns[t]);
        CHECK(f.s.stats[0].skipped == want_overruns[t]);
    }
    CHECK(f.s.stats[0].runs == 3); /* at 0, 4, 8 */
    CHECK(f.s.state[0].pending == 1 && f.s.state[0].remaining_ns == 500);
    fx_end(&f);
}

/* ---- I/O */

typedef struct io_sim {
    double ch[CP_IO_KIND_COUNT + 1][256]; /* by kind (row 0 unused), as cp_sched_set_sim_io's */
    const cp_sched *s;
    int reads;
    int writes;
    uint8_t last_kind;
    uint16_t last_channel;
    uint64_t last_tick;
} io_sim;

static double sim_read(void *ctx, uint8_t kind, uint16_t channel)
{
    io_sim *io = ctx;
    io->reads++;
    return io->ch[kind][channel];
}

static void sim_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    io_sim *io = ctx;
    io->writes++;
    io->ch[kind][channel] = value;
    io->last_kind = kind;
    io->last_channel = channel;
    io->last_tick = io->s->tick;
}

static int same_f32(float a, float b)
{
    return memcmp(&a, &b, 4) == 0;
}

static void test_io_bindings(void)
{
    /* shared slots: inputs 0 f32, 8 f64, 16 i32, 20 bool; outputs 24 i32, 28 bool, 32 f32,
     * 40 f64. Task 0 (period 1) samples the inputs and copies the int one to an output;
     * task 1 (period 2) drives the outputs. */
    enum { IN_F32 = 0, IN_F64 = 8, IN_I32 = 16, IN_BOOL = 20, OUT_I32 = 24, OUT_BOOL = 28,
           OUT_F32 = 32, OUT_F64 = 40, PRIV = 48 };
    sb b;
    sb_init(&b, 64);
    inc_task(&b, IN_I32, PRIV, 1, 1000, 0, 0, 0);
    uint32_t entry = b.code_size; /* task 1: copies the f64 input to the f64 output */
    a_load64(&b, IN_F64);
    a_store64(&b, OUT_F64);
    a_ret(&b);
    sb_task(&b, entry, 2000, 0, 1, 0);
    sb_binding(&b, 0, 1, CP_IO_ADC, 7, 1, IN_F32);
    sb_binding(&b, 0, 1, CP_IO_ADC, 8, 2, IN_F64);
    sb_binding(&b, 0, 1, CP_IO_ENCODER, 255, 3, IN_I32);
    sb_binding(&b, 0, 1, CP_IO_GPIO, 3, 4, IN_BOOL);
    sb_binding(&b, 1, 2, CP_IO_PWM, 0, 3, OUT_I32);
    sb_binding(&b, 1, 2, CP_IO_GPIO, 5, 4, OUT_BOOL);
    sb_binding(&b, 1, 2, CP_IO_PWM, 1, 1, OUT_F32);
    sb_binding(&b, 1, 2, CP_IO_PWM, 2, 2, OUT_F64);
    fx f;
    io_sim io;
    memset(&io, 0, sizeof(io));
    cp_sched_config cfg = default_config(1000);
    cfg.io_read = sim_read;
    cfg.io_write = sim_write;
    cfg.io_ctx = &io;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    io.s = &f.s;

    /* inputs: channel -> slot at each release of task 0 */
    static const struct {
        double in;
        int32_t i32;
        int32_t boolean;
    } cases[] = {
        {0.0, 0, 0}, {-0.0, 0, 0}, {3.7, 3, 1}, {-3.7, -3, 1}, {0.5, 0, 1}, {-0.99, 0, 1},
        {2147483647.0, INT32_MAX, 1}, {2147483647.9, INT32_MAX, 1},
        {2147483648.0, INT32_MAX, 1}, {1e300, INT32_MAX, 1}, {INFINITY, INT32_MAX, 1},
        {-2147483648.0, INT32_MIN, 1}, {-2147483648.9, INT32_MIN, 1},
        {-2147483649.0, INT32_MIN, 1}, {-1e300, INT32_MIN, 1}, {-INFINITY, INT32_MIN, 1},
        {NAN, 0, 1}, {123456.0, 123456, 1},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        double v = cases[k].in;
        io.ch[CP_IO_ADC][7] = v;
        io.ch[CP_IO_ADC][8] = v;
        io.ch[CP_IO_ENCODER][255] = v;
        io.ch[CP_IO_GPIO][3] = v;
        cp_sched_tick(&f.s);
        CHECK(rd32(&f, IN_I32) == cases[k].i32);
        CHECK(rd32(&f, IN_BOOL) == cases[k].boolean);
        CHECK(rd32(&f, PRIV) == (int32_t)((uint32_t)cases[k].i32 + 1u)); /* the chain saw it */
        double d = rdf64(&f, IN_F64);
        CHECK(memcmp(&d, &v, 8) == 0);
        float got = rdf32(&f, IN_F32);
        if (isnan(v)) {
            CHECK(isnan(got));
        } else if (fabs(v) > 3.5e38) {
            CHECK(got == (v > 0 ? INFINITY : -INFINITY));
        } else {
            CHECK(same_f32(got, (float)v));
        }
    }
    CHECK(io.reads == 4 * (int)(sizeof(cases) / sizeof(cases[0])));
    io.ch[CP_IO_ADC][7] = 3.4028235677973362e38; /* just below halfway: rounds to FLT_MAX */
    cp_sched_tick(&f.s);
    CHECK(rdf32(&f, IN_F32) == 3.4028234663852886e38f);
    io.ch[CP_IO_ADC][7] = 0x1.ffffffp127; /* the halfway point rounds (to even) to infinity */
    cp_sched_tick(&f.s);
    CHECK(isinf(rdf32(&f, IN_F32)));

    /* outputs: slot -> channel at the period end of task 1 (every 2 ticks), not at release */
    cp_sched_reset(&f.s);
    memset(io.ch, 0, sizeof(io.ch));
    io.writes = 0;
    io.ch[CP_IO_ADC][8] = 0.25;
    wr32(&f, OUT_I32, -5);
    wr32(&f, OUT_BOOL, 7);
    wrf32(&f, OUT_F32, 0.1f);
    cp_sched_tick(&f.s); /* t = 0: task 1 released, nothing published */
    CHECK(io.writes == 0);
    CHECK(rdf64(&f, OUT_F64) == 0.25); /* the chain wrote the shared slot directly */
    cp_sched_tick(&f.s); /* t = 1 */
    CHECK(io.writes == 0);
    wrf64(&f, OUT_F64, -1.5);
    cp_sched_tick(&f.s); /* t = 2: period end (publishes, then releases again) */
    CHECK(io.writes == 4 && io.last_tick == 2);
    CHECK(io.last_kind == CP_IO_PWM && io.last_channel == 2); /* table order within the task */
    CHECK(io.ch[CP_IO_PWM][0] == -5.0);
    CHECK(io.ch[CP_IO_GPIO][5] == 1.0);
    CHECK(io.ch[CP_IO_PWM][1] == (double)0.1f);
    CHECK(io.ch[CP_IO_PWM][2] == -1.5); /* published before the release overwrote it */
    CHECK(rdf64(&f, OUT_F64) == 0.25);
    wr32(&f, OUT_BOOL, 0);
    cp_sched_advance(&f.s, 2);
    CHECK(io.writes == 8 && io.ch[CP_IO_GPIO][5] == 0.0 && io.ch[CP_IO_PWM][2] == 0.25);
    fx_end(&f);

    /* without callbacks inputs read 0.0 and outputs go nowhere */
    cfg.io_read = NULL;
    cfg.io_write = NULL;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    wr32(&f, IN_I32, 99);
    wr32(&f, IN_BOOL, 1);
    cp_sched_advance(&f.s, 3);
    CHECK(rd32(&f, IN_I32) == 0 && rd32(&f, IN_BOOL) == 0 && rd32(&f, PRIV) == 1);
    fx_end(&f);
}

/* ---- feeds */

static void test_feeds(void)
{
    enum { X = 0, Y = 4, IN = 8, OUT = 12, Z = 16 };
    sb b;
    sb_init(&b, 32);
    inc_task(&b, IN, OUT, 0, 1000, 0, 0, 0);
    sb_copy(&b, 0, 0, 4, X, IN);
    sb_copy(&b, 0, 1, 4, OUT, Y);
    sb_init32(&b, X, 77);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    int32_t samples[5] = {10, 20, 30, 40, 50};
    uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cp_sched_feed feed = {X, 4, (const uint8_t *)samples, 5, 2};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &feed, &f.err), CP_OK);
    cp_sched_feed z = {Z, 1, bytes, 8, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &z, &f.err), CP_OK);
    for (int t = 0; t < 10; t++) {
        cp_sched_tick(&f.s);
        int32_t fed = t < 2 ? 77 : t < 7 ? samples[t - 2] : 50;
        CHECK(rd32(&f, X) == fed); /* the last sample stays */
        CHECK(rd32(&f, IN) == fed); /* written before the release of the same tick */
        int32_t seen = t < 1 ? 0 : t < 3 ? 77 : t < 8 ? samples[t - 3] : 50;
        CHECK(rd32(&f, Y) == seen);
        CHECK(cp_program_data(&f.prog)[Z] == bytes[t < 8 ? t : 7]);
    }

    /* errors */
    cp_sched_feed bad = {30, 4, (const uint8_t *)samples, 5, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &bad, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "[30, 34)") != NULL);
    bad = (cp_sched_feed){0, 0, (const uint8_t *)samples, 5, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &bad, &f.err), CP_ERR_ARGUMENT);
    bad = (cp_sched_feed){0, 4, NULL, 5, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &bad, &f.err), CP_ERR_ARGUMENT);
    bad = (cp_sched_feed){0, 4, (const uint8_t *)samples, UINT64_MAX, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &bad, &f.err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_add_feed(&f.s, NULL, &f.err), CP_ERR_ARGUMENT);
    for (uint32_t k = 2; k < CP_MAX_FEEDS; k++) {
        CHECK_STATUS(cp_sched_add_feed(&f.s, &z, &f.err), CP_OK);
    }
    CHECK_STATUS(cp_sched_add_feed(&f.s, &z, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "clear") != NULL);
    cp_sched_clear_feeds(&f.s);
    CHECK(f.s.feed_count == 0);
    wr32(&f, X, 5);
    cp_sched_tick(&f.s);
    CHECK(rd32(&f, X) == 5);
    fx_end(&f);
}

/* ---- trace */

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Ranges side by side in the data region and in the row are one copy (cp_sched_set_trace
 * merges them); out of order, repeated or apart they stay separate: a row holds the bytes of
 * the ranges as given, one after the other. */
static void test_trace_ranges_merged(void)
{
    sb b;
    sb_init(&b, 32);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 0);
    for (uint32_t k = 4; k < 32; k += 4) {
        sb_init32(&b, k, 0x03020100u + 0x04040404u * k);
    }
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    static const uint32_t offsets[] = {0, 4, 12, 14, 8, 4, 20, 20, 24, 26};
    static const uint32_t sizes[] = {4, 4, 2, 2, 4, 4, 4, 4, 2, 6};
    enum { N = sizeof(offsets) / sizeof(offsets[0]), ROW = 8 + 36, CAP = 3 };
    uint8_t buf[CAP * ROW];
    CHECK_STATUS(cp_sched_set_trace(&f.s, offsets, sizes, N, buf, CAP, &f.err), CP_OK);
    CHECK(f.s.trace_row_size == ROW);
    CHECK(f.s.trace_range_count == 6); /* [0,8) [12,16) [8,12) [4,8) [20,24) [20,32) */
    for (uint64_t t = 1; t <= 5; t++) {
        cp_sched_advance(&f.s, 1);
        const uint8_t *row = buf + ((t - 1) % CAP) * ROW, *data = cp_program_data(f.s.prog);
        CHECK(rd64(row) == (t - 1) * 1000);
        uint32_t at = 8;
        for (uint32_t r = 0; r < N; r++) {
            CHECK(memcmp(row + at, data + offsets[r], sizes[r]) == 0);
            at += sizes[r];
        }
    }
    fx_end(&f);
}

static void test_trace(void)
{
    enum { CNT = 0, PRIV = 4, K = 8 };
    sb b;
    sb_init(&b, 16);
    inc_task(&b, PRIV, PRIV, 1, 1000, 0, 0, 0);
    sb_copy(&b, 0, 1, 4, PRIV, CNT);
    sb_init32(&b, K, 0xa5a5a5a5u);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    enum { CAP = 4, ROW = 8 + 4 + 2 };
    uint8_t buf[CAP * ROW + 1];
    memset(buf, 0xee, sizeof(buf));
    uint32_t offsets[2] = {CNT, K}, sizes[2] = {4, 2};
    CHECK_STATUS(cp_sched_set_trace(&f.s, offsets, sizes, 2, buf, CAP, &f.err), CP_OK);
    CHECK(f.s.trace_row_size == ROW && f.s.trace_capacity == CAP && f.s.trace_rows == 0);
    cp_sched_advance(&f.s, 3);
    CHECK(f.s.trace_rows == 3);
    CHECK(rd64(buf) == 0 && rd64(buf + ROW) == 1000 && rd64(buf + 2 * ROW) == 2000);
    int32_t v;
    memcpy(&v, buf + 2 * ROW + 8, 4);
    CHECK(v == 2);
    CHECK(buf[2 * ROW + 12] == 0xa5 && buf[2 * ROW + 13] == 0xa5);
    CHECK(buf[3 * ROW] == 0xee);
    cp_sched_advance(&f.s, 7); /* rows 0..9: slots hold 8, 9, 6, 7 */
    CHECK(f.s.trace_rows == 10);
    static const uint64_t want_t[CAP] = {8, 9, 6, 7};
    for (int r = 0; r < CAP; r++) {
        CHECK(rd64(buf + r * ROW) == want_t[r] * 1000);
        memcpy(&v, buf + r * ROW + 8, 4);
        CHECK(v == (int32_t)want_t[r]); /* the count published at tick t is t */
    }
    CHECK(buf[CAP * ROW] == 0xee); /* never past the ring */
    uint64_t dropped = f.s.trace_rows > f.s.trace_capacity
                           ? f.s.trace_rows - f.s.trace_capacity : 0;
    CHECK(dropped == 6);

    /* errors; a failed call keeps the trace as it was */
    uint32_t bad_off[1] = {14}, bad_size[1] = {4};
    CHECK_STATUS(cp_sched_set_trace(&f.s, bad_off, bad_size, 1, buf, CAP, &f.err),
                 CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "trace range 0 [14, 18)") != NULL);
    bad_off[0] = 0;
    bad_size[0] = 0;
    CHECK_STATUS(cp_sched_set_trace(&f.s, bad_off, bad_size, 1, buf, CAP, &f.err),
                 CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_set_trace(&f.s, offsets, sizes, 2, buf, 0, &f.err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_set_trace(&f.s, offsets, sizes, 2, NULL, CAP, &f.err),
                 CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_set_trace(&f.s, offsets, sizes, CP_MAX_TRACE_RANGES + 1, buf, CAP,
                                    &f.err), CP_ERR_ARGUMENT);
    CHECK(f.s.trace_rows == 10 && f.s.trace_buf == buf);
    /* count 0 disables */
    CHECK_STATUS(cp_sched_set_trace(&f.s, NULL, NULL, 0, NULL, 0, &f.err), CP_OK);
    CHECK(f.s.trace_buf == NULL && f.s.trace_rows == 0 && f.s.trace_row_size == 0);
    cp_sched_tick(&f.s);
    CHECK(f.s.trace_rows == 0);
    fx_end(&f);
}

/* ---- reset and determinism */

static void test_reset(void)
{
    enum { CNT = 0, PRIV = 4, INIT = 8, OUT = 12 };
    sb b;
    sb_init(&b, 32);
    inc_task(&b, PRIV, PRIV, 1, 1000, 0, 0, 1200);
    inc_task(&b, INIT, INIT, 3, 3000, 1000, 1, 700);
    sb_copy(&b, 0, 1, 4, PRIV, CNT);
    sb_copy(&b, 1, 1, 4, INIT, OUT);
    sb_init32(&b, INIT, 1000);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    uint8_t initial[32];
    memcpy(initial, cp_program_data(&f.prog), 32);
    /* the reset copy holds DATA_INIT (to INIT's end) only: OUT and the feed's slot lie in the
     * zero tail, which the reset zeroes again */
    CHECK(f.prog.initial_size == INIT + 4);
    CHECK(memcmp(initial, f.prog.initial_data, INIT + 4) == 0);
    enum { CAP = 64, ROW = 8 + 32 };
    static uint8_t first[CAP * ROW], second[CAP * ROW];
    uint32_t off[1] = {0}, size[1] = {32};
    CHECK_STATUS(cp_sched_set_trace(&f.s, off, size, 1, first, CAP, &f.err), CP_OK);
    cp_sched_advance(&f.s, 50);
    cp_sched_feed feed = {20, 4, (const uint8_t *)"abcd", 1, 0};
    CHECK_STATUS(cp_sched_add_feed(&f.s, &feed, &f.err), CP_OK);
    CHECK(memcmp(initial, cp_program_data(&f.prog), 32) != 0);
    CHECK(memcmp(initial + OUT, cp_program_data(&f.prog) + OUT, 4) != 0); /* the tail too */
    cp_task_stats before = f.s.stats[0];
    CHECK(before.runs > 0 && before.skipped > 0);

    cp_sched_reset(&f.s);
    CHECK(memcmp(initial, cp_program_data(&f.prog), 32) == 0);
    CHECK(f.s.tick == 0 && f.s.now_ns == 0 && f.s.trace_rows == 0);
    CHECK(f.s.state[0].pending == 0 && f.s.state[1].remaining_ns == 0);
    CHECK(f.s.stats[0].runs == 0 && f.s.stats[0].skipped == 0 && f.s.stats[1].overruns == 0);
    CHECK(f.s.feed_count == 1); /* feeds are configuration, they stay */
    cp_sched_clear_feeds(&f.s);
    CHECK_STATUS(cp_sched_set_trace(&f.s, off, size, 1, second, CAP, &f.err), CP_OK);
    cp_sched_advance(&f.s, 50);
    CHECK(memcmp(first, second, sizeof(first)) == 0); /* bit for bit */
    CHECK(memcmp(&before, &f.s.stats[0], sizeof(before)) == 0);
    fx_end(&f);
}

/* ---- real-time mode with a fake clock */

typedef struct fake_clock {
    uint64_t now;
    uint64_t step;
    int calls;
} fake_clock;

static uint64_t fake_now(void *ctx)
{
    fake_clock *c = ctx;
    c->calls++;
    c->now += c->step;
    return c->now;
}

static void test_clock_modes(void)
{
    sb b;
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 100);
    inc_task(&b, 4, 4, 1, 1000, 0, 1, 100);
    fake_clock clock = {0, 700, 0};
    cp_sched_config cfg = default_config(1000);
    cfg.clock_ns = fake_now;
    cfg.clock_ctx = &clock;

    /* deterministic: the clock only feeds the statistics, cost = wcet */
    fx f;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_advance(&f.s, 10);
    /* one read where a tick's releases start, then one per job: the end of a job is the start
     * of the next (two jobs a tick: 3 reads, not 4) */
    CHECK(clock.calls == 30);
    for (int i = 0; i < 2; i++) {
        CHECK(f.s.stats[i].runs == 10 && f.s.stats[i].skipped == 0);
        CHECK(f.s.stats[i].exec_ns_max == 700 && f.s.stats[i].exec_ns_sum == 7000);
    }
    fx_end(&f);

    /* real time: cost = measured 700 ns each, so the second task overruns */
    cfg.deterministic = 0;
    clock.calls = 0;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_tick(&f.s);
    CHECK(f.s.state[0].remaining_ns == 0 && f.s.state[1].remaining_ns == 400);
    cp_sched_advance(&f.s, 9);
    CHECK(f.s.stats[0].runs == 10 && f.s.stats[0].skipped == 0);
    /* task 1 gets 300 ns a tick: released at 0, 3, 6, 9, overruns (and skips) in between */
    CHECK(f.s.stats[1].runs == 4 && f.s.stats[1].skipped == 6 && f.s.stats[1].overruns == 6);
    CHECK(f.s.stats[1].exec_ns_sum == 4 * 700 && f.s.stats[1].exec_ns_max == 700);
    fx_end(&f);

    /* real time without a clock: cost 0, no statistics */
    cfg.clock_ns = NULL;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    cp_sched_advance(&f.s, 10);
    CHECK(f.s.stats[1].runs == 10 && f.s.stats[1].skipped == 0);
    CHECK(f.s.stats[1].exec_ns_max == 0 && f.s.stats[1].exec_ns_sum == 0);
    fx_end(&f);
}

/* ---- init errors */

static void test_init_errors(void)
{
    sb b;
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000000, 0, 0, 0);
    inc_task(&b, 4, 4, 1, 2000000, 500000, 0, 0);
    inc_task(&b, 8, 8, 1, 1500000, 0, 0, 0);
    inc_task(&b, 12, 12, 1, 0, 0, 0, 0);
    fx f;
    CHECK_STATUS(fx_load(&f, &b), CP_OK);
    cp_sched_config cfg = default_config(1000000);
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK(f.err.detail == 1);
    CHECK(strstr(f.err.message, "task 1 offset 500000 ns is not a multiple of the tick "
                                "1000000 ns") != NULL);
    CHECK(strstr(f.err.message, "the largest is 500000 ns") != NULL);
    if (verbose) {
        printf("  %s\n", f.err.message);
    }
    cfg.tick_ns = 500000;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_OK);
    CHECK(f.err.message[0] == '\0');
    cfg.tick_ns = 250000;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_OK);
    cfg.tick_ns = 3000000;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "task 0 period 1000000 ns is not a multiple of the tick "
                                "3000000 ns") != NULL);
    cfg.tick_ns = 0;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "tick_ns is 0") != NULL);
    if (verbose) {
        printf("  %s\n", f.err.message);
    }
    cfg.tick_ns = 500000;
    cfg.struct_size = 8;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "struct_size") != NULL);
    cfg.struct_size = sizeof(cfg);
    f.s.struct_size = 0;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    f.s.struct_size = sizeof(f.s);
    CHECK_STATUS(cp_sched_init(NULL, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_init(&f.s, NULL, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, NULL, NULL), CP_ERR_ARGUMENT);
    fx_end(&f);
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT); /* unloaded */

    /* the period message */
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000000, 0, 0, 0);
    inc_task(&b, 0, 0, 1, 1000000, 0, 0, 0);
    inc_task(&b, 0, 0, 1, 1500000, 0, 0, 0);
    CHECK_STATUS(fx_load(&f, &b), CP_OK);
    cfg.tick_ns = 1000000;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    CHECK(strstr(f.err.message, "task 2 period 1500000 ns is not a multiple of the tick "
                                "1000000 ns") != NULL);
    if (verbose) {
        printf("  %s\n", f.err.message);
    }
    /* a table that is not grouped by task (not from cp_program_load) is refused */
    cfg.tick_ns = 1000;
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 0);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 0);
    sb_copy(&b, 1, 0, 4, 0, 4);
    sb_copy(&b, 0, 1, 4, 0, 8);
    fx_end(&f);
    CHECK_STATUS(fx_load(&f, &b), CP_OK);
    CHECK(f.prog.let_copies[0].task == 0 && f.prog.let_copies[1].task == 1); /* grouped */
    cp_let_copy swap = f.prog.let_copies[0];
    f.prog.let_copies[0] = f.prog.let_copies[1];
    f.prog.let_copies[1] = swap;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    fx_end(&f);

    /* functions on a never-initialised scheduler do nothing harmful */
    cp_sched zero;
    memset(&zero, 0, sizeof(zero));
    cp_sched_tick(&zero);
    cp_sched_advance(&zero, 3);
    cp_sched_reset(&zero);
    cp_sched_clear_feeds(&zero);
    cp_sched_tick(NULL);
    cp_sched_reset(NULL);
    CHECK(zero.tick == 0);
    cp_sched_feed feed = {0, 4, (const uint8_t *)"abcd", 1, 0};
    CHECK_STATUS(cp_sched_add_feed(&zero, &feed, NULL), CP_ERR_ARGUMENT);
    CHECK_STATUS(cp_sched_set_trace(&zero, NULL, NULL, 0, NULL, 0, NULL), CP_ERR_ARGUMENT);
}

/* Table validation of the new sections at load: 33 tasks, grouping kept in table order. */
static void test_tables_at_load(void)
{
    sb b;
    sb_init(&b, 64);
    for (int i = 0; i < 33; i++) {
        sb_task(&b, 0, 0, 0, 0, 0);
    }
    a_ret(&b);
    fx f;
    CHECK_STATUS(fx_load(&f, &b), CP_ERR_LAYOUT);
    CHECK(strstr(f.err.message, "33 tasks") != NULL);
    b.ntasks = 32;
    CHECK_STATUS(fx_load(&f, &b), CP_OK);
    CHECK(f.prog.task_count == 32 && f.prog.let_copy_count == 0 && f.prog.let_copies != NULL);
    fx_end(&f);

    sb_init(&b, 64);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 77);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 0);
    sb_copy(&b, 1, 1, 1, 0, 1);
    sb_copy(&b, 0, 1, 1, 0, 2);
    sb_copy(&b, 1, 0, 1, 0, 3);
    sb_copy(&b, 0, 1, 1, 0, 4);
    sb_copy(&b, 0, 0, 1, 0, 5);
    sb_binding(&b, 1, 2, 1, 9, 3, 8);
    sb_binding(&b, 0, 2, 1, 8, 3, 8);
    sb_binding(&b, 1, 1, 1, 7, 3, 8);
    sb_binding(&b, 0, 2, 1, 6, 3, 8);
    CHECK_STATUS(fx_load(&f, &b), CP_OK);
    CHECK(f.prog.tasks[0].wcet_ns == 77);
    CHECK(f.prog.let_copy_count == 5 && f.prog.io_binding_count == 4);
    static const uint32_t dst_order[5] = {5, 2, 4, 3, 1};
    for (int k = 0; k < 5; k++) {
        CHECK(f.prog.let_copies[k].dst == dst_order[k]);
    }
    static const uint16_t channel_order[4] = {8, 6, 7, 9};
    for (int k = 0; k < 4; k++) {
        CHECK(f.prog.io_bindings[k].channel == channel_order[k]);
    }
    cp_sched_config cfg = default_config(1000);
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_OK);
    CHECK(f.s.copies[0][0] == 0 && f.s.copies[0][1] == 1 && f.s.copies[0][2] == 3);
    CHECK(f.s.copies[1][0] == 3 && f.s.copies[1][1] == 4 && f.s.copies[1][2] == 5);
    CHECK(f.s.bindings[0][0] == 0 && f.s.bindings[0][1] == 0 && f.s.bindings[0][2] == 2);
    CHECK(f.s.bindings[1][0] == 2 && f.s.bindings[1][1] == 3 && f.s.bindings[1][2] == 4);
    CHECK(f.s.copies[2][0] == 5 && f.s.copies[31][2] == 5);
    /* the initial data lives in the region, after the tables */
    CHECK(f.prog.initial_data >= (const uint8_t *)(f.prog.io_bindings + 4));
    CHECK(f.prog.initial_data + f.prog.initial_size <= f.prog.base + f.prog.region_size);
    fx_end(&f);
    CHECK(f.prog.let_copies == NULL && f.prog.initial_data == NULL && f.prog.initial_size == 0);
}

/* ---- randomised comparison with a naive model of docs/realtime.md
 * Task i: RELEASE shared[i-1] -> in_i; chain out_i = in_i + 1 and cnt_i = cnt_i + 1;
 * PUBLISH out_i -> shared[i] and cnt_i -> shared_cnt[i]. Slots are 32 bytes per task. */

enum { R_SHARED = 0, R_SCNT = 4, R_IN = 8, R_OUT = 12, R_CNT = 16, R_STRIDE = 32 };

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 33) % n;
}

typedef struct ref_task {
    uint64_t period, offset, wcet;
    uint16_t prio;
    int pending;
    uint64_t rem;
    cp_task_stats st;
} ref_task;

static void ref_copy(uint8_t *d, uint32_t src, uint32_t dst)
{
    memmove(d + dst, d + src, 4);
}

static void ref_tick(ref_task *t, uint32_t n, uint8_t *d, uint64_t now, uint64_t tick_ns)
{
    for (uint32_t i = 0; i < n; i++) {
        ref_task *r = &t[i];
        if (r->period && now > r->offset && (now - r->offset) % r->period == 0 && r->pending) {
            if (r->rem == 0) {
                ref_copy(d, R_STRIDE * i + R_OUT, R_STRIDE * i + R_SHARED);
                ref_copy(d, R_STRIDE * i + R_CNT, R_STRIDE * i + R_SCNT);
                r->pending = 0;
            } else {
                r->st.overruns++;
            }
        }
    }
    uint32_t order[CP_MAX_TASKS], done = 0;
    for (uint32_t k = 0; k < n; k++) { /* selection by (priority, index) */
        uint32_t best = n;
        for (uint32_t i = 0; i < n; i++) {
            if (!(done >> i & 1u) && (best == n || t[i].prio < t[best].prio)) {
                best = i;
            }
        }
        order[k] = best;
        done |= 1u << best;
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        ref_task *r = &t[i];
        if (!r->period || now < r->offset || (now - r->offset) % r->period != 0) {
            continue;
        }
        if (r->pending) {
            r->st.skipped++;
            continue;
        }
        uint32_t prev = (i + n - 1) % n;
        ref_copy(d, R_STRIDE * prev + R_SHARED, R_STRIDE * i + R_IN);
        int32_t v;
        memcpy(&v, d + R_STRIDE * i + R_IN, 4);
        v = (int32_t)((uint32_t)v + 1u);
        memcpy(d + R_STRIDE * i + R_OUT, &v, 4);
        memcpy(&v, d + R_STRIDE * i + R_CNT, 4);
        v = (int32_t)((uint32_t)v + 1u);
        memcpy(d + R_STRIDE * i + R_CNT, &v, 4);
        r->st.runs++;
        r->pending = 1;
        r->rem = r->wcet;
    }
    uint64_t left = tick_ns;
    for (uint32_t k = 0; k < n; k++) {
        ref_task *r = &t[order[k]];
        if (r->pending && r->rem) {
            uint64_t take = r->rem < left ? r->rem : left;
            r->rem -= take;
            left -= take;
        }
    }
}

/* 0: no guard, 1: the POSIX guard per job, 2: armed once per tick (the same rules) */
static int random_guard;

static void random_case(uint32_t n, uint32_t ticks)
{
    const uint64_t tick_ns = 1000;
    ref_task ref[CP_MAX_TASKS];
    memset(ref, 0, sizeof(ref));
    sb b;
    sb_init(&b, R_STRIDE * n);
    for (uint32_t i = 0; i < n; i++) {
        ref_task *r = &ref[i];
        r->period = rnd(8) == 0 ? 0 : (1 + rnd(6)) * tick_ns;
        r->offset = r->period ? rnd((uint32_t)(r->period / tick_ns)) * tick_ns : 0;
        r->prio = (uint16_t)rnd(4);
        r->wcet = rnd(3) == 0 ? 0 : rnd(2500);
        uint32_t entry = b.code_size;
        a_load32(&b, R_STRIDE * i + R_IN);
        a_add(&b, 1);
        a_store32(&b, R_STRIDE * i + R_OUT);
        a_load32(&b, R_STRIDE * i + R_CNT);
        a_add(&b, 1);
        a_store32(&b, R_STRIDE * i + R_CNT);
        a_ret(&b);
        sb_task(&b, entry, (uint32_t)r->period, (uint32_t)r->offset, r->prio,
                (uint32_t)r->wcet);
    }
    uint32_t perm[CP_MAX_TASKS]; /* the copy table in a random task order */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = rnd(i + 1);
        perm[i] = perm[k];
        perm[k] = i;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = perm[i], prev = (j + n - 1) % n;
        if (!ref[j].period) {
            continue;
        }
        sb_copy(&b, (uint16_t)j, 1, 4, R_STRIDE * j + R_OUT, R_STRIDE * j + R_SHARED);
        sb_copy(&b, (uint16_t)j, 0, 4, R_STRIDE * prev + R_SHARED, R_STRIDE * j + R_IN);
        sb_copy(&b, (uint16_t)j, 1, 4, R_STRIDE * j + R_CNT, R_STRIDE * j + R_SCNT);
    }
    fx f;
    cp_sched_config cfg = default_config(tick_ns);
    cfg.guard = random_guard != 0 ? cp_posix_guard : NULL;
    cfg.guard_run = random_guard == 2 ? cp_posix_guard_run : NULL;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    uint8_t model[R_STRIDE * CP_MAX_TASKS];
    memset(model, 0, sizeof(model));
    int ok = 1;
    for (uint32_t t = 0; t < ticks && ok; t++) {
        ref_tick(ref, n, model, t * tick_ns, tick_ns);
        if (t % 2 == 0) {
            cp_sched_tick(&f.s);
        } else {
            cp_sched_advance(&f.s, 1);
        }
        ok = memcmp(model, cp_program_data(&f.prog), R_STRIDE * n) == 0;
        for (uint32_t i = 0; i < n; i++) {
            ok = ok && memcmp(&ref[i].st, &f.s.stats[i], sizeof(cp_task_stats)) == 0 &&
                 ref[i].pending == f.s.state[i].pending && ref[i].rem == f.s.state[i].remaining_ns;
        }
        if (!ok) {
            fprintf(stderr, "random case with %u tasks differs from the model at tick %u\n",
                    n, t);
            for (uint32_t i = 0; i < n; i++) {
                fprintf(stderr, "  task %u: period %u offset %u prio %u wcet %u | model runs %u "
                        "skipped %u overruns %u pending %d rem %u | sched %u %u %u %d %u\n", i,
                        (unsigned)ref[i].period, (unsigned)ref[i].offset, ref[i].prio,
                        (unsigned)ref[i].wcet, (unsigned)ref[i].st.runs,
                        (unsigned)ref[i].st.skipped, (unsigned)ref[i].st.overruns,
                        ref[i].pending, (unsigned)ref[i].rem, (unsigned)f.s.stats[i].runs,
                        (unsigned)f.s.stats[i].skipped, (unsigned)f.s.stats[i].overruns,
                        f.s.state[i].pending, (unsigned)f.s.state[i].remaining_ns);
            }
            for (uint32_t k = 0; k < R_STRIDE * n; k += 4) {
                int32_t a, c;
                memcpy(&a, model + k, 4);
                memcpy(&c, cp_program_data(&f.prog) + k, 4);
                if (a != c) {
                    fprintf(stderr, "  data[%u]: model %d, sched %d\n", k, a, c);
                }
            }
        }
    }
    CHECK(ok);
    fx_end(&f);
}

static void test_random_against_model(void)
{
    for (random_guard = 0; random_guard < 3; random_guard++) {
        for (int k = 0; k < 300; k++) {
            random_case(1 + rnd(8), 60);
        }
        for (int k = 0; k < 10; k++) {
            random_case(32, 40); /* bit 31 of the due mask */
        }
    }
}


/* ---- the hyperperiod plan (cp_sched_set_plan) against the per-tick decisions
 * The random model's programs without wcets (every job finishes in its tick), half of the
 * tasks reading the previous task's shared slot in place instead of through a RELEASE copy
 * (bare jobs, as fold_releases compiles them), some tasks with I/O bindings (an INPUT into a spare slot, an OUTPUT of the
 * published count) and one that may fault (ud2 at its K-th run). One scheduler advances in
 * random chunks with a plan (settling after some, writing a shared slot between some), another
 * of the same image takes the same ticks one cp_sched_tick at a time without a plan (the
 * per-tick decisions: due scan, pending, skips, processor model). The guards: none, per job,
 * a run armed per advance, and that run with guard_jobs (a bare tick's jobs in one call).
 * After every chunk their data regions, statistics, pending
 * states, simulated I/O (values and the number of reads and writes; half of the cases the
 * planned one moves it directly, cp_sched_set_sim_io), trace rows and faults are the same. */

enum { R_SPARE = 20, R_FREE = 24 };

/* mode PLAN_BARE: every task folded, none with bindings, periods 1-4 (short hyperperiods):
 * every tick bare, so that the plan has a bare cycle (whole hyperperiods in one guard_jobs
 * call). PLAN_BOUND: periods 1-4 too, half of the tasks with bindings and half with a RELEASE
 * copy: the cycle with I/O moves (and trace rows). PLAN_ANY: periods 1-6, a third bound. */
enum { PLAN_ANY, PLAN_BARE, PLAN_BOUND };

static void plan_program(sb *b, uint32_t n, int can_fault, int mode, uint32_t *faulty,
                         uint32_t *plan_ticks)
{
    int bare = mode == PLAN_BARE;
    const uint32_t tick_ns = 1000;
    sb_init(b, R_STRIDE * n);
    uint32_t period[CP_MAX_TASKS];
    *faulty = can_fault && rnd(2) == 0 ? rnd(n) : n; /* n: none */
    uint8_t folded[CP_MAX_TASKS];
    for (uint32_t i = 0; i < n; i++) {
        period[i] = rnd(8) == 0 ? 0 : 1 + rnd(mode != PLAN_ANY ? 4 : 6);
        uint32_t offset = period[i] ? rnd(period[i]) : 0; /* the loader: below the period */
        uint32_t entry = b->code_size;
        /* half of the tasks read the previous task's shared slot in place, as a chain
         * compiled with fold_releases does (no RELEASE copy: a bare job) */
        folded[i] = (uint8_t)(bare || rnd(2) == 0);
        a_load32(b, folded[i] ? R_STRIDE * ((i + n - 1) % n) + R_SHARED : R_STRIDE * i + R_IN);
        a_add(b, 1);
        a_store32(b, R_STRIDE * i + R_OUT);
        a_load32(b, R_STRIDE * i + R_CNT);
        a_add(b, 1);
        a_store32(b, R_STRIDE * i + R_CNT);
        if (i == *faulty) { /* cmp eax, K; jne +2; ud2 */
            uint32_t k = 1 + rnd(12);
            const uint8_t code[] = {0x3d, (uint8_t)k, 0, 0, 0, 0x75, 0x02, 0x0f, 0x0b};
            emit(b, code, sizeof(code));
        }
        a_ret(b);
        sb_task(b, entry, period[i] * tick_ns, offset * tick_ns, (uint16_t)rnd(4), 0);
    }
    *plan_ticks = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t prev = (i + n - 1) % n;
        if (!period[i]) {
            continue;
        }
        *plan_ticks += 1;
        /* the two PUBLISH copies: side by side in source and destination (the plan merges
         * them), in the source only, or side by side in both but overlapping once merged
         * (R_OUT -> R_CNT, then R_CNT -> R_SPARE: one after the other, not merged) */
        uint32_t shape = rnd(4), base = R_STRIDE * i;
        sb_copy(b, (uint16_t)i, 1, 4, base + R_OUT, base + (shape == 3 ? R_CNT : R_SHARED));
        if (!folded[i]) {
            sb_copy(b, (uint16_t)i, 0, 4, R_STRIDE * prev + R_SHARED, R_STRIDE * i + R_IN);
        }
        sb_copy(b, (uint16_t)i, 1, 4, base + R_CNT,
                base + (shape == 3 ? R_SPARE : shape == 2 ? R_FREE : R_SCNT));
        if (!bare && rnd(mode == PLAN_BOUND ? 2 : 3) == 0 &&
            b->nbindings + 2 <= SB_MAX_BINDINGS) {
            /* int32 or float32 slots (the direct moves' two paths: a dtype switch, and
             * float32 without it) */
            uint8_t in = rnd(2) ? CP_DT_F32 : CP_DT_I32, out = rnd(2) ? CP_DT_F32 : CP_DT_I32;
            /* a quarter of the OUTPUTs read the next task's shared slot, which its PUBLISH
             * copy writes later in the tick: the output must take the value before it (the
             * planned tick then moves outputs task by task, not after the flat copies) */
            uint32_t driven = rnd(mode == PLAN_BOUND ? 2 : 4) == 0
                                  ? R_STRIDE * ((i + 1) % n) + R_SHARED
                                          : R_STRIDE * i + R_SCNT;
            /* half of the bound cases' INPUTs read the task's own OUTPUT channel back (a
             * loop: the data and the trace rows then see every tick's output, not only the
             * channel's last value at the end of a chunk) */
            uint8_t kind = mode == PLAN_BOUND && rnd(2) == 0 ? CP_IO_PWM : CP_IO_ADC;
            sb_binding(b, (uint16_t)i, 1, kind, (uint16_t)i, in, R_STRIDE * i + R_SPARE);
            sb_binding(b, (uint16_t)i, 2, CP_IO_PWM, (uint16_t)i, out, driven);
            /* a third of the bound cases' tasks have a second INPUT (the cycle's INPUT_JOB
             * entry is a task's last float32 INPUT with its job: the ones before it are
             * INPUT entries) */
            if (mode == PLAN_BOUND && rnd(3) == 0 && b->nbindings + 1 <= SB_MAX_BINDINGS) {
                sb_binding(b, (uint16_t)i, 1, CP_IO_ADC, (uint16_t)(i + 1),
                           rnd(2) ? CP_DT_F32 : CP_DT_I32, R_STRIDE * i + R_FREE);
            }
        }
    }
}

/* plan cases whose plan has a bare cycle, and those of them that faulted, with guard_jobs;
 * calls of a bound cycle (I/O moves) and of a traced one whose ring wrapped inside the call */
static int cycle_cases, cycle_faults, io_cycle_calls, io_cycle_faults, wrapped_cycle_calls;
/* calls of a cycle with INPUT_JOB entries, and with an INPUT entry too in one tick */
static int input_job_calls, input_and_job_calls;

/* the planned scheduler's cycle lists (their orders in the plan's buffer: with ROW entries
 * and without) */
static const uint8_t *cycle_order, *cycle_rowless;

/* cp_posix_guard_jobs, counting the calls of a cycle with I/O moves and those whose trace ring
 * wraps inside the call (more of its rows than the ring holds, or past its end) */
static int counting_jobs(void *job_ctx, const cp_guard_job_list *list, uint32_t *at,
                         cp_fault *fault)
{
    if (list->order == cycle_order || list->order == cycle_rowless) {
        uint64_t rows = 0, moves = 0, input_jobs = 0, inputs = 0;
        for (uint32_t k = 0; k < list->count; k++) {
            uint8_t o = list->order[k];
            rows += o == CP_JOBS_ROW;
            moves += o == CP_JOBS_INPUT || o == CP_JOBS_OUTPUT || o == CP_JOBS_INPUT_JOB;
            input_jobs += o == CP_JOBS_INPUT_JOB;
            inputs += o == CP_JOBS_INPUT;
        }
        io_cycle_calls += moves != 0;
        input_job_calls += input_jobs != 0;
        input_and_job_calls += input_jobs != 0 && inputs != 0;
        wrapped_cycle_calls += list->rows != NULL &&
                               *list->row_next + rows * list->repeat > list->row_capacity;
    }
    return cp_posix_guard_jobs(job_ctx, list, at, fault);
}

static void plan_case(uint32_t n, int guard, int mode)
{
    enum { TICKS = 80 };
    sb b;
    uint32_t faulty, periodic;
    plan_program(&b, n, guard != 0, mode, &faulty, &periodic);
    io_sim io[2];
    fx f[2];
    static uint8_t rows[2][TICKS][8 + R_STRIDE * CP_MAX_TASKS + 4];
    static uint8_t plan[1u << 16];
    /* guard_jobs without a test per job too (the policy of LocalTarget's own code) */
    void *policy = guard == 3 && rnd(2) == 0 ? (void *)&cp_posix_own_verified_code : NULL;
    if (policy != NULL) { /* its loop without a test per job needs the supervisor running */
        CHECK(cp_posix_watchdog_start(0, 0) == 0);
    }
    for (int k = 0; k < 2; k++) {
        memset(&io[k], 0, sizeof(io[k]));
        cp_sched_config cfg = default_config(1000);
        cfg.io_read = sim_read;
        cfg.io_write = sim_write;
        cfg.io_ctx = &io[k];
        cfg.guard = guard != 0 ? cp_posix_guard : NULL;
        cfg.guard_run = guard >= 2 ? cp_posix_guard_run : NULL;
        cfg.guard_jobs = guard == 3 ? counting_jobs : NULL; /* a tick's jobs at once */
        cfg.guard_ctx = policy;
        /* budgets of at least 1 s (never reached): one for every task, or one per period
         * (guard_jobs stores the budget once a call, or before each job) */
        cfg.budget_factor = mode != PLAN_ANY ? (rnd(2) == 0 ? 10u : 10000000u) : 0u;
        cfg.budget_min_ns = 1000000000u;
        if (fx_start(&f[k], &b, &cfg) != 0) {
            if (k == 1) {
                fx_end(&f[0]);
            }
            return;
        }
        io[k].s = &f[k].s;
        memset(rows[k], 0, sizeof(rows[k]));
    }
    /* a trace row a tick: always in the general cases, two thirds of the bound ones (a ring of
     * 1-6 rows half of the time, which wraps inside a call of the cycle) */
    uint64_t capacity = mode == PLAN_BOUND && rnd(2) == 0 ? 1 + rnd(6) : TICKS;
    if (mode == PLAN_ANY || (mode == PLAN_BOUND && rnd(3) != 0)) {
        /* ranges side by side (joined into one: the data region) and one apart */
        uint32_t offset[4] = {0, R_OUT, R_OUT + 8, R_STRIDE * (n - 1)};
        uint32_t size[4] = {R_OUT, 8, R_STRIDE * n - R_OUT - 8, 4};
        uint32_t ranges = 1 + rnd(4);
        for (int k = 0; k < 2; k++) {
            CHECK_STATUS(cp_sched_set_trace(&f[k].s, offset, size, ranges, rows[k][0],
                                            capacity, &f[k].err), CP_OK);
        }
    }
    /* the planned one moves the I/O directly half of the time, always in the bound cases
     * (cp_sched_set_sim_io; its callbacks, which drive the safe state, use the same array);
     * sometimes with fewer channels than the bindings use (an INPUT outside reads 0.0, an
     * OUTPUT outside goes nowhere): then the reference moves them directly too */
    int direct = mode == PLAN_BOUND || rnd(2) == 0;
    uint32_t channels = rnd(3) == 0 ? rnd(n + 1) : 256;
    cp_sched_set_sim_io(&f[0].s, direct ? &io[0].ch[1][0] : NULL, channels);
    if (direct && channels < 256) {
        cp_sched_set_sim_io(&f[1].s, &io[1].ch[1][0], channels);
    }
    /* the plan before or after the simulated I/O (its channels patched at either) */
    if (rnd(2) == 0) {
        cp_sched_set_sim_io(&f[0].s, NULL, 0);
    }
    uint32_t used = cp_sched_set_plan(&f[0].s, plan, sizeof(plan));
    cp_sched_set_sim_io(&f[0].s, direct ? &io[0].ch[1][0] : NULL, channels);
    CHECK((used != 0) == (periodic != 0) && used == cp_sched_plan_size(&f[0].s, sizeof(plan) / 5));
    /* every tick with no feed: the plan has its cycle */
    CHECK(mode == PLAN_ANY || periodic == 0 || f[0].s.plan_cycle_count != 0);
    cycle_order = f[0].s.plan_cycle_count != 0 ? plan + f[0].s.plan_cycle_order : NULL;
    cycle_rowless = f[0].s.plan_cycle_count != 0 ? plan + f[0].s.plan_cycle_rowless : NULL;
    int cycle = guard == 3 && f[0].s.plan_cycle_count != 0;
    cycle_cases += cycle;
    int io_calls = io_cycle_calls;
    int ok = 1;
    for (uint32_t t = 0; t < TICKS && ok;) {
        uint32_t chunk = 1 + rnd(rnd(2) == 0 ? 3 : mode != PLAN_ANY ? 40 : 20);
        chunk = chunk < TICKS - t ? chunk : TICKS - t;
        for (uint32_t c = 0; c < n; c++) { /* the inputs change between chunks */
            double v = (double)rnd(100);
            io[0].ch[CP_IO_ADC][c] = v;
            io[1].ch[CP_IO_ADC][c] = v;
        }
        cp_sched_advance(&f[0].s, chunk);
        for (uint32_t k = 0; k < chunk; k++) {
            cp_sched_tick(&f[1].s);
        }
        if (rnd(2) == 0) {
            cp_sched_settle(&f[0].s);
            cp_sched_settle(&f[1].s);
        }
        if (rnd(2) == 0) { /* a write between steps (tg.write): a shared slot in both */
            uint32_t slot = R_STRIDE * rnd(n) + R_SHARED;
            int32_t v = (int32_t)rnd(1000) - 500;
            memcpy(cp_program_data(&f[0].prog) + slot, &v, 4);
            memcpy(cp_program_data(&f[1].prog) + slot, &v, 4);
        }
        t += chunk;
        const cp_fault *a = cp_sched_fault(&f[0].s), *r = cp_sched_fault(&f[1].s);
        ok = memcmp(cp_program_data(&f[0].prog), cp_program_data(&f[1].prog),
                    R_STRIDE * n) == 0 && f[0].s.tick == f[1].s.tick &&
             f[0].s.now_ns == f[1].s.now_ns && f[0].s.trace_rows == f[1].s.trace_rows &&
             memcmp(rows[0], rows[1], sizeof(rows[0])) == 0 &&
             memcmp(io[0].ch, io[1].ch, sizeof(io[0].ch)) == 0 &&
             (direct || (io[0].reads == io[1].reads && io[0].writes == io[1].writes)) &&
             (a == NULL) == (r == NULL) &&
             (a == NULL || (a->kind == r->kind && a->task == r->task && a->tick == r->tick));
        for (uint32_t i = 0; i < n; i++) {
            ok = ok && memcmp(&f[0].s.stats[i], &f[1].s.stats[i], sizeof(cp_task_stats)) == 0 &&
                 f[0].s.state[i].pending == f[1].s.state[i].pending &&
                 f[0].s.state[i].remaining_ns == f[1].s.state[i].remaining_ns;
        }
        if (!ok) {
            fprintf(stderr, "plan case (%u tasks, guard %d, faulty %u) differs after tick %u:"
                    " tick %u/%u fault %u/%u\n", n, guard, faulty, t, (unsigned)f[0].s.tick,
                    (unsigned)f[1].s.tick, a != NULL ? a->kind : 0, r != NULL ? r->kind : 0);
            for (uint32_t i = 0; i < n; i++) {
                fprintf(stderr, "  task %u: period %u offset %u | runs %u/%u pending %d/%d\n",
                        i, (unsigned)f[0].prog.tasks[i].period_ns,
                        (unsigned)f[0].prog.tasks[i].offset_ns, (unsigned)f[0].s.stats[i].runs,
                        (unsigned)f[1].s.stats[i].runs, f[0].s.state[i].pending,
                        f[1].s.state[i].pending);
            }
        }
        if (a != NULL && ok) {
            CHECK(a->kind == CP_FAULT_SIGILL && a->task == faulty);
            cycle_faults += cycle;
            io_cycle_faults += io_cycle_calls != io_calls;
            break;
        }
    }
    CHECK(ok);
    fx_end(&f[0]);
    fx_end(&f[1]);
}

static void test_plan_against_ticks(void)
{
    for (int guard = 0; guard < 4; guard++) {
        for (int k = 0; k < 300; k++) {
            plan_case(1 + rnd(8), guard, PLAN_ANY);
        }
        for (int k = 0; k < 5; k++) {
            plan_case(32, guard, PLAN_ANY);
        }
        for (int k = 0; k < 150; k++) { /* the bare cycle (with guard_jobs) */
            plan_case(1 + rnd(8), guard, PLAN_BARE);
        }
        for (int k = 0; k < 5; k++) {
            plan_case(32, guard, PLAN_BARE);
        }
        /* the cycle with I/O moves and trace rows (it runs with guard_jobs, guard 3) */
        for (int k = 0; k < (guard == 3 ? 800 : 100); k++) {
            plan_case(1 + rnd(8), guard, PLAN_BOUND);
        }
        for (int k = 0; k < 5; k++) {
            plan_case(32, guard, PLAN_BOUND);
        }
    }
    /* the cycles ran (with I/O moves, with a ring that wrapped inside a call), and faults in
     * them were found where the ticks find them */
    fprintf(stderr, "  plan: %d cycle cases (%d faulted), %d calls of a bound cycle (%d cases "
            "faulted), %d calls wrapping the trace ring\n", cycle_cases, cycle_faults,
            io_cycle_calls, io_cycle_faults, wrapped_cycle_calls);
    CHECK(cycle_cases > 100 && cycle_faults > 20);
    CHECK(io_cycle_calls > 100 && io_cycle_faults > 20 && wrapped_cycle_calls > 20);
    fprintf(stderr, "  plan: %d calls of a cycle with INPUT_JOB entries (%d with INPUT entries "
            "too)\n", input_job_calls, input_and_job_calls);
    CHECK(input_job_calls > 100 && input_and_job_calls > 20);
    /* a hyperperiod longer than the buffer is not planned (the general path) */
    sb b;
    uint32_t faulty, periodic;
    rng_state = 7;
    plan_program(&b, 3, 0, PLAN_ANY, &faulty, &periodic);
    fx f;
    cp_sched_config cfg = default_config(1000);
    if (fx_start(&f, &b, &cfg) == 0) {
        uint8_t small[2];
        CHECK(cp_sched_set_plan(&f.s, small, sizeof(small)) == 0 && f.s.plan_ops == 0);
        CHECK(cp_sched_set_plan(&f.s, NULL, 0) == 0);
        fx_end(&f);
    }
    /* timed or with job costs: never planned */
    cfg.clock_ns = fake_now;
    uint8_t plan[4096];
    if (fx_start(&f, &b, &cfg) == 0) {
        CHECK(cp_sched_set_plan(&f.s, plan, sizeof(plan)) == 0);
        fx_end(&f);
    }
}

/* ---- faults, budgets and the safe state */

static void put_f64(uint8_t *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    tb_put32(p, (uint32_t)bits);
    tb_put32(p + 4, (uint32_t)(bits >> 32));
}

/* An extended task entry: budget (bytes 24-27) and link timeout (32-39). */
static void sb_task_ext(sb *b, uint32_t task, uint32_t budget_ns, uint64_t link_ns)
{
    tb_put32(b->tasks[task] + 24, budget_ns);
    tb_put32(b->tasks[task] + 32, (uint32_t)link_ns);
    tb_put32(b->tasks[task] + 36, (uint32_t)(link_ns >> 32));
}

static uint32_t raw_task(sb *b, const uint8_t *code, size_t n, uint32_t period, uint16_t prio)
{
    uint32_t entry = b->code_size;
    emit(b, code, n);
    return sb_task(b, entry, period, 0, prio, 0);
}

/* Task 0 counts and drives PWM 0 (safe 0.25) and GPIO 1 (safe 1); task 1 runs every 3 ticks,
 * its chain faults (ud2, or an endless loop). */
static void fault_program(sb *b, const uint8_t *bad, size_t n, uint32_t budget_ns)
{
    enum { CNT = 0, OUT = 4, OUT2 = 8 };
    sb_init(b, 64);
    b->ext = 1;
    inc_task(b, CNT, CNT, 1, 1000, 0, 0, 0);
    sb_copy(b, 0, 1, 4, CNT, OUT);
    sb_copy(b, 0, 1, 4, CNT, OUT2);
    uint32_t t1 = raw_task(b, bad, n, 3000, 1);
    tb_task_full(b->tasks[t1], b->code_size - (uint32_t)n, 3000, 2000, 1, 0);
    sb_task_ext(b, t1, budget_ns, 0);
    sb_binding(b, 0, 2, CP_IO_PWM, 0, 3, OUT);
    put_f64(b->bindings[0] + 16, 0.25);
    sb_binding(b, 0, 2, CP_IO_GPIO, 1, 3, OUT2);
    put_f64(b->bindings[1] + 16, 1.0);
}

/* The fault program with `bad` as task 1, scheduled with the POSIX guard (1 us ticks), armed
 * per job (cp_posix_guard) or once per tick's releases (cp_posix_guard_run too). */
static int start_faulting(fx *f, io_sim *io, const uint8_t *bad, size_t n, uint32_t budget_ns,
                          uint32_t factor, int per_tick)
{
    sb b;
    fault_program(&b, bad, n, budget_ns);
    memset(io, 0, sizeof(*io));
    cp_sched_config cfg = default_config(1000);
    cfg.io_write = sim_write;
    cfg.io_read = sim_read;
    cfg.io_ctx = io;
    cfg.guard = cp_posix_guard;
    cfg.guard_run = per_tick ? cp_posix_guard_run : NULL;
    cfg.budget_factor = factor;
    if (fx_start(f, &b, &cfg) != 0) {
        return -1;
    }
    io->s = &f->s;
    return 0;
}

static void test_fault_contained(int per_tick)
{
    static const uint8_t ud2[] = {0x0f, 0x0b};
    io_sim io;
    fx f;
    if (start_faulting(&f, &io, ud2, sizeof(ud2), 0, 10, per_tick) != 0) {
        return;
    }
    CHECK(f.prog.io_bindings[0].safe == 0.25 && f.prog.io_bindings[1].safe == 1.0);
    for (int round = 0; round < 50; round++) {
        cp_sched_advance(&f.s, 2);
        CHECK(cp_sched_fault(&f.s) == NULL);
        CHECK(io.ch[CP_IO_PWM][0] == 1.0); /* published after tick 0 ends (at tick 1) */
        cp_sched_tick(&f.s); /* tick 2: task 1's release faults */
        const cp_fault *fault = cp_sched_fault(&f.s);
        CHECK(fault != NULL && fault->kind == CP_FAULT_SIGILL && fault->task == 1 &&
              fault->tick == 2 && fault->pc != 0);
        CHECK(io.ch[CP_IO_PWM][0] == 0.25 && io.ch[CP_IO_GPIO][1] == 1.0);
        uint64_t before = f.s.tick;
        int32_t cnt = rd32(&f, 0);
        cp_sched_advance(&f.s, 5); /* a faulted program does nothing */
        cp_sched_settle(&f.s);
        CHECK(f.s.tick == before && rd32(&f, 0) == cnt && io.ch[CP_IO_PWM][0] == 0.25);
        cp_sched_reset(&f.s);
        CHECK(cp_sched_fault(&f.s) == NULL && f.s.tick == 0 && rd32(&f, 0) == 0);
    }
    /* the safe state alone, and a second fault never overwrites the first */
    io.ch[CP_IO_PWM][0] = 0.9;
    cp_sched_safe_state(&f.s);
    CHECK(io.ch[CP_IO_PWM][0] == 0.25);
    cp_fault link = {CP_FAULT_LINK, CP_FAULT_NO_TASK, 0, 0, 0, 0, 0};
    cp_sched_fail(&f.s, &link);
    cp_fault other = {CP_FAULT_SIGSEGV, 0, 0, 0, 0, 0, 0};
    cp_sched_fail(&f.s, &other);
    CHECK(cp_sched_fault(&f.s) != NULL && cp_sched_fault(&f.s)->kind == CP_FAULT_LINK);
    fx_end(&f);
}

static void test_fault_timeout(int per_tick)
{
    static const uint8_t loop[] = {0xeb, 0xfe}; /* jmp $ */
    io_sim io;
    fx f;
    if (start_faulting(&f, &io, loop, sizeof(loop), 2000000, 2, per_tick) != 0) { /* 2 ms */
        return;
    }
    CHECK(f.s.budget_ns[1] == 4000000 && f.s.budget_ns[0] == 2000);
    CHECK(f.prog.tasks[1].budget_ns == 2000000);
    for (int round = 0; round < 3; round++) {
        cp_sched_advance(&f.s, 3);
        const cp_fault *fault = cp_sched_fault(&f.s);
        CHECK(fault != NULL && fault->kind == CP_FAULT_TIMEOUT && fault->task == 1);
        CHECK(io.ch[CP_IO_PWM][0] == 0.25);
        cp_sched_reset(&f.s);
    }
    fx_end(&f);
}

/* A clock whose k-th read returns 100 * (1 + 2 + ... + k): the interval ending at read k is
 * 100 * k ns, so every job's time says which reads bound it. */
static uint64_t counting_now(void *ctx)
{
    fake_clock *c = ctx;
    c->calls++;
    c->now += 100u * (uint64_t)c->calls;
    return c->now;
}

/* Ten tasks, priority order 9, 8, ..., 0, released every tick but task 6 (period 3 ticks,
 * offset 2), whose chain faults (ud2) at its first release, tick 2. Each task counts its
 * runs in slot 4i. Reads per tick: one before the releases, one after each chain (and after
 * the guard came back). per_tick 0: the per-job guard; 1: a guard run (cp_sched_advance arms
 * one for all five ticks); 2: cp_sched_tick five times, one guard run a tick. */
static void fault_in_the_fourth_job(int per_tick)
{
    static const uint8_t ud2[] = {0x0f, 0x0b};
    sb b;
    sb_init(&b, 64);
    for (uint32_t i = 0; i < 10; i++) {
        if (i == 6) {
            uint32_t t = raw_task(&b, ud2, sizeof(ud2), 3000, 3);
            tb_task_full(b.tasks[t], b.code_size - (uint32_t)sizeof(ud2), 3000, 2000, 3, 0);
        } else {
            inc_task(&b, 4 * i, 4 * i, 1, 1000, 0, (uint16_t)(9 - i), 0);
        }
    }
    fake_clock clock = {0, 0, 0};
    cp_sched_config cfg = default_config(1000);
    cfg.clock_ns = counting_now;
    cfg.clock_ctx = &clock;
    cfg.guard = cp_posix_guard;
    cfg.guard_run = per_tick ? cp_posix_guard_run : NULL;
    cfg.budget_factor = 10;
    fx f;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    if (per_tick == 2) {
        for (int k = 0; k < 5; k++) {
            cp_sched_tick(&f.s);
        }
    } else {
        cp_sched_advance(&f.s, 5);
    }
    const cp_fault *fault = cp_sched_fault(&f.s);
    CHECK(fault != NULL && fault->kind == CP_FAULT_SIGILL && fault->task == 6 &&
          fault->tick == 2);
    CHECK(f.s.tick == 2); /* tick 2 never completes; ticks 3 and 4 do nothing */
    /* ticks 0 and 1: reads 1..10 and 11..20, nine jobs each; tick 2: read 21, then tasks 9,
     * 8, 7 (reads 22..24), task 6 faults (read 25), tasks 5..0 do not run */
    CHECK(clock.calls == 25);
    for (uint32_t i = 0; i < 10; i++) {
        uint64_t p = i >= 7 ? 9 - i : 8 - i; /* position in the order of ticks 0 and 1 */
        uint64_t t0 = 100 * (p + 2), t1 = 100 * (p + 12), t2 = 100 * (p + 22);
        const cp_task_stats *st = &f.s.stats[i];
        if (i >= 7) { /* ran in all three ticks */
            CHECK(st->runs == 3 && st->exec_ns_sum == t0 + t1 + t2 && st->exec_ns_max == t2);
            CHECK(rd32(&f, 4 * i) == 3);
        } else if (i == 6) { /* the faulting job: its time, no run */
            CHECK(st->runs == 0 && st->exec_ns_sum == 2500 && st->exec_ns_max == 2500);
        } else { /* ticks 0 and 1 only */
            CHECK(st->runs == 2 && st->exec_ns_sum == t0 + t1 && st->exec_ns_max == t1);
            CHECK(rd32(&f, 4 * i) == 2);
        }
        CHECK(st->skipped == 0 && st->overruns == 0);
        /* tick 2 published every job of tick 1; only tasks 9, 8, 7 were released again */
        CHECK(f.s.state[i].pending == (i >= 7) && f.s.state[i].remaining_ns == 0);
    }
    /* after a reset the same again: the guard is armed afresh */
    cp_sched_reset(&f.s);
    clock.now = 0;
    clock.calls = 0;
    cp_sched_advance(&f.s, 3);
    fault = cp_sched_fault(&f.s);
    CHECK(fault != NULL && fault->task == 6 && clock.calls == 25 &&
          f.s.stats[9].exec_ns_sum == 3600 && f.s.stats[0].exec_ns_sum == 3000);
    fx_end(&f);
}

static int not_called;

static int never_run(void *ctx, cp_guard_body_fn body, void *arg, cp_fault *fault)
{
    (void)ctx;
    (void)fault;
    not_called = 0;
    return body(arg, NULL, NULL);
}

/* guard_run is ABI 5: a config of ABI 3/4 size ends before it, and its value there is not
 * read; a config shorter than that is refused. */
static void test_config_sizes(void)
{
    sb b;
    sb_init(&b, 16);
    inc_task(&b, 0, 0, 1, 1000, 0, 0, 0);
    fx f;
    if (fx_load(&f, &b) != CP_OK) {
        CHECK(0);
        return;
    }
    cp_sched_config cfg = default_config(1000);
    cfg.guard_run = never_run; /* beyond struct_size: must not be used */
    not_called = 1;
    cfg.struct_size = (uint32_t)CP_SCHED_CONFIG_SIZE_ABI3;
    memset(&f.s, 0, sizeof(f.s));
    f.s.struct_size = sizeof(f.s);
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_OK);
    CHECK(f.s.cfg.guard_run == NULL && f.s.cfg.struct_size == sizeof(cp_sched_config));
    cp_sched_advance(&f.s, 3);
    CHECK(rd32(&f, 0) == 3 && f.s.stats[0].runs == 3 && not_called);
    cfg.struct_size = (uint32_t)CP_SCHED_CONFIG_SIZE_ABI3 - 8;
    CHECK_STATUS(cp_sched_init(&f.s, &f.prog, &cfg, &f.err), CP_ERR_ARGUMENT);
    fx_end(&f);
}

static void test_budgets(void)
{
    cp_task_entry t;
    memset(&t, 0, sizeof(t));
    CHECK(cp_task_budget_ns(&t, 10, 0, 777) == 777);      /* on request */
    t.period_ns = 1000;
    CHECK(cp_task_budget_ns(&t, 10, 0, 777) == 10000);    /* period */
    CHECK(cp_task_budget_ns(&t, 10, 50000, 777) == 50000); /* at least min */
    t.wcet_ns = 300;
    CHECK(cp_task_budget_ns(&t, 10, 0, 0) == 3000);       /* wcet */
    t.budget_ns = 40;
    CHECK(cp_task_budget_ns(&t, 3, 0, 0) == 120);         /* budget */
    CHECK(cp_task_budget_ns(&t, 0, 50000, 777) == 0);     /* factor 0: no limit */
    t.budget_ns = 0xffffffffu;
    CHECK(cp_task_budget_ns(&t, 0xffffffffu, 0, 0) == 0xffffffffull * 0xffffffffull);
}

/* A program replaced by one that drives PWM 0 too: only GPIO 1 goes safe; the link timeout
 * field reaches the task table. */
static void test_release_outputs(void)
{
    static const uint8_t ret[] = {0xc3};
    sb b;
    fault_program(&b, ret, sizeof(ret), 0);
    sb_task_ext(&b, 0, 0, 250000000);
    io_sim io;
    memset(&io, 0, sizeof(io));
    cp_sched_config cfg = default_config(1000);
    cfg.io_write = sim_write;
    cfg.io_ctx = &io;
    fx f, g;
    if (fx_start(&f, &b, &cfg) != 0) {
        return;
    }
    io.s = &f.s;
    CHECK(f.prog.tasks[0].link_timeout_ns == 250000000 && f.prog.tasks[1].budget_ns == 0);
    sb c;
    sb_init(&c, 64);
    c.ext = 1;
    inc_task(&c, 0, 0, 1, 1000, 0, 0, 0);
    sb_binding(&c, 0, 2, CP_IO_PWM, 0, 3, 0);
    if (fx_start(&g, &c, &cfg) != 0) {
        fx_end(&f);
        return;
    }
    io.ch[CP_IO_PWM][0] = io.ch[CP_IO_GPIO][1] = 0.5;
    cp_sched_release_outputs(&f.s, &g.prog);
    CHECK(io.ch[CP_IO_PWM][0] == 0.5 && io.ch[CP_IO_GPIO][1] == 1.0);
    cp_sched_release_outputs(&f.s, NULL);
    CHECK(io.ch[CP_IO_PWM][0] == 0.25);
    fx_end(&g);
    fx_end(&f);

    /* a safe value that is not finite is rejected at load time */
    put_f64(b.bindings[0] + 16, __builtin_inf());
    CHECK_STATUS(fx_load(&f, &b), CP_ERR_LAYOUT);
    put_f64(b.bindings[0] + 16, 0.0);
    tb_put32(b.tasks[0] + 28, 1); /* reserved */
    CHECK_STATUS(fx_load(&f, &b), CP_ERR_LAYOUT);
}

int main(int argc, char **argv)
{
    rng_state = 0x853c49e6748fea9bull;
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
#if defined(__x86_64__)
    test_let_visibility();
    test_multi_rate();
    test_priority_order();
    test_overload();
    test_overrun();
    test_io_bindings();
    test_feeds();
    test_trace();
    test_trace_ranges_merged();
    test_reset();
    test_clock_modes();
    test_init_errors();
    test_tables_at_load();
    test_random_against_model();
    test_plan_against_ticks();
    for (int per_tick = 0; per_tick < 2; per_tick++) {
        test_fault_contained(per_tick);
        test_fault_timeout(per_tick);
        fault_in_the_fourth_job(per_tick);
    }
    fault_in_the_fourth_job(2);
    test_config_sizes();
    test_budgets();
    test_release_outputs();
#else
    printf("test_sched: not an x86_64 host, the chains cannot run; skipped\n");
#endif
    printf("test_sched: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
