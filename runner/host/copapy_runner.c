/* copapy-runner: the host runner process. It speaks the wire protocol of docs/protocol.md over
 * a pty, stdio, a Unix-domain socket or a loopback TCP socket and runs the loaded program in
 * real time, with its chains under fault containment (docs/realtime.md).
 *
 *   copapy-runner --pty [--key-file F] [common options]
 *   copapy-runner --stdio ...
 *   copapy-runner --unix PATH --key-file F ...   (or --insecure-no-auth: the socket file's
 *                                                 permissions alone decide who may connect)
 *   copapy-runner --tcp PORT --key-file F ...    (127.0.0.1 only; PORT 0 picks a free port)
 * common options: --name NAME, --max-image BYTES, --max-memory BYTES, --no-rt, --user NAME,
 *   --budget-factor N, --link-timeout SECONDS, --session-lease SECONDS, --auth-grace SECONDS,
 *   --no-seccomp (the tick thread without its system-call filter, sandbox.c: for debugging),
 *   --io-file PATH (the channels in a shared file; a supervisor process, supervisor.c, drives
 *   the outputs safe if the runner process dies),
 *   --allow-code (accept format-1 images, which carry machine code, besides the verified
 *   format 2: for fault-containment tests only; HELLO reports it, CP_SERVER_FLAG_CODE)
 *   copapy-runner [--pty|--stdio|--unix PATH|--tcp PORT] --image FILE [--start] ...
 *
 * --image loads a saved program (cp.save, `copapy run`) at start-up exactly as an upload
 * would (LOAD_BEGIN/CHUNK/COMMIT through the protocol server, so the same checks apply) and
 * --start starts it; without a transport the runner then just runs it (no Python anywhere).
 *
 * --pty prints "PTY /dev/pts/N", --unix "UNIX PATH" and --tcp "TCP 127.0.0.1:PORT" as the first
 * stdout line; stderr carries only warnings. A key (--key-file: the file's bytes, at least 16,
 * readable by its owner only) makes every request authenticated; socket transports require
 * one. Threads:
 *   * main (protocol): reads the transport, feeds the server (runner/src/server.c), writes its
 *     responses and the queued events; survives disconnects (pty clients may come and go; on a
 *     socket a second connection is the server's guest link: refused with BUSY, or promoted
 *     when it takes the session over) while the program keeps running;
 *   * tick (real time, SCHED_FIFO 80 when permitted; under a seccomp filter that allows only
 *     the system calls it needs, a forbidden one is a SIGSYS fault): sleeps to absolute
 *     deadlines with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), records the release
 *     jitter (wake time - deadline) in a histogram and runs cp_server_tick() under the server
 *     lock (a priority-inheritance mutex), so READ/WRITE from the protocol thread land
 *     between ticks.
 *   * watchdog (SCHED_FIFO 90 when permitted): the budget supervisor of platform_posix.c; it
 *     interrupts a chain that runs past its budget (FAULTED: timeout).
 * Real-time set-up (skipped with --no-rt), each failure one warning: mlockall (RLIMIT_MEMLOCK
 * raised first), SCHED_FIFO 80, PR_SET_TIMERSLACK 1 ns, /dev/cpu_dma_latency opened; it is
 * held at 0 only while a program runs. --user NAME then drops root for good (groups, gid, uid)
 * before the first client is served. SIGINT, SIGTERM and SIGHUP end the runner cleanly: the
 * outputs take their safe values first.
 *
 * Ticks: the tick is the program's (the largest that divides every task period and offset).
 * A wake that is late by whole ticks runs the missed ticks back to back (each counted in
 * late_ticks when it runs a tick or more after its deadline), at most MAX_CATCHUP per wake; a
 * runner further behind drops the remaining missed deadlines (counted as late) and continues
 * from the current time. */
#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "copapy/platform_posix.h"
#include "copapy/server.h"
#include "preload.h"
#include "runner_common.h"
#include "host_os.h"
#include "sandbox.h"
#include "supervisor.h"

enum {
    MAX_PAYLOAD = CP_PRELOAD_MAX_PAYLOAD,
    PORTS_CAPACITY = 64 * 1024,
    /* events (STREAM, FAULT) wait here while the client does not read: 1 MiB holds
     * STALL_TIMEOUT_MS of a 1 kHz stream of up to 190 value bytes per tick (2 + 8 + 8-byte
     * tick + values per event; docs/guide/howto/scope.md, "Host stalls") */
    RING_SIZE = 1024 * 1024,
    CHANNELS = HOST_CHANNELS,
    RT_PRIORITY = 80,
    WATCHDOG_PRIORITY = 90,
    WATCHDOG_POLL_NS = 2000000,
    DEFAULT_BUDGET_FACTOR = 10,
    MIN_KEY = 16,
    MAX_KEY = 4096,
    MAX_CATCHUP = 16,
    MIN_TICK_NS = 10000,
    WRITE_TIMEOUT_MS = 500,
    /* a client that holds a session may stall this long (a busy host, a paused process)
     * before its unread bytes are discarded; events queue in the ring meanwhile */
    STALL_TIMEOUT_MS = 5000,
    /* frames written to a pty remembered (end offset, kind) to account for a discarded
     * backlog: a pty holds at most ~70 KB unread (4 KB line discipline + 64 KB tty buffer),
     * at least 19 bytes a frame (an empty STREAM event) */
    LINK_HISTORY = 8192
};

/* what ends at a link_end: a frame, a STREAM event's frame, bytes of no frame (the rest
 * of a frame begun before a discard, a delimiter) */
enum { LINK_OTHER = 0, LINK_STREAM = 1, LINK_FILLER = 2 };

#define DEFAULT_MAX_IMAGE (4u * 1024u * 1024u)
#define DEFAULT_MAX_MEMORY (64ul * 1024 * 1024)
#define DMA_IDLE_US 2000000000 /* "no constraint" for /dev/cpu_dma_latency */
#define DEFAULT_AUTH_GRACE_NS 2000000000ull /* --auth-grace: SESSION within this, or closed */

typedef enum { T_NONE, T_PTY, T_STDIO, T_TCP, T_UNIX } transport;

typedef struct host {
    cp_server srv;
    cp_server_config cfg;
    cp_platform platform;
    uint8_t *work;
    uint8_t *staging;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int quit;                 /* under lock */
    int sandbox_go;           /* under lock: main has dropped root, the filter may go on */
    int tick_ready, tick_parked; /* under lock: set up (sandbox_rc says how), ended */
    int sandbox_rc;           /* the seccomp filter: 0 installed, else an errno value */
    int want_seccomp;         /* not --no-seccomp */
    int to_supervisor;        /* the pipe to the supervisor process (--io-file), or -1 */
    /* transport */
    transport mode;
    int fd_in, fd_out;        /* the current client (-1: none) */
    int guest_fd;             /* a second connection on a socket transport (-1: none) */
    /* admission (with a key, on a socket): a connection without a session is closed at its
     * deadline, and a new one takes the place of the oldest such connection */
    uint64_t auth_grace_ns;
    uint64_t client_deadline_ns, guest_deadline_ns; /* CLOCK_MONOTONIC */
    int listen_fd;
    const char *unix_path;
    /* set by notify in the protocol context, acted on after the feed returns */
    int text_seen, refused, took_over;
    int pty_master, pty_slave;
    int wake_pipe[2];
    int wake_pending;         /* atomic */
    /* real time */
    int want_rt;
    int drops_root; /* --user given: CAP_IPC_LOCK goes with root */
    int allow_code; /* --allow-code: format-1 images (machine code) too, for tests */
    int rt_active;
    int dma_fd;
    int dma_held;             /* 0 is written (a program runs); under lock */
    int verbose;              /* --verbose: real-time state changes on stderr */
    cp_jitter_hist hist;      /* written by the tick thread only */
    uint32_t late_ticks;      /* atomic */
    /* simulated I/O: doubles as bits, atomics; in io_own, or with --io-file in a shared
     * mapping of the file that the supervisor drives safe if this process dies */
    uint64_t (*io)[CHANNELS];
    uint64_t io_own[CP_IO_KIND_COUNT][CHANNELS];
    /* --image: responses of the server to the start-up requests are decoded here
     * (preloading: set around cp_preload_image, for h_write_link) */
    int preloading;
    cp_preload pre;
    /* the pty link: bytes written to the master so far, and the frames among them (each
     * h_write_link call is one frame; its end offset and kind) */
    uint64_t link_written;
    uint64_t link_end[LINK_HISTORY];
    uint8_t link_kind[LINK_HISTORY]; /* LINK_OTHER, LINK_STREAM, LINK_FILLER */
    uint32_t link_frames;     /* frames recorded (the newest at link_frames - 1) */
    cp_server_link_drops drops; /* the discarded backlog, for STATS (atomics) */
} host;

static host H;
static volatile sig_atomic_t stop_requested;

/* ---- server callbacks */

static void h_lock(void *ctx)
{
    host *h = ctx;
    pthread_mutex_lock(&h->lock);
}

static void h_unlock(void *ctx)
{
    host *h = ctx;
    pthread_mutex_unlock(&h->lock);
}

static uint64_t h_clock(void *ctx)
{
    (void)ctx;
    return cp_posix_monotonic_ns();
}

static double h_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    host *h = ctx;
    return host_io_read(h->io, kind, channel);
}

/* the simulated I/O: runner_common.h */
static int h_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    host *h = ctx;
    return host_io_write(h->io, kind, channel, value);
}

static void h_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    host *h = ctx;
    cp_jitter_rt_stats(out, &h->hist, &h->late_ticks);
    out->link.stream_events = __atomic_load_n(&h->drops.stream_events, __ATOMIC_RELAXED);
    out->link.frames = __atomic_load_n(&h->drops.frames, __ATOMIC_RELAXED);
    out->link.discards = __atomic_load_n(&h->drops.discards, __ATOMIC_RELAXED);
    out->link.bytes = __atomic_load_n(&h->drops.bytes, __ATOMIC_RELAXED);
}

static void dma_hold(host *h, int on);

static void h_notify(void *ctx, uint32_t what)
{
    host *h = ctx;
    switch (what) {
    case CP_SERVER_NOTIFY_STATE:
    case CP_SERVER_NOTIFY_REPLACED:
        /* protocol context: the supervisor learns the loaded program's safe outputs */
        if (h->to_supervisor >= 0 &&
            supervisor_send_safe(h->to_supervisor, cp_server_program(&h->srv)) != 0) {
            warn("cannot tell the supervisor the safe outputs (%s)", strerror(errno));
        }
        pthread_mutex_lock(&h->lock);
        /* at the request itself: a STOP and START within one tick still release and hold */
        dma_hold(h, cp_server_state(&h->srv) == CP_SERVER_RUNNING);
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
        break;
    case CP_SERVER_NOTIFY_TEXT: /* protocol context: acted on when the feed returns */
        h->text_seen = 1;
        break;
    case CP_SERVER_NOTIFY_REFUSE:
        h->refused = 1;
        break;
    case CP_SERVER_NOTIFY_TAKEOVER:
        h->took_over = 1;
        break;
    default:
        if (!__atomic_exchange_n(&h->wake_pending, 1, __ATOMIC_ACQ_REL)) {
            /* tick thread: never blocks (the pipe is non-blocking; a full pipe is awake) */
            ssize_t r = write(h->wake_pipe[1], "e", 1);
            (void)r;
        }
        break;
    }
}

static void drop_client(host *h);
static void drop_guest(host *h);

static int is_socket(const host *h)
{
    return h->mode == T_TCP || h->mode == T_UNIX;
}

/* 1 if the COBS-encoded frame `enc` (n bytes) is a STREAM event: its header's flags and
 * command, decoded from the first bytes (docs/protocol.md, "Framing"). */
static int frame_is_stream(const uint8_t *enc, size_t n)
{
    uint8_t head[CP_FRAME_HEADER];
    size_t i = 0, o = 0;
    while (i < n && o < sizeof(head) && enc[i] != 0) {
        uint8_t code = enc[i++];
        for (uint8_t k = 1; k < code && i < n && o < sizeof(head); k++) {
            head[o++] = enc[i++];
        }
        if (code != 0xFF && o < sizeof(head)) {
            head[o++] = 0;
        }
    }
    return o >= 5 && (head[1] & CP_FLAG_EVENT) != 0 && head[4] == CP_CMD_STREAM;
}

static void add_drop(uint32_t *counter, uint32_t n)
{
    __atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* Remembers the frame (or filler) that ends at the current link_written. */
static void link_record(host *h, uint8_t kind)
{
    uint32_t at = h->link_frames++ % LINK_HISTORY;
    h->link_end[at] = h->link_written;
    h->link_kind[at] = kind;
}

/* Nobody reads the pty: the runner takes the unread backlog itself (a non-blocking read of
 * its own slave, which also waits out the bytes still in the tty buffer) and counts the
 * frames it touched from the history of what it wrote: every frame with a byte in the last
 * `taken` bytes written is lost to the client (one whose head was read arrives truncated).
 * A client that begins to read again during these reads may take some of those bytes:
 * the bytes counted stay exact, the frames may then be off by the few it shares.
 * `frame`: the frame being written (`n` bytes), `sent` of them written. Returns the bytes
 * taken; *truncated: the client holds the head of a frame (a delimiter must end it). */
static uint64_t discard_backlog(host *h, const uint8_t *frame, size_t n, size_t sent,
                                int *truncated)
{
    uint8_t sink[4096];
    uint64_t taken = 0;
    for (;;) {
        ssize_t r = read(h->pty_slave, sink, sizeof(sink));
        if (r > 0) {
            taken += (uint64_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            break;
        }
    }
    /* a client that left raw mode (canonical input) may keep bytes read() does not return:
     * gone too, counted by what the line discipline still reports */
    int left = 0;
    if (ioctl(h->pty_slave, FIONREAD, &left) == 0 && left > 0) {
        taken += (uint64_t)left;
    }
    tcflush(h->pty_slave, TCIFLUSH);
    if (taken > h->link_written) {
        taken = h->link_written; /* cannot happen: only this runner writes the master */
    }
    uint64_t from = h->link_written - taken; /* the first byte the client did not read */
    uint32_t frames = 0, stream = 0;
    *truncated = 0;
    uint64_t end = h->link_written;
    if (sent > 0 && taken > 0) {
        frames++;
        stream += (uint32_t)frame_is_stream(frame, n);
        *truncated = taken < sent;
        end -= sent;
    }
    /* the history reaches further back than a pty's buffer holds (bytes beyond it would
     * still be counted in `bytes`); entry k - 1, the start of entry k, stays valid */
    uint32_t k = h->link_frames;
    while (end > from && k > 0 && h->link_frames - k < LINK_HISTORY - 1u) {
        k--;
        uint8_t kind = h->link_kind[k % LINK_HISTORY];
        frames += kind != LINK_FILLER;
        stream += kind == LINK_STREAM;
        uint64_t start = k > 0 ? h->link_end[(k - 1u) % LINK_HISTORY] : 0;
        *truncated = start < from;
        end = start;
    }
    add_drop(&h->drops.frames, frames);
    add_drop(&h->drops.stream_events, stream);
    add_drop(&h->drops.discards, 1);
    __atomic_store_n(&h->drops.bytes, __atomic_load_n(&h->drops.bytes, __ATOMIC_RELAXED) + taken,
                     __ATOMIC_RELAXED);
    return taken;
}

/* Writes everything or gives up: a client that stops reading for WRITE_TIMEOUT_MS
 * (STALL_TIMEOUT_MS while it holds a session) loses the bytes (pty: the unread backlog is
 * discarded and counted, STATS link_*; a socket client is dropped). */
static void preload_reply(host *h, const uint8_t *bytes, size_t n);

static void h_write_link(void *ctx, uint32_t link, const uint8_t *bytes, size_t n)
{
    host *h = ctx;
    int guest = link == CP_SERVER_GUEST;
    int flushed = 0;
    const uint8_t *frame = bytes;
    size_t frame_n = n, sent = 0;
    uint8_t kind = (uint8_t)frame_is_stream(bytes, n); /* LINK_OTHER or LINK_STREAM */
    if (h->preloading) {
        preload_reply(h, bytes, n);
        return;
    }
    for (;;) {
        int fd = guest ? h->guest_fd : h->fd_out;
        if (fd < 0) {
            return;
        }
        if (n == 0) {
            if (fd == h->pty_master) {
                link_record(h, kind);
            }
            return;
        }
        ssize_t w = write(fd, bytes, n);
        if (w > 0) {
            h->link_written += fd == h->pty_master ? (uint64_t)w : 0;
            bytes += w;
            n -= (size_t)w;
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {fd, POLLOUT, 0};
            int wait_ms = !guest && h->srv.owner.active ? STALL_TIMEOUT_MS : WRITE_TIMEOUT_MS;
            if (poll(&p, 1, wait_ms) > 0 && (p.revents & POLLOUT)) {
                continue;
            }
            if (h->mode == T_PTY && !flushed) {
                /* nobody reads the pty: discard what waits there (counted), then try once
                 * more; a frame whose start went with it is not finished (it could only
                 * arrive damaged), and a delimiter ends a frame the client holds a head of */
                flushed = 1;
                int truncated;
                uint64_t taken = discard_backlog(h, frame, frame_n, sent, &truncated);
                static const uint8_t delimiter[1] = {0};
                if (sent > 0 && taken > 0) {
                    bytes = delimiter;
                    n = truncated ? 1 : 0;
                    kind = LINK_FILLER;
                } else if (truncated) {
                    if (write(fd, delimiter, 1) == 1) {
                        h->link_written++;
                        link_record(h, LINK_FILLER);
                    }
                }
                continue;
            }
        } else if (h->mode == T_STDIO) {
            exit(0); /* a hard error: the client is gone */
        }
        if (guest) {
            drop_guest(h);
        } else if (is_socket(h)) {
            drop_client(h);
        }
        return;
    }
}

static void h_write(void *ctx, const uint8_t *bytes, size_t n)
{
    h_write_link(ctx, CP_SERVER_OWNER, bytes, n);
}

/* Nonces from the kernel's generator. */
static void h_random(void *ctx, uint8_t *out, size_t n)
{
    (void)ctx;
    while (n > 0) {
        ssize_t r = getrandom(out, n, 0);
        if (r > 0) {
            out += r;
            n -= (size_t)r;
        } else if (r < 0 && errno != EINTR) {
            die("getrandom: %s", strerror(errno));
        }
    }
}

/* ---- real time */

static void rt_setup_process(host *h)
{
    if (!h->want_rt) {
        return;
    }
    /* locked memory stays locked after dropping root only within RLIMIT_MEMLOCK: lift it
     * while we may (every program region is mmap'd later, under MCL_FUTURE) */
    struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};
    int lifted = setrlimit(RLIMIT_MEMLOCK, &unlimited) == 0;
    /* where the limit stays (a container without CAP_SYS_RESOURCE), the runner's own pages
     * (2.3 MB of stencil tables among them) may already exceed it: after --user drops
     * CAP_IPC_LOCK, MCL_FUTURE would then make every later mmap fail (EAGAIN), the program
     * regions included; lock what is mapped now only, and say so */
    int future = lifted || !h->drops_root;
    if (!future) {
        warn("RLIMIT_MEMLOCK cannot be raised: memory mapped after start-up (program regions) "
             "is not locked");
    }
    if (mlockall(MCL_CURRENT | (future ? MCL_FUTURE : 0)) != 0) {
        warn("mlockall failed (%s): page faults may delay ticks", strerror(errno));
    }
    /* opened now (it needs root) but held at 0 only while a program runs (dma_hold) */
    h->dma_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (h->dma_fd < 0) {
        warn("cannot open /dev/cpu_dma_latency (%s): CPU idle states may add wake-up latency",
             strerror(errno));
    } else {
        int32_t idle = DMA_IDLE_US;
        if (write(h->dma_fd, &idle, sizeof(idle)) != (ssize_t)sizeof(idle)) {
            warn("cannot write /dev/cpu_dma_latency (%s)", strerror(errno));
            close(h->dma_fd);
            h->dma_fd = -1;
        }
    }
}

/* The CPU stays out of deep idle states (latency 0) only while a program runs; otherwise the
 * request on the open file says "no constraint". Called under the lock by the protocol thread
 * at every state change (START, STOP, RESET, COMMIT, unload) and by the tick thread when it
 * finds the program no longer running (a fault, a timeout, the dead-man switch). */
static void dma_hold(host *h, int on)
{
    if (h->dma_fd < 0 || h->dma_held == on) {
        return;
    }
    int32_t v = on ? 0 : DMA_IDLE_US;
    if (write(h->dma_fd, &v, sizeof(v)) == (ssize_t)sizeof(v)) {
        __atomic_store_n(&h->dma_held, on, __ATOMIC_RELAXED);
        if (h->verbose) {
            fprintf(stderr, "copapy-runner: cpu_dma_latency %s\n",
                    on ? "held at 0 (a program runs)" : "released");
        }
    }
}

static void no_job(void)
{
}

/* The tick thread's set-up: everything that needs a system call the filter forbids is done
 * first (the guard's slot and alternate stack, the job clock's calibration), then the filter
 * goes on when main says so (docs/realtime.md, "Isolation on the host runner"): after --user
 * dropped root, which glibc does in every thread (setuid, setgid, setgroups). */
static void tick_setup(host *h)
{
    if (h->want_rt && prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0) {
        warn("PR_SET_TIMERSLACK failed (%s): wake-ups may be up to 50 us late",
             strerror(errno));
    }
    (void)cp_posix_clock_init();
    cp_fault none;
    memset(&none, 0, sizeof(none));
    (void)cp_posix_guard(NULL, no_job, 0, &none);
    pthread_mutex_lock(&h->lock);
    while (!h->sandbox_go) {
        pthread_cond_wait(&h->cond, &h->lock);
    }
    int rc = 0;
    if (h->want_seccomp) {
        int fds[SANDBOX_MAX_WRITE_FDS] = {h->wake_pipe[1], h->dma_fd,
                                          h->verbose ? STDERR_FILENO : -1, -1};
        rc = sandbox_tick_thread(fds, SANDBOX_MAX_WRITE_FDS);
    }
    h->sandbox_rc = rc;
    h->tick_ready = 1;
    pthread_cond_broadcast(&h->cond);
}

static void *tick_main(void *arg)
{
    host *h = arg;
    tick_setup(h); /* returns locked */
    for (;;) {
        while (!h->quit && cp_server_state(&h->srv) != CP_SERVER_RUNNING) {
            dma_hold(h, 0);
            pthread_cond_wait(&h->cond, &h->lock);
        }
        if (h->quit) {
            break;
        }
        dma_hold(h, 1);
        uint32_t gen = cp_server_generation(&h->srv);
        uint64_t tick = cp_server_tick_ns(&h->srv);
        cp_jitter_clear(&h->hist);
        __atomic_store_n(&h->late_ticks, 0u, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&h->lock);
        uint64_t deadline = cp_posix_monotonic_ns() + tick;
        for (;;) {
            struct timespec ts = {(time_t)(deadline / 1000000000u),
                                  (long)(deadline % 1000000000u)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
            uint64_t wake = cp_posix_monotonic_ns();
            cp_jitter_record(&h->hist, wake > deadline ? wake - deadline : 0);
            pthread_mutex_lock(&h->lock);
            if (h->quit || cp_server_state(&h->srv) != CP_SERVER_RUNNING ||
                cp_server_generation(&h->srv) != gen) {
                break; /* locked: back to waiting for the next START */
            }
            /* a program replaced between two ticks keeps the deadline grid (its first tick is
             * the old one's next deadline); a new tick steps it from there */
            tick = cp_server_tick_ns(&h->srv);
            /* a sleep to an absolute deadline never wakes early: no margin */
            uint32_t late = cp_server_catch_up(&h->srv, &deadline, tick, wake, 0, MAX_CATCHUP);
            if (late != 0) {
                __atomic_store_n(&h->late_ticks,
                                 __atomic_load_n(&h->late_ticks, __ATOMIC_RELAXED) + late,
                                 __ATOMIC_RELAXED);
            }
            pthread_mutex_unlock(&h->lock);
        }
    }
    dma_hold(h, 0);
    /* parked, not ended: under the filter a thread may not exit (SYS_exit is what a task
     * that ends the tick thread would call); the process's exit ends it */
    h->tick_parked = 1;
    pthread_cond_broadcast(&h->cond);
    for (;;) {
        pthread_cond_wait(&h->cond, &h->lock);
    }
    return NULL;
}

/* Main, before any program can be loaded: the tick thread's filter goes on. */
static void seal_tick_thread(host *h)
{
    pthread_mutex_lock(&h->lock);
    h->sandbox_go = 1;
    pthread_cond_broadcast(&h->cond);
    while (!h->tick_ready) {
        pthread_cond_wait(&h->cond, &h->lock);
    }
    int rc = h->sandbox_rc;
    pthread_mutex_unlock(&h->lock);
    if (rc == ENOSYS) {
        warn("no seccomp on this system: the tick thread runs without a system-call filter");
    } else if (rc != 0) {
        die("cannot install the tick thread's seccomp filter: %s (--no-seccomp runs without "
            "it)", strerror(rc));
    }
}

static void start_tick_thread(host *h)
{
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    if (h->want_rt) {
        struct sched_param sp = {.sched_priority = RT_PRIORITY};
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &sp);
        int rc = pthread_create(&thread, &attr, tick_main, h);
        if (rc == 0) {
            h->rt_active = 1;
            pthread_attr_destroy(&attr);
            return;
        }
        warn("SCHED_FIFO priority %d not permitted (%s): ticks run at normal priority",
             RT_PRIORITY, strerror(rc));
        pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
    }
    int rc = pthread_create(&thread, &attr, tick_main, h);
    if (rc != 0) {
        die("cannot create the tick thread: %s", strerror(rc));
    }
    pthread_attr_destroy(&attr);
}

/* ---- transports */

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) {
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
}

/* The owner's connection closed (or was closed): its session ends with it. */
static void drop_client(host *h)
{
    if (is_socket(h) && h->fd_in >= 0) {
        close(h->fd_in);
        h->fd_in = h->fd_out = -1;
        cp_server_disconnect_link(&h->srv, CP_SERVER_OWNER);
    }
}

static void drop_guest(host *h)
{
    if (h->guest_fd >= 0) {
        close(h->guest_fd);
        h->guest_fd = -1;
        cp_server_disconnect_link(&h->srv, CP_SERVER_GUEST);
    }
}

static void open_pty(host *h)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) {
        die("cannot create a pty: %s", strerror(errno));
    }
    const char *name = ptsname(m);
    if (name == NULL) {
        die("ptsname: %s", strerror(errno));
    }
    /* keep the slave open ourselves: clients may open and close it any number of times
     * without the master ever seeing a hang-up */
    int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0) {
        die("cannot open %s: %s", name, strerror(errno));
    }
    struct termios t;
    if (tcgetattr(s, &t) == 0) {
        cfmakeraw(&t);
        tcsetattr(s, TCSANOW, &t);
    }
    set_nonblock(m);
    set_nonblock(s); /* only read to take a backlog nobody reads (discard_backlog) */
    h->pty_master = m;
    h->pty_slave = s;
    h->fd_in = h->fd_out = m;
    printf("PTY %s\n", name);
    fflush(stdout);
}

static void open_tcp(host *h, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4) != 0) {
        die("cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
    }
    socklen_t len = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    h->listen_fd = fd;
    printf("TCP 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
}

/* 1 if a process listens on the Unix-domain socket `a` (a live runner), 0 if nobody does (a
 * stale socket file a killed runner left). */
static int unix_listened(const struct sockaddr_un *a)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    int live = connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0 || errno == EAGAIN;
    close(fd);
    return live;
}

/* A Unix-domain socket whose file (mode 0600, owned by the user the runner runs as) decides
 * who may connect. A stale socket file is replaced; one a live runner listens on is an error
 * (replacing it left that runner and its program running unreachable, and its exit removed
 * the new runner's file); any other file is an error. */
static void open_unix(host *h, const char *path, uid_t owner, gid_t group)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(a.sun_path)) {
        die("--unix path '%s' is longer than %zu bytes", path, sizeof(a.sun_path) - 1);
    }
    strcpy(a.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            die("--unix %s exists and is not a socket", path);
        }
        if (unix_listened(&a)) {
            die("--unix %s: another runner listens there: stop it first (its program keeps "
                "running until then), or give this one another path", path);
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        die("socket: %s", strerror(errno));
    }
    mode_t old = umask(0177); /* srw------- */
    int rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
    umask(old);
    if (rc != 0 || listen(fd, 4) != 0) {
        die("cannot listen on %s: %s", path, strerror(errno));
    }
    if (owner != (uid_t)-1 && chown(path, owner, group) != 0) {
        die("cannot give %s to the --user: %s", path, strerror(errno));
    }
    h->listen_fd = fd;
    h->unix_path = path;
    printf("UNIX %s\n", path);
    fflush(stdout);
}

/* Admission control applies when requests must be authenticated on a socket transport: then a
 * connection is either the owner's with a live session, or unauthenticated. */
static int admission(const host *h)
{
    return is_socket(h) && h->srv.cfg.require_auth;
}

/* The owner link's connection has a session. (cp_server.owner is the server's: read here, in
 * the protocol context that alone changes it.) */
static int client_authenticated(const host *h)
{
    return h->fd_in >= 0 && h->srv.owner.active;
}

/* Closes each unauthenticated connection whose grace time is over; an authenticated owner's
 * deadline moves on (a session that ends starts its grace anew). Returns the poll timeout in
 * ms to the next deadline, -1 for none. */
static int admission_deadlines(host *h)
{
    if (!admission(h)) {
        return -1;
    }
    int drop = 0;
    int client = h->fd_in < 0              ? HOST_LINK_NONE
                 : client_authenticated(h) ? HOST_LINK_AUTHENTICATED
                                           : HOST_LINK_OPEN;
    int ms = host_admission_deadlines(cp_posix_monotonic_ns(), h->auth_grace_ns,
                                      &h->client_deadline_ns, h->guest_deadline_ns, client,
                                      h->guest_fd >= 0, &drop);
    if (drop & HOST_DROP_CLIENT) {
        drop_client(h);
    }
    if (drop & HOST_DROP_GUEST) {
        drop_guest(h);
    }
    return ms;
}

/* The first connection is the owner's; a second one is the server's guest link (refused with
 * BUSY, or promoted when it takes over). With admission control a further one takes the slot
 * of the older unauthenticated connection (the guest, or an owner without a session), so idle
 * peers can neither hold the runner nor keep the key holder waiting; without it (no key, or a
 * pty), it waits in the backlog until a slot is free. */
static void accept_client(host *h)
{
    int c = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
        return;
    }
    if (h->mode == T_TCP) {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    uint64_t deadline = cp_posix_monotonic_ns() + h->auth_grace_ns;
    if (h->fd_in >= 0 && h->guest_fd >= 0) { /* admission(h): evict the oldest */
        if (!client_authenticated(h) && h->client_deadline_ns <= h->guest_deadline_ns) {
            drop_client(h);
        } else {
            drop_guest(h);
        }
    }
    if (h->fd_in < 0) {
        h->fd_in = h->fd_out = c;
        h->client_deadline_ns = deadline;
    } else {
        h->guest_fd = c;
        h->guest_deadline_ns = deadline;
    }
}

/* Socket transports: the bytes of one link, and what the server reported while it took them:
 * text closes that connection, a refused guest is closed, a guest that took over becomes the
 * owner (the old owner's connection is closed) and the rest of its bytes are the owner's. */
/* Hangs up on a peer that got a text reply without resetting the connection: a close with
 * unread bytes (an HTTP body still arriving) sends RST, and the peer may lose the reply. FIN
 * after the reply, then discard what comes until the peer's FIN (at most ~200 ms). */
static void linger_reply(int fd)
{
    (void)shutdown(fd, SHUT_WR);
    uint8_t sink[1024];
    for (int waited = 0; waited < 200; waited += 20) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0 && read(fd, sink, sizeof sink) <= 0) {
            return; /* the peer's FIN (or an error): nothing is left to reset */
        }
    }
}

static void feed_socket(host *h, int guest, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        h->text_seen = h->refused = h->took_over = 0;
        size_t used = cp_server_feed_link(&h->srv, guest ? CP_SERVER_GUEST : CP_SERVER_OWNER,
                                          buf, n);
        buf += used;
        n -= used;
        if (h->took_over) {
            /* the server has made the guest's session the owner's: only the old connection
             * goes (drop_client would end the new owner's session) */
            if (h->fd_in >= 0) {
                close(h->fd_in);
            }
            h->fd_in = h->fd_out = h->guest_fd;
            h->client_deadline_ns = h->guest_deadline_ns;
            h->guest_fd = -1;
            guest = 0;
        } else if (h->text_seen || h->refused) {
            if (h->text_seen) {
                /* most likely a browser or curl: tell it in its own terms, then hang up */
                static const char reply[] =
                    "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n"
                    "Connection: close\r\n\r\ncopapy runner: not an HTTP server; it speaks "
                    "the copapy wire protocol (docs/protocol.md), authenticated by its key\n";
                int fd = guest ? h->guest_fd : h->fd_out;
                ssize_t w = write(fd, reply, sizeof(reply) - 1);
                (void)w;
                linger_reply(fd);
            }
            if (guest) {
                drop_guest(h);
            } else {
                drop_client(h);
            }
            return;
        }
    }
}

static void protocol_loop(host *h)
{
    uint8_t buf[4096];
    while (!stop_requested) {
        int timeout_ms = admission_deadlines(h);
        struct pollfd p[4];
        int n = 0, i_client = -1, i_wake, i_listen = -1, i_guest = -1;
        if (h->fd_in >= 0) {
            i_client = n;
            p[n++] = (struct pollfd){h->fd_in, POLLIN, 0};
        }
        i_wake = n;
        p[n++] = (struct pollfd){h->wake_pipe[0], POLLIN, 0};
        if (is_socket(h) && (h->fd_in < 0 || h->guest_fd < 0 || admission(h))) {
            /* without admission control a third connection waits in the backlog until a
             * slot is free (polling the listener without accepting would spin) */
            i_listen = n;
            p[n++] = (struct pollfd){h->listen_fd, POLLIN, 0};
        }
        if (h->guest_fd >= 0) {
            i_guest = n;
            p[n++] = (struct pollfd){h->guest_fd, POLLIN, 0};
        }
        if (poll(p, (nfds_t)n, timeout_ms) < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("poll: %s", strerror(errno));
        }
        if (p[i_wake].revents & POLLIN) {
            while (read(h->wake_pipe[0], buf, sizeof(buf)) > 0) {
            }
            __atomic_store_n(&h->wake_pending, 0, __ATOMIC_RELEASE);
            cp_server_flush(&h->srv); /* without a client the bytes are dropped */
        }
        if (i_listen >= 0 && (p[i_listen].revents & POLLIN)) {
            accept_client(h);
            continue;
        }
        if (i_guest >= 0 && (p[i_guest].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = read(h->guest_fd, buf, sizeof(buf));
            if (r > 0) {
                feed_socket(h, 1, buf, (size_t)r);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
                drop_guest(h);
            }
            continue; /* the owner's descriptor may have changed (a takeover) */
        }
        if (i_client >= 0 && (p[i_client].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = read(h->fd_in, buf, sizeof(buf));
            if (r > 0 && is_socket(h)) {
                feed_socket(h, 0, buf, (size_t)r);
            } else if (r > 0) {
                cp_server_feed(&h->srv, buf, (size_t)r);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
                if (h->mode == T_STDIO) {
                    return; /* stdin closed: nobody can talk to us any more */
                }
                if (is_socket(h)) {
                    drop_client(h);
                } else {
                    /* a pty whose slave is held open does not hang up; be safe anyway */
                    cp_server_disconnect(&h->srv);
                    struct timespec ts = {0, 50000000};
                    nanosleep(&ts, NULL);
                }
            }
        }
    }
}

/* ---- --image: a saved program loaded at start-up through the protocol server (preload.c) */

static void preload_reply(host *h, const uint8_t *bytes, size_t n)
{
    cp_preload_reply(&h->pre, bytes, n);
}

static void preload_image(host *h, const char *path, int start)
{
    char why[CP_ERROR_MESSAGE_MAX + PATH_MAX + 128];
    h->preloading = 1;
    int rc = cp_preload_image(&h->srv, &h->pre, h->cfg.staging_size, path, start, why,
                              sizeof(why));
    h->preloading = 0;
    if (rc != 0) {
        die("%s", why);
    }
}

/* ---- main */

static const char USAGE[] =
    "usage: copapy-runner (--pty | --stdio | --unix PATH | --tcp PORT) [--key-file F]\n"
    "         [--insecure-no-auth] [--user NAME] [--name NAME] [--max-image BYTES]\n"
    "         [--max-memory BYTES] [--budget-factor N] [--link-timeout SECONDS]\n"
    "         [--session-lease SECONDS] [--auth-grace SECONDS] [--no-rt] [--verbose]\n"
    "         [--no-seccomp] [--io-file PATH]\n"
    "         [--allow-code]  (also format-1 images, machine code: fault tests only)\n"
    "         [--image FILE [--start]]\n"
    "       copapy-runner --image FILE --start [options]   (no transport)\n";

/* Bad usage: what is wrong (NULL: getopt said it), then the synopsis; exit status 2. */
static void usage(const char *why)
{
    if (why != NULL) {
        fprintf(stderr, "copapy-runner: error: %s\n", why);
    }
    fputs(USAGE, stderr);
    exit(2);
}

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
    ssize_t r = write(H.wake_pipe[1], "q", 1); /* ends the protocol loop's poll */
    (void)r;
}

/* The shared key: the whole file (16 .. 4096 bytes), which only its owner may read. */
static uint8_t *read_key(const char *path, uint32_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        die("--key-file %s: %s", path, strerror(errno));
    }
    if ((st.st_mode & 077) != 0) {
        die("--key-file %s can be read by other users (mode %03o): chmod 600 %s", path,
            (unsigned)(st.st_mode & 0777), path);
    }
    static uint8_t key[MAX_KEY + 1];
    ssize_t n = read(fd, key, sizeof(key));
    close(fd);
    if (n < MIN_KEY || n > MAX_KEY) {
        die("--key-file %s has %zd bytes; a key has %d to %d (e.g. head -c 32 /dev/urandom)",
            path, n, MIN_KEY, MAX_KEY);
    }
    *len = (uint32_t)n;
    return key;
}

/* A whole number min..max (base 0: 0x.. too) or die with `what`; a sign is refused
 * (strtoul reads "-5" as ULONG_MAX - 4: --max-memory -5 was accepted as unlimited). */
static unsigned long parse_count(const char *opt, const char *arg, int base, unsigned long min,
                                 unsigned long max, const char *what)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(arg, &end, base);
    if (end == arg || *end != '\0' || errno == ERANGE || strpbrk(arg, "+-") != NULL ||
        v < min || v > max) {
        die("%s needs %s, got '%s'", opt, what, arg);
    }
    return v;
}

/* --user: after the real-time set-up and the sockets, root is given up for good. */
static void drop_root(const struct passwd *pw)
{
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) {
        die("cannot drop root to user %s: %s", pw->pw_name, strerror(errno));
    }
    if (setuid(0) == 0 || geteuid() == 0) {
        die("still root after dropping to %s", pw->pw_name);
    }
}

int main(int argc, char **argv)
{
    host *h = &H;
    h->mode = T_NONE;
    h->fd_in = h->fd_out = h->listen_fd = h->pty_master = h->pty_slave = h->dma_fd = -1;
    h->guest_fd = -1;
    h->want_rt = 1;
    h->want_seccomp = 1;
    h->to_supervisor = -1;
    h->io = h->io_own;
    const char *io_file = NULL;
    const char *name = "copapy host runner";
    const char *key_file = NULL, *user = NULL, *unix_path = NULL;
    unsigned long max_image = DEFAULT_MAX_IMAGE, max_memory = DEFAULT_MAX_MEMORY;
    unsigned long budget_factor = DEFAULT_BUDGET_FACTOR;
    double link_timeout = 0.0, lease = 0.0, auth_grace = -1.0;
    int tcp_port = -1, no_auth = 0;
    const char *image_path = NULL;
    int start_image = 0;
    static const struct option opts[] = {
        {"pty", no_argument, NULL, 'p'},
        {"stdio", no_argument, NULL, 's'},
        {"tcp", required_argument, NULL, 't'},
        {"unix", required_argument, NULL, 'u'},
        {"key-file", required_argument, NULL, 'k'},
        {"insecure-no-auth", no_argument, NULL, 'I'},
        {"user", required_argument, NULL, 'U'},
        {"name", required_argument, NULL, 'n'},
        {"max-image", required_argument, NULL, 'm'},
        {"max-memory", required_argument, NULL, 'M'},
        {"budget-factor", required_argument, NULL, 'b'},
        {"link-timeout", required_argument, NULL, 'l'},
        {"session-lease", required_argument, NULL, 'L'},
        {"auth-grace", required_argument, NULL, 'A'},
        {"no-rt", no_argument, NULL, 'r'},
        {"no-seccomp", no_argument, NULL, 'S'},
        {"io-file", required_argument, NULL, 'o'},
        {"allow-code", no_argument, NULL, 'C'},
        {"verbose", no_argument, NULL, 'v'},
        {"image", required_argument, NULL, 'i'},
        {"start", no_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'p':
        case 's':
        case 't':
        case 'u':
            if (h->mode != T_NONE) {
                usage("give one transport: --pty, --stdio, --unix PATH or --tcp PORT");
            }
            h->mode = c == 'p' ? T_PTY : c == 's' ? T_STDIO : c == 't' ? T_TCP : T_UNIX;
            if (c == 'u') {
                unix_path = optarg;
            } else if (c == 't') {
                tcp_port = (int)strtol(optarg, &end, 10);
                if (end == optarg || *end != '\0' || tcp_port < 0 || tcp_port > 65535) {
                    die("--tcp needs a port number 0..65535, got '%s'", optarg);
                }
            }
            break;
        case 'k':
            key_file = optarg;
            break;
        case 'I':
            no_auth = 1;
            break;
        case 'U':
            user = optarg;
            h->drops_root = 1;
            break;
        case 'n':
            name = optarg;
            break;
        case 'm':
            max_image = parse_count("--max-image", optarg, 0, 64, 0x7fffffffUL,
                                    "a size in bytes (64 .. 2^31-1)");
            break;
        case 'M':
            max_memory = parse_count("--max-memory", optarg, 0, 4096, ULONG_MAX,
                                     "a size in bytes (>= 4096)");
            break;
        case 'b':
            budget_factor = parse_count("--budget-factor", optarg, 10, 0, 1000000,
                                        "a whole number 0 .. 1000000 (0: no time limit)");
            break;
        case 'l':
            link_timeout = parse_seconds("--link-timeout", optarg);
            break;
        case 'L':
            lease = parse_seconds("--session-lease", optarg);
            break;
        case 'A':
            auth_grace = parse_seconds("--auth-grace", optarg);
            break;
        case 'r':
            h->want_rt = 0;
            break;
        case 'C':
            h->allow_code = 1;
            break;
        case 'S':
            h->want_seccomp = 0;
            break;
        case 'o':
            io_file = optarg;
            break;
        case 'v':
            h->verbose = 1;
            break;
        case 'i':
            image_path = optarg;
            break;
        case 'g':
            start_image = 1;
            break;
        case 'h':
            fputs(USAGE, stdout);
            exit(0);
        default:
            usage(NULL);
        }
    }
    if (optind != argc) {
        fprintf(stderr, "copapy-runner: error: unexpected argument '%s'\n", argv[optind]);
        usage(NULL);
    }
    if (start_image && image_path == NULL) {
        usage("--start needs --image FILE (the program to start)");
    }
    if (h->mode == T_NONE && !(image_path != NULL && start_image)) {
        usage("give a transport (--pty, --stdio, --unix PATH or --tcp PORT), or --image FILE "
              "--start to run a program without one");
    }
    /* who may run native code here: sockets need a key (a Unix socket may rely on its file
     * permissions alone, if asked explicitly); TCP always needs one */
    if (h->mode == T_TCP && key_file == NULL) {
        die("--tcp needs --key-file: any local user (and a browser's request) can reach a TCP "
            "port; prefer --unix PATH, whose file permissions decide who may connect");
    }
    if (h->mode == T_UNIX && key_file == NULL && !no_auth) {
        die("--unix needs --key-file, or --insecure-no-auth to let everyone who may open %s "
            "run code as this user", unix_path);
    }
    if (no_auth && (h->mode != T_UNIX || key_file != NULL)) {
        die("--insecure-no-auth is only for --unix, without --key-file");
    }
    const struct passwd *pw = NULL;
    if (user != NULL) {
        pw = getpwnam(user);
        if (pw == NULL) {
            die("--user %s: no such user", user);
        }
        if (geteuid() != 0) {
            die("--user %s needs the runner to be started as root", user);
        }
    } else if (geteuid() == 0) {
        warn("running as root: uploaded programs run as root too; use --user NAME");
    }
    uint32_t key_len = 0;
    const uint8_t *key = key_file != NULL ? read_key(key_file, &key_len) : NULL;
    if (io_file != NULL) {
        /* before any thread exists: the supervisor is a fork of this process */
        void *io = supervisor_map_io(io_file, sizeof(h->io_own));
        if (io == NULL) {
            die("--io-file %s: %s", io_file, strerror(errno));
        }
        h->io = io;
        supervisor_start(io, CP_IO_KIND_COUNT, CHANNELS, &h->to_supervisor);
    }
    signal(SIGPIPE, SIG_IGN);

    h->staging = malloc(max_image);
    size_t work_size = cp_server_work_size(MAX_PAYLOAD, PORTS_CAPACITY, RING_SIZE);
    h->work = malloc(work_size);
    if (h->staging == NULL || h->work == NULL) {
        die("out of memory");
    }
    if (pipe2(h->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        die("pipe: %s", strerror(errno));
    }
    struct sigaction stop;
    memset(&stop, 0, sizeof(stop));
    stop.sa_handler = on_stop_signal;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    if (pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT) != 0) {
        warn("priority-inheritance mutexes are not available");
    }
    pthread_mutex_init(&h->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_cond_init(&h->cond, NULL);

    rt_setup_process(h);

    h->platform = *cp_platform_posix();
    h->platform.max_region_size = max_memory;
    h->platform.memory_option = "raise it with copapy-runner --max-memory BYTES";
    cp_server_config *cfg = &h->cfg;
    cfg->struct_size = sizeof(*cfg);
    cfg->platform = &h->platform;
    cfg->staging = h->staging;
    cfg->staging_size = (uint32_t)max_image;
    cfg->work = h->work;
    cfg->work_size = work_size;
    cfg->max_payload = MAX_PAYLOAD;
    for (int k = 0; k < CP_IO_KIND_COUNT; k++) {
        cfg->channels[k] = CHANNELS;
    }
    cfg->ports_capacity = PORTS_CAPACITY;
    cfg->ring_size = RING_SIZE;
    cfg->min_tick_ns = MIN_TICK_NS;
    cfg->name = name;
    cfg->ctx = h;
    cfg->write = h_write;
    cfg->write_link = h_write_link;
    cfg->lock = h_lock;
    cfg->unlock = h_unlock;
    cfg->notify = h_notify;
    cfg->clock_ns = h_clock;
    cfg->io_read = h_io_read;
    cfg->io_write = h_io_write;
    cfg->rt_stats = h_rt_stats;
    cfg->random = h_random;
    cfg->guard = cp_posix_guard;
    cfg->budget_factor = (uint32_t)budget_factor;
    cfg->budget_min_ns = 2u * WATCHDOG_POLL_NS; /* what the supervisor can resolve */
    cfg->link_timeout_ns = (uint64_t)(link_timeout * 1e9);
    cfg->session_lease_ns = (uint64_t)(lease * 1e9);
    h->auth_grace_ns = auth_grace >= 0.0 ? (uint64_t)(auth_grace * 1e9) : DEFAULT_AUTH_GRACE_NS;
    cfg->key = key;
    cfg->key_len = key_len;
    /* --image feeds its requests unauthenticated, before any client can connect; the rule
     * is switched on after it (the server reads it per request) */
    cfg->require_auth = key != NULL && image_path == NULL;

    /* the threads first: whether the tick thread got SCHED_FIFO goes into HELLO's flags; the
     * supervisor must preempt a real-time chain that loops */
    start_tick_thread(h);
    int wd = cp_posix_watchdog_start(WATCHDOG_POLL_NS, h->want_rt ? WATCHDOG_PRIORITY : 0);
    if (wd != 0) {
        die("cannot start the watchdog thread: %s", strerror(wd));
    }
    cfg->flags = (uint8_t)(CP_SERVER_FLAG_SIMULATED_IO |
                           (h->rt_active ? CP_SERVER_FLAG_REALTIME : 0) |
                           (h->allow_code ? CP_SERVER_FLAG_CODE : 0));
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    pthread_mutex_lock(&h->lock);
    cp_status st = cp_server_init(&h->srv, cfg, &err);
    pthread_mutex_unlock(&h->lock);
    if (st != CP_OK) {
        die("%s", err.message);
    }

    /* sockets may need root (a path under /run, a port below 1024); the pty belongs to the
     * user it is opened by, so it comes after dropping root */
    switch (h->mode) {
    case T_TCP:
        open_tcp(h, tcp_port);
        break;
    case T_UNIX:
        open_unix(h, unix_path, pw != NULL ? pw->pw_uid : (uid_t)-1,
                  pw != NULL ? pw->pw_gid : (gid_t)-1);
        break;
    default:
        break;
    }
    if (pw != NULL) {
        drop_root(pw);
        if (h->verbose) {
            fprintf(stderr, "copapy-runner: running as user %s (uid %u)\n", pw->pw_name,
                    (unsigned)getuid());
        }
    }
    seal_tick_thread(h);
    if (image_path != NULL) {
        /* after dropping root: the program is loaded as the user it runs as */
        preload_image(h, image_path, start_image);
        h->srv.cfg.require_auth = key != NULL;
    }
    if (h->mode == T_PTY) {
        open_pty(h);
    } else if (h->mode == T_STDIO) {
        h->fd_in = STDIN_FILENO;
        h->fd_out = STDOUT_FILENO;
    }
    protocol_loop(h);

    pthread_mutex_lock(&h->lock);
    h->quit = 1;
    pthread_cond_broadcast(&h->cond);
    while (!h->tick_parked) {
        pthread_cond_wait(&h->cond, &h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    cp_server_close(&h->srv); /* the outputs take their safe values */
    if (h->to_supervisor >= 0) {
        supervisor_send_clean_exit(h->to_supervisor);
    }
    if (h->unix_path != NULL) {
        unlink(h->unix_path);
    }
    return 0;
}
