/* Deterministic mutation fuzzing of the protocol server (docs/protocol.md) under ASan/UBSan:
 * sessions of plausible requests (uploads of real images, commits, start/stop, reads, writes,
 * streams, I/O, resets) whose payloads, headers and wire bytes are mutated, with ticks of the
 * running program in between. Invariants: no crash or undefined behaviour, every intact
 * request gets exactly one well-formed response with its seq, and nothing the server writes is
 * a malformed frame. Ticks run only while a known-good image is loaded (a mutated image that
 * passes validation could hold any machine code); one of them faults (ud2 in a task, under the
 * POSIX guard). Runners alternate between no key, an empty-key session and a required key:
 * the generator begins real sessions (SESSION, the derived key) and then sends authenticated
 * frames, mutated before the tag (valid, the server must judge the payload) or after it
 * (invalid), replays old ones, and feeds a guest link now and then. Every authenticated
 * response must carry a valid tag with the request's counter.
 * Usage: fuzz_server [iterations] [seed] */
#include "server_fixture.h"
#include "rng.h"

static uint32_t interesting(void)
{
    static const uint32_t v[] = {0, 1, 2, 3, 4, 7, 8, 12, 16, 20, 24, 28, 32, 40, 44, 48, 52,
                                 60, 63, 64, 65, 127, 128, 255, 256, 1019, 1020, 1024, 4095,
                                 4096, 8191, 8192, 65535, 65536, 0x7fffffffu, 0xfffffffcu,
                                 0xffffffffu};
    return v[below(sizeof(v) / sizeof(v[0]))];
}

enum { NGOOD = 6 };
static tb_image good[NGOOD];
static uint32_t good_crc[NGOOD];

static int known_good(uint32_t crc)
{
    for (int i = 0; i < NGOOD; i++) {
        if (good_crc[i] == crc) {
            return 1;
        }
    }
    return 0;
}

static uint8_t payload[70000];
static size_t plen;

static void p8(uint8_t v)
{
    payload[plen++] = v;
}

static void p16(uint16_t v)
{
    tb_put16(payload + plen, v);
    plen += 2;
}

static void p32(uint32_t v)
{
    tb_put32(payload + plen, v);
    plen += 4;
}

static uint32_t small_offset(void)
{
    return below(8) == 0 ? interesting() : below(PG_DATA_SIZE + 8);
}

/* The generator's session (what a host tracks): key, counter; the runner's key. */
static const uint8_t KEY[] = "fuzz-key-0123456789";
static int sess_on;
static cp_hmac sess_mac;
static uint32_t sess_counter;
static uint32_t req_counter;    /* the counter of the request in flight */
static int last_sent_auth, last_tampered;
static cp_hmac req_mac;         /* and the session key it was sent with */
static cp_hmac own_mac;         /* the key of the session the runner answered last */
static uint32_t ev_counter;     /* the last event counter seen in the session */
static uint8_t sess_nonce[16];
static const uint8_t *runner_key;
static size_t runner_key_len;

/* Upload state of the generator (what a host would track). */
static int up_image = -1;
static uint32_t up_off;
static tb_image up_bytes;

/* The requests of contract.h's command table (its EVENT rows are never requests). */
#define REQUEST_OPEN(code) code,
#define REQUEST_OWNER(code) code,
#define REQUEST_EVENT(code)
#define REQUEST_CODE(N, h, code, effect, access) REQUEST_##access(code)
static const uint8_t requests[] = {CP_COMMAND_TABLE(REQUEST_CODE)};
#define N_REQUESTS ((uint32_t)(sizeof(requests) / sizeof(requests[0])))

/* Builds one plausible request; returns the command. A command of the table without its own
 * case below gets random payload bytes (as do random command bytes, 2 picks in N + 2). */
static uint8_t gen_request(void)
{
    plen = 0;
    uint32_t pick = below(N_REQUESTS + 2);
    uint8_t command = pick < N_REQUESTS ? requests[pick] : 0;
    if (!sess_on && below(6) == 0) {
        command = CP_CMD_SESSION; /* hosts begin sessions */
    }
    if (up_image >= 0 && below(2) == 0) { /* a host keeps uploading, then commits */
        command = up_off < up_bytes.len ? CP_CMD_LOAD_CHUNK : CP_CMD_LOAD_COMMIT;
    }
    switch (command) {
    case CP_CMD_HELLO:
        p16(1);
        return CP_CMD_HELLO;
    case CP_CMD_PING:
        return CP_CMD_PING;
    case CP_CMD_LOAD_BEGIN: { /* a good image, sometimes a corrupted copy or a wrong CRC */
        up_image = (int)below(NGOOD);
        up_bytes = good[up_image];
        up_off = 0;
        uint32_t crc = good_crc[up_image];
        switch (below(6)) {
        case 0:
            up_bytes.bytes[below((uint32_t)up_bytes.len)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* consistently corrupted: the core has to find it */
            for (int k = 0; k < 3; k++) {
                uint32_t at = below((uint32_t)up_bytes.len - 4);
                up_bytes.bytes[at] = (uint8_t)(below(2) ? interesting() : rng());
            }
            tb_fix_crc(up_bytes.bytes, up_bytes.len);
            crc = tb_get32(up_bytes.bytes + up_bytes.len - 4);
            break;
        case 2:
            crc = (uint32_t)rng();
            break;
        default:
            break;
        }
        p32((uint32_t)up_bytes.len);
        p32(crc);
        return CP_CMD_LOAD_BEGIN;
    }
    case CP_CMD_LOAD_CHUNK: { /* the next chunk (sometimes skipping ahead or replaying) */
        if (up_image < 0) {
            p32(0);
            return CP_CMD_LOAD_CHUNK;
        }
        uint32_t off = up_off;
        if (below(6) == 0) {
            off = below((uint32_t)up_bytes.len + 10);
        }
        uint32_t n = 1 + below(FX_MAXP - 4);
        if (off > up_bytes.len) {
            n = 0;
        } else if (n > up_bytes.len - off) {
            n = (uint32_t)up_bytes.len - off;
        }
        p32(off);
        memcpy(payload + plen, up_bytes.bytes + off, n);
        plen += n;
        if (off <= up_off && off + n > up_off) {
            up_off = off + n;
        }
        return CP_CMD_LOAD_CHUNK;
    }
    case CP_CMD_LOAD_STATUS:
    case CP_CMD_LOAD_COMMIT:
        if (up_image >= 0 && up_off >= up_bytes.len && below(4) != 0) {
            up_image = -1;
            return CP_CMD_LOAD_COMMIT;
        }
        return below(2) ? CP_CMD_LOAD_COMMIT : CP_CMD_LOAD_STATUS;
    case CP_CMD_START:
    case CP_CMD_STOP:
        return below(3) ? CP_CMD_START : CP_CMD_STOP;
    case CP_CMD_READ: {
        uint32_t n = below(4);
        for (uint32_t i = 0; i < n; i++) {
            p32(small_offset());
            p16((uint16_t)(below(4) == 0 ? interesting() : below(16)));
        }
        return CP_CMD_READ;
    }
    case CP_CMD_WRITE: {
        uint32_t n = below(4);
        for (uint32_t i = 0; i < n; i++) {
            uint16_t size = (uint16_t)below(16);
            p32(below(3) == 0 ? small_offset() : 4u * below(16));
            p16(size);
            for (uint16_t k = 0; k < size; k++) {
                p8((uint8_t)rng());
            }
        }
        return CP_CMD_WRITE;
    }
    case CP_CMD_STATS:
        if (below(2)) {
            p16((uint16_t)below(3));
        }
        return CP_CMD_STATS;
    case CP_CMD_STREAM: {
        p16((uint16_t)below(4));
        uint32_t n = below(4) == 0 ? below(20) : below(3);
        for (uint32_t i = 0; i < n; i++) {
            p32(small_offset());
            p16((uint16_t)(below(6) == 0 ? interesting() : below(12)));
        }
        return CP_CMD_STREAM;
    }
    case CP_CMD_RESET:
        p8((uint8_t)(below(8) == 0 ? below(4) : below(5) == 0 ? 1 : 0));
        return CP_CMD_RESET;
    case CP_CMD_IO_READ: {
        uint32_t n = below(5);
        for (uint32_t i = 0; i < n; i++) {
            p8((uint8_t)below(CP_IO_KIND_COUNT + 2)); /* kinds 0..COUNT + 1: two unknown */
            p16((uint16_t)below(10));
        }
        return CP_CMD_IO_READ;
    }
    case CP_CMD_IO_WRITE: {
        uint32_t n = below(4);
        for (uint32_t i = 0; i < n; i++) {
            static const double values[] = {0.0, -0.0, 1.5, -7.9, 3e9, -3e9, 1e300, 0.1};
            p8((uint8_t)below(CP_IO_KIND_COUNT + 2)); /* kinds 0..COUNT + 1: two unknown */
            p16((uint16_t)below(10));
            double v = values[below(8)];
            memcpy(payload + plen, &v, 8);
            plen += 8;
        }
        return CP_CMD_IO_WRITE;
    }
    case CP_CMD_GET_PORTS:
        p32(below(4) == 0 ? interesting() : below(200));
        return CP_CMD_GET_PORTS;
    case CP_CMD_SESSION: { /* SESSION: begin (sometimes taking over, sometimes closing) */
        for (int i = 0; i < 16; i++) {
            sess_nonce[i] = (uint8_t)rng();
        }
        p8((uint8_t)(below(4) == 0 ? below(4) : below(2)));
        p8(0);
        p16(0);
        memcpy(payload + plen, sess_nonce, 16);
        plen += 16;
        return CP_CMD_SESSION;
    }
    default: { /* anything */
        uint32_t n = below(40);
        for (uint32_t i = 0; i < n; i++) {
            p8((uint8_t)rng());
        }
        return pick < N_REQUESTS ? command : (uint8_t)rng();
    }
    }
}

static void mutate_payload(void)
{
    unsigned n = 1 + below(3);
    for (unsigned m = 0; m < n; m++) {
        switch (below(5)) {
        case 0:
            if (plen > 0) {
                payload[below((uint32_t)plen)] ^= (uint8_t)(1u << below(8));
            }
            break;
        case 1:
            if (plen > 0) {
                uint32_t at = below((uint32_t)plen);
                uint32_t v = interesting();
                for (unsigned i = 0; i < (1u << below(3)) && at + i < plen; i++) {
                    payload[at + i] = (uint8_t)(v >> (8 * i));
                }
            }
            break;
        case 2:
            plen = below((uint32_t)plen + 1);
            break;
        case 3: {
            uint32_t grow = below(16);
            for (uint32_t i = 0; i < grow && plen < FX_MAXP + 8; i++) {
                payload[plen++] = (uint8_t)rng();
            }
            break;
        }
        default:
            plen = FX_MAXP - below(8); /* around the limit */
            break;
        }
    }
}

static size_t mutate_wire(uint8_t *w, size_t n, size_t cap)
{
    unsigned k = 1 + below(3);
    for (unsigned m = 0; m < k && n > 0; m++) {
        uint32_t at = below((uint32_t)n);
        switch (below(5)) {
        case 0:
            w[at] ^= (uint8_t)(1u << below(8));
            break;
        case 1:
            w[at] = 0;
            break;
        case 2:
            memmove(w + at, w + at + 1, n - at - 1);
            n--;
            break;
        case 3:
            if (n < cap) {
                memmove(w + at + 1, w + at, n - at);
                w[at] = (uint8_t)rng();
                n++;
            }
            break;
        default:
            n = at; /* cut: the rest of the frame is lost */
            break;
        }
    }
    return n;
}

typedef struct tally {
    uint64_t requests, intact, responses, errors[CP_PERR_COUNT + 1], events, ticks,
        replays_sent;
    uint64_t commits_ok, bad_client_frames, authenticated, sessions, faults, guest_bytes;
} tally;

static tally T;

/* Decodes what the server wrote; checks every frame. */
static void drain(fx *f, int expect_response, uint16_t seq, uint8_t cmd)
{
    static fx_reply r;
    int responses = 0;
    uint32_t bad_before = f->client.bad_frames;
    while (fx_next(f, &r)) {
        if (r.flags & CP_FLAG_EVENT) {
            T.events++;
            int auth = (r.flags & CP_FLAG_AUTH) != 0;
            uint32_t body = auth ? (uint32_t)r.len - CP_AUTH_TRAILER : r.len;
            if (auth) { /* events of our session: valid tags, increasing counters */
                uint32_t c = tb_get32(r.p + body);
                if (c <= ev_counter ||
                    !fx_tag_ok(r.flags, r.seq, r.command, r.p, r.len, &own_mac, c)) {
                    fprintf(stderr, "event with a bad tag or counter\n");
                    abort();
                }
                ev_counter = c;
            }
            if ((r.command != CP_CMD_STREAM || body < 8) &&
                (r.command != CP_CMD_FAULT || body != CP_SERVER_FAULT_RECORD)) {
                fprintf(stderr, "malformed event\n");
                abort();
            }
            T.faults += r.command == CP_CMD_FAULT;
            continue;
        }
        responses++;
        T.responses++;
        if (r.len > FX_MAXP || r.seq != seq || r.command != cmd ||
            !(r.flags & CP_FLAG_RESPONSE)) {
            fprintf(stderr, "bad response: seq %u/%u cmd %u/%u len %u flags %u\n", r.seq, seq,
                    r.command, cmd, r.len, r.flags);
            abort();
        }
        if ((r.flags & CP_FLAG_AUTH) != 0) {
            /* a response in a session answers our last counter with a valid tag */
            if (!fx_tag_ok(r.flags, r.seq, r.command, r.p, r.len, &req_mac, req_counter)) {
                fprintf(stderr, "response with a bad tag\n");
                abort();
            }
            if (memcmp(&own_mac, &req_mac, sizeof(own_mac)) != 0) {
                own_mac = req_mac; /* that session owns the runner now: its events follow */
                ev_counter = 0;
            }
            T.authenticated++;
            r.len -= CP_AUTH_TRAILER;
        }
        if (r.flags & CP_FLAG_ERROR) {
            if (r.len < 8 || r.len > 8 + CP_ERROR_MESSAGE_MAX || r.p[0] == 0 || r.p[0] > CP_PERR_COUNT) {
                fprintf(stderr, "bad error payload\n");
                abort();
            }
            T.errors[r.p[0]]++;
            if (r.p[0] == CP_PERR_AUTH_FAILED && last_sent_auth && !last_tampered) {
                sess_on = 0; /* our session ended (taken over, closed): begin a new one */
            }
        } else {
            if (cmd == CP_CMD_SESSION && r.len == 28) { /* a new session: derive its key */
                fx_session_key(runner_key, runner_key_len, r.p + 4, sess_nonce, &sess_mac);
                sess_on = 1;
                sess_counter = 0;
                T.sessions++;
            }
            T.errors[0]++;
            if (cmd == CP_CMD_LOAD_COMMIT) {
                T.commits_ok++;
            }
        }
    }
    if (f->client.bad_frames != bad_before) {
        fprintf(stderr, "the server wrote a malformed frame\n");
        abort();
    }
    if (expect_response >= 0 && responses != expect_response) {
        fprintf(stderr, "request seq %u cmd %u: %d responses, expected %d\n", seq, cmd,
                responses, expect_response);
        abort();
    }
}

static void run_ticks(fx *f)
{
    if (cp_server_state(&f->srv) != CP_SERVER_RUNNING || !known_good(f->srv.image_crc)) {
        return;
    }
    uint32_t n = below(4) == 0 ? below(50) : below(3);
    for (uint32_t i = 0; i < n; i++) {
        fx_lock(f);
        T.ticks += (uint64_t)cp_server_tick(&f->srv);
        fx_unlock(f);
    }
}

int main(int argc, char **argv)
{
    uint64_t iterations = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x5eed5eedull;
    if (rng_state == 0) {
        rng_state = 1;
    }
    static const uint8_t ud2[] = {0x0f, 0x0b};
    for (int i = 0; i < NGOOD; i++) {
        /* 0-3 with v1 entries; 4 with ABI 3 entries; 5 too, and task 1 faults */
        pg_options o = {i == 5 ? ud2 : NULL, i == 5 ? sizeof(ud2) : 0, 0.5, 0,
                        i == 4 ? 1000000u : 0u};
        pg_build_opts(&good[i], (uint32_t)i, i >= 4 ? &o : NULL);
        good_crc[i] = tb_get32(good[i].bytes + good[i].len - 4);
    }
    static uint8_t wire[CP_WIRE_MAX(70000)];
    static uint8_t last_wire[CP_WIRE_MAX(70000)];
    size_t last_len = 0;
    uint32_t last_counter = 0;
    static cp_hmac last_mac;
    uint16_t last_seq = 0;
    uint8_t last_cmd = 0;
    fx *f = malloc(sizeof(*f));
    int session = -1;
    for (uint64_t it = 0; it < iterations; it++) {
        if (session < 0 || below(3000) == 0) { /* a fresh runner now and then, both memory modes */
            if (session >= 0) {
                fx_close(f);
            }
            session++;
            fx_config(f, session % 2);
            if (session % 3 == 2) {
                f->cfg.max_payload = 128 + (uint16_t)below(512);
                f->cfg.ring_size = 512;
            }
            f->cfg.guard = cp_posix_guard;
            f->cfg.budget_factor = 10;
            runner_key = NULL;
            runner_key_len = 0;
            if (session % 4 >= 2) { /* a key; required on every other one */
                runner_key = KEY;
                runner_key_len = sizeof(KEY) - 1;
                f->cfg.key = KEY;
                f->cfg.key_len = (uint32_t)runner_key_len;
                f->cfg.require_auth = session % 4 == 3;
            }
            sess_on = 0;
            memset(&own_mac, 0, sizeof(own_mac));
            ev_counter = 0;
            if (fx_start(f) != CP_OK) {
                return 2;
            }
            up_image = -1;
            last_len = 0;
        }
        uint8_t cmd = gen_request();
        uint8_t version = 1, flags = 0;
        int auth = sess_on && below(8) != 0, tamper = 0, sent_auth = 0;
        uint16_t seq = f->seq++;
        int replay = 0;
        switch (below(10)) {
        case 0:
        case 1:
            mutate_payload();
            break;
        case 2:
            if (below(4) == 0) {
                version = (uint8_t)below(4);
            } else if (below(3) == 0) {
                flags = (uint8_t)below(16);
                auth = 0;
            } else if (below(4) == 0) {
                tamper = auth; /* a valid tag, then a changed byte */
            } else {
                cmd = (uint8_t)below(20);
            }
            break;
        case 3:
            replay = last_len > 0;
            break;
        default:
            break;
        }
        if (plen > FX_CLIENT_MAXP) {
            plen = FX_CLIENT_MAXP;
        }
        size_t n;
        if (replay) {
            memcpy(wire, last_wire, last_len);
            n = last_len;
            seq = last_seq;
            cmd = last_cmd;
            T.replays_sent++;
            req_counter = last_counter;
            req_mac = last_mac;
        } else if (auth && version == 1 && plen + CP_AUTH_TRAILER <= FX_CLIENT_MAXP) {
            uint32_t c = below(16) == 0 ? (uint32_t)rng() : ++sess_counter;
            if (c > sess_counter) {
                sess_counter = c; /* a jump ahead is a valid new counter */
            }
            n = fx_frame_auth(wire, sizeof(wire), seq, cmd, payload, plen, &sess_mac, c, tamper);
            req_counter = c;
            req_mac = sess_mac;
            sent_auth = 1;
        } else {
            n = fx_frame(wire, sizeof(wire), version, flags, seq, cmd, payload, plen);
        }
        int intact = 1;
        if (!replay && below(8) == 0) {
            n = mutate_wire(wire, n, sizeof(wire));
            intact = 0;
        }
        T.requests++;
        last_sent_auth = sent_auth;
        last_tampered = tamper;
        /* feed in random pieces */
        size_t at = 0;
        while (at < n) {
            size_t chunk = 1 + below(below(2) ? 8 : 600);
            if (chunk > n - at) {
                chunk = n - at;
            }
            cp_server_feed(&f->srv, wire + at, chunk);
            at += chunk;
        }
        if (!intact) {
            /* end whatever the mutation left open, as a host's next frame would */
            static const uint8_t zero = 0;
            cp_server_feed(&f->srv, &zero, 1);
        }
        int expect = -1;
        if (intact) {
            T.intact++;
            /* a replay repeats the last request that was answered */
            size_t len = plen + (sent_auth ? CP_AUTH_TRAILER : 0);
            int answered = replay || ((flags & 7) == 0 && len <= f->cfg.max_payload);
            expect = answered ? 1 : 0;
            if (answered && !replay) {
                last_counter = req_counter;
                last_mac = req_mac;
                memcpy(last_wire, wire, n);
                last_len = n;
                last_seq = seq;
                last_cmd = cmd;
            }
        }
        if (getenv("FUZZ_DEBUG")) {
            fprintf(stderr, "it %llu seq %u cmd %u plen %zu flags %u version %u max %u intact %d replay %d\n", (unsigned long long)it, seq, cmd, plen, flags, version, f->cfg.max_payload, intact, replay);
        }
        drain(f, expect, seq, cmd);
        if (below(64) == 0) { /* a second connection's bytes: no crash, own buffers */
            uint8_t guest[256];
            size_t gn = below(2) ? fx_frame(guest, sizeof(guest), 1, (uint8_t)below(16),
                                            (uint16_t)rng(), (uint8_t)below(20), payload,
                                            plen < 100 ? plen : 100)
                                 : (size_t)below(200);
            if (gn != 0 && below(2) == 0) {
                gn = mutate_wire(guest, gn, sizeof(guest));
            }
            size_t used = 0;
            while (used < gn) {
                used += cp_server_feed_link(&f->srv, CP_SERVER_GUEST, guest + used, gn - used);
                if (f->notify_takeover != 0) { /* cannot prove a key it does not have */
                    fprintf(stderr, "a guest took over without the key\n");
                    abort();
                }
            }
            T.guest_bytes += gn;
            f->gwire_len = 0;
            if (below(2)) {
                cp_server_disconnect_link(&f->srv, CP_SERVER_GUEST);
            }
            drain(f, 0, 0, 0);
        }
        run_ticks(f);
        cp_server_flush(&f->srv);
        drain(f, 0, 0, 0);
    }
    fx_close(f);
    free(f);
    printf("fuzz_server: %llu iterations, no crash; %llu intact requests, %llu responses "
           "(OK %llu", (unsigned long long)iterations, (unsigned long long)T.intact,
           (unsigned long long)T.responses, (unsigned long long)T.errors[0]);
#define PRINT_ERROR(N, code) printf(", " #N " %llu", (unsigned long long)T.errors[code]);
    CP_PROTOCOL_ERROR_TABLE(PRINT_ERROR)
    printf("); %llu commits, %llu replays sent, %llu ticks, %llu events (%llu faults), "
           "%llu sessions, %llu authenticated responses, %llu guest bytes, %d runners\n",
           (unsigned long long)T.commits_ok, (unsigned long long)T.replays_sent,
           (unsigned long long)T.ticks, (unsigned long long)T.events,
           (unsigned long long)T.faults, (unsigned long long)T.sessions,
           (unsigned long long)T.authenticated, (unsigned long long)T.guest_bytes, session + 1);
    return 0;
}
