/* Shared by test_server.c and fuzz_server.c: a protocol server over the POSIX platform (or two
 * fixed slots), a client that frames requests and decodes what the server writes, simulated
 * I/O channels, and a hand-assembled x86_64 test program with input, output and state ports. */
#ifndef COPAPY_SERVER_FIXTURE_H
#define COPAPY_SERVER_FIXTURE_H

#define _GNU_SOURCE 1

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN 1
#include <windows.h>
#else
#include <sys/mman.h>
#endif

#include "copapy/platform_posix.h"

#if defined(_WIN32) /* memmem is a GNU and BSD extension the Windows C runtime lacks */
static inline void *memmem(const void *hay, size_t n, const void *needle, size_t m)
{
    const uint8_t *h = hay;
    for (size_t i = 0; m <= n && i <= n - m; i++) {
        if (memcmp(h + i, needle, m) == 0) {
            return (void *)(uintptr_t)(h + i);
        }
    }
    return NULL;
}
#endif
#include "copapy/server.h"
#include "internal.h"
#include "test_image.h"

/* ---- the test program
 * data (i32 unless noted):
 *    0 in        input port          4 in_priv
 *    8 out_priv                     12 out       output port (driven to PWM 0)
 *   16 a_priv   20 b_priv           24 a, 28 b   output ports, published together
 *   32 counter  state               36 (no port)
 *   40 in2      input port          44 in3 (f32) input port
 *   48 adc (f32) input port, sampled from ADC 0 at task 0's release
 *   52 counter2 state of task 1     56 adc_priv (f32)
 * task 0 (1 ms, prio 0): in_priv = in; out_priv = in_priv + 1; counter += 1;
 *                        a_priv = b_priv = counter; publish out, a, b
 * task 1 (2 ms, offset 1 ms, prio 1): counter2 += 1
 */
enum {
    PG_DATA_OFFSET = 4096,
    PG_DATA_SIZE = 64,
    PG_IN = 0, PG_IN_PRIV = 4, PG_OUT_PRIV = 8, PG_OUT = 12, PG_A_PRIV = 16, PG_B_PRIV = 20,
    PG_A = 24, PG_B = 28, PG_COUNTER = 32, PG_IN2 = 40, PG_IN3 = 44, PG_ADC = 48,
    PG_COUNTER2 = 52, PG_ADC_PRIV = 56,
    PG_PORTS = 8
};

typedef struct pg {
    uint8_t code[512];
    uint32_t code_size;
    uint8_t kind[20];
    uint8_t patches[32][12];
    uint32_t npatches;
    uint8_t tasks[2][40];
    uint8_t copies[8][16];
    uint32_t ncopies;
    uint8_t bindings[2][24];
    uint8_t ports[PG_PORTS][16];
    char strings[64];
    uint32_t strings_size;
    uint8_t data_init[16];
} pg;

static inline void pg_emit(pg *b, const uint8_t *p, size_t n)
{
    memcpy(b->code + b->code_size, p, n);
    b->code_size += (uint32_t)n;
}

/* an instruction ending in a rip-relative disp32 to data slot `slot` */
static inline void pg_rip(pg *b, const uint8_t *op, size_t n, uint32_t slot)
{
    static const uint8_t zero[4] = {0};
    pg_emit(b, op, n);
    tb_patch(b->patches[b->npatches++], b->code_size, 0, PG_DATA_OFFSET + (int32_t)slot - 4);
    pg_emit(b, zero, 4);
}

static inline void pg_load(pg *b, uint32_t slot) /* mov eax, [slot] */
{
    static const uint8_t op[] = {0x8b, 0x05};
    pg_rip(b, op, sizeof(op), slot);
}

static inline void pg_store(pg *b, uint32_t slot) /* mov [slot], eax */
{
    static const uint8_t op[] = {0x89, 0x05};
    pg_rip(b, op, sizeof(op), slot);
}

static inline void pg_inc(pg *b) /* add eax, 1 */
{
    static const uint8_t op[] = {0x83, 0xc0, 0x01};
    pg_emit(b, op, sizeof(op));
}

static inline void pg_ret(pg *b)
{
    static const uint8_t op[] = {0xc3};
    pg_emit(b, op, sizeof(op));
}

/* Options of the program with ABI 3 entries (40-byte tasks, 24-byte bindings): task 1's
 * code replaced (e.g. by a fault), the PWM output's safe value, task 1's budget and task 0's
 * link timeout. */
typedef struct pg_options {
    const uint8_t *task1_code;  /* NULL: the counter */
    size_t task1_len;
    double pwm_safe;
    uint32_t budget_ns;
    uint64_t link_timeout_ns;
} pg_options;

/* Builds the program; `variant` changes the initial value of `in` (so images differ); `o`
 * (may be NULL: v1-sized entries) the ABI 3 fields. */
static inline void pg_build_opts(tb_image *img, uint32_t variant, const pg_options *o)
{
    static const uint8_t rel32[][3] = {{0, 32, 0}};
    pg b;
    memset(&b, 0, sizeof(b));
    tb_kind(b.kind, 32, 1 | 4, 0, 32, 0, 1, rel32);
    pg_load(&b, PG_IN_PRIV);
    pg_inc(&b);
    pg_store(&b, PG_OUT_PRIV);
    pg_load(&b, PG_COUNTER);
    pg_inc(&b);
    pg_store(&b, PG_COUNTER);
    pg_store(&b, PG_A_PRIV);
    pg_store(&b, PG_B_PRIV);
    pg_ret(&b);
    uint32_t task1 = b.code_size;
    if (o != NULL && o->task1_code != NULL) {
        pg_emit(&b, o->task1_code, o->task1_len);
    } else {
        pg_load(&b, PG_COUNTER2);
        pg_inc(&b);
        pg_store(&b, PG_COUNTER2);
        pg_ret(&b);
    }
    tb_task_full(b.tasks[0], 0, 1000000, 0, 0, 0);
    tb_task_full(b.tasks[1], task1, 2000000, 1000000, 1, 0);
    tb_copy(b.copies[b.ncopies++], 0, 0, 4, PG_IN, PG_IN_PRIV);
    tb_copy(b.copies[b.ncopies++], 0, 0, 4, PG_ADC, PG_ADC_PRIV);
    tb_copy(b.copies[b.ncopies++], 0, 1, 4, PG_OUT_PRIV, PG_OUT);
    tb_copy(b.copies[b.ncopies++], 0, 1, 4, PG_A_PRIV, PG_A);
    tb_copy(b.copies[b.ncopies++], 0, 1, 4, PG_B_PRIV, PG_B);
    tb_binding(b.bindings[0], 0, 1, CP_IO_ADC, 0, 1, PG_ADC);
    tb_binding(b.bindings[1], 0, 2, CP_IO_PWM, 0, 3, PG_OUT);
    uint32_t tsize = 24, bsize = 16;
    if (o != NULL) {
        tsize = 40;
        bsize = 24;
        uint64_t bits;
        memcpy(&bits, &o->pwm_safe, 8);
        tb_put32(b.bindings[1] + 16, (uint32_t)bits);
        tb_put32(b.bindings[1] + 20, (uint32_t)(bits >> 32));
        tb_put32(b.tasks[1] + 24, o->budget_ns);
        tb_put32(b.tasks[0] + 32, (uint32_t)o->link_timeout_ns);
        tb_put32(b.tasks[0] + 36, (uint32_t)(o->link_timeout_ns >> 32));
    }
    static uint8_t tasks[2 * 40], bindings[2 * 24];
    for (int i = 0; i < 2; i++) {
        memcpy(tasks + i * tsize, b.tasks[i], tsize);
        memcpy(bindings + i * bsize, b.bindings[i], bsize);
    }
    static const char names[] = "in\0out\0a\0b\0counter\0in2\0in3\0adc";
    memcpy(b.strings, names, sizeof(names));
    b.strings_size = sizeof(names);
    tb_port(b.ports[0], 0, PG_IN, 3, 1, 0xffff, 1);
    tb_port(b.ports[1], 3, PG_OUT, 3, 2, 0, 1);
    tb_port(b.ports[2], 7, PG_A, 3, 2, 0, 1);
    tb_port(b.ports[3], 9, PG_B, 3, 2, 0, 1);
    tb_port(b.ports[4], 11, PG_COUNTER, 3, 3, 0, 1);
    tb_port(b.ports[5], 19, PG_IN2, 3, 1, 0xffff, 1);
    tb_port(b.ports[6], 23, PG_IN3, 1, 1, 0xffff, 1);
    tb_port(b.ports[7], 27, PG_ADC, 1, 1, 0xffff, 1);
    tb_put32(b.data_init + PG_IN, 100 + variant);

    tb_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.version = 1;
    spec.header_size = 48;
    spec.arch = CP_ARCH_X86_64;
    spec.code_size = b.code_size;
    spec.data_offset = PG_DATA_OFFSET;
    spec.data_size = PG_DATA_SIZE;
    spec.base_align = 4096;
    size_t n = 0;
    spec.sec[n++] = (tb_section){1, 1, b.code, b.code_size};
    spec.sec[n++] = (tb_section){2, 1, b.data_init, sizeof(b.data_init)};
    spec.sec[n++] = (tb_section){3, 20, b.kind, 20};
    spec.sec[n++] = (tb_section){4, 12, b.patches, 12 * b.npatches};
    spec.sec[n++] = (tb_section){5, (uint16_t)tsize, tasks, 2 * tsize};
    spec.sec[n++] = (tb_section){6, 16, b.ports, sizeof(b.ports)};
    spec.sec[n++] = (tb_section){7, 1, b.strings, b.strings_size};
    spec.sec[n++] = (tb_section){9, 16, b.copies, 16 * b.ncopies};
    spec.sec[n++] = (tb_section){10, (uint16_t)bsize, bindings, 2 * bsize};
    spec.nsec = n;
    tb_build(&spec, img);
}

static inline void pg_build(tb_image *img, uint32_t variant)
{
    pg_build_opts(img, variant, NULL);
}

/* ---- the fixture */

enum { FX_MAXP = 1024, FX_PORTS = 2048, FX_RING = 4096, FX_STAGING = 8192,
       FX_WIRE = 1 << 20, FX_CLIENT_MAXP = 65535 - 12,
       FX_ROOM = FX_MAXP - CP_AUTH_TRAILER /* what a response may carry */ };

typedef struct fx_reply {
    uint8_t flags;
    uint8_t command;
    uint16_t seq;
    uint16_t len;
    uint8_t p[FX_CLIENT_MAXP];
} fx_reply;

typedef struct fx {
    cp_server srv;
    cp_server_config cfg;
    uint8_t work[CP_SERVER_WORK_SIZE(FX_MAXP, FX_PORTS, FX_RING)];
    uint8_t staging[FX_STAGING];
    uint8_t *slots;            /* mmap'd RWX slot memory, or NULL */
    /* everything the server wrote, not yet parsed */
    uint8_t wire[FX_WIRE];
    size_t wire_len;
    uint8_t gwire[1 << 16];    /* what the server wrote to the guest link */
    size_t gwire_len;
    cp_decoder client;
    uint8_t client_buf[FX_CLIENT_MAXP + 12];
    uint16_t seq;
    /* hooks */
    pthread_mutex_t mutex;
    int locked, lock_calls, notify_state, notify_output;
    int notify_text, notify_takeover, notify_refuse, notify_replaced;
    double io[CP_IO_KIND_COUNT][8];
    int io_writes;
    int io_write_fail;
    cp_server_rt_stats rt;
    cp_platform slot_pf;
} fx;

static inline void fx_write(void *ctx, const uint8_t *b, size_t n)
{
    fx *f = ctx;
    if (f->wire_len + n <= sizeof(f->wire)) {
        memcpy(f->wire + f->wire_len, b, n);
        f->wire_len += n;
    } else {
        f->wire_len = sizeof(f->wire) + 1; /* overflow marker: the test forgot to drain */
    }
}

static inline void fx_lock(void *ctx)
{
    fx *f = ctx;
    pthread_mutex_lock(&f->mutex);
    f->locked++;
    f->lock_calls++;
}

static inline void fx_unlock(void *ctx)
{
    fx *f = ctx;
    f->locked--;
    pthread_mutex_unlock(&f->mutex);
}

static inline void fx_write_link(void *ctx, uint32_t link, const uint8_t *b, size_t n)
{
    fx *f = ctx;
    if (link == CP_SERVER_OWNER) {
        fx_write(ctx, b, n);
    } else if (f->gwire_len + n <= sizeof(f->gwire)) {
        memcpy(f->gwire + f->gwire_len, b, n);
        f->gwire_len += n;
    }
}

static inline void fx_notify(void *ctx, uint32_t what)
{
    fx *f = ctx;
    switch (what) {
    case CP_SERVER_NOTIFY_STATE: f->notify_state++; break;
    case CP_SERVER_NOTIFY_OUTPUT: f->notify_output++; break;
    case CP_SERVER_NOTIFY_TEXT: f->notify_text++; break;
    case CP_SERVER_NOTIFY_TAKEOVER: f->notify_takeover++; break;
    case CP_SERVER_NOTIFY_REFUSE: f->notify_refuse++; break;
    default: f->notify_replaced++; break;
    }
}

static inline double fx_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    fx *f = ctx;
    return kind >= 1 && kind <= CP_IO_KIND_COUNT && channel < 8 ? f->io[kind - 1][channel] : -1.0;
}

static inline int fx_io_write(void *ctx, uint8_t kind, uint16_t channel, double v)
{
    fx *f = ctx;
    f->io_writes++;
    if (f->io_write_fail || kind < 1 || kind > CP_IO_KIND_COUNT || channel >= 8) {
        return 1;
    }
    f->io[kind - 1][channel] = v;
    return 0;
}

static inline void fx_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    fx *f = ctx;
    *out = f->rt;
}

static inline uint64_t fx_clock(void *ctx)
{
    (void)ctx;
    static uint64_t t;
    return t += 1000; /* 1 us per reading */
}

/* Slot memory must stay writable after a load: seal as RWX (tests only). */
static inline int fx_seal_rwx(void *ctx, void *base, size_t code_len, size_t size)
{
    (void)ctx;
    (void)code_len;
    uintptr_t page = (uintptr_t)base & ~(uintptr_t)4095;
    size_t len = ((uintptr_t)base + size + 4095 - page) & ~(size_t)4095;
#if defined(_WIN32)
    DWORD old = 0;
    return VirtualProtect((void *)page, len, PAGE_EXECUTE_READWRITE, &old) ? 0 : -1;
#else
    return mprotect((void *)page, len, PROT_READ | PROT_WRITE | PROT_EXEC);
#endif
}

enum { FX_SLOT_SIZE = 1 << 16 };

/* Sets up the config; call fx_start afterwards (tests may change the config between). */
static inline void fx_config(fx *f, int use_slots)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mutex, NULL);
    cp_server_config *c = &f->cfg;
    c->struct_size = sizeof(*c);
    c->platform = cp_platform_posix();
    if (use_slots) {
#if defined(_WIN32)
        f->slots = VirtualAlloc(NULL, 2 * FX_SLOT_SIZE, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        if (f->slots == NULL) {
#else
        f->slots = mmap(NULL, 2 * FX_SLOT_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (f->slots == MAP_FAILED) {
#endif
            perror("mmap");
            exit(2);
        }
        f->slot_pf = *cp_platform_posix();
        f->slot_pf.region_seal = fx_seal_rwx;
        c->platform = &f->slot_pf;
        c->slot_mem[0] = f->slots;
        c->slot_mem[1] = f->slots + FX_SLOT_SIZE;
        c->slot_size = FX_SLOT_SIZE;
    }
    c->staging = f->staging;
    c->staging_size = sizeof(f->staging);
    c->work = f->work;
    c->work_size = sizeof(f->work);
    c->max_payload = FX_MAXP;
    c->channels[CP_IO_GPIO - 1] = 4;
    c->channels[CP_IO_PWM - 1] = 4;
    c->channels[CP_IO_ENCODER - 1] = 2;
    c->channels[CP_IO_ADC - 1] = 8;
    c->flags = CP_SERVER_FLAG_SIMULATED_IO;
    c->ports_capacity = FX_PORTS;
    c->ring_size = FX_RING;
    c->min_tick_ns = 0;
    c->name = "test-runner";
    c->ctx = f;
    c->write = fx_write;
    c->write_link = fx_write_link;
    c->lock = fx_lock;
    c->unlock = fx_unlock;
    c->notify = fx_notify;
    c->clock_ns = fx_clock;
    c->io_read = fx_io_read;
    c->io_write = fx_io_write;
    c->rt_stats = fx_rt_stats;
    (void)cp_decoder_init(&f->client, f->client_buf, sizeof(f->client_buf), FX_CLIENT_MAXP);
    f->seq = 1;
}

static inline cp_status fx_start(fx *f)
{
    cp_error e = tb_error();
    cp_status st = cp_server_init(&f->srv, &f->cfg, &e);
    if (st != CP_OK) {
        fprintf(stderr, "cp_server_init: %s\n", e.message);
    }
    return st;
}

static inline void fx_close(fx *f)
{
    cp_server_close(&f->srv);
    if (f->slots != NULL) {
#if defined(_WIN32)
        VirtualFree(f->slots, 0, MEM_RELEASE);
#else
        munmap(f->slots, 2 * FX_SLOT_SIZE);
#endif
    }
    pthread_mutex_destroy(&f->mutex);
}

/* Encodes a request frame into out; returns its wire length. */
static inline size_t fx_frame(uint8_t *out, size_t cap, uint8_t version, uint8_t flags,
                              uint16_t seq, uint8_t command, const void *payload, size_t n)
{
    static uint8_t frame[70000];
    if (n > 65535) {
        return 0;
    }
    if (n > 0) {
        memcpy(frame + CP_FRAME_HEADER, payload, n);
    }
    size_t w = cp_frame_encode(frame, flags, seq, command, (uint16_t)n, out, cap);
    if (w > 0 && version != CP_FRAME_VERSION) {
        /* re-seal with another version byte */
        frame[0] = version;
        cp_put32(frame + CP_FRAME_HEADER + n, cp_crc32(0, frame, CP_FRAME_HEADER + n));
        size_t e = cp_cobs_encode(frame, CP_FRAME_HEADER + n + 4, out, cap - 1);
        out[e] = 0;
        w = e + 1;
    }
    return w;
}

/* A request frame with a session's trailer (u32 counter, 16-byte tag); returns the wire
 * length. `tamper` flips a payload bit after the tag was computed (before the CRC). */
static inline size_t fx_frame_auth(uint8_t *out, size_t cap, uint16_t seq, uint8_t command,
                                   const void *payload, size_t n, const cp_hmac *mac,
                                   uint32_t counter, int tamper)
{
    static uint8_t frame[70000];
    size_t total = n + CP_AUTH_TRAILER;
    if (total > 65535) {
        return 0;
    }
    cp_frame_header(frame, CP_FLAG_AUTH, seq, command, (uint16_t)total);
    if (n > 0) {
        memcpy(frame + CP_FRAME_HEADER, payload, n);
    }
    tb_put32(frame + CP_FRAME_HEADER + n, counter);
    uint8_t tag[32];
    cp_hmac_mac2(mac, frame, CP_FRAME_HEADER + n + 4, frame, 0, tag);
    memcpy(frame + CP_FRAME_HEADER + n + 4, tag, CP_AUTH_TAG);
    if (tamper && n > 0) {
        frame[CP_FRAME_HEADER] ^= 0x01;
    }
    cp_frame_put_crc(frame, (uint16_t)total);
    size_t e = cp_cobs_encode(frame, CP_FRAME_HEADER + total + 4, out, cap - 1);
    out[e] = 0;
    return e + 1;
}

/* The session key a client derives from the key and both nonces (docs/protocol.md). */
static inline void fx_session_key(const uint8_t *key, size_t key_len, const uint8_t *nonce_s,
                                  const uint8_t *nonce_c, cp_hmac *out)
{
    static const char label[] = "copapy session v1";
    uint8_t msg[sizeof(label) - 1 + 32], k[32];
    memcpy(msg, label, sizeof(label) - 1);
    memcpy(msg + sizeof(label) - 1, nonce_s, 16);
    memcpy(msg + sizeof(label) - 1 + 16, nonce_c, 16);
    cp_hmac_sha256(key, key_len, msg, sizeof(msg), k);
    cp_hmac_init(out, k, sizeof(k));
}

/* 1 if a decoded frame (header fields and payload) carries a valid tag of `mac` and the
 * counter `counter`. */
static inline int fx_tag_ok(uint8_t flags, uint16_t seq, uint8_t command, const uint8_t *p,
                            uint16_t len, const cp_hmac *mac, uint32_t counter)
{
    if (!(flags & CP_FLAG_AUTH) || len < CP_AUTH_TRAILER ||
        tb_get32(p + len - CP_AUTH_TRAILER) != counter) {
        return 0;
    }
    static uint8_t frame[70000];
    cp_frame_header(frame, flags, seq, command, len);
    memcpy(frame + CP_FRAME_HEADER, p, len);
    uint8_t tag[32];
    cp_hmac_mac2(mac, frame, CP_FRAME_HEADER + len - CP_AUTH_TAG, frame, 0, tag);
    return memcmp(tag, p + len - CP_AUTH_TAG, CP_AUTH_TAG) == 0;
}

/* Pops the next frame the server wrote; returns 0 if none is complete. */
static inline int fx_next(fx *f, fx_reply *r)
{
    static size_t at;
    static const fx *owner;
    if (owner != f) {
        owner = f;
        at = 0;
    }
    while (at < f->wire_len && f->wire_len <= sizeof(f->wire)) {
        cp_frame fr;
        int k = cp_decoder_push(&f->client, f->wire[at++], &fr);
        if (k == CP_DEC_FRAME) {
            r->flags = fr.flags;
            r->command = fr.command;
            r->seq = fr.seq;
            r->len = fr.length;
            memcpy(r->p, fr.payload, fr.length);
            if (at == f->wire_len) {
                at = 0;
                f->wire_len = 0;
            }
            return 1;
        }
    }
    at = 0;
    f->wire_len = 0;
    return 0;
}

#endif /* COPAPY_SERVER_FIXTURE_H */
