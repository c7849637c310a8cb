/* Unit tests of the protocol server (runner/src/server.c, docs/protocol.md) with real x86_64
 * task code: every command's happy path, every error code, resumed uploads, replay of a
 * duplicate seq, a corrupted commit keeping the old program, STREAM events and the ring, and
 * READ/WRITE racing a tick thread through the embedder's lock. Run under ASan/UBSan. */
#include "server_fixture.h"

#include <math.h>
#include "check.h"

/* Every request must get exactly one response (same seq and command), whatever the split. */
static fx_reply R;
static fx_reply EV[256];
static int nev;
static void collect(fx *f, int *responses)
{
    fx_reply *r = malloc(sizeof(*r));
    while (fx_next(f, r)) {
        if (r->flags & CP_FLAG_EVENT) {
            if (nev < (int)(sizeof(EV) / sizeof(EV[0]))) {
                EV[nev++] = *r;
            }
        } else {
            R = *r;
            (*responses)++;
        }
    }
    free(r);
}

static void feed_split(fx *f, const uint8_t *w, size_t n)
{
    size_t at = 0;
    while (at < n) {
        size_t chunk = below(4) == 0 ? 1 : 1 + below(300);
        if (chunk > n - at) {
            chunk = n - at;
        }
        cp_server_feed(&f->srv, w + at, chunk);
        at += chunk;
    }
}

/* Sends a request with an explicit seq; returns the error code (0 for success). */
static int req_seq(fx *f, uint16_t seq, uint8_t cmd, const void *p, size_t n)
{
    static uint8_t wire[CP_WIRE_MAX(70000)];
    size_t w = fx_frame(wire, sizeof(wire), 1, 0, seq, cmd, p, n);
    feed_split(f, wire, w);
    int responses = 0;
    collect(f, &responses);
    CHECK(responses == 1);
    CHECK(R.seq == seq && R.command == cmd);
    CHECK(R.flags & CP_FLAG_RESPONSE);
    if (R.flags & CP_FLAG_ERROR) {
        CHECK(R.len >= 8 && R.len <= 8 + CP_ERROR_MESSAGE_MAX);
        return R.p[0];
    }
    return 0;
}

static int req(fx *f, uint8_t cmd, const void *p, size_t n)
{
    return req_seq(f, f->seq++, cmd, p, n);
}

static uint32_t err_detail(void)
{
    return tb_get32(R.p + 4);
}

static uint16_t g16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint64_t g64(const uint8_t *p)
{
    return tb_get32(p) | (uint64_t)tb_get32(p + 4) << 32;
}

/* payload builder */
typedef struct pb {
    uint8_t b[70000];
    size_t n;
} pb;

static pb P;

static void pb_reset(void)
{
    P.n = 0;
}

static void pb8(uint8_t v)
{
    P.b[P.n++] = v;
}

static void pb16(uint16_t v)
{
    tb_put16(P.b + P.n, v);
    P.n += 2;
}

static void pb32(uint32_t v)
{
    tb_put32(P.b + P.n, v);
    P.n += 4;
}

static void pb64(uint64_t v)
{
    pb32((uint32_t)v);
    pb32((uint32_t)(v >> 32));
}

static void pbf64(double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    pb64(v);
}

static void pbbytes(const void *p, size_t n)
{
    memcpy(P.b + P.n, p, n);
    P.n += n;
}

static int send_p(fx *f, uint8_t cmd)
{
    return req(f, cmd, P.b, P.n);
}

/* ---- protocol-level helpers */

static int upload(fx *f, const uint8_t *img, size_t len, uint32_t crc, size_t chunk)
{
    pb_reset();
    pb32((uint32_t)len);
    pb32(crc);
    int e = send_p(f, CP_CMD_LOAD_BEGIN);
    if (e != 0) {
        return e;
    }
    size_t max_chunk = tb_get32(R.p);
    CHECK(max_chunk == f->cfg.max_payload - CP_AUTH_TRAILER - 4u);
    chunk = chunk < max_chunk ? chunk : max_chunk;
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        pb_reset();
        pb32((uint32_t)off);
        pbbytes(img + off, n);
        e = send_p(f, CP_CMD_LOAD_CHUNK);
        CHECK(e == 0);
        CHECK(tb_get32(R.p) == off + n);
    }
    return req(f, CP_CMD_LOAD_COMMIT, NULL, 0);
}

static uint32_t image_crc(const tb_image *img)
{
    return tb_get32(img->bytes + img->len - 4);
}

static int load_program(fx *f, uint32_t variant)
{
    tb_image img;
    pg_build(&img, variant);
    return upload(f, img.bytes, img.len, image_crc(&img), 200);
}

static int32_t read_i32(fx *f, uint32_t off)
{
    pb_reset();
    pb32(off);
    pb16(4);
    int e = send_p(f, CP_CMD_READ);
    CHECK(e == 0 && R.len == 4);
    return (int32_t)tb_get32(R.p);
}

static int write_i32(fx *f, uint32_t off, int32_t v)
{
    pb_reset();
    pb32(off);
    pb16(4);
    pb32((uint32_t)v);
    return send_p(f, CP_CMD_WRITE);
}

static void ticks(fx *f, int n)
{
    for (int i = 0; i < n; i++) {
        fx_lock(f);
        cp_server_tick(&f->srv);
        fx_unlock(f);
    }
}

static fx *new_fx(int slots)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, slots);
    CHECK(fx_start(f) == CP_OK);
    return f;
}

static void free_fx(fx *f)
{
    fx_close(f);
    free(f);
}

/* ---- tests */

static void test_init_errors(void)
{
    fx *f = malloc(sizeof(*f));
    cp_error e = tb_error();
    fx_config(f, 0);
    f->cfg.work_size = 100;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    f->cfg.ring_size = 3000;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    f->cfg.max_payload = 64;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    f->cfg.write = NULL;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    f->cfg.unlock = NULL;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    f->cfg.slot_mem[0] = f->staging;
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_ERR_ARGUMENT);
    fx_config(f, 0);
    CHECK(cp_server_init(&f->srv, &f->cfg, &e) == CP_OK);
    fx_close(f);
    free(f);
}

/* HELLO's fields (docs/protocol.md, protocol 2) */
enum { HELLO_STATE = 24, HELLO_FLAGS = 25, HELLO_CRC = 26, HELLO_TICKS = 30, HELLO_KINDS = 38,
       HELLO_CHANNELS = 39 };

static void test_hello(void)
{
    fx *f = new_fx(0);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0);
    CHECK(R.len == HELLO_CHANNELS + 2 * CP_IO_KIND_COUNT + strlen("test-runner"));
    CHECK(g16(R.p) == CP_PROTO_VERSION && g16(R.p + 2) == CP_RUNNER_ABI_VERSION &&
          g16(R.p + 4) == CP_ARCH_X86_64 && g16(R.p + 6) == CP_IMAGE_FORMAT_VERSION &&
          g16(R.p + 8) == FX_MAXP &&
          g16(R.p + 10) == 32);
    CHECK(tb_get32(R.p + 12) == UINT32_MAX && tb_get32(R.p + 16) == UINT32_MAX);
    CHECK(tb_get32(R.p + 20) == 0);
    CHECK(R.p[HELLO_KINDS] == CP_IO_KIND_COUNT);
    for (uint32_t k = 0; k < CP_IO_KIND_COUNT; k++) {
        CHECK(g16(R.p + HELLO_CHANNELS + 2 * k) == f->cfg.channels[k]);
    }
    CHECK(g16(R.p + HELLO_CHANNELS) == 4 && g16(R.p + HELLO_CHANNELS + 2) == 4 &&
          g16(R.p + HELLO_CHANNELS + 4) == 2 && g16(R.p + HELLO_CHANNELS + 6) == 8);
    CHECK(R.p[HELLO_STATE] == CP_SERVER_EMPTY && R.p[HELLO_FLAGS] == CP_SERVER_FLAG_SIMULATED_IO);
    CHECK(tb_get32(R.p + HELLO_CRC) == 0 && g64(R.p + HELLO_TICKS) == 0);
    CHECK(memcmp(R.p + HELLO_CHANNELS + 2 * CP_IO_KIND_COUNT, "test-runner", 11) == 0);
    /* HELLO without host_version */
    CHECK(req(f, CP_CMD_HELLO, NULL, 0) == CP_PERR_BAD_PAYLOAD);

    /* after a load: state, tick and CRC */
    tb_image img;
    pg_build(&img, 0);
    CHECK(load_program(f, 0) == 0);
    CHECK(tb_get32(R.p) == image_crc(&img) && g16(R.p + 4) == 2 && g16(R.p + 6) == PG_PORTS);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0);
    CHECK(R.p[HELLO_STATE] == CP_SERVER_STOPPED && tb_get32(R.p + 20) == 1000000 &&
          tb_get32(R.p + HELLO_CRC) == image_crc(&img));
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 7);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0);
    CHECK(R.p[HELLO_STATE] == CP_SERVER_RUNNING && g64(R.p + HELLO_TICKS) == 7);
    free_fx(f);
}

static void test_upload(void)
{
    fx *f = new_fx(0);
    tb_image img;
    pg_build(&img, 0);
    uint32_t crc = image_crc(&img);

    /* LOAD_CHUNK / LOAD_COMMIT without LOAD_BEGIN */
    pb_reset();
    pb32(0);
    pb8(1);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == CP_PERR_BAD_STATE);
    CHECK(req(f, CP_CMD_LOAD_COMMIT, NULL, 0) == CP_PERR_BAD_STATE);
    CHECK(req(f, CP_CMD_LOAD_STATUS, NULL, 0) == 0 && tb_get32(R.p) == 0 &&
          tb_get32(R.p + 4) == 0);

    /* LOAD_BEGIN errors */
    pb_reset();
    pb32((uint32_t)img.len);
    CHECK(send_p(f, CP_CMD_LOAD_BEGIN) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb32(FX_STAGING + 1);
    pb32(0);
    CHECK(send_p(f, CP_CMD_LOAD_BEGIN) == CP_PERR_TOO_LARGE && err_detail() == FX_STAGING);
    pb_reset();
    pb32(0);
    pb32(0);
    CHECK(send_p(f, CP_CMD_LOAD_BEGIN) == CP_PERR_BAD_PAYLOAD);

    pb_reset();
    pb32((uint32_t)img.len);
    pb32(crc);
    CHECK(send_p(f, CP_CMD_LOAD_BEGIN) == 0);
    /* chunk 0, then chunk 2 is "lost in transit": chunk 3 arrives -> GAP with the resume point */
    size_t c = 100;
    pb_reset();
    pb32(0);
    pbbytes(img.bytes, c);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0 && tb_get32(R.p) == c);
    pb_reset();
    pb32((uint32_t)(2 * c));
    pbbytes(img.bytes + 2 * c, c);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == CP_PERR_GAP && err_detail() == c);
    /* the host asks where to continue (as after a disconnect) */
    CHECK(req(f, CP_CMD_LOAD_STATUS, NULL, 0) == 0 && tb_get32(R.p) == img.len &&
          tb_get32(R.p + 4) == c);
    /* a replayed chunk inside the prefix: acknowledged without effect */
    pb_reset();
    pb32(10);
    pbbytes(img.bytes + 10, 50);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0 && tb_get32(R.p) == c);
    /* a chunk overlapping the end of the prefix extends it */
    pb_reset();
    pb32((uint32_t)(c - 20));
    pbbytes(img.bytes + c - 20, c + 20);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0 && tb_get32(R.p) == 2 * c);
    /* commit before the end */
    CHECK(req(f, CP_CMD_LOAD_COMMIT, NULL, 0) == CP_PERR_BAD_STATE && err_detail() == 2 * c);
    /* a chunk past total_size; a chunk without an offset */
    pb_reset();
    pb32((uint32_t)(2 * c));
    pbbytes(img.bytes, img.len);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == CP_PERR_BAD_PAYLOAD && err_detail() == img.len);
    pb_reset();
    pb16(0);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == CP_PERR_BAD_PAYLOAD);
    /* the rest, an empty chunk at the end, commit */
    pb_reset();
    pb32((uint32_t)(2 * c));
    pbbytes(img.bytes + 2 * c, img.len - 2 * c);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0 && tb_get32(R.p) == img.len);
    pb_reset();
    pb32((uint32_t)img.len);
    CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0 && tb_get32(R.p) == img.len);
    CHECK(req(f, CP_CMD_LOAD_STATUS, NULL, 0) == 0 && tb_get32(R.p + 4) == img.len);
    CHECK(req(f, CP_CMD_LOAD_COMMIT, "x", 1) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_LOAD_COMMIT, NULL, 0) == 0);
    CHECK(tb_get32(R.p) == crc && g16(R.p + 4) == 2 && g16(R.p + 6) == PG_PORTS);
    CHECK(f->notify_state == 1);
    /* the upload is finished */
    CHECK(req(f, CP_CMD_LOAD_STATUS, NULL, 0) == 0 && tb_get32(R.p) == 0);
    CHECK(req(f, CP_CMD_LOAD_COMMIT, NULL, 0) == CP_PERR_BAD_STATE);
    CHECK(read_i32(f, PG_IN) == 100);
    free_fx(f);
}

/* A commit that fails for any reason leaves the running program running, unchanged. */
static void test_bad_commit_keeps_program(int slots)
{
    fx *f = new_fx(slots);
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 5);
    CHECK(read_i32(f, PG_A) == 4);
    tb_image good;
    pg_build(&good, 1);
    uint32_t good_crc = image_crc(&good);

    /* corrupted in transit: LOAD_BEGIN announced the good CRC */
    tb_image bad = good;
    bad.bytes[200] ^= 0x10;
    CHECK(upload(f, bad.bytes, bad.len, good_crc, 300) == CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_CRC);
    /* transferred intact (LOAD_BEGIN matches the bytes) but the trailer is stale: the core's
     * CRC check (fed the CRC the server computed) rejects it */
    CHECK(upload(f, bad.bytes, bad.len, cp_crc32(0, bad.bytes, bad.len - 4), 300) ==
          CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_CRC);
    CHECK(R.len > 8 && memmem(R.p + 8, R.len - 8u, "CRC-32 mismatch", 15) != NULL);
    /* consistently corrupted (CRC fixed): the core rejects it */
    bad = good;
    tb_put32(bad.bytes + 16, 0x7fffffff); /* code_size */
    tb_fix_crc(bad.bytes, bad.len);
    CHECK(upload(f, bad.bytes, bad.len, image_crc(&bad), 300) == CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_LAYOUT);
    /* another architecture */
    bad = good;
    tb_put16(bad.bytes + 8, CP_ARCH_CORTEX_M7);
    tb_fix_crc(bad.bytes, bad.len);
    CHECK(upload(f, bad.bytes, bad.len, image_crc(&bad), 300) == CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_ARCH);
    CHECK(R.len > 8 && memmem(R.p + 8, R.len - 8u, "cortex-m7", 9) != NULL);
    /* not an image at all, shorter than a header */
    CHECK(upload(f, (const uint8_t *)"hello", 5, cp_crc32(0, (const uint8_t *)"h", 1), 300) ==
          CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_TRUNCATED);

    /* still running the old program: ticks go on, data and HELLO unchanged */
    ticks(f, 3);
    CHECK(read_i32(f, PG_A) == 7 && read_i32(f, PG_IN) == 100);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == CP_SERVER_RUNNING);

    /* an upload longer than the header's total_size is rejected (LAYOUT, detail = the
     * total_size) and the old program keeps running */
    tb_image longer = good;
    longer.bytes[longer.len] = 0xa5;
    CHECK(upload(f, longer.bytes, longer.len + 1, cp_crc32(0, longer.bytes, longer.len - 3),
                 300) == CP_PERR_IMAGE_INVALID);
    CHECK(R.p[1] == CP_ERR_LAYOUT && cp_le32(R.p + 4) == longer.len);
    ticks(f, 2);
    CHECK(read_i32(f, PG_A) == 9);

    /* a good commit replaces it (stopped); slots alternate over several commits */
    for (uint32_t v = 1; v <= 3; v++) {
        CHECK(load_program(f, v) == 0);
        CHECK(read_i32(f, PG_IN) == (int32_t)(100 + v) && read_i32(f, PG_A) == 0);
        pb_reset();
        pb16(1);
        CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == CP_SERVER_STOPPED);
        CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
        ticks(f, 2);
        CHECK(read_i32(f, PG_A) == 1);
    }
    free_fx(f);
}

static void test_min_tick(void)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.min_tick_ns = 2000000;
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == CP_PERR_TOO_LARGE && err_detail() == 2000000);
    fx_close(f);
    fx_config(f, 0);
    f->cfg.tick_quantum_ns = 300000; /* 1 ms is no multiple */
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == CP_PERR_TOO_LARGE && err_detail() == 300000);
    fx_close(f);
    fx_config(f, 0);
    f->cfg.min_tick_ns = 1000000;
    f->cfg.tick_quantum_ns = 250000;
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == 0);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == CP_SERVER_STOPPED);
    free_fx(f);
}

/* LOAD_COMMIT refuses an image binding a channel the runner lacks (HELLO's counts) or one its
 * hardware cannot serve in that direction (cfg.io_check); the running program stays. */
static const char *refuse_pwm_out(void *ctx, const cp_io_binding *b)
{
    (void)ctx;
    return b->kind == CP_IO_PWM && b->direction == CP_DIR_OUTPUT ? "no PWM on this board" : NULL;
}

static void test_io_bindings_checked(void)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.channels[CP_IO_ADC - 1] = 0; /* the program samples ADC 0 (binding 0) */
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == CP_PERR_OUT_OF_RANGE && err_detail() == 0);
    CHECK(R.len > 8 && memmem(R.p + 8, R.len - 8u, "ADC channel 0 does not exist", 28) != NULL);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == CP_SERVER_EMPTY);
    fx_close(f);

    fx_config(f, 0);
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 2);
    f->srv.cfg.io_check = refuse_pwm_out; /* as if configured so from the start */
    CHECK(load_program(f, 1) == CP_PERR_OUT_OF_RANGE && err_detail() == 1);
    CHECK(R.len > 8 && memmem(R.p + 8, R.len - 8u, "(output to PWM channel 0) refused: no PWM "
                              "on this board", 50) != NULL);
    ticks(f, 1);
    CHECK(read_i32(f, PG_IN) == 100 && read_i32(f, PG_A) == 2); /* the old program runs on */
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == CP_SERVER_RUNNING);
    free_fx(f);
}

static void test_run_read_write(void)
{
    fx *f = new_fx(0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == CP_PERR_BAD_STATE);
    CHECK(write_i32(f, PG_IN, 1) == CP_PERR_BAD_STATE);
    pb_reset();
    pb32(0);
    pb16(4);
    CHECK(send_p(f, CP_CMD_READ) == CP_PERR_BAD_STATE);
    CHECK(load_program(f, 0) == 0);
    CHECK(f->notify_state == 1);
    /* stopped: ticks do nothing */
    CHECK(cp_server_tick(&f->srv) == 0);
    CHECK(req(f, CP_CMD_START, "x", 1) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    CHECK(f->notify_state == 2);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0); /* already running: no change */
    CHECK(f->notify_state == 2);
    ticks(f, 1); /* t = 0: task 0 released (in 100 -> out_priv 101), not yet published */
    CHECK(read_i32(f, PG_OUT) == 0 && read_i32(f, PG_OUT_PRIV) == 101);
    /* a write between ticks is picked up at the next release */
    CHECK(write_i32(f, PG_IN, 41) == 0);
    ticks(f, 1); /* t = 1 ms: publish 101, release with 41 */
    CHECK(read_i32(f, PG_OUT) == 101);
    ticks(f, 1);
    CHECK(read_i32(f, PG_OUT) == 42 && read_i32(f, PG_A) == 2);
    CHECK(f->io[CP_IO_PWM - 1][0] == 42.0); /* the output binding drove PWM 0 */

    /* READ of several ranges, concatenated */
    pb_reset();
    pb32(PG_OUT);
    pb16(4);
    pb32(PG_A);
    pb16(8);
    pb32(0);
    pb16(0);
    CHECK(send_p(f, CP_CMD_READ) == 0 && R.len == 12);
    CHECK(tb_get32(R.p) == 42 && tb_get32(R.p + 4) == 2 && tb_get32(R.p + 8) == 2);
    CHECK(req(f, CP_CMD_READ, NULL, 0) == 0 && R.len == 0);
    /* READ errors */
    CHECK(req(f, CP_CMD_READ, "12345", 5) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb32(0);
    pb16(4);
    pb32(PG_DATA_SIZE - 2);
    pb16(4);
    CHECK(send_p(f, CP_CMD_READ) == CP_PERR_OUT_OF_RANGE && err_detail() == 1);
    pb_reset();
    pb32(0xfffffffeu);
    pb16(0xffff);
    CHECK(send_p(f, CP_CMD_READ) == CP_PERR_OUT_OF_RANGE);
    pb_reset();
    for (int i = 0; i < 20; i++) {
        pb32(0);
        pb16(PG_DATA_SIZE);
    }
    CHECK(send_p(f, CP_CMD_READ) == CP_PERR_TOO_LARGE && err_detail() == FX_ROOM);

    /* WRITE: only input ports; several adjacent input ports may be covered at once */
    CHECK(write_i32(f, PG_OUT, 5) == CP_PERR_NOT_WRITABLE);
    CHECK(write_i32(f, PG_COUNTER, 5) == CP_PERR_NOT_WRITABLE);
    CHECK(write_i32(f, PG_IN_PRIV, 5) == CP_PERR_NOT_WRITABLE);
    CHECK(write_i32(f, 36, 5) == CP_PERR_NOT_WRITABLE);
    pb_reset();
    pb32(PG_IN2);
    pb16(12);
    pb32(7);
    pb32(0x40490fdbu); /* 3.14159f */
    pb32(0x3f800000u);
    CHECK(send_p(f, CP_CMD_WRITE) == 0);
    CHECK(read_i32(f, PG_IN2) == 7 && read_i32(f, PG_IN3) == 0x40490fdb);
    pb_reset();
    pb32(PG_IN3);
    pb16(8); /* in3 + adc: both inputs */
    pb32(1);
    pb32(2);
    CHECK(send_p(f, CP_CMD_WRITE) == 0);
    pb_reset(); /* [36, 44): 36 is no port */
    pb32(36);
    pb16(8);
    pb64(0);
    CHECK(send_p(f, CP_CMD_WRITE) == CP_PERR_NOT_WRITABLE && err_detail() == 0);
    /* a write with a good and a bad entry changes nothing */
    pb_reset();
    pb32(PG_IN);
    pb16(4);
    pb32(999);
    pb32(PG_B);
    pb16(4);
    pb32(999);
    CHECK(send_p(f, CP_CMD_WRITE) == CP_PERR_NOT_WRITABLE && err_detail() == 1);
    CHECK(read_i32(f, PG_IN) == 41);
    pb_reset();
    pb32(PG_DATA_SIZE);
    pb16(4);
    pb32(1);
    CHECK(send_p(f, CP_CMD_WRITE) == CP_PERR_OUT_OF_RANGE);
    pb_reset();
    pb32(PG_IN);
    pb16(4);
    pb16(1);
    CHECK(send_p(f, CP_CMD_WRITE) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_WRITE, "abc", 3) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_WRITE, NULL, 0) == 0);

    /* STOP settles and freezes time; START resumes */
    CHECK(req(f, CP_CMD_STOP, NULL, 0) == 0);
    uint64_t t = cp_server_ticks(&f->srv);
    CHECK(cp_server_tick(&f->srv) == 0 && cp_server_ticks(&f->srv) == t);
    CHECK(req(f, CP_CMD_STOP, NULL, 0) == 0);
    CHECK(req(f, CP_CMD_STOP, "x", 1) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 2);
    CHECK(cp_server_ticks(&f->srv) == t + 2);

    /* RESET 0: time 0, initial data; RESET 1: unloaded */
    uint32_t gen = cp_server_generation(&f->srv);
    pb_reset();
    pb8(0);
    CHECK(send_p(f, CP_CMD_RESET) == 0);
    CHECK(cp_server_generation(&f->srv) != gen);
    CHECK(cp_server_ticks(&f->srv) == 0 && read_i32(f, PG_IN) == 100 && read_i32(f, PG_A) == 0);
    CHECK(cp_server_state(&f->srv) == CP_SERVER_RUNNING);
    pb_reset();
    pb8(2);
    CHECK(send_p(f, CP_CMD_RESET) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_RESET, NULL, 0) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb8(1);
    CHECK(send_p(f, CP_CMD_RESET) == 0);
    CHECK(cp_server_state(&f->srv) == CP_SERVER_EMPTY && cp_server_tick(&f->srv) == 0);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && R.p[HELLO_STATE] == 0 && tb_get32(R.p + HELLO_CRC) == 0 &&
          tb_get32(R.p + 20) == 0);
    pb_reset();
    pb8(0);
    CHECK(send_p(f, CP_CMD_RESET) == CP_PERR_BAD_STATE);
    pb_reset();
    pb8(1);
    CHECK(send_p(f, CP_CMD_RESET) == 0);
    free_fx(f);
}

static void test_stats(void)
{
    fx *f = new_fx(0);
    CHECK(req(f, CP_CMD_STATS, NULL, 0) == 0);
    CHECK(R.len == 26 + 12 + 40 + 20 && g64(R.p) == 0 && g16(R.p + 24) == 0);
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 10);
    f->rt.late_ticks = 3;
    f->rt.jitter_max_ns = 900;
    f->rt.jitter_p99_ns = 800;
    f->rt.jitter_p50_ns = 400;
    f->rt.link = (cp_server_link_drops){5, 7, 2, 0x100000001ull}; /* the embedder's discards */
    /* a dropped frame and a frame that is not a request both count as bad */
    static const uint8_t junk[] = {0x05, 1, 2, 3, 4, 0};
    cp_server_feed(&f->srv, junk, sizeof(junk));
    uint8_t wire[64];
    size_t w = fx_frame(wire, sizeof(wire), 1, CP_FLAG_RESPONSE, 99, CP_CMD_START, NULL, 0);
    cp_server_feed(&f->srv, wire, w);
    CHECK(f->wire_len == 0); /* never answered */
    CHECK(req(f, CP_CMD_STATS, NULL, 0) == 0);
    CHECK(R.len == 26 + 2 * 40 + 12 + 40 + 20);
    CHECK(g64(R.p) == 10 && tb_get32(R.p + 8) == 2 && tb_get32(R.p + 12) == 3 &&
          tb_get32(R.p + 16) == 900 && tb_get32(R.p + 20) == 800 && g16(R.p + 24) == 2);
    const uint8_t *t0 = R.p + 26, *t1 = R.p + 66, *tail = R.p + 106;
    CHECK(g64(t0) == 10 && g64(t0 + 8) == 0 && g64(t0 + 16) == 0);
    CHECK(g64(t0 + 24) > 0 && g64(t0 + 32) >= g64(t0 + 24)); /* fake clock: 1 us per read */
    CHECK(g64(t1) == 5); /* task 1: 2 ms period, 1 ms offset: t = 1, 3, 5, 7, 9 */
    CHECK(tb_get32(tail) == 400 && tb_get32(tail + 4) == 0 && g16(tail + 8) == 0 &&
          g16(tail + 10) == 2);
    const uint8_t *link = tail + 12 + 40; /* appended after the fault record */
    CHECK(tb_get32(link) == 5 && tb_get32(link + 4) == 7 && tb_get32(link + 8) == 2 &&
          g64(link + 12) == 0x100000001ull);
    /* paging */
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_STATS) == 0 && g16(R.p + 24) == 1 && g64(R.p + 26) == 5);
    CHECK(g16(R.p + 66 + 8) == 1 && g16(R.p + 66 + 10) == 2);
    pb_reset();
    pb16(7);
    CHECK(send_p(f, CP_CMD_STATS) == 0 && g16(R.p + 24) == 0);
    CHECK(req(f, CP_CMD_STATS, "abc", 3) == CP_PERR_BAD_PAYLOAD);
    free_fx(f);
}

static void test_stream(void)
{
    fx *f = new_fx(0);
    pb_reset();
    pb16(1);
    pb32(PG_A);
    pb16(8);
    CHECK(send_p(f, CP_CMD_STREAM) == CP_PERR_BAD_STATE);
    CHECK(load_program(f, 0) == 0);
    pb_reset();
    pb16(1);
    pb32(PG_A);
    pb16(8);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    nev = 0;
    /* no events while stopped */
    ticks(f, 3);
    cp_server_flush(&f->srv);
    int responses = 0;
    collect(f, &responses);
    CHECK(nev == 0);
    /* every 2nd tick, starting with the first after the request */
    pb_reset();
    pb16(2);
    pb32(PG_A);
    pb16(8);
    pb32(PG_OUT);
    pb16(4);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 7);
    CHECK(f->notify_output == 4);
    CHECK(cp_server_flush(&f->srv) > 0);
    collect(f, &responses);
    CHECK(responses == 0 && nev == 4);
    for (int i = 0; i < nev && i < 4; i++) {
        CHECK(EV[i].flags == CP_FLAG_EVENT && EV[i].command == CP_CMD_STREAM);
        CHECK(EV[i].seq == i && EV[i].len == 8 + 12);
        uint64_t tick = g64(EV[i].p);
        CHECK(tick == (uint64_t)(2 * i));
        /* after tick k, a and b hold the counter published at k: k (task 0 every tick) */
        CHECK(tb_get32(EV[i].p + 8) == tick && tb_get32(EV[i].p + 12) == tick);
    }
    CHECK(cp_server_flush(&f->srv) == 0);
    /* events pending when a response is sent go out right after it */
    nev = 0;
    ticks(f, 2); /* t = 7, 8 */
    CHECK(req(f, CP_CMD_LOAD_STATUS, NULL, 0) == 0);
    CHECK(nev == 1 && EV[0].seq == 4 && g64(EV[0].p) == 8);
    /* a full ring drops events (counted in STATS, the seq shows the gap) */
    nev = 0;
    ticks(f, 2 * 400);
    CHECK(req(f, CP_CMD_STATS, NULL, 0) == 0);
    uint32_t dropped = tb_get32(R.p + 26 + 2 * 40 + 4);
    CHECK(dropped > 0);
    CHECK(nev > 0 && nev < 400 && nev + (int)dropped == 400);
    /* the dropped events still took their seq numbers: a gap the host can see */
    nev = 0;
    ticks(f, 2);
    cp_server_flush(&f->srv);
    collect(f, &responses);
    CHECK(nev == 1 && EV[0].seq == 405 && g64(EV[0].p) == 810);
    /* a new subscription discards the old one's queued events: every STREAM event after its
     * response is of the new one (they followed the response, and a host took them as the
     * new subscription's rows) */
    nev = 0;
    ticks(f, 4); /* t = 811..814: the events of 812 and 814 queued, 12 bytes each */
    pb_reset();
    pb16(1);
    pb32(PG_A);
    pb16(4);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    ticks(f, 1);
    cp_server_flush(&f->srv);
    collect(f, &responses);
    CHECK(nev == 1 && EV[0].len == 8 + 4 && g64(EV[0].p) == 815 && EV[0].seq == 408);
    /* STREAM n = 0 stops */
    pb_reset();
    pb16(0);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    nev = 0;
    ticks(f, 5);
    CHECK(cp_server_flush(&f->srv) == 0);
    /* errors */
    CHECK(req(f, CP_CMD_STREAM, NULL, 0) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_STREAM, "\x01\x00\x01", 3) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb16(0);
    pb32(0);
    pb16(4);
    CHECK(send_p(f, CP_CMD_STREAM) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb16(1);
    for (int i = 0; i < 17; i++) {
        pb32(0);
        pb16(4);
    }
    CHECK(send_p(f, CP_CMD_STREAM) == CP_PERR_TOO_LARGE && err_detail() == 16);
    pb_reset();
    pb16(1);
    pb32(PG_DATA_SIZE - 3);
    pb16(4);
    CHECK(send_p(f, CP_CMD_STREAM) == CP_PERR_OUT_OF_RANGE);
    pb_reset();
    pb16(1);
    for (int i = 0; i < 16; i++) {
        pb32(0);
        pb16(PG_DATA_SIZE);
    }
    CHECK(send_p(f, CP_CMD_STREAM) == CP_PERR_TOO_LARGE && err_detail() == FX_ROOM - 8);
    /* a new commit ends the subscription */
    pb_reset();
    pb16(1);
    pb32(PG_A);
    pb16(4);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    CHECK(load_program(f, 1) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 3);
    CHECK(cp_server_flush(&f->srv) == 0);
    free_fx(f);
}

static void test_io(void)
{
    fx *f = new_fx(0);
    pb_reset();
    pb8(CP_IO_ADC);
    pb16(0);
    pbf64(2.5);
    pb8(CP_IO_ENCODER);
    pb16(1);
    pbf64(-7.0);
    CHECK(send_p(f, CP_CMD_IO_WRITE) == 0 && R.len == 0);
    CHECK(f->io[CP_IO_ADC - 1][0] == 2.5 && f->io[CP_IO_ENCODER - 1][1] == -7.0);
    pb_reset();
    pb8(CP_IO_ADC);
    pb16(0);
    pb8(CP_IO_ENCODER);
    pb16(1);
    pb8(CP_IO_GPIO);
    pb16(3);
    CHECK(send_p(f, CP_CMD_IO_READ) == 0 && R.len == 24);
    double v[3];
    memcpy(v, R.p, 24);
    CHECK(v[0] == 2.5 && v[1] == -7.0 && v[2] == 0.0);
    /* the program samples ADC 0 into its f32 input slot at each release of task 0 */
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 1);
    int32_t bits = read_i32(f, PG_ADC);
    float adc;
    memcpy(&adc, &bits, 4);
    CHECK(adc == 2.5f);
    ticks(f, 1);
    pb_reset();
    pb8(CP_IO_PWM);
    pb16(0);
    CHECK(send_p(f, CP_CMD_IO_READ) == 0);
    memcpy(v, R.p, 8);
    CHECK(v[0] == 101.0);
    /* errors */
    CHECK(req(f, CP_CMD_IO_READ, "ab", 2) == CP_PERR_BAD_PAYLOAD);
    CHECK(req(f, CP_CMD_IO_WRITE, "abcdefghij", 10) == CP_PERR_BAD_PAYLOAD);
    pb_reset();
    pb8(CP_IO_GPIO);
    pb16(0);
    pb8(5);
    pb16(0);
    CHECK(send_p(f, CP_CMD_IO_READ) == CP_PERR_OUT_OF_RANGE && err_detail() == 1);
    pb_reset();
    pb8(CP_IO_ENCODER);
    pb16(2); /* 2 encoders: 0 and 1 */
    CHECK(send_p(f, CP_CMD_IO_READ) == CP_PERR_OUT_OF_RANGE);
    pb_reset();
    pb8(0);
    pb16(0);
    pbf64(1.0);
    CHECK(send_p(f, CP_CMD_IO_WRITE) == CP_PERR_OUT_OF_RANGE);
    pb_reset();
    for (int i = 0; i < 200; i++) {
        pb8(CP_IO_ADC);
        pb16(0);
    }
    CHECK(send_p(f, CP_CMD_IO_READ) == CP_PERR_TOO_LARGE && err_detail() == FX_ROOM / 8);
    f->io_write_fail = 1;
    pb_reset();
    pb8(CP_IO_GPIO);
    pb16(0);
    pbf64(1.0);
    CHECK(send_p(f, CP_CMD_IO_WRITE) == CP_PERR_NOT_WRITABLE && err_detail() == 0);
    free_fx(f);
}

static void test_get_ports(void)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.max_payload = 128; /* force paging */
    CHECK(fx_start(f) == CP_OK);
    pb_reset();
    pb32(0);
    CHECK(send_p(f, CP_CMD_GET_PORTS) == CP_PERR_BAD_STATE);
    CHECK(load_program(f, 0) == 0);
    tb_image img;
    pg_build(&img, 0);
    uint8_t block[1024];
    uint32_t total = 0, got = 0;
    do {
        pb_reset();
        pb32(got);
        CHECK(send_p(f, CP_CMD_GET_PORTS) == 0);
        total = tb_get32(R.p);
        CHECK(R.len >= 4 && R.len - 4u <= 124u && total <= sizeof(block));
        memcpy(block + got, R.p + 4, R.len - 4u);
        got += R.len - 4u;
    } while (got < total && R.len > 4);
    CHECK(got == total && total == 8 + 16 * PG_PORTS + 31);
    CHECK(tb_get32(block) == PG_PORTS && tb_get32(block + 4) == 31);
    /* the ports and names exactly as in the image: find them there */
    const uint8_t *ports = memmem(img.bytes, img.len, block + 8, 16 * PG_PORTS);
    CHECK(ports != NULL);
    CHECK(memcmp(block + 8 + 16 * PG_PORTS, "in\0out\0a\0b\0counter\0in2\0in3\0adc", 31) == 0);
    pb_reset();
    pb32(total);
    CHECK(send_p(f, CP_CMD_GET_PORTS) == 0 && R.len == 4);
    pb_reset();
    pb32(total + 1);
    CHECK(send_p(f, CP_CMD_GET_PORTS) == CP_PERR_OUT_OF_RANGE && err_detail() == total);
    CHECK(req(f, CP_CMD_GET_PORTS, NULL, 0) == CP_PERR_BAD_PAYLOAD);
    /* a port table larger than the runner keeps */
    fx_close(f);
    fx_config(f, 0);
    f->cfg.ports_capacity = 100;
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == CP_PERR_TOO_LARGE && err_detail() == 100);
    CHECK(cp_server_state(&f->srv) == CP_SERVER_EMPTY);
    free_fx(f);
}

static void test_errors_and_replay(void)
{
    fx *f = new_fx(0);
    /* unknown command */
    CHECK(req(f, 99, NULL, 0) == CP_PERR_BAD_COMMAND && err_detail() == 99);
    CHECK(req(f, 0, NULL, 0) == CP_PERR_BAD_COMMAND);
    /* another frame version: answered (in frame version 1) with VERSION */
    uint8_t wire[256];
    size_t w = fx_frame(wire, sizeof(wire), 2, 0, 500, CP_CMD_HELLO, "\x02\x00", 2);
    cp_server_feed(&f->srv, wire, w);
    int responses = 0;
    collect(f, &responses);
    CHECK(responses == 1 && (R.flags & CP_FLAG_ERROR) && R.p[0] == CP_PERR_VERSION &&
          R.seq == 500 && err_detail() == 1);

    /* replay: the same side-effect request (same seq, same bytes) is not executed twice */
    pb_reset();
    pb8(CP_IO_GPIO);
    pb16(1);
    pbf64(1.0);
    int before = f->io_writes;
    CHECK(req_seq(f, 700, CP_CMD_IO_WRITE, P.b, P.n) == 0);
    CHECK(req_seq(f, 700, CP_CMD_IO_WRITE, P.b, P.n) == 0);
    CHECK(f->io_writes == before + 1 && f->srv.replays == 1);
    /* same seq, other content: a new request */
    pb_reset();
    pb8(CP_IO_GPIO);
    pb16(1);
    pbf64(0.0);
    CHECK(req_seq(f, 700, CP_CMD_IO_WRITE, P.b, P.n) == 0);
    CHECK(f->io_writes == before + 2);
    /* a replayed error is the same error */
    tb_image img;
    pg_build(&img, 0);
    pb_reset();
    pb32((uint32_t)img.len);
    pb32(image_crc(&img));
    CHECK(req_seq(f, 701, CP_CMD_LOAD_BEGIN, P.b, P.n) == 0);
    pb_reset();
    pb32(0);
    pbbytes(img.bytes, 300);
    CHECK(req_seq(f, 702, CP_CMD_LOAD_CHUNK, P.b, P.n) == 0 && tb_get32(R.p) == 300);
    /* the response was lost: the host retries the LOAD_BEGIN-like non-idempotent sequence */
    pb_reset();
    pb32((uint32_t)img.len);
    pb32(image_crc(&img));
    CHECK(req_seq(f, 703, CP_CMD_LOAD_BEGIN, P.b, P.n) == 0);
    CHECK(req_seq(f, 703, CP_CMD_LOAD_BEGIN, P.b, P.n) == 0);
    pb_reset();
    pb32(0);
    pbbytes(img.bytes, 300);
    CHECK(req_seq(f, 704, CP_CMD_LOAD_CHUNK, P.b, P.n) == 0);
    /* LOAD_BEGIN replayed after chunk 704 would reset the upload; only the last is cached */
    pb_reset();
    pb32(300);
    pbbytes(img.bytes + 300, img.len - 300);
    CHECK(req_seq(f, 705, CP_CMD_LOAD_CHUNK, P.b, P.n) == 0 && tb_get32(R.p) == img.len);
    CHECK(req_seq(f, 705, CP_CMD_LOAD_CHUNK, P.b, P.n) == 0 && tb_get32(R.p) == img.len);
    CHECK(req_seq(f, 706, CP_CMD_LOAD_COMMIT, NULL, 0) == 0);
    uint32_t gen = cp_server_generation(&f->srv);
    CHECK(req_seq(f, 706, CP_CMD_LOAD_COMMIT, NULL, 0) == 0); /* not a second commit */
    CHECK(cp_server_generation(&f->srv) == gen && tb_get32(R.p) == image_crc(&img));
    uint32_t replays = f->srv.replays;
    CHECK(req_seq(f, 707, CP_CMD_START, "x", 1) == CP_PERR_BAD_PAYLOAD);
    CHECK(req_seq(f, 707, CP_CMD_START, "x", 1) == CP_PERR_BAD_PAYLOAD);
    CHECK(f->srv.replays == replays + 1);
    /* read-only requests are executed again (fresh data), HELLO ends the replay window */
    CHECK(req_seq(f, 708, CP_CMD_START, NULL, 0) == 0);
    pb_reset();
    pb16(1);
    CHECK(req_seq(f, 709, CP_CMD_HELLO, P.b, P.n) == 0);
    ticks(f, 3);
    CHECK(req_seq(f, 709, CP_CMD_HELLO, P.b, P.n) == 0 && g64(R.p + HELLO_TICKS) == 3);
    CHECK(req_seq(f, 708, CP_CMD_START, NULL, 0) == 0);
    CHECK(f->srv.replays == replays + 1);
    free_fx(f);
}

/* READ and WRITE from the protocol thread while a tick thread runs the program: the lock
 * keeps each tick whole, so the two halves of one LET publication are always seen together. */
typedef struct race {
    fx *f;
    int stop;
    int ticks;
} race;

static void *tick_thread(void *arg)
{
    race *r = arg;
    while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
        fx_lock(r->f);
        if (cp_server_tick(&r->f->srv)) {
            __atomic_fetch_add(&r->ticks, 1, __ATOMIC_RELAXED);
        }
        fx_unlock(r->f);
    }
    return NULL;
}

static void test_concurrent_access(void)
{
    fx *f = new_fx(0);
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    pb_reset();
    pb16(50);
    pb32(PG_A);
    pb16(8);
    CHECK(send_p(f, CP_CMD_STREAM) == 0);
    race r = {f, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, tick_thread, &r);
    int torn = 0, reads = 0, stale = 0;
    nev = 0;
    int32_t last = 0;
    /* at least 3000 reads, and on until the tick thread has ticked (an unfair mutex, as
     * winpthreads' under wine, may let this thread take every turn for a while) */
    int i = 0, written = 0; /* the last value written: 2997 unless the loop waited on */
    for (; i < 3000 || (__atomic_load_n(&r.ticks, __ATOMIC_RELAXED) == 0 && i < 3000000); i++) {
        pb_reset();
        pb32(PG_A);
        pb16(4);
        pb32(PG_B);
        pb16(4);
        CHECK(send_p(f, CP_CMD_READ) == 0);
        int32_t a = (int32_t)tb_get32(R.p), b = (int32_t)tb_get32(R.p + 4);
        torn += a != b;
        stale += a < last;
        last = a;
        reads++;
        if (i % 3 == 0) {
            CHECK(write_i32(f, PG_IN, i) == 0);
            written = i;
        }
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    cp_server_flush(&f->srv);
    int responses = 0;
    collect(f, &responses);
    CHECK(torn == 0 && stale == 0 && reads == i && reads >= 3000);
    CHECK(r.ticks > 0);
    CHECK(f->locked == 0);
    for (int i = 0; i < nev; i++) {
        CHECK(tb_get32(EV[i].p + 8) == tb_get32(EV[i].p + 12));
    }
    /* the last write reached the program through a release */
    fx_lock(f);
    cp_server_tick(&f->srv);
    cp_server_tick(&f->srv);
    fx_unlock(f);
    CHECK(read_i32(f, PG_OUT) == written + 1);
    if (getenv("VERBOSE")) {
        printf("concurrent: %d ticks during %d reads, %d events\n", r.ticks, reads, nev);
    }
    free_fx(f);
}

static void test_jitter_hist(void)
{
    static cp_jitter_hist h;
    cp_jitter_clear(&h);
    CHECK(cp_jitter_percentile(&h, 500) == 0);
    for (uint32_t i = 1; i <= 1000; i++) {
        cp_jitter_record(&h, i * 1000u); /* 1 us .. 1 ms */
    }
    CHECK(h.count == 1000 && h.max_ns == 1000000);
    uint32_t p50 = cp_jitter_percentile(&h, 500);
    uint32_t p99 = cp_jitter_percentile(&h, 990);
    CHECK(p50 >= 500000 && p50 <= 510000);
    CHECK(p99 >= 990000 && p99 <= 1000000);
    CHECK(cp_jitter_percentile(&h, 1000) == 1000000);
    cp_jitter_record(&h, 50000000000ull);
    CHECK(h.max_ns == UINT32_MAX);
    cp_jitter_clear(&h);
    cp_jitter_record(&h, 250);
    CHECK(cp_jitter_percentile(&h, 990) == 250);
    /* the embedders' rt_stats callback */
    cp_jitter_record(&h, 5000);
    uint32_t late = 7;
    cp_server_rt_stats rt;
    cp_jitter_rt_stats(&rt, &h, &late);
    CHECK(rt.late_ticks == 7 && rt.jitter_max_ns == 5000);
    CHECK(rt.jitter_p50_ns == cp_jitter_percentile(&h, 500) &&
          rt.jitter_p99_ns == cp_jitter_percentile(&h, 990) && rt.jitter_p50_ns == 300);
}

/* The catch-up rule of the real-time tick loops (host runner and firmware). */
static void test_catch_up(void)
{
    /* cp_deadline_skip: nothing due, one due, several due, and the margin */
    uint64_t d = 1000;
    CHECK(cp_deadline_skip(&d, 100, 999, 0) == 0 && d == 1000);
    CHECK(cp_deadline_skip(&d, 100, 1000, 0) == 1 && d == 1100);
    CHECK(cp_deadline_skip(&d, 100, 1399, 0) == 3 && d == 1400);
    CHECK(cp_deadline_skip(&d, 100, 1400, 0) == 1 && d == 1500);
    /* the deadline is after now but within the margin: due, so it is skipped (the old
     * firmware computed (now - deadline) here and added an underflowed count) */
    d = 1005;
    CHECK(cp_deadline_skip(&d, 10, 1000, 8) == 1 && d == 1015);
    d = 1005;
    CHECK(cp_deadline_skip(&d, 10, 1000, 5) == 1 && d == 1015);
    d = 1005;
    CHECK(cp_deadline_skip(&d, 10, 1000, 4) == 0 && d == 1005);
    d = 1005;
    CHECK(cp_deadline_skip(&d, 10, 1000, 25) == 3 && d == 1035);
    /* saturating at the end of time; a zero tick skips nothing */
    d = UINT64_MAX - 5;
    CHECK(cp_deadline_skip(&d, 10, UINT64_MAX - 10, 100) == 1);
    d = 7;
    CHECK(cp_deadline_skip(&d, 0, 100, 0) == 0 && d == 7);

    /* cp_server_catch_up on a running server: each run tick advances the schedule */
    fx *f = new_fx(0);
    CHECK(load_program(f, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    const uint64_t tick = 1000;
    uint64_t before = cp_server_ticks(&f->srv);
    fx_lock(f);
    /* on time: one tick, not late */
    d = 5000;
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 5000, 0, 16) == 0 && d == 6000);
    /* a wake before the deadline (beyond the margin) runs nothing */
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 5500, 400, 16) == 0 && d == 6000);
    /* early within the margin: runs the tick, not late */
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 5700, 400, 16) == 0 && d == 7000);
    /* 2.5 ticks late: three ticks, the first two a tick or more after their deadlines */
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 9500, 0, 16) == 2 && d == 10000);
    fx_unlock(f);
    CHECK(cp_server_ticks(&f->srv) == before + 5);

    /* far behind: max_run ticks, then the rest dropped and counted */
    fx_lock(f);
    before = cp_server_ticks(&f->srv);
    d = 10000;
    /* due: 10000 .. 29000 (20 deadlines); 4 run (all late), 16 dropped */
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 29000, 0, 4) == 20 && d == 30000);
    CHECK(cp_server_ticks(&f->srv) == before + 4);
    /* the margin edge case: after max_run ticks the next deadline is after now but within
     * the margin; it is dropped and counted once */
    before = cp_server_ticks(&f->srv);
    d = 30000;
    CHECK(cp_server_catch_up(&f->srv, &d, tick, 31600, 500, 2) == 2 && d == 33000);
    CHECK(cp_server_ticks(&f->srv) == before + 2);
    fx_unlock(f);
    free_fx(f);
}


/* ---- faults, the safe state and atomic replace */

static const uint8_t UD2[] = {0x0f, 0x0b};

/* upload + commit with the commit payload `commit` (n bytes) */
static int load_commit(fx *f, uint32_t variant, const pg_options *o, const uint8_t *commit,
                       size_t n)
{
    tb_image img;
    pg_build_opts(&img, variant, o);
    pb_reset();
    pb32((uint32_t)img.len);
    pb32(image_crc(&img));
    if (send_p(f, CP_CMD_LOAD_BEGIN) != 0) {
        return R.p[0];
    }
    for (size_t off = 0; off < img.len; off += 500) {
        size_t n = img.len - off < 500 ? img.len - off : 500;
        pb_reset();
        pb32((uint32_t)off);
        pbbytes(img.bytes + off, n);
        CHECK(send_p(f, CP_CMD_LOAD_CHUNK) == 0);
    }
    return req(f, CP_CMD_LOAD_COMMIT, commit, n);
}

/* upload + commit with flags (0: none, 1: START) */
static int load_opts(fx *f, uint32_t variant, const pg_options *o, int start)
{
    uint8_t flags = (uint8_t)start;
    return load_commit(f, variant, o, &flags, start ? 1 : 0);
}

/* a KEEP commit: START | KEEP, `count` entries of (old, new, size) from `e` */
static size_t keep_payload(uint8_t *out, uint16_t count, const uint32_t (*e)[3])
{
    out[0] = 3;
    tb_put16(out + 1, count);
    for (uint32_t i = 0; i < count; i++) {
        for (uint32_t k = 0; k < 3; k++) {
            tb_put32(out + 3 + 12 * i + 4 * k, e[i][k]);
        }
    }
    return 3u + 12u * count;
}

static uint8_t hello_state(fx *f)
{
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0);
    return R.p[HELLO_STATE];
}

/* The fault record of a STATS response (before the 20 bytes of link_* counters). */
static const uint8_t *stats_fault(fx *f)
{
    CHECK(req(f, CP_CMD_STATS, NULL, 0) == 0);
    return R.p + R.len - 20 - CP_SERVER_FAULT_RECORD;
}

static fx *new_guarded_fx(void)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.guard = cp_posix_guard;
    f->cfg.budget_factor = 10;
    CHECK(fx_start(f) == CP_OK);
    return f;
}

static void test_faults_and_safe_state(void)
{
    fx *f = new_guarded_fx();
    pg_options o = {UD2, sizeof(UD2), 0.5, 0, 0};
    CHECK(load_opts(f, 0, &o, 0) == 0);
    for (uint32_t round = 1; round <= 100; round++) {
        CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
        nev = 0;
        ticks(f, 1); /* tick 0: task 0 runs */
        ticks(f, 1); /* tick 1: task 0 publishes out = 101 to PWM 0; task 1 faults */
        CHECK(hello_state(f) == CP_SERVER_FAULTED);
        CHECK(f->io[CP_IO_PWM - 1][0] == 0.5);
        const uint8_t *rec = stats_fault(f);
        CHECK(tb_get32(rec) == CP_FAULT_SIGILL && tb_get32(rec + 4) == 1 && g64(rec + 16) != 0 &&
              tb_get32(rec + 28) == round && g64(rec + 32) == 1);
        int events = 0;
        for (int i = 0; i < nev; i++) {
            if (EV[i].command == CP_CMD_FAULT) {
                events++;
                CHECK(EV[i].len == CP_SERVER_FAULT_RECORD && tb_get32(EV[i].p) == CP_FAULT_SIGILL &&
                      tb_get32(EV[i].p + 28) == round);
            }
        }
        CHECK(events == 1);
        ticks(f, 3); /* nothing runs */
        CHECK(read_i32(f, PG_COUNTER) == 2);
        CHECK(req(f, CP_CMD_START, NULL, 0) == CP_PERR_BAD_STATE);
        pb_reset();
        pb8(0);
        CHECK(send_p(f, CP_CMD_RESET) == 0 && hello_state(f) == CP_SERVER_STOPPED);
        rec = stats_fault(f);
        CHECK(tb_get32(rec) == 0 && tb_get32(rec + 28) == round);
    }
    /* a healthy program: STOP and unload drive the safe value */
    o.task1_code = NULL;
    CHECK(load_opts(f, 1, &o, 1) == 0 && hello_state(f) == CP_SERVER_RUNNING);
    ticks(f, 3);
    CHECK(f->io[CP_IO_PWM - 1][0] == 102.0);
    CHECK(req(f, CP_CMD_STOP, NULL, 0) == 0 && f->io[CP_IO_PWM - 1][0] == 0.5);
    CHECK(read_i32(f, PG_OUT) == 102); /* the data keep what was published */
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    ticks(f, 2);
    CHECK(f->io[CP_IO_PWM - 1][0] == 102.0);
    pb_reset();
    pb8(1);
    CHECK(send_p(f, CP_CMD_RESET) == 0 && f->io[CP_IO_PWM - 1][0] == 0.5);
    /* a commit without START replaces a running program: its outputs go safe */
    CHECK(load_opts(f, 1, &o, 1) == 0);
    ticks(f, 2);
    CHECK(f->io[CP_IO_PWM - 1][0] == 102.0);
    CHECK(load_opts(f, 2, &o, 0) == 0 && f->io[CP_IO_PWM - 1][0] == 0.5);
    free_fx(f);
}

static void test_timeout_fault(void)
{
    static const uint8_t loop[] = {0xeb, 0xfe};
    fx *f = new_guarded_fx();
    pg_options o = {loop, sizeof(loop), 0.25, 1000000, 0}; /* 1 ms budget x 10 */
    CHECK(load_opts(f, 0, &o, 1) == 0);
    ticks(f, 2);
    CHECK(hello_state(f) == CP_SERVER_FAULTED && f->io[CP_IO_PWM - 1][0] == 0.25);
    CHECK(tb_get32(stats_fault(f)) == CP_FAULT_TIMEOUT);
    free_fx(f);
}

/* A commit with START replaces the running program between two ticks: the next tick is the
 * new program's first, a channel both drive keeps its value until the new one publishes. */
static void test_atomic_replace(void)
{
    fx *f = new_guarded_fx();
    pg_options o = {NULL, 0, 0.5, 0, 0};
    CHECK(load_opts(f, 0, &o, 1) == 0);
    ticks(f, 5);
    CHECK(read_i32(f, PG_COUNTER) == 5 && f->io[CP_IO_PWM - 1][0] == 101.0);
    uint32_t gen = cp_server_generation(&f->srv);
    int replaced = f->notify_replaced;
    for (uint32_t v = 1; v <= 20; v++) {
        CHECK(load_opts(f, v, &o, 1) == 0);
        CHECK(hello_state(f) == CP_SERVER_RUNNING && cp_server_ticks(&f->srv) == 0);
        CHECK(read_i32(f, PG_COUNTER) == 0 && f->io[CP_IO_PWM - 1][0] == 100.0 + v);
        ticks(f, 1); /* the new program's tick 0 */
        CHECK(read_i32(f, PG_COUNTER) == 1 && cp_server_ticks(&f->srv) == 1);
        CHECK(f->io[CP_IO_PWM - 1][0] == 100.0 + v); /* held, not safe */
        ticks(f, 1);
        CHECK(f->io[CP_IO_PWM - 1][0] == 101.0 + v); /* published by the new program */
    }
    CHECK(cp_server_generation(&f->srv) == gen && f->notify_replaced == replaced + 20);
    /* an invalid image with START leaves the running program as it was */
    tb_image img;
    pg_build_opts(&img, 30, &o);
    img.bytes[60] ^= 1;
    CHECK(upload(f, img.bytes, img.len, image_crc(&img), 300) == CP_PERR_IMAGE_INVALID);
    ticks(f, 3);
    CHECK(read_i32(f, PG_COUNTER) == 5 && hello_state(f) == CP_SERVER_RUNNING);
    uint8_t bad = 3;
    CHECK(req(f, CP_CMD_LOAD_COMMIT, &bad, 1) == CP_PERR_BAD_PAYLOAD);
    /* START on a stopped program's commit starts the new one */
    CHECK(req(f, CP_CMD_STOP, NULL, 0) == 0);
    CHECK(load_opts(f, 31, &o, 1) == 0 && hello_state(f) == CP_SERVER_RUNNING);
    free_fx(f);
}

/* LOAD_COMMIT KEEP: the listed bytes go from the old program's data into the new one's at
 * the swap (the counter state goes on); a list outside either data region, an empty entry, a
 * length other than the count's, or KEEP without a running program is refused and the old
 * program runs on. */
static void test_keep_state(void)
{
    fx *f = new_guarded_fx();
    pg_options o = {NULL, 0, 0.5, 0, 0};
    uint8_t commit[3 + 12 * 3];
    const uint32_t keep[][3] = {{PG_COUNTER, PG_COUNTER, 4}};
    size_t n = keep_payload(commit, 1, keep);
    CHECK(load_commit(f, 0, &o, commit, n) == CP_PERR_BAD_STATE); /* nothing runs yet */
    CHECK(load_opts(f, 0, &o, 1) == 0);
    ticks(f, 5);
    CHECK(read_i32(f, PG_COUNTER) == 5);
    CHECK(load_commit(f, 1, &o, commit, n) == 0);
    CHECK(hello_state(f) == CP_SERVER_RUNNING && read_i32(f, PG_COUNTER) == 5); /* carried */
    ticks(f, 1);
    CHECK(read_i32(f, PG_COUNTER) == 6);
    const uint32_t bad[][3][3] = {
        {{PG_DATA_SIZE - 2, PG_COUNTER, 4}},            /* past the old data */
        {{PG_COUNTER, PG_DATA_SIZE, 4}},                /* past the new data */
        {{PG_COUNTER, PG_COUNTER, 4}, {0, 0, 0}},       /* an empty entry */
        {{0xFFFFFFF0u, 0, 0x20}},                       /* wraps in 32 bits */
    };
    const uint16_t counts[] = {1, 1, 2, 1};
    const uint32_t index[] = {0, 0, 1, 0};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        n = keep_payload(commit, counts[k], bad[k]);
        CHECK(load_commit(f, 2, &o, commit, n) == CP_PERR_OUT_OF_RANGE);
        CHECK(err_detail() == index[k]);
        ticks(f, 1);
        CHECK(read_i32(f, PG_COUNTER) == 7 + (int32_t)k && hello_state(f) == CP_SERVER_RUNNING);
    }
    n = keep_payload(commit, 2, bad[2]);
    CHECK(load_commit(f, 2, &o, commit, n - 12) == CP_PERR_BAD_PAYLOAD); /* count says 2 */
    n = keep_payload(commit, 0, keep);
    commit[0] = 2; /* KEEP without START */
    CHECK(load_commit(f, 2, &o, commit, n) == CP_PERR_BAD_STATE);
    commit[0] = 7;
    CHECK(load_commit(f, 2, &o, commit, 1) == CP_PERR_BAD_PAYLOAD);
    ticks(f, 1);
    CHECK(read_i32(f, PG_COUNTER) == 11 && hello_state(f) == CP_SERVER_RUNNING);
    free_fx(f);
}

static void test_link_timeout(void)
{
    fx *f = new_guarded_fx();
    pg_options o = {NULL, 0, 0.75, 0, 300000}; /* the fake clock runs 1 us per reading */
    CHECK(load_opts(f, 0, &o, 1) == 0);
    for (int i = 0; i < 300; i++) { /* a request per tick keeps it alive */
        ticks(f, 1);
        CHECK(req(f, CP_CMD_PING, NULL, 0) == 0);
    }
    CHECK(hello_state(f) == CP_SERVER_RUNNING);
    int n = 0;
    while (cp_server_state(&f->srv) == CP_SERVER_RUNNING && n < 1000) {
        for (int k = 0; k < 50; k++) {
            ticks(f, 1);
        }
        n++;
    }
    CHECK(hello_state(f) == CP_SERVER_FAULTED && f->io[CP_IO_PWM - 1][0] == 0.75);
    const uint8_t *rec = stats_fault(f);
    CHECK(tb_get32(rec) == CP_FAULT_LINK && tb_get32(rec + 4) == CP_FAULT_NO_TASK);
    free_fx(f);
}

/* ---- sessions and authentication */

static const uint8_t KEY[] = "0123456789abcdef-the-runner-key";

typedef struct client {
    cp_hmac mac;
    uint32_t counter;
    uint8_t last[CP_WIRE_MAX(2048)];
    size_t last_len;
} client;

/* SESSION as a client with `key`; returns the error code. */
static int begin_session(fx *f, client *c, const uint8_t *key, size_t key_len, uint8_t flags)
{
    uint8_t nonce_c[16];
    for (int i = 0; i < 16; i++) {
        nonce_c[i] = (uint8_t)below(256);
    }
    pb_reset();
    pb8(flags);
    pb8(0);
    pb16(0);
    pbbytes(nonce_c, 16);
    int e = send_p(f, CP_CMD_SESSION);
    if (e != 0) {
        return e;
    }
    CHECK(R.len == 28 && (R.flags & CP_FLAG_AUTH) == 0);
    fx_session_key(key, key_len, R.p + 4, nonce_c, &c->mac);
    c->counter = 0;
    return 0;
}

/* An authenticated request (new counter unless `again`); returns the error code; a success
 * must carry a valid tag with the request's counter. */
static int areq(fx *f, client *c, uint8_t cmd, const void *p, size_t n, int tamper)
{
    uint16_t seq = f->seq++;
    c->counter++;
    c->last_len = fx_frame_auth(c->last, sizeof(c->last), seq, cmd, p, n, &c->mac, c->counter,
                                tamper);
    feed_split(f, c->last, c->last_len);
    int responses = 0;
    collect(f, &responses);
    CHECK(responses == 1 && R.seq == seq && R.command == cmd);
    if (R.flags & CP_FLAG_ERROR) {
        return R.p[0];
    }
    CHECK(fx_tag_ok(R.flags, R.seq, R.command, R.p, R.len, &c->mac, c->counter));
    R.len -= CP_AUTH_TRAILER;
    return 0;
}

/* Sends the client's last frame again. */
static int again(fx *f, client *c)
{
    feed_split(f, c->last, c->last_len);
    int responses = 0;
    collect(f, &responses);
    CHECK(responses == 1);
    return (R.flags & CP_FLAG_ERROR) ? R.p[0] : 0;
}

static fx *new_auth_fx(int require)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.key = KEY;
    f->cfg.key_len = sizeof(KEY) - 1;
    f->cfg.require_auth = (uint32_t)require;
    CHECK(fx_start(f) == CP_OK);
    return f;
}

static void test_authentication(void)
{
    fx *f = new_auth_fx(1);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && (R.p[HELLO_FLAGS] & CP_SERVER_FLAG_AUTH) != 0);
    CHECK(req(f, CP_CMD_STATS, NULL, 0) == CP_PERR_AUTH_REQUIRED); /* no key */
    CHECK(load_program(f, 0) == CP_PERR_AUTH_REQUIRED);
    client owner, other;
    CHECK(begin_session(f, &owner, KEY, sizeof(KEY) - 1, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_STATS, NULL, 0, 0) == 0 && R.len == 26 + 12 + 40 + 20);
    /* an upload and START in the session */
    tb_image img;
    pg_build(&img, 0);
    pb_reset();
    pb32((uint32_t)img.len);
    pb32(image_crc(&img));
    CHECK(areq(f, &owner, CP_CMD_LOAD_BEGIN, P.b, P.n, 0) == 0);
    for (size_t off = 0; off < img.len; off += 400) {
        size_t n = img.len - off < 400 ? img.len - off : 400;
        pb_reset();
        pb32((uint32_t)off);
        pbbytes(img.bytes + off, n);
        CHECK(areq(f, &owner, CP_CMD_LOAD_CHUNK, P.b, P.n, 0) == 0);
    }
    CHECK(areq(f, &owner, CP_CMD_LOAD_COMMIT, NULL, 0, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_START, NULL, 0, 0) == 0);
    ticks(f, 4);
    /* a retry of the last request is answered from the cache (START is not run twice) */
    CHECK(areq(f, &owner, CP_CMD_STOP, NULL, 0, 0) == 0);
    CHECK(req(f, CP_CMD_START, NULL, 0) == CP_PERR_AUTH_REQUIRED);
    uint32_t gen = cp_server_generation(&f->srv);
    CHECK(again(f, &owner) == 0 && cp_server_generation(&f->srv) == gen);
    /* replayed frame: an older counter */
    uint8_t old[CP_WIRE_MAX(2048)];
    memcpy(old, owner.last, owner.last_len);
    size_t old_len = owner.last_len;
    CHECK(areq(f, &owner, CP_CMD_START, NULL, 0, 0) == 0);
    feed_split(f, old, old_len);
    int responses = 0;
    collect(f, &responses);
    CHECK(responses == 1 && (R.flags & CP_FLAG_ERROR) && R.p[0] == CP_PERR_REPLAY);
    CHECK(hello_state(f) == CP_SERVER_RUNNING); /* STOP was not replayed */
    /* tampered frame */
    pb_reset();
    pb8(1);
    CHECK(areq(f, &owner, CP_CMD_RESET, P.b, P.n, 1) == CP_PERR_AUTH_FAILED);
    CHECK(hello_state(f) == CP_SERVER_RUNNING);
    /* a second client: BUSY; with takeover but the wrong key: AUTH_FAILED */
    CHECK(begin_session(f, &other, KEY, sizeof(KEY) - 1, 0) == CP_PERR_BUSY);
    static const uint8_t wrong[] = "not the key";
    CHECK(begin_session(f, &other, wrong, sizeof(wrong) - 1, 1) == 0);
    CHECK(areq(f, &other, CP_CMD_STOP, NULL, 0, 0) == CP_PERR_AUTH_FAILED);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == 0); /* the owner is undisturbed */
    ticks(f, 2);
    pb_reset();
    pb32(PG_COUNTER);
    pb16(4);
    CHECK(areq(f, &owner, CP_CMD_READ, P.b, P.n, 0) == 0 && tb_get32(R.p) == 6);
    CHECK(hello_state(f) == CP_SERVER_RUNNING);
    /* takeover with the key: the old owner's session ends */
    CHECK(begin_session(f, &other, KEY, sizeof(KEY) - 1, 1) == 0);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == 0); /* still the owner until proven */
    CHECK(areq(f, &other, CP_CMD_PING, NULL, 0, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == CP_PERR_AUTH_FAILED);
    /* close: then a new client needs no takeover */
    pb_reset();
    pb8(2);
    pb8(0);
    pb16(0);
    pbbytes(KEY, 16);
    CHECK(areq(f, &other, CP_CMD_SESSION, P.b, P.n, 0) == 0);
    CHECK(areq(f, &other, CP_CMD_PING, NULL, 0, 0) == CP_PERR_AUTH_FAILED);
    CHECK(begin_session(f, &owner, KEY, sizeof(KEY) - 1, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == 0);
    free_fx(f);
}

/* Without a required key: unauthenticated requests work while nobody holds a session; a
 * session (empty key) makes the runner BUSY for others until it ends or its lease runs out. */
static void test_sessions_without_key(void)
{
    fx *f = malloc(sizeof(*f));
    fx_config(f, 0);
    f->cfg.session_lease_ns = 200000; /* 200 readings of the fake clock */
    CHECK(fx_start(f) == CP_OK);
    CHECK(load_program(f, 0) == 0);
    client a, b;
    CHECK(begin_session(f, &a, NULL, 0, 0) == 0);
    CHECK(areq(f, &a, CP_CMD_START, NULL, 0, 0) == 0);
    CHECK(req(f, CP_CMD_STOP, NULL, 0) == CP_PERR_BUSY);
    pb_reset();
    pb16(1);
    CHECK(send_p(f, CP_CMD_HELLO) == 0 && (R.p[HELLO_FLAGS] & CP_SERVER_FLAG_SESSION) != 0);
    CHECK(begin_session(f, &b, NULL, 0, 0) == CP_PERR_BUSY);
    /* the lease runs out without requests */
    for (int i = 0; i < 300; i++) {
        (void)fx_clock(f);
    }
    CHECK(begin_session(f, &b, NULL, 0, 0) == 0);
    CHECK(areq(f, &b, CP_CMD_STOP, NULL, 0, 0) == 0);
    CHECK(areq(f, &a, CP_CMD_PING, NULL, 0, 0) == CP_PERR_AUTH_FAILED);
    cp_server_disconnect_link(&f->srv, CP_SERVER_OWNER); /* a socket client went away */
    CHECK(req(f, CP_CMD_START, NULL, 0) == 0);
    free_fx(f);
}

/* Text (an HTTP request) is rejected: the link is reported for closing and nothing in it is
 * executed, even valid frames after the text in the same buffer. */
static void test_text_and_guest_link(void)
{
    fx *f = new_auth_fx(0);
    CHECK(load_program(f, 0) == 0);
    static uint8_t buf[4096];
    static const char http[] = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99\r\n\r\n";
    size_t n = sizeof(http) - 1;
    memcpy(buf, http, n);
    n += fx_frame(buf + n, sizeof(buf) - n, 1, 0, 7, CP_CMD_START, NULL, 0);
    size_t used = cp_server_feed_link(&f->srv, CP_SERVER_OWNER, buf, n);
    CHECK(f->notify_text == 1 && used == 4 && f->wire_len == 0);
    CHECK(f->srv.dec.text_frames == 1);
    cp_server_disconnect_link(&f->srv, CP_SERVER_OWNER); /* the host closed it */
    CHECK(hello_state(f) == CP_SERVER_STOPPED);
    /* pty: text is dropped up to its delimiter, the link stays */
    cp_server_feed(&f->srv, (const uint8_t *)"GET /\r\n\0", 8);
    CHECK(f->notify_text == 2 && hello_state(f) == CP_SERVER_STOPPED);

    /* a guest connection: HELLO is answered, anything else refused (BUSY) while the owner
     * holds a session; a takeover with the key promotes it */
    client owner, guest;
    CHECK(begin_session(f, &owner, KEY, sizeof(KEY) - 1, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_START, NULL, 0, 0) == 0);
    uint8_t wire[256];
    size_t w = fx_frame(wire, sizeof(wire), 1, 0, 50, CP_CMD_STOP, NULL, 0);
    CHECK(cp_server_feed_link(&f->srv, CP_SERVER_GUEST, wire, w) == w);
    CHECK(f->notify_refuse == 1 && f->gwire_len > 0 && f->wire_len == 0);
    f->gwire_len = 0;
    cp_server_disconnect_link(&f->srv, CP_SERVER_GUEST);
    uint8_t nonce_c[16] = {1, 2, 3};
    pb_reset();
    pb8(1); /* takeover */
    pb8(0);
    pb16(0);
    pbbytes(nonce_c, 16);
    w = fx_frame(wire, sizeof(wire), 1, 0, 51, CP_CMD_SESSION, P.b, P.n);
    CHECK(cp_server_feed_link(&f->srv, CP_SERVER_GUEST, wire, w) == w);
    cp_decoder d;
    uint8_t dbuf[2048];
    cp_decoder_init(&d, dbuf, sizeof(dbuf), 1024);
    cp_frame fr;
    int got = 0;
    for (size_t i = 0; i < f->gwire_len; i++) {
        if (cp_decoder_push(&d, f->gwire[i], &fr) == CP_DEC_FRAME) {
            got = 1;
            break;
        }
    }
    CHECK(got && fr.command == CP_CMD_SESSION && !(fr.flags & CP_FLAG_ERROR));
    fx_session_key(KEY, sizeof(KEY) - 1, fr.payload + 4, nonce_c, &guest.mac);
    f->gwire_len = 0;
    CHECK(hello_state(f) == CP_SERVER_RUNNING); /* the owner still runs its program */
    w = fx_frame_auth(wire, sizeof(wire), 52, CP_CMD_STOP, NULL, 0, &guest.mac, 1, 0);
    CHECK(cp_server_feed_link(&f->srv, CP_SERVER_GUEST, wire, w) == w);
    CHECK(f->notify_takeover == 1 && f->gwire_len > 0 && hello_state(f) == CP_SERVER_STOPPED);
    /* the former guest is the owner link now */
    guest.counter = 1;
    CHECK(areq(f, &guest, CP_CMD_PING, NULL, 0, 0) == 0);
    CHECK(areq(f, &owner, CP_CMD_PING, NULL, 0, 0) == CP_PERR_AUTH_FAILED);
    free_fx(f);
}

int main(void)
{
    rng_state = 12345;
    test_init_errors();
    test_hello();
    test_upload();
    test_bad_commit_keeps_program(0);
    test_bad_commit_keeps_program(1);
    test_min_tick();
    test_io_bindings_checked();
    test_run_read_write();
    test_stats();
    test_stream();
    test_io();
    test_get_ports();
    test_errors_and_replay();
    test_concurrent_access();
    test_jitter_hist();
    test_catch_up();
    test_faults_and_safe_state();
    test_timeout_fault();
    test_atomic_replace();
    test_keep_state();
    test_link_timeout();
    test_authentication();
    test_sessions_without_key();
    test_text_and_guest_link();
    printf("test_server: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
