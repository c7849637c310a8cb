/* The protocol server of docs/protocol.md (design notes in copapy/server.h). Libc-free and
 * allocation-free: every buffer is carved out of the embedder's work area at init, every
 * payload field is bounds-checked before it is used. */
#include "copapy/server.h"

#include "internal.h"

#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define RELAXED_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define RELAXED_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

enum {
    HELLO_FIXED = 46,     /* HELLO response without the name */
    STATS_HEAD = 26,      /* STATS response before the per-task records */
    STATS_TASK = 40,
    STATS_TAIL = 12,      /* appended: p50, stream_dropped, first_task, total_tasks */
    PORTS_HEAD = 8        /* GET_PORTS block: u32 port_count, u32 strings_size */
};

/* ---- small helpers */

static void do_lock(cp_server *s)
{
    if (s->cfg.lock != NULL) {
        s->cfg.lock(s->cfg.ctx);
    }
}

static void do_unlock(cp_server *s)
{
    if (s->cfg.unlock != NULL) {
        s->cfg.unlock(s->cfg.ctx);
    }
}

static void do_notify(cp_server *s, uint32_t what)
{
    if (s->cfg.notify != NULL) {
        s->cfg.notify(s->cfg.ctx, what);
    }
}

static size_t str_len(const char *p, size_t max)
{
    size_t n = 0;
    while (p != NULL && n < max && p[n] != '\0') {
        n++;
    }
    return n;
}

static uint8_t *resp(cp_server *s)
{
    return s->tx + CP_FRAME_HEADER;
}

/* Appending to the response; the handlers check sizes first, these only guard. */
static void put_u8(cp_server *s, uint8_t v)
{
    if (s->resp_len + 1u <= s->cfg.max_payload) {
        resp(s)[s->resp_len++] = v;
    }
}

static void put_u16(cp_server *s, uint16_t v)
{
    if (s->resp_len + 2u <= s->cfg.max_payload) {
        cp_put16(resp(s) + s->resp_len, v);
        s->resp_len += 2;
    }
}

static void put_u32(cp_server *s, uint32_t v)
{
    if (s->resp_len + 4u <= s->cfg.max_payload) {
        cp_put32(resp(s) + s->resp_len, v);
        s->resp_len += 4;
    }
}

static void put_u64(cp_server *s, uint64_t v)
{
    if (s->resp_len + 8u <= s->cfg.max_payload) {
        cp_put64(resp(s) + s->resp_len, v);
        s->resp_len += 8;
    }
}

static void put_bytes(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (s->resp_len + n <= s->cfg.max_payload) {
        cp_copy(resp(s) + s->resp_len, p, n);
        s->resp_len += n;
    }
}

/* An ERROR response: u8 code, u8 status, u16 reserved, u32 detail, message (<= 120 bytes). */
static void fail_msg(cp_server *s, uint8_t code, uint8_t status, uint32_t detail,
                     const char *msg)
{
    s->resp_flags = CP_FLAG_RESPONSE | CP_FLAG_ERROR;
    s->resp_len = 0;
    put_u8(s, code);
    put_u8(s, status);
    put_u16(s, 0);
    put_u32(s, detail);
    uint32_t room = s->cfg.max_payload - s->resp_len;
    size_t n = str_len(msg, CP_ERROR_MESSAGE_MAX < room ? CP_ERROR_MESSAGE_MAX : room);
    put_bytes(s, (const uint8_t *)msg, (uint32_t)n);
}

static void fail_fmt(cp_server *s, uint8_t code, uint8_t status, uint32_t detail,
                     const char *fmt, const uint64_t *args, size_t nargs)
{
    cp_error e;
    e.struct_size = sizeof(e);
    (void)cp_fail(&e, CP_ERR_ARGUMENT, 0, fmt, args, nargs);
    fail_msg(s, code, status, detail, e.message);
}

#define FAIL(s, code, detail, fmt, ...) \
    fail_fmt((s), (code), 0, (detail), (fmt), CP_ARGS(__VA_ARGS__))

static uint32_t region_capacity(const cp_server *s)
{
    size_t cap = s->cfg.slot_mem[0] != NULL ? s->cfg.slot_size : s->cfg.platform->max_region_size;
    if (cap == 0 || cap > UINT32_MAX) {
        return UINT32_MAX;
    }
    return (uint32_t)cap;
}

static const cp_program *active_prog(const cp_server *s)
{
    return &s->prog[s->active];
}

static uint32_t data_size(const cp_server *s)
{
    return s->state == CP_SERVER_EMPTY ? 0 : active_prog(s)->data_size;
}

static double f64_of(uint64_t bits)
{
    double d;
    cp_copy((uint8_t *)&d, (const uint8_t *)&bits, sizeof(d));
    return d;
}

static uint64_t bits_of(double d)
{
    uint64_t bits;
    cp_copy((uint8_t *)&bits, (const uint8_t *)&d, sizeof(bits));
    return bits;
}

/* ---- program slots over embedder memory */

static void *slot_alloc(void *ctx, size_t size, size_t align)
{
    cp_server_slot *slot = ctx;
    cp_server *s = slot->server;
    uint8_t *base = s->cfg.slot_mem[slot->index];
    if (base == NULL || size == 0 || align == 0 || (align & (align - 1)) != 0) {
        return NULL;
    }
    size_t pad = (size_t)((align - (uintptr_t)base % align) % align);
    if (pad > s->cfg.slot_size || size > s->cfg.slot_size - pad) {
        return NULL;
    }
    return base + pad;
}

static int slot_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    cp_server_slot *slot = ctx;
    const cp_platform *pf = slot->server->cfg.platform;
    return pf->region_seal != NULL ? pf->region_seal(pf->ctx, base, code_len, size) : 0;
}

static void slot_free(void *ctx, void *base, size_t size)
{
    (void)ctx;
    (void)base;
    (void)size;
}

/* The scheduler's I/O goes through the embedder's callbacks. */
static double sched_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    cp_server *s = ctx;
    return s->cfg.io_read != NULL ? s->cfg.io_read(s->cfg.ctx, kind, channel) : 0.0;
}

static void sched_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    cp_server *s = ctx;
    if (s->cfg.io_write != NULL) {
        (void)s->cfg.io_write(s->cfg.ctx, kind, channel, value);
    }
}

/* ---- init */

size_t cp_server_work_size(uint16_t max_payload, uint32_t ports_capacity, uint32_t ring_size)
{
    return CP_SERVER_WORK_SIZE(max_payload, ports_capacity, ring_size);
}

cp_status cp_server_init(cp_server *srv, const cp_server_config *cfg, cp_error *err)
{
    if (srv == NULL || cfg == NULL || cfg->struct_size < sizeof(cp_server_config)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_server_init: server and config (struct_size %u) are required",
                       sizeof(cp_server_config));
    }
    const cp_platform *pf = cfg->platform;
    if (pf == NULL || pf->struct_size < sizeof(cp_platform) || pf->abi_version == 0 ||
        (cfg->slot_mem[0] == NULL &&
         (pf->region_alloc == NULL || pf->region_seal == NULL || pf->region_free == NULL))) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_server_init: a complete platform is required (region_alloc, "
                       "region_seal and region_free unless slot memory is given)", 0);
    }
    if ((cfg->slot_mem[0] == NULL) != (cfg->slot_mem[1] == NULL) ||
        (cfg->slot_mem[0] != NULL && cfg->slot_size == 0)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_server_init: give both program slots with slot_size > 0, or none",
                       0);
    }
    if (cfg->max_payload < 128 || cfg->staging == NULL || cfg->staging_size == 0 ||
        cfg->write == NULL || (cfg->lock == NULL) != (cfg->unlock == NULL)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_server_init: max_payload >= 128, a staging buffer, a write callback "
                       "and lock together with unlock are required", 0);
    }
    if (cfg->ring_size != 0 && (cfg->ring_size & (cfg->ring_size - 1)) != 0) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, cfg->ring_size,
                       "cp_server_init: ring_size %u is not a power of two", cfg->ring_size);
    }
    size_t need = cp_server_work_size(cfg->max_payload, cfg->ports_capacity, cfg->ring_size);
    if (cfg->work == NULL || cfg->work_size < need) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_server_init: the work area needs %u bytes (%u given)", need,
                       cfg->work == NULL ? 0 : cfg->work_size);
    }

    cp_fill((uint8_t *)srv, 0, sizeof(*srv));
    srv->cfg = *cfg;
    srv->cfg.struct_size = sizeof(cp_server_config);
    size_t frame = (size_t)cfg->max_payload + CP_FRAME_OVERHEAD;
    srv->wire_cap = CP_WIRE_MAX((size_t)cfg->max_payload);
    uint8_t *w = cfg->work;
    srv->rx = w;
    w += frame;
    srv->tx = w;
    w += frame;
    srv->txenc = w;
    w += srv->wire_cap;
    srv->ev = w;
    w += frame;
    srv->evenc = w;
    w += srv->wire_cap;
    srv->ports = w;
    w += cfg->ports_capacity;
    srv->ring = w;
    (void)cp_decoder_init(&srv->dec, srv->rx, frame, cfg->max_payload);
    for (uint32_t i = 0; i < 2; i++) {
        srv->prog[i].struct_size = sizeof(cp_program);
        srv->sched[i].struct_size = sizeof(cp_sched);
        srv->slot_ctx[i].server = srv;
        srv->slot_ctx[i].index = i;
        srv->slot_platform[i] = *pf;
        if (cfg->slot_mem[0] != NULL) {
            srv->slot_platform[i].ctx = &srv->slot_ctx[i];
            srv->slot_platform[i].region_alloc = slot_alloc;
            srv->slot_platform[i].region_seal = slot_seal;
            srv->slot_platform[i].region_free = slot_free;
            srv->slot_platform[i].max_region_size = cfg->slot_size;
        }
    }
    srv->state = CP_SERVER_EMPTY;
    cp_ok(err);
    return CP_OK;
}

void cp_server_close(cp_server *srv)
{
    do_lock(srv);
    srv->state = CP_SERVER_EMPTY;
    srv->generation++;
    do_unlock(srv);
    cp_program_unload(&srv->prog[0]);
    cp_program_unload(&srv->prog[1]);
}

uint32_t cp_server_state(const cp_server *srv)
{
    return srv->state;
}

uint64_t cp_server_tick_ns(const cp_server *srv)
{
    return srv->state == CP_SERVER_EMPTY ? 0 : srv->tick_ns;
}

uint32_t cp_server_generation(const cp_server *srv)
{
    return srv->generation;
}

uint64_t cp_server_ticks(const cp_server *srv)
{
    return srv->state == CP_SERVER_EMPTY ? 0 : srv->sched[srv->active].tick;
}

/* ---- commands */

static void cmd_hello(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    if (n < 2) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 2, "HELLO needs u16 host_version (%u bytes given)", n);
        return;
    }
    do_lock(s);
    uint32_t state = s->state;
    uint64_t ticks = cp_server_ticks(s);
    do_unlock(s);
    uint32_t cap = region_capacity(s);
    put_u16(s, CP_PROTO_VERSION);
    put_u16(s, CP_RUNNER_ABI_VERSION);
    put_u16(s, s->cfg.platform->arch);
    put_u16(s, CP_IMAGE_FORMAT_VERSION);
    put_u16(s, s->cfg.max_payload);
    put_u16(s, CP_MAX_TASKS);
    put_u32(s, cap);
    put_u32(s, cap);
    put_u32(s, state == CP_SERVER_EMPTY ? 0 : (uint32_t)s->tick_ns);
    for (uint32_t k = 0; k < 4; k++) {
        put_u16(s, s->cfg.channels[k]);
    }
    put_u8(s, (uint8_t)state);
    put_u8(s, s->cfg.flags);
    put_u32(s, state == CP_SERVER_EMPTY ? 0 : s->image_crc);
    put_u64(s, ticks);
    uint32_t room = s->cfg.max_payload - s->resp_len;
    size_t len = str_len(s->cfg.name, CP_SERVER_NAME_MAX < room ? CP_SERVER_NAME_MAX : room);
    put_bytes(s, (const uint8_t *)s->cfg.name, (uint32_t)len);
}

static void cmd_load_begin(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n != 8) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 8, "LOAD_BEGIN needs u32 total_size, u32 image_crc "
             "(%u bytes given)", n);
        return;
    }
    uint32_t total = cp_le32(p);
    if (total == 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "LOAD_BEGIN: total_size is 0", 0);
        return;
    }
    if (total > s->cfg.staging_size) {
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.staging_size,
             "image of %u bytes, this runner accepts at most %u", total, s->cfg.staging_size);
        return;
    }
    s->up_active = 1;
    s->up_total = total;
    s->up_crc = cp_le32(p + 4);
    s->up_received = 0;
    put_u32(s, (uint32_t)s->cfg.max_payload - 4u);
}

static void cmd_load_chunk(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n < 4) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 4, "LOAD_CHUNK needs u32 offset, bytes (%u bytes given)",
             n);
        return;
    }
    if (!s->up_active) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "LOAD_CHUNK without LOAD_BEGIN", 0);
        return;
    }
    uint32_t offset = cp_le32(p);
    uint32_t len = n - 4;
    if (offset > s->up_received) {
        FAIL(s, CP_PERR_GAP, s->up_received,
             "chunk at %u is beyond the received prefix: continue at %u", offset,
             s->up_received);
        return;
    }
    uint64_t end = (uint64_t)offset + len;
    if (end > s->up_total) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, s->up_total,
             "chunk [%u, %u) runs past the image size %u", offset, end, s->up_total);
        return;
    }
    if (end > s->up_received) {
        uint32_t skip = s->up_received - offset;
        cp_copy(s->cfg.staging + s->up_received, p + 4 + skip, (size_t)(len - skip));
        s->up_received = (uint32_t)end;
    }
    put_u32(s, s->up_received);
}

static void cmd_load_status(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    if (n != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "LOAD_STATUS takes no payload (%u bytes given)", n);
        return;
    }
    put_u32(s, s->up_active ? s->up_total : 0);
    put_u32(s, s->up_active ? s->up_received : 0);
}

/* LOAD_COMMIT: every I/O binding of the image must name a channel this runner has (kind and
 * number below HELLO's counts) that its hardware can serve in that direction (cfg.io_check).
 * Returns 1 if so; else the OUT_OF_RANGE error (detail = the binding's index in the image) is
 * the response. */
static int check_io_bindings(cp_server *s, const cp_image *img)
{
    static const char *const kind_fmt[4] = {
        "I/O binding %u: GPIO channel %u does not exist on this runner (%u GPIO channels)",
        "I/O binding %u: PWM channel %u does not exist on this runner (%u PWM channels)",
        "I/O binding %u: ENCODER channel %u does not exist on this runner (%u ENCODER "
        "channels)",
        "I/O binding %u: ADC channel %u does not exist on this runner (%u ADC channels)",
    };
    static const char *const kind_refused[4][2] = {
        {"I/O binding %u (input from GPIO channel %u) refused: ",
         "I/O binding %u (output to GPIO channel %u) refused: "},
        {"I/O binding %u (input from PWM channel %u) refused: ",
         "I/O binding %u (output to PWM channel %u) refused: "},
        {"I/O binding %u (input from ENCODER channel %u) refused: ",
         "I/O binding %u (output to ENCODER channel %u) refused: "},
        {"I/O binding %u (input from ADC channel %u) refused: ",
         "I/O binding %u (output to ADC channel %u) refused: "},
    };
    uint32_t count = img->sec[CP_SEC_IO_BINDINGS].count;
    for (uint32_t i = 0; i < count; i++) {
        cp_io_binding b = cp_image_io_binding(img, i);
        uint32_t k = (uint32_t)b.kind - 1u; /* the image parser checked kind 1..4 */
        if (k >= 4u) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i, "I/O binding %u: kind %u is unknown", i, b.kind);
            return 0;
        }
        if (b.channel >= s->cfg.channels[k]) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i, kind_fmt[k], i, b.channel, s->cfg.channels[k]);
            return 0;
        }
        const char *why = s->cfg.io_check != NULL ? s->cfg.io_check(s->cfg.ctx, &b) : NULL;
        if (why != NULL) {
            cp_error e;
            e.struct_size = sizeof(e);
            (void)CP_FAIL(&e, CP_ERR_ARGUMENT, 0, kind_refused[k][b.direction == 2 ? 1 : 0], i,
                          b.channel);
            size_t n = str_len(e.message, sizeof(e.message) - 1u);
            size_t w = str_len(why, sizeof(e.message) - 1u - n);
            cp_copy((uint8_t *)e.message + n, (const uint8_t *)why, w);
            e.message[n + w] = '\0';
            fail_msg(s, CP_PERR_OUT_OF_RANGE, 0, i, e.message);
            return 0;
        }
    }
    return 1;
}

static void cmd_load_commit(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    if (n != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "LOAD_COMMIT takes no payload (%u bytes given)", n);
        return;
    }
    if (!s->up_active) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "LOAD_COMMIT without LOAD_BEGIN", 0);
        return;
    }
    if (s->up_received != s->up_total) {
        FAIL(s, CP_PERR_BAD_STATE, s->up_received,
             "upload incomplete: %u of %u bytes received", s->up_received, s->up_total);
        return;
    }
    const uint8_t *image = s->cfg.staging;
    uint32_t total = s->up_total;
    uint32_t crc = cp_crc32(0, image, total >= 4 ? total - 4u : 0u);
    if (crc != s->up_crc) {
        fail_fmt(s, CP_PERR_IMAGE_INVALID, CP_ERR_CRC, crc,
                 "image CRC %x differs from %x given in LOAD_BEGIN: corrupted in transit, "
                 "upload again", CP_ARGS(crc, s->up_crc));
        return;
    }

    /* load into the slot the tick context does not use; the running program is untouched.
     * The image is parsed once (reusing the CRC just computed): the load and the port table
     * below both work from that parse. */
    uint32_t fresh = s->state == CP_SERVER_EMPTY ? 0u : 1u - s->active;
    cp_program *prog = &s->prog[fresh];
    cp_program_unload(prog); /* defensive: the inactive slot is always empty */
    cp_error e;
    e.struct_size = sizeof(e);
    cp_image img;
    cp_status st = cp_image_parse_crc(&img, image, total, s->slot_platform[fresh].arch, crc, &e);
    if (st == CP_OK) {
        st = cp_program_load_parsed(prog, &img, &s->slot_platform[fresh], &e);
    }
    if (st != CP_OK) {
        fail_msg(s, CP_PERR_IMAGE_INVALID, (uint8_t)st, e.detail, e.message);
        return;
    }
    if (!check_io_bindings(s, &img)) {
        cp_program_unload(prog);
        return;
    }
    uint64_t tick = cp_program_tick_ns(prog);
    if (tick == 0) {
        tick = CP_SERVER_IDLE_TICK_NS;
    }
    if (tick < s->cfg.min_tick_ns) {
        cp_program_unload(prog);
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.min_tick_ns,
             "the task periods need a tick of %u ns; this runner's shortest tick is %u ns",
             tick, s->cfg.min_tick_ns);
        return;
    }
    if (s->cfg.tick_quantum_ns != 0 && tick % s->cfg.tick_quantum_ns != 0) {
        cp_program_unload(prog);
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.tick_quantum_ns,
             "the task periods need a tick of %u ns; this runner's ticks are multiples of "
             "%u ns", tick, s->cfg.tick_quantum_ns);
        return;
    }
    /* the port table and its names, for WRITE checks and GET_PORTS */
    uint32_t port_count = img.sec[CP_SEC_PORTS].count;
    uint32_t strings_size = img.sec[CP_SEC_STRINGS].size;
    uint64_t ports_len = PORTS_HEAD + (uint64_t)port_count * CP_PORT_SIZE + strings_size;
    if (ports_len > s->cfg.ports_capacity) {
        cp_program_unload(prog);
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.ports_capacity,
             "the port table and names take %u bytes; this runner keeps at most %u",
             ports_len, s->cfg.ports_capacity);
        return;
    }
    cp_sched_config sc;
    cp_fill((uint8_t *)&sc, 0, sizeof(sc));
    sc.struct_size = sizeof(sc);
    sc.deterministic = 0; /* real time: a job costs its measured time */
    sc.tick_ns = tick;
    sc.clock_ns = s->cfg.clock_ns;
    sc.clock_ctx = s->cfg.ctx;
    sc.io_read = sched_io_read;
    sc.io_write = sched_io_write;
    sc.io_ctx = s;
    s->sched[fresh].struct_size = sizeof(cp_sched);
    st = cp_sched_init(&s->sched[fresh], prog, &sc, &e);
    if (st != CP_OK) {
        cp_program_unload(prog);
        fail_msg(s, CP_PERR_IMAGE_INVALID, (uint8_t)st, e.detail, e.message);
        return;
    }

    /* swap: the old program stops; it is unloaded once the tick context cannot use it */
    do_lock(s);
    uint32_t old = s->active;
    int had_old = s->state != CP_SERVER_EMPTY;
    s->active = fresh;
    s->state = CP_SERVER_STOPPED;
    s->tick_ns = tick;
    s->image_crc = crc;
    s->st_count = 0;
    s->generation++;
    do_unlock(s);
    if (had_old && old != fresh) {
        cp_program_unload(&s->prog[old]);
    }

    cp_put32(s->ports, port_count);
    cp_put32(s->ports + 4, strings_size);
    for (uint32_t i = 0; i < port_count; i++) {
        cp_copy(s->ports + PORTS_HEAD + (size_t)i * CP_PORT_SIZE,
                cp_image_entry(&img, CP_SEC_PORTS, i), CP_PORT_SIZE);
    }
    cp_copy(s->ports + PORTS_HEAD + (size_t)port_count * CP_PORT_SIZE,
            image + img.sec[CP_SEC_STRINGS].offset, strings_size);
    s->port_count = port_count;
    s->strings_size = strings_size;
    s->ports_len = (uint32_t)ports_len;
    s->up_active = 0;
    s->up_total = 0;
    s->up_received = 0;
    do_notify(s, CP_SERVER_NOTIFY_STATE);

    put_u32(s, crc);
    put_u16(s, (uint16_t)prog->task_count);
    put_u16(s, (uint16_t)(port_count > 0xffffu ? 0xffffu : port_count));
}

static int no_payload(cp_server *s, const char *what, uint32_t n)
{
    if (n != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, what, n);
        return 0;
    }
    return 1;
}

static void cmd_start(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    if (!no_payload(s, "START takes no payload (%u bytes given)", n)) {
        return;
    }
    do_lock(s);
    uint32_t state = s->state;
    if (state == CP_SERVER_STOPPED) {
        s->state = CP_SERVER_RUNNING;
        s->st_countdown = 0;
        s->generation++;
    }
    do_unlock(s);
    if (state == CP_SERVER_EMPTY) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "START without a program: upload and commit one first",
             0);
        return;
    }
    if (state == CP_SERVER_STOPPED) {
        do_notify(s, CP_SERVER_NOTIFY_STATE);
    }
}

static void cmd_stop(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    if (!no_payload(s, "STOP takes no payload (%u bytes given)", n)) {
        return;
    }
    do_lock(s);
    uint32_t state = s->state;
    if (state == CP_SERVER_RUNNING) {
        /* the state at the stop time shows every period that ended then */
        cp_sched_settle(&s->sched[s->active]);
        s->state = CP_SERVER_STOPPED;
        s->generation++;
    }
    do_unlock(s);
    if (state == CP_SERVER_RUNNING) {
        do_notify(s, CP_SERVER_NOTIFY_STATE);
    }
}

static void cmd_reset(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n != 1 || p[0] > 1) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0,
             "RESET needs u8 what: 0 program state, 1 unload (%u bytes given)", n);
        return;
    }
    if (p[0] == 0) {
        do_lock(s);
        uint32_t state = s->state;
        if (state != CP_SERVER_EMPTY) {
            cp_sched_reset(&s->sched[s->active]);
            s->st_countdown = 0;
            s->generation++;
        }
        do_unlock(s);
        if (state == CP_SERVER_EMPTY) {
            FAIL(s, CP_PERR_BAD_STATE, 0, "RESET 0 without a program", 0);
            return;
        }
        do_notify(s, CP_SERVER_NOTIFY_STATE);
        return;
    }
    do_lock(s);
    uint32_t state = s->state;
    s->state = CP_SERVER_EMPTY;
    s->st_count = 0;
    s->generation++;
    do_unlock(s);
    if (state != CP_SERVER_EMPTY) {
        cp_program_unload(&s->prog[s->active]);
        s->image_crc = 0;
        s->tick_ns = 0;
        s->ports_len = 0;
        s->port_count = 0;
        s->strings_size = 0;
        do_notify(s, CP_SERVER_NOTIFY_STATE);
    }
}

/* Checks the ranges of READ (stride 6) and STREAM; returns the total size or -1 after
 * answering with an error. */
static int64_t check_ranges(cp_server *s, const uint8_t *p, uint32_t count, const char *what)
{
    uint32_t limit = data_size(s);
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t off = cp_le32(p + 6 * i);
        uint16_t size = cp_le16(p + 6 * i + 4);
        if ((uint64_t)off + size > limit) {
            fail_fmt(s, CP_PERR_OUT_OF_RANGE, 0, i, what,
                     CP_ARGS(i, off, (uint64_t)off + size, limit));
            return -1;
        }
        total += size;
    }
    return (int64_t)total;
}

static void cmd_read(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n % 6 != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n, "READ needs n x (u32 offset, u16 size): %u bytes", n);
        return;
    }
    if (s->state == CP_SERVER_EMPTY) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "READ without a program", 0);
        return;
    }
    uint32_t count = n / 6;
    int64_t total = check_ranges(s, p, count,
                                 "READ range %u [%u, %u) is outside the %u-byte data region");
    if (total < 0) {
        return;
    }
    if (total > s->cfg.max_payload) {
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.max_payload,
             "READ of %u bytes; a response holds at most %u", (uint64_t)total,
             s->cfg.max_payload);
        return;
    }
    const uint8_t *data = cp_program_data(active_prog(s));
    do_lock(s);
    for (uint32_t i = 0; i < count; i++) {
        put_bytes(s, data + cp_le32(p + 6 * i), cp_le16(p + 6 * i + 4));
    }
    do_unlock(s);
}

/* 1 if every byte of [off, end) belongs to an input port (role 1) of the loaded image. */
static int input_covered(const cp_server *s, uint64_t off, uint64_t end)
{
    while (off < end) {
        uint64_t reach = off;
        for (uint32_t i = 0; i < s->port_count; i++) {
            const uint8_t *port = s->ports + PORTS_HEAD + (size_t)i * CP_PORT_SIZE;
            if (port[9] != 1) {
                continue;
            }
            uint64_t start = cp_le32(port + 4);
            uint64_t stop = start + (uint64_t)cp_le32(port + 12) * cp_dtype_size(port[8]);
            if (start <= off && stop > reach) {
                reach = stop;
            }
        }
        if (reach == off) {
            return 0;
        }
        off = reach;
    }
    return 1;
}

static void cmd_write(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (s->state == CP_SERVER_EMPTY) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "WRITE without a program", 0);
        return;
    }
    uint32_t limit = data_size(s);
    uint32_t pos = 0;
    for (uint32_t i = 0; pos < n; i++) {
        if (n - pos < 6 || n - pos - 6 < cp_le16(p + pos + 4)) {
            FAIL(s, CP_PERR_BAD_PAYLOAD, pos,
                 "WRITE entry %u at byte %u is cut short: n x (u32 offset, u16 size, bytes)",
                 i, pos);
            return;
        }
        uint32_t off = cp_le32(p + pos);
        uint16_t size = cp_le16(p + pos + 4);
        uint64_t end = (uint64_t)off + size;
        if (end > limit) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i,
                 "WRITE range %u [%u, %u) is outside the %u-byte data region", i, off, end,
                 limit);
            return;
        }
        if (!input_covered(s, off, end)) {
            FAIL(s, CP_PERR_NOT_WRITABLE, i,
                 "WRITE range %u [%u, %u) touches bytes that are not an input port", i, off,
                 end);
            return;
        }
        pos += 6u + size;
    }
    uint8_t *data = cp_program_data(active_prog(s));
    do_lock(s);
    for (pos = 0; pos < n;) {
        uint16_t size = cp_le16(p + pos + 4);
        cp_copy(data + cp_le32(p + pos), p + pos + 6, size);
        pos += 6u + size;
    }
    do_unlock(s);
}

static void cmd_stats(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n != 0 && n != 2) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n, "STATS takes nothing or u16 first_task (%u bytes)", n);
        return;
    }
    uint32_t first = n == 2 ? cp_le16(p) : 0;
    cp_server_rt_stats rt;
    cp_fill((uint8_t *)&rt, 0, sizeof(rt));
    if (s->cfg.rt_stats != NULL) {
        s->cfg.rt_stats(s->cfg.ctx, &rt);
    }
    uint32_t fit = ((uint32_t)s->cfg.max_payload - STATS_HEAD - STATS_TAIL) / STATS_TASK;
    do_lock(s);
    uint32_t tasks = s->state == CP_SERVER_EMPTY ? 0 : active_prog(s)->task_count;
    uint32_t count = first < tasks ? tasks - first : 0;
    count = count < fit ? count : fit;
    put_u64(s, cp_server_ticks(s));
    put_u32(s, s->dec.bad_frames + s->non_requests);
    put_u32(s, rt.late_ticks);
    put_u32(s, rt.jitter_max_ns);
    put_u32(s, rt.jitter_p99_ns);
    put_u16(s, (uint16_t)count);
    for (uint32_t i = first; i < first + count; i++) {
        const cp_task_stats *t = &s->sched[s->active].stats[i];
        put_u64(s, t->runs);
        put_u64(s, t->skipped);
        put_u64(s, t->overruns);
        put_u64(s, t->exec_ns_max);
        put_u64(s, t->exec_ns_sum);
    }
    do_unlock(s);
    put_u32(s, rt.jitter_p50_ns);
    put_u32(s, RELAXED_LOAD(&s->ev_dropped));
    put_u16(s, (uint16_t)first);
    put_u16(s, (uint16_t)tasks);
}

static void cmd_stream(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n < 2 || (n - 2) % 6 != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n,
             "STREAM needs u16 decimation, n x (u32 offset, u16 size): %u bytes", n);
        return;
    }
    uint32_t decimation = cp_le16(p);
    uint32_t count = (n - 2) / 6;
    if (count == 0) {
        do_lock(s);
        s->st_count = 0;
        do_unlock(s);
        return;
    }
    if (decimation == 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "STREAM decimation must be >= 1", 0);
        return;
    }
    if (count > CP_SERVER_MAX_STREAM_RANGES) {
        FAIL(s, CP_PERR_TOO_LARGE, CP_SERVER_MAX_STREAM_RANGES,
             "STREAM of %u ranges; at most %u", count, CP_SERVER_MAX_STREAM_RANGES);
        return;
    }
    if (s->state == CP_SERVER_EMPTY) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "STREAM without a program", 0);
        return;
    }
    int64_t total = check_ranges(s, p + 2, count,
                                 "STREAM range %u [%u, %u) is outside the %u-byte data region");
    if (total < 0) {
        return;
    }
    uint64_t payload = 8u + (uint64_t)total;
    if (payload > s->cfg.max_payload || CP_WIRE_MAX(payload) > s->cfg.ring_size) {
        uint64_t limit = s->cfg.max_payload - 8u;
        while (limit > 0 && CP_WIRE_MAX(8u + limit) > s->cfg.ring_size) {
            limit--;
        }
        FAIL(s, CP_PERR_TOO_LARGE, (uint32_t)limit,
             "STREAM of %u bytes per event; at most %u", (uint64_t)total, limit);
        return;
    }
    do_lock(s);
    for (uint32_t i = 0; i < count; i++) {
        s->st_offset[i] = cp_le32(p + 2 + 6 * i);
        s->st_size[i] = cp_le16(p + 2 + 6 * i + 4);
    }
    s->st_bytes = (uint32_t)total;
    s->st_decimation = decimation;
    s->st_countdown = 0;
    s->st_count = count;
    do_unlock(s);
}

static int check_channel(cp_server *s, uint8_t kind, uint16_t channel, uint32_t i)
{
    if (kind < 1 || kind > 4 || channel >= s->cfg.channels[kind - 1]) {
        FAIL(s, CP_PERR_OUT_OF_RANGE, i,
             "I/O entry %u: channel %u of kind %u does not exist (kinds 1 GPIO, 2 PWM, "
             "3 ENCODER, 4 ADC)", i, channel, kind);
        return 0;
    }
    return 1;
}

static void cmd_io_read(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n % 3 != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n, "IO_READ needs n x (u8 kind, u16 channel): %u bytes",
             n);
        return;
    }
    uint32_t count = n / 3;
    if (count * 8u > s->cfg.max_payload) {
        FAIL(s, CP_PERR_TOO_LARGE, s->cfg.max_payload / 8u,
             "IO_READ of %u channels; at most %u", count, s->cfg.max_payload / 8u);
        return;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!check_channel(s, p[3 * i], cp_le16(p + 3 * i + 1), i)) {
            return;
        }
    }
    for (uint32_t i = 0; i < count; i++) {
        double v = s->cfg.io_read != NULL
                       ? s->cfg.io_read(s->cfg.ctx, p[3 * i], cp_le16(p + 3 * i + 1)) : 0.0;
        put_u64(s, bits_of(v));
    }
}

static void cmd_io_write(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n % 11 != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n,
             "IO_WRITE needs n x (u8 kind, u16 channel, f64 value): %u bytes", n);
        return;
    }
    uint32_t count = n / 11;
    for (uint32_t i = 0; i < count; i++) {
        if (!check_channel(s, p[11 * i], cp_le16(p + 11 * i + 1), i)) {
            return;
        }
    }
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = p + 11 * i;
        int rc = s->cfg.io_write != NULL
                     ? s->cfg.io_write(s->cfg.ctx, e[0], cp_le16(e + 1), f64_of(cp_le64(e + 3)))
                     : 1;
        if (rc != 0) {
            FAIL(s, CP_PERR_NOT_WRITABLE, i, "I/O entry %u: channel %u of kind %u cannot be "
                 "written on this runner", i, cp_le16(e + 1), e[0]);
            return;
        }
    }
}

static void cmd_get_ports(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n != 4) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, n, "GET_PORTS needs u32 offset (%u bytes given)", n);
        return;
    }
    if (s->state == CP_SERVER_EMPTY) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "GET_PORTS without a program", 0);
        return;
    }
    uint32_t off = cp_le32(p);
    if (off > s->ports_len) {
        FAIL(s, CP_PERR_OUT_OF_RANGE, s->ports_len, "GET_PORTS offset %u is past the %u-byte "
             "block", off, s->ports_len);
        return;
    }
    uint32_t chunk = s->ports_len - off;
    uint32_t room = (uint32_t)s->cfg.max_payload - 4u;
    chunk = chunk < room ? chunk : room;
    put_u32(s, s->ports_len);
    put_bytes(s, s->ports + off, chunk);
}

/* ---- dispatch */

/* Commands with side effects: a repeated request is answered from the cache. */
static int has_effect(uint8_t command)
{
    switch (command) {
    case CP_CMD_LOAD_BEGIN:
    case CP_CMD_LOAD_CHUNK:
    case CP_CMD_LOAD_COMMIT:
    case CP_CMD_START:
    case CP_CMD_STOP:
    case CP_CMD_WRITE:
    case CP_CMD_STREAM:
    case CP_CMD_RESET:
    case CP_CMD_IO_WRITE:
        return 1;
    default:
        return 0;
    }
}

static void send_tx(cp_server *s)
{
    size_t w = cp_cobs_encode(s->tx, s->tx_len, s->txenc, s->wire_cap - 1);
    if (w == 0) {
        return; /* cannot happen: wire_cap covers a full frame */
    }
    s->txenc[w] = 0;
    s->cfg.write(s->cfg.ctx, s->txenc, w + 1);
}

static void execute(cp_server *s, uint8_t command, const uint8_t *p, uint32_t n)
{
    switch (command) {
    case CP_CMD_HELLO: cmd_hello(s, p, n); break;
    case CP_CMD_LOAD_BEGIN: cmd_load_begin(s, p, n); break;
    case CP_CMD_LOAD_CHUNK: cmd_load_chunk(s, p, n); break;
    case CP_CMD_LOAD_STATUS: cmd_load_status(s, p, n); break;
    case CP_CMD_LOAD_COMMIT: cmd_load_commit(s, p, n); break;
    case CP_CMD_START: cmd_start(s, p, n); break;
    case CP_CMD_STOP: cmd_stop(s, p, n); break;
    case CP_CMD_READ: cmd_read(s, p, n); break;
    case CP_CMD_WRITE: cmd_write(s, p, n); break;
    case CP_CMD_STATS: cmd_stats(s, p, n); break;
    case CP_CMD_STREAM: cmd_stream(s, p, n); break;
    case CP_CMD_RESET: cmd_reset(s, p, n); break;
    case CP_CMD_IO_READ: cmd_io_read(s, p, n); break;
    case CP_CMD_IO_WRITE: cmd_io_write(s, p, n); break;
    case CP_CMD_GET_PORTS: cmd_get_ports(s, p, n); break;
    default:
        FAIL(s, CP_PERR_BAD_COMMAND, command, "unknown command %u", command);
        break;
    }
}

static void on_frame(cp_server *s, const cp_frame *f)
{
    if ((f->flags & (CP_FLAG_RESPONSE | CP_FLAG_EVENT | CP_FLAG_ERROR)) != 0) {
        s->non_requests++; /* e.g. our own output echoed back: never answer it */
        return;
    }
    int effect = has_effect(f->command);
    if (f->version == CP_PROTO_VERSION && effect && s->cache_valid && f->seq == s->cache_seq &&
        f->command == s->cache_cmd && f->crc == s->cache_crc) {
        s->replays++;
        send_tx(s);
        return;
    }
    s->resp_len = 0;
    s->resp_flags = CP_FLAG_RESPONSE;
    if (f->version != CP_PROTO_VERSION) {
        FAIL(s, CP_PERR_VERSION, CP_PROTO_VERSION,
             "protocol version %u is not supported; this runner speaks version %u", f->version,
             CP_PROTO_VERSION);
        effect = 0;
    } else {
        execute(s, f->command, f->payload, f->length);
    }
    s->tx_len = (uint32_t)cp_frame_seal(s->tx, s->resp_flags, f->seq, f->command,
                                        (uint16_t)s->resp_len);
    s->cache_valid = (uint8_t)effect;
    s->cache_seq = f->seq;
    s->cache_cmd = f->command;
    s->cache_crc = f->crc;
    send_tx(s);
}

void cp_server_feed(cp_server *srv, const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cp_frame f;
        if (cp_decoder_push(&srv->dec, bytes[i], &f) == CP_DEC_FRAME) {
            on_frame(srv, &f);
            (void)cp_server_flush(srv);
        }
    }
}

void cp_server_disconnect(cp_server *srv)
{
    cp_decoder_reset(&srv->dec);
}

/* ---- events: produced in the tick context, written in the protocol context */

size_t cp_server_flush(cp_server *srv)
{
    uint32_t size = srv->cfg.ring_size;
    if (size == 0) {
        return 0;
    }
    uint32_t head = ATOMIC_LOAD(&srv->ring_head);
    uint32_t tail = srv->ring_tail;
    size_t written = 0;
    while (tail != head) {
        uint32_t at = tail & (size - 1);
        uint32_t chunk = head - tail;
        if (chunk > size - at) {
            chunk = size - at;
        }
        srv->cfg.write(srv->cfg.ctx, srv->ring + at, chunk);
        tail += chunk;
        written += chunk;
        ATOMIC_STORE(&srv->ring_tail, tail);
    }
    return written;
}

static void emit_event(cp_server *s, uint64_t tick)
{
    const uint8_t *data = cp_program_data(active_prog(s));
    uint8_t *payload = s->ev + CP_FRAME_HEADER;
    cp_put64(payload, tick);
    uint32_t len = 8;
    for (uint32_t i = 0; i < s->st_count; i++) {
        cp_copy(payload + len, data + s->st_offset[i], s->st_size[i]);
        len += s->st_size[i];
    }
    uint16_t seq = s->ev_seq++;
    size_t w = cp_frame_encode(s->ev, CP_FLAG_EVENT, seq, CP_CMD_STREAM, (uint16_t)len,
                               s->evenc, s->wire_cap);
    uint32_t size = s->cfg.ring_size;
    uint32_t head = s->ring_head;
    uint32_t tail = ATOMIC_LOAD(&s->ring_tail);
    if (w == 0 || w > size - (head - tail)) {
        RELAXED_STORE(&s->ev_dropped, RELAXED_LOAD(&s->ev_dropped) + 1u);
        return;
    }
    for (size_t k = 0; k < w; k++) {
        s->ring[(head + (uint32_t)k) & (size - 1)] = s->evenc[k];
    }
    ATOMIC_STORE(&s->ring_head, head + (uint32_t)w);
    s->ev_sent++;
    do_notify(s, CP_SERVER_NOTIFY_OUTPUT);
}

int cp_server_tick(cp_server *srv)
{
    if (srv->state != CP_SERVER_RUNNING) {
        return 0;
    }
    cp_sched *sc = &srv->sched[srv->active];
    cp_sched_tick(sc);
    if (srv->st_count != 0) {
        if (srv->st_countdown == 0) {
            emit_event(srv, sc->tick - 1);
            srv->st_countdown = srv->st_decimation;
        }
        srv->st_countdown--;
    }
    return 1;
}

/* ---- the catch-up rule of a tick loop */

uint64_t cp_deadline_skip(uint64_t *deadline, uint64_t tick, uint64_t now, uint64_t margin)
{
    uint64_t limit = now > UINT64_MAX - margin ? UINT64_MAX : now + margin;
    if (tick == 0 || *deadline > limit) {
        return 0;
    }
    uint64_t missed = (limit - *deadline) / tick + 1u;
    *deadline += missed * tick;
    return missed;
}

uint32_t cp_server_catch_up(cp_server *srv, uint64_t *deadline, uint64_t tick, uint64_t now,
                            uint64_t margin, uint32_t max_run)
{
    if (tick == 0) {
        return 0;
    }
    uint64_t limit = now > UINT64_MAX - margin ? UINT64_MAX : now + margin;
    uint64_t late = 0;
    for (uint32_t run = 0; run < max_run && *deadline <= limit; run++) {
        if (now >= *deadline && now - *deadline >= tick) {
            late++;
        }
        (void)cp_server_tick(srv);
        *deadline += tick;
    }
    late += cp_deadline_skip(deadline, tick, now, margin);
    return late > UINT32_MAX ? UINT32_MAX : (uint32_t)late;
}

/* ---- jitter histogram */

void cp_jitter_clear(cp_jitter_hist *h)
{
    for (uint32_t i = 0; i < CP_JITTER_FINE + CP_JITTER_COARSE + 1; i++) {
        RELAXED_STORE(&h->bucket[i], 0u);
    }
    RELAXED_STORE(&h->count, 0u);
    RELAXED_STORE(&h->max_ns, 0u);
}

void cp_jitter_record(cp_jitter_hist *h, uint64_t ns)
{
    uint32_t b;
    if (ns < 100000u) {
        b = (uint32_t)ns / 100u;
    } else if (ns < 10000000u) {
        b = CP_JITTER_FINE + ((uint32_t)ns - 100000u) / 10000u;
    } else {
        b = CP_JITTER_FINE + CP_JITTER_COARSE;
    }
    RELAXED_STORE(&h->bucket[b], RELAXED_LOAD(&h->bucket[b]) + 1u);
    RELAXED_STORE(&h->count, RELAXED_LOAD(&h->count) + 1u);
    uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    if (v > RELAXED_LOAD(&h->max_ns)) {
        RELAXED_STORE(&h->max_ns, v);
    }
}

uint32_t cp_jitter_percentile(const cp_jitter_hist *h, uint32_t permille)
{
    uint32_t count = RELAXED_LOAD(&h->count);
    uint32_t max = RELAXED_LOAD(&h->max_ns);
    if (count == 0) {
        return 0;
    }
    uint64_t target = ((uint64_t)count * permille + 999u) / 1000u;
    if (target == 0) {
        target = 1;
    }
    uint64_t seen = 0;
    for (uint32_t i = 0; i < CP_JITTER_FINE + CP_JITTER_COARSE + 1; i++) {
        seen += RELAXED_LOAD(&h->bucket[i]);
        if (seen >= target) {
            uint32_t edge = i < CP_JITTER_FINE ? (i + 1u) * 100u
                            : i < CP_JITTER_FINE + CP_JITTER_COARSE
                                ? 100000u + (i - CP_JITTER_FINE + 1u) * 10000u
                                : max;
            return edge < max ? edge : max;
        }
    }
    return max;
}

void cp_jitter_rt_stats(cp_server_rt_stats *out, const cp_jitter_hist *h,
                        const uint32_t *late_ticks)
{
    out->late_ticks = RELAXED_LOAD(late_ticks);
    out->jitter_p50_ns = cp_jitter_percentile(h, 500);
    out->jitter_p99_ns = cp_jitter_percentile(h, 990);
    out->jitter_max_ns = RELAXED_LOAD(&h->max_ns);
}
