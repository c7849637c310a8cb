/* The protocol server of docs/protocol.md (design notes in copapy/server.h). Libc-free and
 * allocation-free: every buffer is carved out of the embedder's work area at init, every
 * payload field is bounds-checked before it is used. */
#include "copapy/server.h"

#include "internal.h"
#ifdef CP_DEBUG_AUTH
#include <stdio.h>
#endif

enum {
    HELLO_FIXED = 39 + 2 * CP_IO_KIND_COUNT, /* HELLO response (protocol 2) without the name */
    STATS_HEAD = 26,      /* STATS response before the per-task records */
    STATS_TASK = 40,
    /* appended: p50, stream_dropped, first_task, total_tasks; then the fault record; then
     * link_stream_dropped, link_frames_dropped, link_discards, link_bytes_dropped */
    STATS_TAIL = 12 + CP_SERVER_FAULT_RECORD + 20,
    PORTS_HEAD = 8,       /* GET_PORTS block: u32 port_count, u32 strings_size */
    SESSION_REQUEST = 4 + CP_AUTH_NONCE,   /* u8 flags, 3 reserved, client nonce */
    SESSION_TAKEOVER = 1, /* SESSION flags */
    SESSION_CLOSE = 2
};

#define DEFAULT_LEASE_NS 10000000000ull
static const char session_label[] = "copapy session v1";

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
    if (what == CP_SERVER_NOTIFY_TEXT || what == CP_SERVER_NOTIFY_TAKEOVER ||
        what == CP_SERVER_NOTIFY_REFUSE) {
        s->stop_feed = 1; /* the link changes: cp_server_feed_link returns */
    }
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
    if (s->resp_len + 1u <= s->room) {
        resp(s)[s->resp_len++] = v;
    }
}

static void put_u16(cp_server *s, uint16_t v)
{
    if (s->resp_len + 2u <= s->room) {
        cp_put16(resp(s) + s->resp_len, v);
        s->resp_len += 2;
    }
}

static void put_u32(cp_server *s, uint32_t v)
{
    if (s->resp_len + 4u <= s->room) {
        cp_put32(resp(s) + s->resp_len, v);
        s->resp_len += 4;
    }
}

static void put_u64(cp_server *s, uint64_t v)
{
    if (s->resp_len + 8u <= s->room) {
        cp_put64(resp(s) + s->resp_len, v);
        s->resp_len += 8;
    }
}

static void put_bytes(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (s->resp_len + n <= s->room) {
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
    uint32_t room = s->room - s->resp_len;
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

static uint64_t now_ns(const cp_server *s)
{
    return s->cfg.clock_ns != NULL ? s->cfg.clock_ns(s->cfg.ctx) : 0;
}

/* A session is live while its client keeps talking: a second client gets BUSY. */
static int owner_live(const cp_server *s)
{
    if (!s->owner.active) {
        return 0;
    }
    uint64_t lease = s->cfg.session_lease_ns != 0 ? s->cfg.session_lease_ns : DEFAULT_LEASE_NS;
    uint64_t now = now_ns(s);
    return s->cfg.clock_ns == NULL || now - s->owner.last_ns < lease;
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
    if (cfg->key_len != 0 && cfg->key == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0, "cp_server_init: key_len %u without a key",
                       cfg->key_len);
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
    srv->rx2 = w;
    w += frame;
    srv->gtx = w;
    w += frame;
    srv->evraw = w;
    w += frame;
    srv->ports = w;
    w += cfg->ports_capacity;
    srv->ring = w;
    srv->room = (uint32_t)cfg->max_payload - CP_AUTH_TRAILER;
    (void)cp_decoder_init(&srv->dec, srv->rx, frame, cfg->max_payload);
    (void)cp_decoder_init(&srv->dec2, srv->rx2, frame, cfg->max_payload);
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
    if (srv->state != CP_SERVER_EMPTY) {
        cp_sched_safe_state(&srv->sched[srv->active]);
    }
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

const cp_program *cp_server_program(const cp_server *srv)
{
    return srv->state == CP_SERVER_EMPTY ? NULL : active_prog(srv);
}

static size_t flush_ring(cp_server *srv, uint32_t head, int drop_stream);

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
    put_u8(s, (uint8_t)state);
    put_u8(s, (uint8_t)(s->cfg.flags | (s->cfg.require_auth ? CP_SERVER_FLAG_AUTH : 0u) |
                        (owner_live(s) ? CP_SERVER_FLAG_SESSION : 0u)));
    put_u32(s, state == CP_SERVER_EMPTY ? 0 : s->image_crc);
    put_u64(s, ticks);
    put_u8(s, CP_IO_KIND_COUNT); /* protocol 2: the kinds this runner knows, then their counts */
    for (uint32_t k = 0; k < CP_IO_KIND_COUNT; k++) {
        put_u16(s, s->cfg.channels[k]);
    }
    uint32_t room = s->room - s->resp_len;
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
    put_u32(s, s->room - 4u);
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
    uint32_t count = img->sec[CP_SEC_IO_BINDINGS].count;
    for (uint32_t i = 0; i < count; i++) {
        cp_io_binding b = cp_image_io_binding(img, i);
        uint32_t k = (uint32_t)b.kind - 1u; /* the image parser checked the kind */
        if (k >= CP_IO_KIND_COUNT) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i, "I/O binding %u: kind %u is unknown", i, b.kind);
            return 0;
        }
        const char *kind = cp_io_kind_name(b.kind);
        if (b.channel >= s->cfg.channels[k]) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i, "I/O binding %u: %s channel %u does not exist on "
                 "this runner (%u %s channels)", i, (uint64_t)(uintptr_t)kind, b.channel,
                 s->cfg.channels[k], (uint64_t)(uintptr_t)kind);
            return 0;
        }
        const char *why = s->cfg.io_check != NULL ? s->cfg.io_check(s->cfg.ctx, &b) : NULL;
        if (why != NULL) {
            cp_error e;
            e.struct_size = sizeof(e);
            (void)CP_FAIL(&e, CP_ERR_ARGUMENT, 0, "I/O binding %u (%s %s channel %u) refused: ",
                          i, (uint64_t)(uintptr_t)(b.direction == CP_DIR_OUTPUT ? "output to"
                                                                                : "input from"),
                          (uint64_t)(uintptr_t)kind, b.channel);
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

/* The smallest nonzero of a and b (0: neither). */
static uint64_t min_nonzero(uint64_t a, uint64_t b)
{
    return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

/* LOAD_COMMIT's KEEP list: (u32 old offset, u32 new offset, u32 size) each, checked against
 * both data regions before the swap (0: refused, the old program untouched). */
#define KEEP_ENTRY 12u

static int check_keep(cp_server *s, const uint8_t *list, uint32_t count, uint32_t old_size,
                      const cp_image *img)
{
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = list + (size_t)i * KEEP_ENTRY;
        uint64_t from = cp_le32(e), to = cp_le32(e + 4), size = cp_le32(e + 8);
        if (size == 0 || from + size > old_size || to + size > img->data_size) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i,
                 "KEEP entry %u: %u bytes at old %u -> new %u outside the data (old %u, new "
                 "%u bytes): made for another program", i, size, from, to, old_size,
                 img->data_size);
            return 0;
        }
        /* the verifier read the new program's lengths, pointer slots and loop counters from
         * its image: a copy over one would undo the verification */
        if (cp_blocks_frozen_overlap(img, to, size)) {
            FAIL(s, CP_PERR_OUT_OF_RANGE, i,
                 "KEEP entry %u: %u bytes into new %u overlap a frozen slot of the new program "
                 "(a length, pointer slot or loop counter, fixed at load): carry states only",
                 i, size, to);
            return 0;
        }
    }
    return 1;
}

static void cmd_load_commit(cp_server *s, const uint8_t *p, uint32_t n)
{
    /* u8 flags (bit 0 START, bit 1 KEEP); with KEEP: u16 count, count x (old, new, size) */
    uint32_t keep_count = n >= 3 ? cp_le16(p + 1) : 0u;
    int keep = n >= 1 && (p[0] & 2u) != 0;
    if (n >= 1 && (p[0] & ~3u) != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "LOAD_COMMIT flags: bit 0 START, bit 1 KEEP; other "
             "bits are reserved (%u given)", p[0]);
        return;
    }
    if (keep ? (n < 3 || n != 3u + keep_count * KEEP_ENTRY) : n > 1) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, 0, "LOAD_COMMIT: u8 flags (bit 0 START), with KEEP "
             "(bit 1) u16 count + count x 12 bytes; %u bytes given", n);
        return;
    }
    int start = n >= 1 && (p[0] & 1u) != 0;
    if (keep && !(start && s->state == CP_SERVER_RUNNING)) {
        FAIL(s, CP_PERR_BAD_STATE, 0, "KEEP carries state from a running program: commit "
             "with START while one runs", 0);
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
    img.allow_code = (s->cfg.flags & CP_SERVER_FLAG_CODE) != 0;
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
    sc.guard = s->cfg.guard;
    sc.guard_ctx = s->cfg.guard_ctx;
    sc.budget_factor = s->cfg.budget_factor;
    sc.budget_min_ns = s->cfg.budget_min_ns;
    s->sched[fresh].struct_size = sizeof(cp_sched);
    st = cp_sched_init(&s->sched[fresh], prog, &sc, &e);
    if (st != CP_OK) {
        cp_program_unload(prog);
        fail_msg(s, CP_PERR_IMAGE_INVALID, (uint8_t)st, e.detail, e.message);
        return;
    }

    if (keep && !check_keep(s, p + 3, keep_count, s->prog[s->active].data_size, &img)) {
        cp_program_unload(prog);
        return;
    }

    uint64_t link_timeout = s->cfg.link_timeout_ns;
    for (uint32_t i = 0; i < prog->task_count; i++) {
        link_timeout = min_nonzero(link_timeout, prog->tasks[i].link_timeout_ns);
    }

    /* swap between two ticks. Without START the old program stops and its outputs go safe;
     * with START a running program is replaced and the new one runs from the next tick on
     * (its first tick is the old one's next deadline: none lost, none doubled): the outputs
     * it does not take over go safe, the others keep their value until it publishes. */
    do_lock(s);
    uint32_t old = s->active;
    uint32_t old_state = s->state;
    int had_old = old_state != CP_SERVER_EMPTY;
    int replace = start && old_state == CP_SERVER_RUNNING;
    if (replace && keep) { /* between two ticks: the old program's states go on in the new */
        const uint8_t *from = cp_program_data(&s->prog[old]);
        uint8_t *to = cp_program_data(prog);
        for (uint32_t i = 0; i < keep_count; i++) {
            const uint8_t *e = p + 3 + (size_t)i * KEEP_ENTRY;
            cp_copy(to + cp_le32(e + 4), from + cp_le32(e), cp_le32(e + 8));
        }
    }
    if (had_old) {
        cp_sched_release_outputs(&s->sched[old], replace ? prog : NULL);
    }
    s->active = fresh;
    s->state = start ? CP_SERVER_RUNNING : CP_SERVER_STOPPED;
    s->tick_ns = tick;
    s->image_crc = crc;
    s->st_count = 0;
    s->st_countdown = 0;
    s->link_timeout_ns = link_timeout;
    s->last_rx_ns = now_ns(s);
    if (!replace) {
        s->generation++;
    }
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
    do_notify(s, replace ? CP_SERVER_NOTIFY_REPLACED : CP_SERVER_NOTIFY_STATE);

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
    if (state == CP_SERVER_FAULTED) {
        FAIL(s, CP_PERR_BAD_STATE, s->sched[s->active].fault.kind,
             "START of a faulted program (%u, task %u): RESET it or commit a new one",
             s->sched[s->active].fault.kind, s->sched[s->active].fault.task);
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
        /* the state at the stop time shows every period that ended then; the channels go
         * to their safe values (the data region keeps what was published) */
        cp_sched_settle(&s->sched[s->active]);
        cp_sched_safe_state(&s->sched[s->active]);
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
            cp_sched_reset(&s->sched[s->active]); /* clears a fault */
            if (state == CP_SERVER_FAULTED) {
                s->state = CP_SERVER_STOPPED;
            }
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
    if (state != CP_SERVER_EMPTY) {
        cp_sched_safe_state(&s->sched[s->active]);
    }
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
    if (total > s->room) {
        FAIL(s, CP_PERR_TOO_LARGE, s->room,
             "READ of %u bytes; a response holds at most %u", (uint64_t)total,
             s->room);
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

/* The fault record (CP_SERVER_FAULT_RECORD bytes). */
static void write_fault(uint8_t *out, const cp_fault *f, uint32_t count)
{
    cp_put32(out, f->kind);
    cp_put32(out + 4, f->task);
    cp_put64(out + 8, f->address);
    cp_put64(out + 16, f->pc);
    cp_put32(out + 24, f->code);
    cp_put32(out + 28, count);
    cp_put64(out + 32, f->tick);
}

/* The loaded program's fault (zeros but the count if there is none), protocol context. */
static void put_fault(cp_server *s, uint8_t *out)
{
    cp_fault f;
    cp_fill((uint8_t *)&f, 0, sizeof(f));
    do_lock(s);
    const cp_fault *cur = s->state == CP_SERVER_EMPTY ? NULL
                                                      : cp_sched_fault(&s->sched[s->active]);
    if (cur != NULL) {
        f = *cur;
    }
    uint32_t count = s->fault_count;
    do_unlock(s);
    write_fault(out, &f, count);
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
    uint32_t fit = (s->room - STATS_HEAD - STATS_TAIL) / STATS_TASK;
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
    put_fault(s, resp(s) + s->resp_len);
    s->resp_len += CP_SERVER_FAULT_RECORD;
    put_u32(s, rt.link.stream_events);
    put_u32(s, rt.link.frames);
    put_u32(s, rt.link.discards);
    put_u64(s, rt.link.bytes);
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
        uint32_t head = ATOMIC_LOAD(&s->ring_head);
        do_unlock(s);
        (void)flush_ring(s, head, 1);
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
    /* the ring holds a 2-byte length and the frame without CRC and trailer */
    if (payload > s->room || 2u + CP_FRAME_HEADER + payload > s->cfg.ring_size) {
        uint64_t limit = s->room - 8u;
        while (limit > 0 && 2u + CP_FRAME_HEADER + 8u + limit > s->cfg.ring_size) {
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
    uint32_t head = ATOMIC_LOAD(&s->ring_head);
    do_unlock(s);
    /* the rows of the subscription this one replaces, still queued, are discarded: every
     * STREAM event sent after this response is of the new subscription */
    (void)flush_ring(s, head, 1);
}

static int check_channel(cp_server *s, uint8_t kind, uint16_t channel, uint32_t i)
{
    if (kind < 1 || kind > CP_IO_KIND_COUNT || channel >= s->cfg.channels[kind - 1]) {
        FAIL(s, CP_PERR_OUT_OF_RANGE, i,
             "I/O entry %u: channel %u of kind %u does not exist (kinds:" CP_IO_KIND_LIST ")",
             i, channel, kind);
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
    if (count * 8u > s->room) {
        FAIL(s, CP_PERR_TOO_LARGE, s->room / 8u,
             "IO_READ of %u channels; at most %u", count, s->room / 8u);
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
    uint32_t room = s->room - 4u;
    chunk = chunk < room ? chunk : room;
    put_u32(s, s->ports_len);
    put_bytes(s, s->ports + off, chunk);
}

/* ---- sessions (docs/protocol.md, "Sessions and authentication") */

/* Nonce bytes: the embedder's random source, else HMAC(key, counter | clock | mix). */
static void make_nonce(cp_server *s, uint8_t *out, const uint8_t *mix, size_t mix_len)
{
    if (s->cfg.random != NULL) {
        s->cfg.random(s->cfg.ctx, out, CP_AUTH_NONCE);
        return;
    }
    uint8_t seed[12];
    cp_put32(seed, ++s->nonce_count);
    cp_put64(seed + 4, now_ns(s));
    cp_hmac m;
    cp_hmac_init(&m, s->cfg.key, s->cfg.key_len);
    uint8_t digest[CP_SHA256_SIZE];
    cp_hmac_mac2(&m, seed, sizeof(seed), mix, mix_len, digest);
    cp_copy(out, digest, CP_AUTH_NONCE);
}

/* The session key HMAC(key, label | server nonce | client nonce), prepared for use. */
static void session_key(const cp_server *s, const uint8_t *nonce_s, const uint8_t *nonce_c,
                        cp_hmac *out)
{
    uint8_t nonces[2 * CP_AUTH_NONCE];
    cp_copy(nonces, nonce_s, CP_AUTH_NONCE);
    cp_copy(nonces + CP_AUTH_NONCE, nonce_c, CP_AUTH_NONCE);
    cp_hmac k;
    cp_hmac_init(&k, s->cfg.key, s->cfg.key_len);
    uint8_t key[CP_SHA256_SIZE];
    cp_hmac_mac2(&k, (const uint8_t *)session_label, sizeof(session_label) - 1, nonces,
                 sizeof(nonces), key);
    cp_hmac_init(out, key, sizeof(key));
    cp_fill(key, 0, sizeof(key));
}

static void cmd_session(cp_server *s, const uint8_t *p, uint32_t n)
{
    if (n != SESSION_REQUEST || p[1] != 0 || p[2] != 0 || p[3] != 0) {
        FAIL(s, CP_PERR_BAD_PAYLOAD, SESSION_REQUEST,
             "SESSION needs u8 flags, 3 reserved bytes, a 16-byte nonce (%u bytes given)", n);
        return;
    }
    uint8_t flags = p[0];
    if ((flags & SESSION_CLOSE) != 0) {
        if (s->req_sess != &s->owner) {
            FAIL(s, CP_PERR_AUTH_REQUIRED, 0, "SESSION close must be authenticated by the "
                 "session it closes", 0);
            return;
        }
        s->req_close = 1;
        return;
    }
    if (owner_live(s) && (flags & SESSION_TAKEOVER) == 0 && s->req_sess != &s->owner) {
        uint64_t idle = now_ns(s) - s->owner.last_ns;
        FAIL(s, CP_PERR_BUSY, (uint32_t)(idle / 1000000u),
             "another client owns this runner (its last request %u ms ago); take it "
             "over with SerialTarget(..., takeover=True)",
             idle / 1000000u);
        return;
    }
    uint8_t nonce_s[CP_AUTH_NONCE];
    make_nonce(s, nonce_s, p + 4, CP_AUTH_NONCE);
    cp_fill((uint8_t *)&s->pending, 0, sizeof(s->pending));
    session_key(s, nonce_s, p + 4, &s->pending.mac);
    s->pending.active = 1;
    s->pending.link = (uint8_t)s->req_link;
    s->pending.last_ns = now_ns(s);
    /* the owner keeps its session until the new client proves the key */
    put_u8(s, s->cfg.require_auth ? 1u : 0u);
    put_u8(s, 0);
    put_u16(s, 0);
    put_bytes(s, nonce_s, CP_AUTH_NONCE);
    uint64_t lease = s->cfg.session_lease_ns != 0 ? s->cfg.session_lease_ns : DEFAULT_LEASE_NS;
    put_u32(s, (uint32_t)(lease / 1000000u));
    put_u32(s, (uint32_t)(s->cfg.link_timeout_ns / 1000000u));
}

static void cmd_ping(cp_server *s, const uint8_t *p, uint32_t n)
{
    (void)p;
    no_payload(s, "PING takes no payload (%u bytes given)", n);
}

/* ---- dispatch */

static void link_write(cp_server *s, uint32_t link, const uint8_t *bytes, size_t n)
{
    if (s->cfg.write_link != NULL) {
        s->cfg.write_link(s->cfg.ctx, link, bytes, n);
    } else if (link == CP_SERVER_OWNER) {
        s->cfg.write(s->cfg.ctx, bytes, n);
    }
}

/* COBS-encodes a sealed frame into txenc and writes it to a link. */
static void send_frame(cp_server *s, uint32_t link, const uint8_t *frame, size_t len)
{
    size_t w = cp_cobs_encode(frame, len, s->txenc, s->wire_cap - 1);
    if (w == 0) {
        return; /* cannot happen: wire_cap covers a full frame */
    }
    s->txenc[w] = 0;
    link_write(s, link, s->txenc, w + 1);
}

static void send_tx(cp_server *s)
{
    send_frame(s, CP_SERVER_OWNER, s->tx, s->tx_len);
}

/* The authentication tag of a frame whose header (length including the trailer) and payload
 * up to the counter are in place: HMAC over everything before the tag. */
static void frame_tag(const cp_hmac *mac, const uint8_t *frame, uint32_t length,
                      uint8_t tag[CP_SHA256_SIZE])
{
    cp_hmac_mac2(mac, frame, (size_t)CP_FRAME_HEADER + length - CP_AUTH_TAG, frame, 0, tag);
}

/* Header, trailer (counter, tag) and CRC around `length` payload bytes at frame + 8; the
 * payload has room for the trailer (handlers use at most room bytes). */
static size_t seal(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                   uint32_t length, const cp_server_session *sess, uint32_t counter)
{
    if (sess == NULL) {
        return cp_frame_seal(frame, flags, seq, command, (uint16_t)length);
    }
    uint32_t total = length + CP_AUTH_TRAILER;
    cp_frame_header(frame, (uint8_t)(flags | CP_FLAG_AUTH), seq, command, (uint16_t)total);
    cp_put32(frame + CP_FRAME_HEADER + length, counter);
    uint8_t tag[CP_SHA256_SIZE];
    frame_tag(&sess->mac, frame, total, tag);
    cp_copy(frame + CP_FRAME_HEADER + length + 4, tag, CP_AUTH_TAG);
    cp_frame_put_crc(frame, (uint16_t)total);
    return (size_t)CP_FRAME_HEADER + total + CP_FRAME_CRC;
}

/* 1 if the frame's trailer is a valid tag of `sess`. */
static int tag_valid(const cp_server_session *sess, const uint8_t *frame, uint32_t length)
{
    if (!sess->active || length < CP_AUTH_TRAILER) {
        return 0;
    }
    uint8_t tag[CP_SHA256_SIZE];
    frame_tag(&sess->mac, frame, length, tag);
    return cp_equal_ct(tag, frame + CP_FRAME_HEADER + length - CP_AUTH_TAG, CP_AUTH_TAG);
}

/* An unauthenticated ERROR response on a link, without touching the owner's replay cache. */
static void refuse(cp_server *s, uint32_t link, const cp_frame *f, uint8_t code,
                   uint32_t detail, const char *fmt, const uint64_t *args, size_t nargs)
{
    uint8_t *saved = s->tx;
    s->tx = s->gtx;
    s->resp_len = 0;
    fail_fmt(s, code, 0, detail, fmt, args, nargs);
    size_t len = cp_frame_seal(s->gtx, s->resp_flags, f->seq, f->command,
                               (uint16_t)s->resp_len);
    s->tx = saved;
    s->refused++;
    send_frame(s, link, s->gtx, len);
    if (link == CP_SERVER_GUEST) {
        do_notify(s, CP_SERVER_NOTIFY_REFUSE); /* a refused second connection is closed */
    }
}

#define REFUSE(s, link, f, code, detail, fmt, ...) \
    refuse((s), (link), (f), (code), (detail), (fmt), CP_ARGS(__VA_ARGS__))

/* The guest's session proved the key: it is the owner now, on the guest's connection. */
static void promote(cp_server *s, uint32_t link)
{
    s->owner = s->pending;
    cp_fill((uint8_t *)&s->pending, 0, sizeof(s->pending));
    s->owner.link = CP_SERVER_OWNER;
    s->cache_valid = 0;
    if (link == CP_SERVER_GUEST) {
        cp_decoder d = s->dec;
        s->dec = s->dec2;
        s->dec2 = d;
        uint8_t *rx = s->rx;
        s->rx = s->rx2;
        s->rx2 = rx;
        cp_decoder_reset(&s->dec2);
        do_notify(s, CP_SERVER_NOTIFY_TAKEOVER);
    }
}

/* The requests, by code (contract.h's CP_COMMAND_TABLE): the handler (NULL: an event, no
 * request), whether the command has side effects (a repeated request is answered from the
 * replay cache) and whether anyone may send it unauthenticated. */
typedef struct command_row {
    void (*handler)(cp_server *s, const uint8_t *p, uint32_t n);
    uint8_t effect;
    uint8_t open;
} command_row;

#define HANDLER_OPEN(h) cmd_##h
#define HANDLER_OWNER(h) cmd_##h
#define HANDLER_EVENT(h) NULL
#define COMMAND_ROW(N, h, code, effect, access) \
    [code] = {HANDLER_##access(h), effect, ACCESS_OPEN_##access},
enum { ACCESS_OPEN_OPEN = 1, ACCESS_OPEN_OWNER = 0, ACCESS_OPEN_EVENT = 0 };

static const command_row commands[CP_COMMAND_COUNT + 1] = {CP_COMMAND_TABLE(COMMAND_ROW)};

static const command_row *command_of(uint8_t command)
{
    return command <= CP_COMMAND_COUNT ? &commands[command] : &commands[0];
}

static void execute(cp_server *s, uint8_t command, const uint8_t *p, uint32_t n)
{
    const command_row *row = command_of(command);
    if (row->handler == NULL) {
        FAIL(s, CP_PERR_BAD_COMMAND, command, "unknown command %u", command);
        return;
    }
    row->handler(s, p, n);
}

/* Checks a request's authentication. Returns 0 and the session (NULL: unauthenticated,
 * allowed) with the payload length without the trailer, or nonzero after refusing it. A
 * retry of the session's last request (same counter and CRC) passes: the replay cache then
 * answers it, or it is executed again if it has no effect. */
static int authenticate(cp_server *s, uint32_t link, const cp_frame *f,
                        cp_server_session **out, uint32_t *length)
{
    *out = NULL;
    *length = f->length;
    const uint8_t *frame = f->payload - CP_FRAME_HEADER;
    if ((f->flags & CP_FLAG_AUTH) == 0) {
        /* SESSION is open when it begins a session, not when it closes one */
        int open = command_of(f->command)->open &&
                   (f->command != CP_CMD_SESSION ||
                    (f->length >= 1 && (f->payload[0] & SESSION_CLOSE) == 0));
        if (open) {
            return 0;
        }
        if (s->cfg.require_auth) {
            REFUSE(s, link, f, CP_PERR_AUTH_REQUIRED, 0,
                   "this runner accepts authenticated requests only: connect "
                   "with the runner's key (SerialTarget(..., key=...))", 0);
            return 1;
        }
        if (link == CP_SERVER_GUEST || owner_live(s)) {
            REFUSE(s, link, f, CP_PERR_BUSY, 0,
                   "another client owns this runner; begin a session with takeover to "
                   "replace it", 0);
            return 1;
        }
        return 0;
    }
    cp_server_session *sess = NULL;
    if (link == CP_SERVER_OWNER && tag_valid(&s->owner, frame, f->length)) {
        sess = &s->owner;
    } else if (s->pending.link == link && tag_valid(&s->pending, frame, f->length)) {
        sess = &s->pending;
    }
    if (sess == NULL) {
#ifdef CP_DEBUG_AUTH
        fprintf(stderr, "auth failed: link %u pending link %u active %u owner %u\n", link,
                s->pending.link, s->pending.active, s->owner.active);
#endif
        REFUSE(s, link, f, CP_PERR_AUTH_FAILED, 0,
               "the frame's tag is not valid for any session of this runner "
               "(wrong key, a changed frame, or the session ended)", 0);
        return 1;
    }
    uint32_t counter = cp_le32(f->payload + f->length - CP_AUTH_TRAILER);
    if (sess == &s->owner) {
        int retry = counter == sess->rx_counter && f->crc == sess->rx_crc;
        if (!retry && counter <= sess->rx_counter) {
            REFUSE(s, link, f, CP_PERR_REPLAY, sess->rx_counter,
                   "request counter %u was used already (the last one was %u)",
                   counter, sess->rx_counter);
            return 1;
        }
    } else {
        promote(s, link);
        sess = &s->owner;
    }
    sess->rx_counter = counter;
    sess->rx_crc = f->crc;
    sess->last_ns = now_ns(s);
    *out = sess;
    *length = f->length - CP_AUTH_TRAILER;
    return 0;
}

static void on_frame(cp_server *s, uint32_t link, const cp_frame *f)
{
    if ((f->flags & (CP_FLAG_RESPONSE | CP_FLAG_EVENT | CP_FLAG_ERROR)) != 0) {
        s->non_requests++; /* e.g. our own output echoed back: never answer it */
        return;
    }
    if (f->version != CP_FRAME_VERSION) {
        REFUSE(s, link, f, CP_PERR_VERSION, CP_FRAME_VERSION,
               "frame version %u is not supported; this runner speaks version %u",
               f->version, CP_FRAME_VERSION);
        return;
    }
    cp_server_session *sess;
    uint32_t n;
    if (authenticate(s, link, f, &sess, &n) != 0) {
        return;
    }
    /* a link still a guest after authentication speaks only HELLO and SESSION */
    int guest = link == CP_SERVER_GUEST && sess == NULL;
    int effect = command_of(f->command)->effect && !guest;
    if (effect && s->cache_valid && f->seq == s->cache_seq && f->command == s->cache_cmd &&
        f->crc == s->cache_crc) {
        s->replays++;
        send_tx(s);
        return;
    }
    if (!guest && (sess != NULL || !s->owner.active)) {
        s->last_rx_ns = now_ns(s); /* the dead-man switch: the owner talks */
    }
    uint8_t *saved = s->tx;
    if (guest) {
        s->tx = s->gtx;
    }
    s->resp_len = 0;
    s->resp_flags = CP_FLAG_RESPONSE;
    s->req_sess = sess;
    s->req_link = link;
    s->req_close = 0;
    execute(s, f->command, f->payload, n);
    uint32_t counter = sess != NULL ? sess->rx_counter : 0;
    size_t len = seal(s->tx, s->resp_flags, f->seq, f->command, s->resp_len, sess, counter);
    s->req_sess = NULL;
    if (guest) {
        s->tx = saved;
        send_frame(s, link, s->gtx, len);
        return;
    }
    s->tx_len = (uint32_t)len;
    s->cache_valid = (uint8_t)effect;
    s->cache_seq = f->seq;
    s->cache_cmd = f->command;
    s->cache_crc = f->crc;
    send_frame(s, link, s->tx, len);
    if (s->req_close) {
        cp_fill((uint8_t *)&s->owner, 0, sizeof(s->owner));
        s->cache_valid = 0;
    }
}

size_t cp_server_feed_link(cp_server *srv, uint32_t link, const uint8_t *bytes, size_t n)
{
    srv->stop_feed = 0;
    for (size_t i = 0; i < n; i++) {
        cp_decoder *d = link == CP_SERVER_GUEST ? &srv->dec2 : &srv->dec;
        cp_frame f;
        int r = cp_decoder_push(d, bytes[i], &f);
        if (r == CP_DEC_TEXT) {
            do_notify(srv, CP_SERVER_NOTIFY_TEXT);
        } else if (r == CP_DEC_FRAME) {
            on_frame(srv, link, &f);
            (void)cp_server_flush(srv);
        }
        if (srv->stop_feed) {
            srv->stop_feed = 0;
            return i + 1;
        }
    }
    return n;
}

void cp_server_feed(cp_server *srv, const uint8_t *bytes, size_t n)
{
    size_t done = 0;
    while (done < n) { /* text is discarded up to its delimiter; the rest is fed on */
        done += cp_server_feed_link(srv, CP_SERVER_OWNER, bytes + done, n - done);
    }
}

void cp_server_disconnect(cp_server *srv)
{
    cp_decoder_reset(&srv->dec);
}

void cp_server_disconnect_link(cp_server *srv, uint32_t link)
{
    if (link == CP_SERVER_GUEST) {
        cp_decoder_reset(&srv->dec2);
        if (srv->pending.link == CP_SERVER_GUEST) {
            cp_fill((uint8_t *)&srv->pending, 0, sizeof(srv->pending));
        }
        return;
    }
    cp_decoder_reset(&srv->dec);
    cp_fill((uint8_t *)&srv->owner, 0, sizeof(srv->owner));
    if (srv->pending.link == CP_SERVER_OWNER) {
        cp_fill((uint8_t *)&srv->pending, 0, sizeof(srv->pending));
    }
    srv->cache_valid = 0;
}

/* ---- events: produced in the tick context, sealed and written in the protocol context
 * The ring holds records: u16 length, then the frame without CRC (header and payload). The
 * protocol context adds the session's trailer and the CRC, so the tick context never hashes
 * and never encodes. */

static void ring_copy_out(const cp_server *s, uint32_t from, uint8_t *dst, uint32_t n)
{
    uint32_t mask = s->cfg.ring_size - 1;
    for (uint32_t k = 0; k < n; k++) {
        dst[k] = s->ring[(from + k) & mask];
    }
}

/* Sends the events queued before ring position `head`; drop_stream: discards the STREAM
 * events among them (a replaced subscription's rows) and sends the others (FAULT). */
static size_t flush_ring(cp_server *srv, uint32_t head, int drop_stream)
{
    uint32_t size = srv->cfg.ring_size;
    if (size == 0) {
        return 0;
    }
    uint32_t tail = srv->ring_tail;
    size_t written = 0;
    while (head - tail >= 2u) {
        uint8_t len_bytes[2];
        ring_copy_out(srv, tail, len_bytes, 2);
        uint32_t len = cp_le16(len_bytes);
        ring_copy_out(srv, tail + 2u, srv->evraw, len);
        tail += 2u + len;
        ATOMIC_STORE(&srv->ring_tail, tail);
        if (drop_stream && srv->evraw[4] == CP_CMD_STREAM) {
            continue;
        }
        uint32_t payload = len - CP_FRAME_HEADER;
        cp_server_session *sess = srv->owner.active ? &srv->owner : NULL;
        uint32_t counter = sess != NULL ? ++sess->ev_counter : 0;
        size_t frame = seal(srv->evraw, srv->evraw[1], cp_le16(srv->evraw + 2), srv->evraw[4],
                            payload, sess, counter);
        size_t w = cp_cobs_encode(srv->evraw, frame, srv->evenc, srv->wire_cap - 1);
        if (w != 0) {
            srv->evenc[w] = 0;
            link_write(srv, CP_SERVER_OWNER, srv->evenc, w + 1);
            written += w + 1;
        }
    }
    return written;
}

size_t cp_server_flush(cp_server *srv)
{
    return flush_ring(srv, ATOMIC_LOAD(&srv->ring_head), 0);
}

/* Tick context: queues the event built in s->ev (payload of `len` bytes). */
static void queue_event(cp_server *s, uint8_t command, uint32_t len)
{
    uint8_t *f = s->ev;
    cp_frame_header(f, CP_FLAG_EVENT, s->ev_seq++, command, (uint16_t)len);
    uint32_t record = 2u + CP_FRAME_HEADER + len;
    uint32_t size = s->cfg.ring_size;
    uint32_t head = s->ring_head;
    uint32_t tail = ATOMIC_LOAD(&s->ring_tail);
    if (size == 0 || record > size - (head - tail)) {
        RELAXED_STORE(&s->ev_dropped, RELAXED_LOAD(&s->ev_dropped) + 1u);
        return;
    }
    uint32_t mask = size - 1;
    s->ring[head & mask] = (uint8_t)(record - 2u);
    s->ring[(head + 1u) & mask] = (uint8_t)((record - 2u) >> 8);
    for (uint32_t k = 0; k < record - 2u; k++) {
        s->ring[(head + 2u + k) & mask] = f[k];
    }
    ATOMIC_STORE(&s->ring_head, head + record);
    s->ev_sent++;
    do_notify(s, CP_SERVER_NOTIFY_OUTPUT);
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
    queue_event(s, CP_CMD_STREAM, len);
}

/* Tick context, lock held: the program faulted (in this tick, or by the link timeout). */
static void faulted(cp_server *s, const cp_fault *f)
{
    s->state = CP_SERVER_FAULTED;
    s->generation++;
    s->fault_count++;
    write_fault(s->ev + CP_FRAME_HEADER, f, s->fault_count);
    queue_event(s, CP_CMD_FAULT, CP_SERVER_FAULT_RECORD);
}

int cp_server_tick(cp_server *srv)
{
    if (srv->state != CP_SERVER_RUNNING) {
        return 0;
    }
    cp_sched *sc = &srv->sched[srv->active];
    if (srv->link_timeout_ns != 0) {
        uint64_t silent = now_ns(srv) - srv->last_rx_ns;
        if (silent > srv->link_timeout_ns && silent < (UINT64_MAX >> 1)) {
            cp_fault link = {CP_FAULT_LINK, CP_FAULT_NO_TASK, 0, 0,
                             (uint32_t)(silent / 1000000u), 0, 0};
            cp_sched_fail(sc, &link);
        }
    }
    cp_sched_tick(sc);
    const cp_fault *fault = cp_sched_fault(sc);
    if (fault != NULL) {
        faulted(srv, fault);
        return 1;
    }
    if (srv->st_count != 0) {
        if (srv->st_countdown == 0) {
            emit_event(srv, sc->tick - 1);
            srv->st_countdown = srv->st_decimation;
        }
        srv->st_countdown--;
    }
    return 1;
}
