/* The transport-independent protocol server of docs/protocol.md: it decodes request frames,
 * executes them against the runner core (upload, commit, scheduler, data, I/O) and emits
 * response and event frames through a write callback. The same code runs in the host runner
 * process (runner/host) and in the firmware (runner/baremetal); it never allocates and uses no
 * libc, so everything it needs comes from the embedder in cp_server_config.
 *
 * ---- Contexts and locking (how READ/WRITE land between ticks)
 *
 * Two contexts touch a server:
 *   * the PROTOCOL context calls cp_server_feed() with received bytes and cp_server_flush()
 *     when told that events are waiting. Every `write` callback happens in this context, so
 *     frames never interleave. Only this context changes the server's state (commit, start,
 *     stop, reset, stream subscriptions) and the data region (WRITE).
 *   * the TICK context calls cp_server_tick() once per tick while cp_server_state() is
 *     CP_SERVER_RUNNING (host: the real-time thread; firmware: the SysTick handler). It runs one
 *     scheduler tick and queues a STREAM event into a lock-free ring when one is due; it never
 *     calls `write`, never blocks, never waits for the protocol context.
 *
 * The embedder provides `lock`/`unlock`, an exclusion between the two that the tick context
 * holds for the whole of cp_server_tick() (host: a priority-inheritance mutex taken by the RT
 * thread around each tick; firmware: the SysTick handler is exclusive by nature and lock =
 * PRIMASK set). The server takes the lock only for short, bounded sections: copying READ
 * bytes out, applying WRITE bytes, copying statistics, START/STOP/RESET and the final pointer
 * swap of a commit. Loading a new program (validation, copy, patching) happens outside the
 * lock into the slot the tick context does not use. Because the tick context runs a whole tick
 * under the lock, a READ never sees half of a tick (half a LET publication) and a WRITE is
 * picked up at the next release of every task. `lock` may be NULL for a single-threaded
 * embedder that calls cp_server_tick() from the same loop as cp_server_feed().
 *
 * The lock is never held while the server calls `write`, `notify`, `io_read`/`io_write` for
 * IO_READ/IO_WRITE, or `rt_stats`. The scheduler calls io_read/io_write from the tick context.
 *
 * ---- Program memory
 *
 * ---- Faults, sessions, links (docs/protocol.md, docs/realtime.md)
 *
 * The scheduler runs chains inside cfg.guard (the platform's fault containment): a fault or a
 * budget overrun puts the program into CP_SERVER_FAULTED in the tick context (safe outputs,
 * a FAULT event queued); the protocol context keeps answering. A runner-wide or program
 * link timeout faults the program (CP_FAULT_LINK) when no request of the owner arrives for
 * that long: a dead-man switch.
 *
 * Sessions: a client begins one with SESSION (nonces), then authenticates every request with
 * HMAC-SHA256 under a key derived from cfg.key (an empty key when none is configured:
 * integrity and ownership without secrecy). cfg.require_auth refuses unauthenticated
 * requests (except HELLO and SESSION). While a session is live (a request within
 * session_lease_ns) a second client is refused with BUSY unless it asks to take over and
 * proves the key. A socket transport feeds a second connection as the GUEST link
 * (cp_server_feed_link): it is answered on its own buffers, and promoted to the owner link
 * when it takes over (notify TAKEOVER: the embedder closes the old connection); refused
 * guests and text on a link are reported (notify REFUSE / TEXT) so the embedder closes them.
 *
 * COMMIT loads into the slot that is not active, then swaps. The regions come either from two
 * fixed slots the embedder provides (slot_mem[0..1], slot_size bytes each; region_seal of the
 * given platform is still called, region_alloc/free are not), or, when slot_mem[0] is NULL,
 * from platform->region_alloc/free (e.g. mmap with W^X on a host). The staging buffer holds the
 * uploaded image until COMMIT.
 */
#ifndef COPAPY_SERVER_H
#define COPAPY_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/proto.h"
#include "copapy/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CP_SERVER_MAX_STREAM_RANGES 16u
#define CP_SERVER_IDLE_TICK_NS 1000000u  /* tick of a program without periodic tasks */
#define CP_SERVER_NAME_MAX 64u

/* Program states (HELLO `state`). FAULTED: stopped by a fault (outputs safe) until RESET or
 * a new program. */
enum { CP_SERVER_EMPTY = 0, CP_SERVER_STOPPED = 1, CP_SERVER_RUNNING = 2,
       CP_SERVER_FAULTED = 3 };

/* HELLO flags. AUTH: requests must be authenticated (cfg.require_auth); SESSION: a client's
 * session is live (a second one gets BUSY). */
enum { CP_SERVER_FLAG_REALTIME = 1u, CP_SERVER_FLAG_SIMULATED_IO = 2u,
       CP_SERVER_FLAG_AUTH = 4u, CP_SERVER_FLAG_SESSION = 8u,
       /* the runner also loads format-1 images (machine code, unverified): a runner started
        * for fault-containment tests (copapy-runner --allow-code), never for peers */
       CP_SERVER_FLAG_CODE = 16u };

/* Links: the owner's connection, and a second connection on a socket transport. */
enum { CP_SERVER_OWNER = 0, CP_SERVER_GUEST = 1 };

/* Bytes of the fault record (FAULT events, STATS): u32 kind, u32 task, u64 address, u64 pc,
 * u32 code, u32 count (faults since the runner started), u64 tick. */
#define CP_SERVER_FAULT_RECORD 40u

/* What `notify` reports. */
enum {
    /* state, tick_ns or generation changed (START, STOP, RESET, COMMIT, unload): the tick
     * context should re-read them. Called in the protocol context, lock not held. */
    CP_SERVER_NOTIFY_STATE = 1,
    /* event bytes are waiting: call cp_server_flush() in the protocol context. Called in the
     * tick context (from cp_server_tick), lock held; must not block. */
    CP_SERVER_NOTIFY_OUTPUT = 2,
    /* the link being fed sent text (an HTTP request?): close it if the transport can. Called
     * in the protocol context; cp_server_feed_link returns right after. */
    CP_SERVER_NOTIFY_TEXT = 3,
    /* the guest link took the session over and is the owner link now: close the old owner
     * connection and feed the former guest as the owner (the rest of the buffer too). */
    CP_SERVER_NOTIFY_TAKEOVER = 4,
    /* the guest link was refused (BUSY): close it. */
    CP_SERVER_NOTIFY_REFUSE = 5,
    /* a commit replaced the running program between two ticks and it runs on (tick_ns may
     * have changed): keep the deadline grid, step it by the new tick. Protocol context. */
    CP_SERVER_NOTIFY_REPLACED = 6
};

/* Real-time statistics the embedder measures (STATS). */
/* What the embedder's link discarded unread (a pty's backlog nobody read, docs/protocol.md
 * STATS link_*): frames with a byte among the discarded ones, STREAM events among them,
 * discard episodes, bytes. */
typedef struct cp_server_link_drops {
    uint32_t stream_events;
    uint32_t frames;
    uint32_t discards;
    uint64_t bytes;
} cp_server_link_drops;

typedef struct cp_server_rt_stats {
    uint32_t late_ticks;
    uint32_t jitter_p50_ns;
    uint32_t jitter_p99_ns;
    uint32_t jitter_max_ns;
    cp_server_link_drops link; /* zeros where the link discards nothing */
} cp_server_rt_stats;

typedef struct cp_server_config {
    uint32_t struct_size;             /* sizeof(cp_server_config) */
    const cp_platform *platform;      /* arch, region_seal (and alloc/free without slots) */
    uint8_t *slot_mem[2];             /* optional fixed program slots */
    size_t slot_size;
    uint8_t *staging;                 /* upload buffer: the largest image */
    uint32_t staging_size;
    uint8_t *work;                    /* cp_server_work_size(max_payload, ports, ring) bytes */
    size_t work_size;
    uint16_t max_payload;             /* >= 128 */
    uint16_t channels[CP_IO_KIND_COUNT]; /* channels of each kind (CP_IO_GPIO - 1 ...) */
    uint8_t flags;                    /* CP_SERVER_FLAG_* for HELLO */
    uint8_t reserved;
    uint32_t ports_capacity;          /* bytes for the loaded image's PORTS+STRINGS block */
    uint32_t ring_size;               /* event ring, a power of two (0: no STREAM) */
    uint32_t min_tick_ns;             /* shortest tick this runner can keep (0: any) */
    uint32_t tick_quantum_ns;         /* the tick must be a multiple of this (0: any) */
    const char *name;                 /* runner name for HELLO (NUL-terminated) */

    void *ctx;                        /* passed to every callback */
    /* Sends bytes on the transport; called only in the protocol context. */
    void (*write)(void *ctx, const uint8_t *bytes, size_t n);
    void (*lock)(void *ctx);          /* may be NULL (single context) */
    void (*unlock)(void *ctx);
    void (*notify)(void *ctx, uint32_t what);                       /* may be NULL */
    uint64_t (*clock_ns)(void *ctx);  /* monotonic ns for job execution times; may be NULL */
    /* I/O channels; io_write returns 0, or nonzero if the channel cannot be written. */
    double (*io_read)(void *ctx, uint8_t kind, uint16_t channel);   /* may be NULL: 0.0 */
    int (*io_write)(void *ctx, uint8_t kind, uint16_t channel, double value);  /* may be NULL */
    void (*rt_stats)(void *ctx, cp_server_rt_stats *out);          /* may be NULL: zeros */
    /* appended in ABI 3 */
    /* sends on a link (CP_SERVER_OWNER or CP_SERVER_GUEST); NULL: `write` (owner only) */
    void (*write_link)(void *ctx, uint32_t link, const uint8_t *bytes, size_t n);
    cp_guard_fn guard;                /* fault containment for the chains; NULL: none */
    void *guard_ctx;
    uint32_t budget_factor;           /* cp_task_budget_ns; 0: no time limit */
    uint32_t require_auth;            /* 1: authenticated requests only */
    uint64_t budget_min_ns;
    uint64_t link_timeout_ns;         /* runner-wide dead-man switch; 0: the program's only */
    uint64_t session_lease_ns;        /* a session is live this long after a request; 0: 10 s */
    const uint8_t *key;               /* the shared key (NULL with key_len 0: none) */
    uint32_t key_len;
    uint32_t reserved2;
    /* fills n bytes with unpredictable data (nonces); NULL: derived from the key, clock_ns
     * and a counter (unique, not unpredictable without a secret key) */
    void (*random)(void *ctx, uint8_t *out, size_t n);
    /* LOAD_COMMIT, protocol context, lock not held: may this runner's hardware serve the
     * binding (its kind and channel are below `channels`)? NULL to accept, else a short reason
     * (e.g. "this board's encoders are inputs") that the OUT_OF_RANGE error quotes. The
     * running program is untouched either way. May be NULL: every such binding is accepted. */
    const char *(*io_check)(void *ctx, const cp_io_binding *binding);
} cp_server_config;

/* Bytes of the work area: receive frames (owner, guest), response frames (the owner's is also
 * the replay cache, one for the guest), their COBS encoding, the event frame (tick context),
 * an event frame and its encoding for the protocol context, the ports block and the event
 * ring. */
#define CP_SERVER_WORK_SIZE(max_payload, ports_capacity, ring_size) \
    (6u * ((size_t)(max_payload) + 12u) + 2u * CP_WIRE_MAX((size_t)(max_payload)) + \
     (size_t)(ports_capacity) + (size_t)(ring_size) + 16u)

typedef struct cp_server_slot {
    struct cp_server *server;
    uint32_t index;
} cp_server_slot;

/* A session's key and counters (private to server.c). */
typedef struct cp_server_session {
    cp_hmac mac;                      /* HMAC-SHA256 keyed with the session key */
    uint32_t rx_counter;              /* the last request counter accepted */
    uint32_t rx_crc;                  /* that request's CRC (a retry repeats it) */
    uint32_t ev_counter;              /* the last event counter sent */
    uint8_t active;
    uint8_t link;                     /* the link that began it */
    uint8_t reserved[2];
    uint64_t last_ns;                 /* when the last request was accepted */
} cp_server_session;

/* Embeddable; every field is private to server.c. */
typedef struct cp_server {
    cp_server_config cfg;
    cp_decoder dec;
    uint8_t *rx, *tx, *txenc, *ev, *evenc, *ports, *ring;
    size_t wire_cap;
    uint32_t non_requests;            /* well-formed frames that were not requests */
    uint32_t replays;

    /* replay cache: the response in tx answers (seq, command, crc) */
    uint8_t cache_valid;
    uint8_t cache_cmd;
    uint16_t cache_seq;
    uint32_t cache_crc;
    uint32_t tx_len;                  /* frame bytes in tx */

    /* upload */
    uint8_t up_active;
    uint32_t up_total, up_received, up_crc;

    /* programs: slot `active` is the loaded one (when state != EMPTY) */
    cp_program prog[2];
    cp_sched sched[2];
    cp_platform slot_platform[2];
    cp_server_slot slot_ctx[2];
    uint32_t active;
    uint32_t state;                   /* CP_SERVER_*; changed under the lock */
    uint32_t generation;
    uint64_t tick_ns;
    uint32_t image_crc;
    uint32_t port_count, strings_size, ports_len;

    /* STREAM (changed under the lock, read by the tick context) */
    uint32_t st_count, st_bytes, st_decimation, st_countdown;
    uint32_t st_offset[CP_SERVER_MAX_STREAM_RANGES];
    uint16_t st_size[CP_SERVER_MAX_STREAM_RANGES];
    uint16_t ev_seq;
    uint32_t ev_dropped, ev_sent;
    uint32_t ring_head, ring_tail;    /* free-running byte counters (atomics) */

    /* response being built */
    uint32_t resp_len;
    uint8_t resp_flags;

    /* appended in ABI 3 */
    cp_decoder dec2;                  /* the guest link */
    uint8_t *rx2, *gtx, *evraw;
    uint32_t room;                    /* payload bytes a response may use (max_payload - 20) */
    uint32_t fault_count;             /* faults since init */
    uint64_t link_timeout_ns;         /* of the loaded program and the runner, 0: none */
    uint64_t last_rx_ns;              /* the owner's last accepted request (under the lock) */
    cp_server_session owner, pending;
    uint32_t nonce_count;
    uint32_t refused;                 /* requests refused: BUSY, AUTH_*, REPLAY, VERSION */
    /* the request being executed: its session (NULL: none), link, and whether its session
     * closes after the response; stop_feed: cp_server_feed_link returns (a link change) */
    cp_server_session *req_sess;
    uint32_t req_link;
    uint8_t req_close;
    uint8_t stop_feed;
    uint8_t reserved3[2];
} cp_server;

size_t cp_server_work_size(uint16_t max_payload, uint32_t ports_capacity, uint32_t ring_size);

/* Checks the configuration and sets up an empty server. */
cp_status cp_server_init(cp_server *srv, const cp_server_config *cfg, cp_error *err);

/* Protocol context: received bytes of the owner link (any sequence, any split). Responses go
 * to `write`. Text is discarded frame by frame (a transport without connections cannot
 * close one). */
void cp_server_feed(cp_server *srv, const uint8_t *bytes, size_t n);

/* Protocol context: bytes of a link. Returns how many were consumed: all, unless the link
 * sent text (notify TEXT), was refused (REFUSE) or took over (TAKEOVER); then the embedder
 * acts on the notification and feeds the rest accordingly (after TAKEOVER: as the owner). */
size_t cp_server_feed_link(cp_server *srv, uint32_t link, const uint8_t *bytes, size_t n);

/* Protocol context: forget a partly received frame (after a disconnect). */
void cp_server_disconnect(cp_server *srv);

/* Protocol context: a link's connection closed: its partial frame is forgotten; for the owner
 * link its session ends too (a socket transport: a reconnecting client is not BUSY). */
void cp_server_disconnect_link(cp_server *srv, uint32_t link);

/* Protocol context: write queued event bytes. Returns the bytes written. */
size_t cp_server_flush(cp_server *srv);

/* Tick context, lock held: one scheduler tick if running, then a STREAM event when due.
 * Returns 1 if a tick was processed. */
int cp_server_tick(cp_server *srv);

/* Read under the lock (or from the protocol context): the state, the loaded program's tick,
 * a counter that changes on every START, STOP, RESET, COMMIT and unload, and the ticks run. */
uint32_t cp_server_state(const cp_server *srv);
uint64_t cp_server_tick_ns(const cp_server *srv);
uint32_t cp_server_generation(const cp_server *srv);
uint64_t cp_server_ticks(const cp_server *srv);
/* The loaded program (its I/O bindings: what a supervisor must drive safe), NULL if none.
 * Under the lock, or in the protocol context (the only one that replaces it). */
const cp_program *cp_server_program(const cp_server *srv);

/* Shuts down: unloads the program (frees its region). */
void cp_server_close(cp_server *srv);

/* ---- a release-jitter histogram for embedders (libc-free, allocation-free)
 * 0..100 us in 100 ns buckets, 100 us..10 ms in 10 us buckets, then one overflow bucket; the
 * maximum is exact. Single writer (the tick context); readers may race benignly. */
#define CP_JITTER_FINE 1000u
#define CP_JITTER_COARSE 990u
typedef struct cp_jitter_hist {
    uint32_t bucket[CP_JITTER_FINE + CP_JITTER_COARSE + 1];
    uint32_t count;
    uint32_t max_ns;
} cp_jitter_hist;

void cp_jitter_clear(cp_jitter_hist *h);
void cp_jitter_record(cp_jitter_hist *h, uint64_t ns);
/* The value below which `permille`/1000 of the samples lie (the upper edge of its bucket,
 * capped at the maximum); 0 without samples. */
uint32_t cp_jitter_percentile(const cp_jitter_hist *h, uint32_t permille);

/* An embedder's rt_stats callback in one call: p50, p99 and max of the histogram and the
 * late-tick counter (written by the tick context, read with relaxed atomic loads). */
void cp_jitter_rt_stats(cp_server_rt_stats *out, const cp_jitter_hist *h,
                        const uint32_t *late_ticks);

/* ---- the catch-up rule of a real-time tick loop (docs/protocol.md, "The tick"), shared by
 * the host runner and the firmware. Times are in any one unit (ns, cycles); tick > 0. A
 * deadline is due at a wake at `now` when deadline <= now + margin: margin is how early a wake
 * may come relative to the deadline grid (half a timer interval for a periodic interrupt; 0
 * for a sleep to an absolute deadline). */

/* Drops every due deadline: advances *deadline by whole ticks until it is later than
 * now + margin and returns the number of deadlines skipped (0 if none was due). */
uint64_t cp_deadline_skip(uint64_t *deadline, uint64_t tick, uint64_t now, uint64_t margin);

/* Tick context, lock held: one wake of a tick loop at `now`. Runs cp_server_tick() for each
 * due deadline, oldest first, at most max_run of them, advancing *deadline by one tick each;
 * then drops the deadlines still due (cp_deadline_skip). Returns the late ticks (saturated):
 * each tick run a tick or more after its deadline, and each dropped deadline. */
uint32_t cp_server_catch_up(cp_server *srv, uint64_t *deadline, uint64_t tick, uint64_t now,
                            uint64_t margin, uint32_t max_run);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_SERVER_H */
