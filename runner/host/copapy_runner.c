/* copapy-runner: the host runner process. It speaks the wire protocol of docs/protocol.md over
 * a pty, stdio or a loopback TCP socket and runs the loaded program in real time.
 *
 *   copapy-runner --pty [--name NAME] [--max-image BYTES] [--no-rt]
 *   copapy-runner --stdio ...
 *   copapy-runner --tcp PORT ...        (127.0.0.1 only; PORT 0 picks a free port)
 *   copapy-runner [--pty|--stdio|--tcp PORT] --image FILE [--start]
 *
 * --image loads a saved program (cp.save, `copapy run`) at start-up exactly as an upload
 * would (LOAD_BEGIN/CHUNK/COMMIT through the protocol server, so the same checks apply) and
 * --start starts it; without a transport the runner then just runs it (no Python anywhere).
 *
 * --pty prints "PTY /dev/pts/N" and --tcp prints "TCP 127.0.0.1:PORT" as the first stdout line;
 * stderr carries only warnings. Threads:
 *   * main (protocol): reads the transport, feeds the server (runner/src/server.c), writes its
 *     responses and the queued STREAM events; survives disconnects (pty clients may come and
 *     go, a new TCP client replaces the old one) while the program keeps running;
 *   * tick (real time, SCHED_FIFO 80 when permitted): sleeps to absolute deadlines with
 *     clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), records the release jitter (wake time -
 *     deadline) in a histogram and runs cp_server_tick() under the server lock (a priority-
 *     inheritance mutex), so READ/WRITE from the protocol thread land between ticks.
 * Real-time set-up (skipped with --no-rt), each failure one warning: mlockall, SCHED_FIFO 80,
 * PR_SET_TIMERSLACK 1 ns, /dev/cpu_dma_latency held at 0.
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
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "copapy/platform_posix.h"
#include "copapy/server.h"

enum {
    MAX_PAYLOAD = 1024,
    PORTS_CAPACITY = 64 * 1024,
    RING_SIZE = 64 * 1024,
    CHANNELS = 16,
    RT_PRIORITY = 80,
    MAX_CATCHUP = 16,
    MIN_TICK_NS = 10000,
    WRITE_TIMEOUT_MS = 500
};

#define DEFAULT_MAX_IMAGE (4u * 1024u * 1024u)
#define REGION_LIMIT ((size_t)64 * 1024 * 1024)

typedef enum { T_NONE, T_PTY, T_STDIO, T_TCP } transport;

typedef struct host {
    cp_server srv;
    cp_server_config cfg;
    cp_platform platform;
    uint8_t *work;
    uint8_t *staging;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t tick_thread;
    int quit;                 /* under lock */
    /* transport */
    transport mode;
    int fd_in, fd_out;        /* the current client (-1: none) */
    int listen_fd;
    int pty_master, pty_slave;
    int wake_pipe[2];
    int wake_pending;         /* atomic */
    /* real time */
    int want_rt;
    int rt_active;
    int dma_fd;
    cp_jitter_hist hist;      /* written by the tick thread only */
    uint32_t late_ticks;      /* atomic */
    /* simulated I/O: doubles as bits, atomics */
    uint64_t io[4][CHANNELS];
    /* --image: responses of the server to the start-up requests are decoded here */
    int preloading;
    cp_decoder pre_dec;
    uint8_t pre_buf[MAX_PAYLOAD + CP_FRAME_OVERHEAD];
    int pre_answered, pre_error;
    char pre_message[CP_ERROR_MESSAGE_MAX + 1];
} host;

static host H;

static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("copapy-runner: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("copapy-runner: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
    return now_ns();
}

static double h_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    host *h = ctx;
    if (kind < 1 || kind > 4 || channel >= CHANNELS) {
        return 0.0;
    }
    uint64_t bits = __atomic_load_n(&h->io[kind - 1][channel], __ATOMIC_RELAXED);
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

/* Outputs (GPIO, PWM) are recorded; inputs (ENCODER, ADC) are set by the host via IO_WRITE.
 * Every simulated channel is writable. */
static int h_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    host *h = ctx;
    if (kind < 1 || kind > 4 || channel >= CHANNELS) {
        return 1;
    }
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    __atomic_store_n(&h->io[kind - 1][channel], bits, __ATOMIC_RELAXED);
    return 0;
}

static void h_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    host *h = ctx;
    cp_jitter_rt_stats(out, &h->hist, &h->late_ticks);
}

static void h_notify(void *ctx, uint32_t what)
{
    host *h = ctx;
    if (what == CP_SERVER_NOTIFY_STATE) {
        pthread_mutex_lock(&h->lock);
        pthread_cond_broadcast(&h->cond);
        pthread_mutex_unlock(&h->lock);
    } else if (!__atomic_exchange_n(&h->wake_pending, 1, __ATOMIC_ACQ_REL)) {
        /* tick thread: never blocks (the pipe is non-blocking; a full pipe is awake anyway) */
        ssize_t r = write(h->wake_pipe[1], "e", 1);
        (void)r;
    }
}

static void drop_client(host *h);

/* Writes everything or gives up: a client that stops reading for WRITE_TIMEOUT_MS loses the
 * bytes (pty: the unread backlog is discarded; TCP: the client is dropped). */
static void preload_reply(host *h, const uint8_t *bytes, size_t n);

static void h_write(void *ctx, const uint8_t *bytes, size_t n)
{
    host *h = ctx;
    int flushed = 0;
    if (h->preloading) {
        preload_reply(h, bytes, n);
        return;
    }
    while (n > 0 && h->fd_out >= 0) {
        ssize_t w = write(h->fd_out, bytes, n);
        if (w > 0) {
            bytes += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {h->fd_out, POLLOUT, 0};
            if (poll(&p, 1, WRITE_TIMEOUT_MS) > 0 && (p.revents & POLLOUT)) {
                continue;
            }
            if (h->mode == T_PTY && !flushed) {
                /* nobody reads the pty: discard what waits there, then try once more */
                tcflush(h->pty_slave, TCIFLUSH);
                flushed = 1;
                continue;
            }
            if (h->mode == T_TCP) {
                drop_client(h);
            }
            return;
        }
        /* a hard error: the client is gone */
        if (h->mode == T_STDIO) {
            exit(0);
        }
        if (h->mode == T_TCP) {
            drop_client(h);
        }
        return;
    }
}

/* ---- real time */

static void rt_setup_process(host *h)
{
    if (!h->want_rt) {
        return;
    }
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        warn("mlockall failed (%s): page faults may delay ticks", strerror(errno));
    }
    h->dma_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
    if (h->dma_fd < 0) {
        warn("cannot open /dev/cpu_dma_latency (%s): CPU idle states may add wake-up latency",
             strerror(errno));
    } else {
        int32_t zero = 0;
        if (write(h->dma_fd, &zero, sizeof(zero)) != (ssize_t)sizeof(zero)) {
            warn("cannot write /dev/cpu_dma_latency (%s)", strerror(errno));
            close(h->dma_fd);
            h->dma_fd = -1;
        }
    }
}

static void *tick_main(void *arg)
{
    host *h = arg;
    if (h->want_rt && prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0) {
        warn("PR_SET_TIMERSLACK failed (%s): wake-ups may be up to 50 us late",
             strerror(errno));
    }
    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (!h->quit && cp_server_state(&h->srv) != CP_SERVER_RUNNING) {
            pthread_cond_wait(&h->cond, &h->lock);
        }
        if (h->quit) {
            break;
        }
        uint32_t gen = cp_server_generation(&h->srv);
        uint64_t tick = cp_server_tick_ns(&h->srv);
        cp_jitter_clear(&h->hist);
        __atomic_store_n(&h->late_ticks, 0u, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&h->lock);
        uint64_t deadline = now_ns() + tick;
        for (;;) {
            struct timespec ts = {(time_t)(deadline / 1000000000u),
                                  (long)(deadline % 1000000000u)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
            uint64_t wake = now_ns();
            cp_jitter_record(&h->hist, wake > deadline ? wake - deadline : 0);
            pthread_mutex_lock(&h->lock);
            if (h->quit || cp_server_state(&h->srv) != CP_SERVER_RUNNING ||
                cp_server_generation(&h->srv) != gen) {
                break; /* locked: back to waiting for the next START */
            }
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
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void start_tick_thread(host *h)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    if (h->want_rt) {
        struct sched_param sp = {.sched_priority = RT_PRIORITY};
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &sp);
        int rc = pthread_create(&h->tick_thread, &attr, tick_main, h);
        if (rc == 0) {
            h->rt_active = 1;
            pthread_attr_destroy(&attr);
            return;
        }
        warn("SCHED_FIFO priority %d not permitted (%s): ticks run at normal priority",
             RT_PRIORITY, strerror(rc));
        pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
    }
    int rc = pthread_create(&h->tick_thread, &attr, tick_main, h);
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

static void drop_client(host *h)
{
    if (h->mode == T_TCP && h->fd_in >= 0) {
        close(h->fd_in);
        h->fd_in = h->fd_out = -1;
        cp_server_disconnect(&h->srv);
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

static void accept_client(host *h)
{
    int c = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
        return;
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    drop_client(h); /* the newest client wins: the old one is most likely dead */
    h->fd_in = h->fd_out = c;
}

static void protocol_loop(host *h)
{
    uint8_t buf[4096];
    for (;;) {
        struct pollfd p[3];
        int n = 0, i_client = -1, i_wake, i_listen = -1;
        if (h->fd_in >= 0) {
            i_client = n;
            p[n++] = (struct pollfd){h->fd_in, POLLIN, 0};
        }
        i_wake = n;
        p[n++] = (struct pollfd){h->wake_pipe[0], POLLIN, 0};
        if (h->mode == T_TCP) {
            i_listen = n;
            p[n++] = (struct pollfd){h->listen_fd, POLLIN, 0};
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
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
        if (i_client >= 0 && (p[i_client].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = read(h->fd_in, buf, sizeof(buf));
            if (r > 0) {
                cp_server_feed(&h->srv, buf, (size_t)r);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
                if (h->mode == T_STDIO) {
                    return; /* stdin closed: nobody can talk to us any more */
                }
                if (h->mode == T_TCP) {
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

/* ---- --image: a saved program loaded at start-up through the protocol server */

static void preload_reply(host *h, const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cp_frame f;
        if (cp_decoder_push(&h->pre_dec, bytes[i], &f) != CP_DEC_FRAME ||
            !(f.flags & CP_FLAG_RESPONSE)) {
            continue;
        }
        h->pre_answered = 1;
        h->pre_error = 0;
        if (f.flags & CP_FLAG_ERROR) {
            h->pre_error = f.length > 0 ? f.payload[0] : -1;
            size_t len = f.length > 8 ? (size_t)f.length - 8 : 0;
            if (len > CP_ERROR_MESSAGE_MAX) {
                len = CP_ERROR_MESSAGE_MAX;
            }
            memcpy(h->pre_message, f.payload + 8, len);
            h->pre_message[len] = '\0';
        }
    }
}

/* One request to the server; dies with the server's message if it is refused. */
static void preload_request(host *h, uint16_t seq, uint8_t command, const uint8_t *payload,
                            uint16_t length, const char *path)
{
    static uint8_t frame[MAX_PAYLOAD + CP_FRAME_OVERHEAD];
    static uint8_t wire[CP_WIRE_MAX(MAX_PAYLOAD)];
    memcpy(frame + CP_FRAME_HEADER, payload, length);
    size_t n = cp_frame_encode(frame, 0, seq, command, length, wire, sizeof(wire));
    h->pre_answered = 0;
    cp_server_feed(&h->srv, wire, n);
    if (!h->pre_answered) {
        die("%s: the runner did not answer command %u", path, command);
    }
    if (h->pre_error != 0) {
        die("%s: %s", path, h->pre_message);
    }
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++) {
        p[k] = (uint8_t)(v >> (8 * k));
    }
}

static void preload_image(host *h, const char *path, int start)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        die("cannot open %s: %s", path, strerror(errno));
    }
    uint8_t *image = malloc(h->cfg.staging_size);
    if (image == NULL) {
        die("out of memory");
    }
    size_t size = fread(image, 1, h->cfg.staging_size, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (more) {
        die("%s is larger than the largest image this runner accepts (%u bytes; --max-image)",
            path, h->cfg.staging_size);
    }
    if (size < 8 || memcmp(image, "CPIM", 4) != 0) {
        die("%s is not a copapy program image (it does not start with CPIM)", path);
    }
    if (cp_decoder_init(&h->pre_dec, h->pre_buf, sizeof(h->pre_buf), MAX_PAYLOAD) != 0) {
        die("decoder set-up failed");
    }
    /* the image CRC of LOAD_BEGIN is the image's own trailing CRC field (docs/protocol.md) */
    uint8_t p[MAX_PAYLOAD];
    put_u32(p, (uint32_t)size);
    memcpy(p + 4, image + size - 4, 4);
    uint16_t seq = 1;
    h->preloading = 1;
    preload_request(h, seq++, CP_CMD_LOAD_BEGIN, p, 8, path);
    const size_t chunk = MAX_PAYLOAD - 4;
    for (size_t off = 0; off < size; off += chunk) {
        size_t len = size - off < chunk ? size - off : chunk;
        put_u32(p, (uint32_t)off);
        memcpy(p + 4, image + off, len);
        preload_request(h, seq++, CP_CMD_LOAD_CHUNK, p, (uint16_t)(len + 4), path);
    }
    preload_request(h, seq++, CP_CMD_LOAD_COMMIT, p, 0, path);
    if (start) {
        preload_request(h, seq++, CP_CMD_START, p, 0, path);
    }
    h->preloading = 0;
    cp_server_disconnect(&h->srv);
    free(image);
}

/* ---- main */

static void usage(void)
{
    fputs("usage: copapy-runner (--pty | --stdio | --tcp PORT) [--name NAME] "
          "[--max-image BYTES] [--no-rt] [--image FILE [--start]]\n"
          "       copapy-runner --image FILE --start [--no-rt]   (no transport)\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    host *h = &H;
    h->mode = T_NONE;
    h->fd_in = h->fd_out = h->listen_fd = h->pty_master = h->pty_slave = h->dma_fd = -1;
    h->want_rt = 1;
    const char *name = "copapy host runner";
    unsigned long max_image = DEFAULT_MAX_IMAGE;
    int tcp_port = -1;
    const char *image_path = NULL;
    int start_image = 0;
    static const struct option opts[] = {
        {"pty", no_argument, NULL, 'p'},
        {"stdio", no_argument, NULL, 's'},
        {"tcp", required_argument, NULL, 't'},
        {"name", required_argument, NULL, 'n'},
        {"max-image", required_argument, NULL, 'm'},
        {"no-rt", no_argument, NULL, 'r'},
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
            if (h->mode != T_NONE) {
                usage();
            }
            h->mode = c == 'p' ? T_PTY : T_STDIO;
            break;
        case 't':
            if (h->mode != T_NONE) {
                usage();
            }
            h->mode = T_TCP;
            tcp_port = (int)strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || tcp_port < 0 || tcp_port > 65535) {
                die("--tcp needs a port number 0..65535, got '%s'", optarg);
            }
            break;
        case 'n':
            name = optarg;
            break;
        case 'm':
            max_image = strtoul(optarg, &end, 0);
            if (end == optarg || *end != '\0' || max_image < 64 || max_image > 0x7fffffffUL) {
                die("--max-image needs a size in bytes (64 .. 2^31-1), got '%s'", optarg);
            }
            break;
        case 'r':
            h->want_rt = 0;
            break;
        case 'i':
            image_path = optarg;
            break;
        case 'g':
            start_image = 1;
            break;
        default:
            usage();
        }
    }
    if (optind != argc || (start_image && image_path == NULL) ||
        (h->mode == T_NONE && !(image_path != NULL && start_image))) {
        usage();
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
    h->platform.max_region_size = REGION_LIMIT;
    cp_server_config *cfg = &h->cfg;
    cfg->struct_size = sizeof(*cfg);
    cfg->platform = &h->platform;
    cfg->staging = h->staging;
    cfg->staging_size = (uint32_t)max_image;
    cfg->work = h->work;
    cfg->work_size = work_size;
    cfg->max_payload = MAX_PAYLOAD;
    for (int k = 0; k < 4; k++) {
        cfg->channels[k] = CHANNELS;
    }
    cfg->ports_capacity = PORTS_CAPACITY;
    cfg->ring_size = RING_SIZE;
    cfg->min_tick_ns = MIN_TICK_NS;
    cfg->name = name;
    cfg->ctx = h;
    cfg->write = h_write;
    cfg->lock = h_lock;
    cfg->unlock = h_unlock;
    cfg->notify = h_notify;
    cfg->clock_ns = h_clock;
    cfg->io_read = h_io_read;
    cfg->io_write = h_io_write;
    cfg->rt_stats = h_rt_stats;

    /* the tick thread first: whether it got SCHED_FIFO goes into HELLO's flags */
    start_tick_thread(h);
    cfg->flags = (uint8_t)(CP_SERVER_FLAG_SIMULATED_IO |
                           (h->rt_active ? CP_SERVER_FLAG_REALTIME : 0));
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    pthread_mutex_lock(&h->lock);
    cp_status st = cp_server_init(&h->srv, cfg, &err);
    pthread_mutex_unlock(&h->lock);
    if (st != CP_OK) {
        die("%s", err.message);
    }

    if (image_path != NULL) {
        preload_image(h, image_path, start_image);
    }
    switch (h->mode) {
    case T_NONE:
        for (;;) {
            pause(); /* the tick thread runs the program until the process is killed */
        }
    case T_PTY:
        open_pty(h);
        break;
    case T_TCP:
        open_tcp(h, tcp_port);
        break;
    default:
        h->fd_in = STDIN_FILENO;
        h->fd_out = STDOUT_FILENO;
        break;
    }
    protocol_loop(h);

    pthread_mutex_lock(&h->lock);
    h->quit = 1;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->tick_thread, NULL);
    cp_server_close(&h->srv);
    return 0;
}
