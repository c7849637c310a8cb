/* copapy-runner.exe: the host runner process on Windows. It speaks the wire protocol of
 * docs/protocol.md over a loopback TCP socket (with a key) or a COM port and runs the loaded
 * program in real time with its chains under the Windows fault containment
 * (src/platform_win32.c). The POSIX runner (../copapy_runner.c) is the reference: the same
 * server, the same link rules (owner and guest connections, admission with a key, text
 * answered with 400), the same tick loop; what differs is the system interface.
 *
 *   copapy-runner --tcp PORT --key-file F [options]   (127.0.0.1 only; PORT 0: a free port)
 *   copapy-runner --com COM3 [--key-file F] [options] (115200 8N1, raw)
 *   copapy-runner --stdio [--key-file F] [options]    (standard input and output)
 * (--unix, --pty, --user are the Linux runner's: refused, naming these three)
 * options: --name NAME --max-image BYTES --max-memory BYTES --budget-factor N
 *          --link-timeout SECONDS --session-lease SECONDS --auth-grace SECONDS --no-rt
 *          --allow-code --image FILE [--start] (a saved program loaded at start, ../preload.h)
 *
 * --tcp prints "TCP 127.0.0.1:PORT", --com "COM COM3" as the first stdout line. Threads: main
 * (protocol: WSAPoll on the sockets and a loopback wake socket, or the COM port polled every
 * millisecond), tick (THREAD_PRIORITY_TIME_CRITICAL unless --no-rt; absolute deadlines through
 * a high-resolution waitable timer), watchdog (the budget supervisor, time-critical too).
 * Ctrl-C and Ctrl-Break end the runner cleanly: outputs safe first. docs/platforms.md. */
#define WIN32_LEAN_AND_MEAN 1

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <aclapi.h>
#include <bcrypt.h>
#include <mmsystem.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copapy/platform_posix.h"
#include "copapy/platform_win32.h"
#include "copapy/server.h"
#include "../preload.h"
#include "../runner_common.h"

enum {
    MAX_PAYLOAD = CP_PRELOAD_MAX_PAYLOAD,
    PORTS_CAPACITY = 64 * 1024,
    RING_SIZE = 64 * 1024,
    CHANNELS = HOST_CHANNELS,
    WATCHDOG_POLL_NS = 2000000,
    DEFAULT_BUDGET_FACTOR = 10,
    MIN_KEY = 16,
    MAX_KEY = 4096,
    MAX_CATCHUP = 16,
    MIN_TICK_NS = 10000,
    WRITE_TIMEOUT_MS = 500
};

#define DEFAULT_MAX_IMAGE (4u * 1024u * 1024u)
#define DEFAULT_MAX_MEMORY (64ull * 1024 * 1024)
#define DEFAULT_AUTH_GRACE_NS 2000000000ull

typedef enum { T_NONE, T_TCP, T_COM, T_STDIO } transport;

typedef struct host {
    cp_server srv;
    cp_server_config cfg;
    cp_platform platform;
    uint8_t *work;
    uint8_t *staging;
    SRWLOCK lock;
    CONDITION_VARIABLE cond;
    HANDLE tick_thread;
    int quit; /* under lock */
    transport mode;
    SOCKET client, guest, listener;
    HANDLE com;      /* --com: the port; --stdio: standard output (written like a port) */
    HANDLE stdin_h;  /* --stdio: standard input */
    SOCKET stdin_tx, stdin_rx; /* --stdio: its bytes, copied by a thread (open_stdio) */
    uint64_t auth_grace_ns;
    uint64_t client_deadline_ns, guest_deadline_ns;
    int text_seen, refused, took_over; /* set by notify in the protocol context */
    SOCKET wake_rx, wake_tx;           /* a loopback UDP pair: the tick thread wakes main */
    LONG wake_pending;
    int want_rt, rt_active;
    int allow_code; /* --allow-code: format-1 images (machine code) too, for tests */
    cp_preload pre; /* --image: the server's answers to the start-up requests */
    cp_jitter_hist hist;
    uint32_t late_ticks; /* atomic */
    uint64_t io[CP_IO_KIND_COUNT][CHANNELS];
} host;

static host H;
static volatile LONG stop_requested;

/* ---- server callbacks */

static void h_lock(void *ctx)
{
    AcquireSRWLockExclusive(&((host *)ctx)->lock);
}

static void h_unlock(void *ctx)
{
    ReleaseSRWLockExclusive(&((host *)ctx)->lock);
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

static int h_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    host *h = ctx;
    return host_io_write(h->io, kind, channel, value);
}

static void h_rt_stats(void *ctx, cp_server_rt_stats *out)
{
    host *h = ctx;
    cp_jitter_rt_stats(out, &h->hist, &h->late_ticks);
}

static void wake_main(host *h)
{
    if (!__atomic_exchange_n(&h->wake_pending, 1, __ATOMIC_ACQ_REL)) {
        (void)send(h->wake_tx, "e", 1, 0);
    }
}

static void h_notify(void *ctx, uint32_t what)
{
    host *h = ctx;
    switch (what) {
    case CP_SERVER_NOTIFY_STATE:
    case CP_SERVER_NOTIFY_REPLACED:
        AcquireSRWLockExclusive(&h->lock);
        WakeAllConditionVariable(&h->cond);
        ReleaseSRWLockExclusive(&h->lock);
        break;
    case CP_SERVER_NOTIFY_TEXT:
        h->text_seen = 1;
        break;
    case CP_SERVER_NOTIFY_REFUSE:
        h->refused = 1;
        break;
    case CP_SERVER_NOTIFY_TAKEOVER:
        h->took_over = 1;
        break;
    default:
        wake_main(h);
        break;
    }
}

static void drop_client(host *h)
{
    if (h->mode == T_TCP && h->client != INVALID_SOCKET) {
        closesocket(h->client);
        h->client = INVALID_SOCKET;
        cp_server_disconnect_link(&h->srv, CP_SERVER_OWNER);
    }
}

static void drop_guest(host *h)
{
    if (h->guest != INVALID_SOCKET) {
        closesocket(h->guest);
        h->guest = INVALID_SOCKET;
        cp_server_disconnect_link(&h->srv, CP_SERVER_GUEST);
    }
}

/* Everything or nothing within WRITE_TIMEOUT_MS: a socket peer that stops reading is dropped. */
static int send_all(SOCKET s, const uint8_t *bytes, size_t n)
{
    while (n > 0) {
        int w = send(s, (const char *)bytes, n > 65536 ? 65536 : (int)n, 0);
        if (w > 0) {
            bytes += w;
            n -= (size_t)w;
            continue;
        }
        if (w == SOCKET_ERROR && WSAGetLastError() == WSAEWOULDBLOCK) {
            WSAPOLLFD p = {s, POLLWRNORM, 0};
            if (WSAPoll(&p, 1, WRITE_TIMEOUT_MS) > 0) {
                continue;
            }
        }
        return -1;
    }
    return 0;
}

static void h_write_link(void *ctx, uint32_t link, const uint8_t *bytes, size_t n)
{
    host *h = ctx;
    if (h->pre.active) {
        cp_preload_reply(&h->pre, bytes, n);
        return;
    }
    if (n == 0) {
        return;
    }
    if (h->mode == T_COM || h->mode == T_STDIO) {
        DWORD done = 0;
        while (n > 0 && WriteFile(h->com, bytes, (DWORD)n, &done, NULL) && done > 0) {
            bytes += done;
            n -= done;
        }
        return;
    }
    int guest = link == CP_SERVER_GUEST;
    SOCKET s = guest ? h->guest : h->client;
    if (s != INVALID_SOCKET && send_all(s, bytes, n) != 0) {
        if (guest) {
            drop_guest(h);
        } else {
            drop_client(h);
        }
    }
}

static void h_write(void *ctx, const uint8_t *bytes, size_t n)
{
    h_write_link(ctx, CP_SERVER_OWNER, bytes, n);
}

static void h_random(void *ctx, uint8_t *out, size_t n)
{
    (void)ctx;
    if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, out, (ULONG)n, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) {
        die("BCryptGenRandom failed");
    }
}

/* ---- the tick thread */

static DWORD WINAPI tick_main(LPVOID arg)
{
    host *h = arg;
    AcquireSRWLockExclusive(&h->lock);
    for (;;) {
        while (!h->quit && cp_server_state(&h->srv) != CP_SERVER_RUNNING) {
            SleepConditionVariableSRW(&h->cond, &h->lock, INFINITE, 0);
        }
        if (h->quit) {
            break;
        }
        uint32_t gen = cp_server_generation(&h->srv);
        uint64_t tick = cp_server_tick_ns(&h->srv);
        cp_jitter_clear(&h->hist);
        __atomic_store_n(&h->late_ticks, 0u, __ATOMIC_RELAXED);
        ReleaseSRWLockExclusive(&h->lock);
        uint64_t deadline = cp_posix_monotonic_ns() + tick;
        for (;;) {
            cp_win32_sleep_until(deadline);
            uint64_t wake = cp_posix_monotonic_ns();
            cp_jitter_record(&h->hist, wake > deadline ? wake - deadline : 0);
            AcquireSRWLockExclusive(&h->lock);
            if (h->quit || cp_server_state(&h->srv) != CP_SERVER_RUNNING ||
                cp_server_generation(&h->srv) != gen) {
                break; /* locked: back to waiting for the next START */
            }
            tick = cp_server_tick_ns(&h->srv);
            uint32_t late = cp_server_catch_up(&h->srv, &deadline, tick, wake, 0, MAX_CATCHUP);
            if (late != 0) {
                __atomic_store_n(&h->late_ticks,
                                 __atomic_load_n(&h->late_ticks, __ATOMIC_RELAXED) + late,
                                 __ATOMIC_RELAXED);
            }
            ReleaseSRWLockExclusive(&h->lock);
        }
    }
    ReleaseSRWLockExclusive(&h->lock);
    return 0;
}

static void start_tick_thread(host *h)
{
    h->tick_thread = CreateThread(NULL, 1u << 20, tick_main, h, 0, NULL);
    if (h->tick_thread == NULL) {
        die("cannot create the tick thread (error %lu)", GetLastError());
    }
    if (h->want_rt) {
        if (SetThreadPriority(h->tick_thread, THREAD_PRIORITY_TIME_CRITICAL)) {
            h->rt_active = 1;
        } else {
            warn("THREAD_PRIORITY_TIME_CRITICAL refused (error %lu): ticks run at normal "
                 "priority", GetLastError());
        }
    }
}

/* ---- transports */

static SOCKET loopback(int type, uint16_t port)
{
    SOCKET s = socket(AF_INET, type, 0);
    if (s == INVALID_SOCKET) {
        die("socket: error %d", WSAGetLastError());
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
        die("cannot bind 127.0.0.1:%u: error %d", port, WSAGetLastError());
    }
    return s;
}

static uint16_t port_of(SOCKET s)
{
    struct sockaddr_in a;
    int len = sizeof(a);
    getsockname(s, (struct sockaddr *)&a, &len);
    return ntohs(a.sin_port);
}

static void set_nonblock(SOCKET s)
{
    u_long on = 1;
    ioctlsocket(s, FIONBIO, &on);
}

static void open_wake(host *h)
{
    h->wake_rx = loopback(SOCK_DGRAM, 0);
    h->wake_tx = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port_of(h->wake_rx));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (h->wake_tx == INVALID_SOCKET || connect(h->wake_tx, (struct sockaddr *)&a, sizeof(a)) != 0) {
        die("cannot set up the wake socket: error %d", WSAGetLastError());
    }
    set_nonblock(h->wake_rx);
    set_nonblock(h->wake_tx);
}

static void open_tcp(host *h, int port)
{
    /* exclusive: no other process may bind the same port over ours */
    SOCKET s = socket(AF_INET, SOCK_STREAM, 0);
    BOOL one = TRUE;
    if (s != INVALID_SOCKET) {
        setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (const char *)&one, sizeof(one));
        closesocket(s);
    }
    h->listener = loopback(SOCK_STREAM, (uint16_t)port);
    if (listen(h->listener, 4) != 0) {
        die("cannot listen on 127.0.0.1:%d: error %d", port, WSAGetLastError());
    }
    set_nonblock(h->listener);
    printf("TCP 127.0.0.1:%u\n", port_of(h->listener));
    fflush(stdout);
}

static void open_com(host *h, const char *name)
{
    char path[64];
    snprintf(path, sizeof(path), "\\\\.\\%s", name);
    h->com = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
    if (h->com == INVALID_HANDLE_VALUE) {
        die("cannot open %s (error %lu)", name, GetLastError());
    }
    DCB dcb;
    memset(&dcb, 0, sizeof(dcb));
    dcb.DCBlength = sizeof(dcb);
    if (GetCommState(h->com, &dcb)) {
        dcb.BaudRate = CBR_115200;
        dcb.ByteSize = 8;
        dcb.Parity = NOPARITY;
        dcb.StopBits = ONESTOPBIT;
        dcb.fBinary = TRUE;
        dcb.fOutxCtsFlow = dcb.fOutxDsrFlow = dcb.fOutX = dcb.fInX = FALSE;
        dcb.fRtsControl = RTS_CONTROL_ENABLE;
        dcb.fDtrControl = DTR_CONTROL_ENABLE;
        (void)SetCommState(h->com, &dcb);
    }
    /* a read returns what has arrived within 1 ms (the protocol loop also serves wakes) */
    COMMTIMEOUTS t = {MAXDWORD, MAXDWORD, 1, 0, WRITE_TIMEOUT_MS};
    SetCommTimeouts(h->com, &t);
    printf("COM %s\n", name);
    fflush(stdout);
}

/* Admission with a key on the socket: a connection without a session is closed at its
 * deadline; a new one takes the place of the oldest unauthenticated one. */
static int admission(const host *h)
{
    return h->mode == T_TCP && h->srv.cfg.require_auth;
}

static int client_authenticated(const host *h)
{
    return h->client != INVALID_SOCKET && h->srv.owner.active;
}

static int admission_deadlines(host *h)
{
    if (!admission(h)) {
        return -1;
    }
    int drop = 0;
    int client = h->client == INVALID_SOCKET ? HOST_LINK_NONE
                 : client_authenticated(h)   ? HOST_LINK_AUTHENTICATED
                                             : HOST_LINK_OPEN;
    int ms = host_admission_deadlines(cp_posix_monotonic_ns(), h->auth_grace_ns,
                                      &h->client_deadline_ns, h->guest_deadline_ns, client,
                                      h->guest != INVALID_SOCKET, &drop);
    if (drop & HOST_DROP_CLIENT) {
        drop_client(h);
    }
    if (drop & HOST_DROP_GUEST) {
        drop_guest(h);
    }
    return ms;
}

static void accept_client(host *h)
{
    SOCKET c = accept(h->listener, NULL, NULL);
    if (c == INVALID_SOCKET) {
        return;
    }
    set_nonblock(c);
    BOOL one = TRUE;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, (const char *)&one, sizeof(one));
    uint64_t deadline = cp_posix_monotonic_ns() + h->auth_grace_ns;
    if (h->client != INVALID_SOCKET && h->guest != INVALID_SOCKET) { /* admission: evict */
        if (!client_authenticated(h) && h->client_deadline_ns <= h->guest_deadline_ns) {
            drop_client(h);
        } else {
            drop_guest(h);
        }
    }
    if (h->client == INVALID_SOCKET) {
        h->client = c;
        h->client_deadline_ns = deadline;
    } else {
        h->guest = c;
        h->guest_deadline_ns = deadline;
    }
}

/* The bytes of one socket link, and what the server reported while it took them (as the
 * POSIX runner's feed_socket). */
static void feed_socket(host *h, int guest, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        h->text_seen = h->refused = h->took_over = 0;
        size_t used = cp_server_feed_link(&h->srv, guest ? CP_SERVER_GUEST : CP_SERVER_OWNER,
                                          buf, n);
        buf += used;
        n -= used;
        if (h->took_over) {
            if (h->client != INVALID_SOCKET) {
                closesocket(h->client);
            }
            h->client = h->guest;
            h->client_deadline_ns = h->guest_deadline_ns;
            h->guest = INVALID_SOCKET;
            guest = 0;
        } else if (h->text_seen || h->refused) {
            if (h->text_seen) {
                static const char reply[] =
                    "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\n"
                    "Connection: close\r\n\r\ncopapy runner: not an HTTP server; it speaks "
                    "the copapy wire protocol (docs/protocol.md), authenticated by its key\n";
                SOCKET s = guest ? h->guest : h->client;
                (void)send_all(s, (const uint8_t *)reply, sizeof(reply) - 1);
                shutdown(s, SD_SEND);
                Sleep(50); /* the peer reads the reply before the close */
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

static void serve_wake(host *h)
{
    char sink[64];
    while (recv(h->wake_rx, sink, sizeof(sink), 0) > 0) {
    }
    __atomic_store_n(&h->wake_pending, 0, __ATOMIC_RELEASE);
    cp_server_flush(&h->srv);
}

static void tcp_loop(host *h)
{
    uint8_t buf[4096];
    while (!stop_requested) {
        int timeout_ms = admission_deadlines(h);
        WSAPOLLFD p[4];
        int n = 0, i_client = -1, i_listen = -1, i_guest = -1;
        p[n++] = (WSAPOLLFD){h->wake_rx, POLLRDNORM, 0};
        if (h->client != INVALID_SOCKET) {
            i_client = n;
            p[n++] = (WSAPOLLFD){h->client, POLLRDNORM, 0};
        }
        if (h->client == INVALID_SOCKET || h->guest == INVALID_SOCKET || admission(h)) {
            i_listen = n;
            p[n++] = (WSAPOLLFD){h->listener, POLLRDNORM, 0};
        }
        if (h->guest != INVALID_SOCKET) {
            i_guest = n;
            p[n++] = (WSAPOLLFD){h->guest, POLLRDNORM, 0};
        }
        /* a bounded wait: Ctrl-C sets stop_requested from another thread */
        if (WSAPoll(p, (ULONG)n, timeout_ms < 0 || timeout_ms > 200 ? 200 : timeout_ms) < 0) {
            die("WSAPoll: error %d", WSAGetLastError());
        }
        if (p[0].revents & POLLRDNORM) {
            serve_wake(h);
        }
        if (i_listen >= 0 && (p[i_listen].revents & POLLRDNORM)) {
            accept_client(h);
            continue;
        }
        const short ready = POLLRDNORM | POLLHUP | POLLERR;
        if (i_guest >= 0 && (p[i_guest].revents & ready)) {
            int r = recv(h->guest, (char *)buf, sizeof(buf), 0);
            if (r > 0) {
                feed_socket(h, 1, buf, (size_t)r);
            } else if (r == 0 || WSAGetLastError() != WSAEWOULDBLOCK) {
                drop_guest(h);
            }
            continue; /* the owner's socket may have changed (a takeover) */
        }
        if (i_client >= 0 && (p[i_client].revents & ready)) {
            int r = recv(h->client, (char *)buf, sizeof(buf), 0);
            if (r > 0) {
                feed_socket(h, 0, buf, (size_t)r);
            } else if (r == 0 || WSAGetLastError() != WSAEWOULDBLOCK) {
                drop_client(h);
            }
        }
    }
}

/* --stdio: a thread copies standard input (pipe, file or console; ReadFile blocks) into a
 * loopback TCP connection that the main loop polls beside the wake socket; the end of input
 * closes it, which ends the runner (as on Linux). Standard output is written like a COM port.
 * (PeekNamedPipe would need no thread, but wine does not support it on the pipes a Linux
 * parent passes: tests/test_windows.py could not test it.) */
static DWORD WINAPI stdin_main(LPVOID arg)
{
    host *h = arg;
    uint8_t buf[4096];
    DWORD got = 0;
    while (ReadFile(h->stdin_h, buf, sizeof(buf), &got, NULL) && got > 0) {
        if (send_all(h->stdin_tx, buf, got) != 0) {
            break;
        }
    }
    shutdown(h->stdin_tx, SD_SEND);
    return 0;
}

static int same_address(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
    return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static void open_stdio(host *h)
{
    h->stdin_h = GetStdHandle(STD_INPUT_HANDLE);
    h->com = GetStdHandle(STD_OUTPUT_HANDLE);
    if (h->stdin_h == NULL || h->stdin_h == INVALID_HANDLE_VALUE || h->com == NULL ||
        h->com == INVALID_HANDLE_VALUE) {
        die("--stdio: this process has no standard input or output");
    }
    SOCKET listener = loopback(SOCK_STREAM, 0);
    struct sockaddr_in to, from, peer;
    int len = sizeof(to);
    memset(&to, 0, sizeof(to));
    h->stdin_tx = socket(AF_INET, SOCK_STREAM, 0);
    if (listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr *)&to, &len) != 0 ||
        h->stdin_tx == INVALID_SOCKET ||
        connect(h->stdin_tx, (struct sockaddr *)&to, sizeof(to)) != 0) {
        die("--stdio: cannot set up the input connection: error %d", WSAGetLastError());
    }
    len = sizeof(from);
    getsockname(h->stdin_tx, (struct sockaddr *)&from, &len);
    h->stdin_rx = accept(listener, NULL, NULL);
    len = sizeof(peer);
    /* only our own connection: another local process may not have raced in first */
    if (h->stdin_rx == INVALID_SOCKET ||
        getpeername(h->stdin_rx, (struct sockaddr *)&peer, &len) != 0 ||
        !same_address(&peer, &from)) {
        die("--stdio: the input connection was not the runner's own");
    }
    closesocket(listener);
    if (CreateThread(NULL, 1u << 16, stdin_main, h, 0, NULL) == NULL) {
        die("--stdio: cannot start the input thread (error %lu)", GetLastError());
    }
}

static void stdio_loop(host *h)
{
    uint8_t buf[4096];
    while (!stop_requested) {
        WSAPOLLFD p[2] = {{h->stdin_rx, POLLRDNORM, 0}, {h->wake_rx, POLLRDNORM, 0}};
        if (WSAPoll(p, 2, 100) == SOCKET_ERROR) {
            die("WSAPoll failed: error %d", WSAGetLastError());
        }
        if (p[0].revents != 0) {
            int got = recv(h->stdin_rx, (char *)buf, sizeof(buf), 0);
            if (got <= 0) {
                break; /* end of input */
            }
            cp_server_feed(&h->srv, buf, (size_t)got);
        }
        if (p[1].revents & POLLRDNORM) {
            serve_wake(h);
        }
    }
}

static void com_loop(host *h)
{
    uint8_t buf[4096];
    while (!stop_requested) {
        DWORD got = 0;
        if (!ReadFile(h->com, buf, sizeof(buf), &got, NULL)) {
            die("reading the COM port failed (error %lu)", GetLastError());
        }
        if (got > 0) {
            cp_server_feed(&h->srv, buf, got);
        }
        WSAPOLLFD p = {h->wake_rx, POLLRDNORM, 0};
        if (WSAPoll(&p, 1, 0) > 0) {
            serve_wake(h);
        }
    }
}

/* ---- main */

static const char USAGE[] =
    "usage: copapy-runner (--tcp PORT --key-file F | --com COMn | --stdio) [--key-file F]\n"
    "         [--name NAME]\n"
    "         [--max-image BYTES] [--max-memory BYTES] [--budget-factor N]\n"
    "         [--link-timeout SECONDS] [--session-lease SECONDS] [--auth-grace SECONDS]\n"
    "         [--no-rt] [--allow-code]  (also format-1 images, machine code: fault tests)\n"
    "         [--image FILE [--start]]  (a saved program loaded at start)\n";

static BOOL WINAPI on_console(DWORD what)
{
    (void)what;
    InterlockedExchange(&stop_requested, 1);
    return TRUE;
}

/* The key file's DACL may grant no read access to the groups every local user is in (the
 * Linux runner's "no bits for group and others"): Everyone, Users, Authenticated Users. A NULL
 * DACL grants everything. Any allow ACE for them that includes reading counts, whatever deny
 * ACEs say (icacls writes a protected, explicit list: that is what is asked for). Under wine
 * the DACL of a file without a stored one is made from its Unix mode: "other" bits give an
 * Everyone ACE (docs/platforms.md). */
static void check_key_acl(const char *path)
{
    PACL dacl = NULL;
    PSECURITY_DESCRIPTOR sd = NULL;
    DWORD rc = GetNamedSecurityInfoA(path, SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, NULL, NULL,
                                     &dacl, NULL, &sd);
    if (rc != ERROR_SUCCESS) {
        die("--key-file %s: cannot read its access control list (Windows error %lu)", path,
            (unsigned long)rc);
    }
    static const WELL_KNOWN_SID_TYPE wide[] = {WinWorldSid, WinBuiltinUsersSid,
                                               WinAuthenticatedUserSid};
    static const char *const wide_name[] = {"Everyone", "Users", "Authenticated Users"};
    const char *who = dacl == NULL ? "Everyone (it has no access control list)" : NULL;
    const DWORD reading = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL | MAXIMUM_ALLOWED;
    for (DWORD i = 0; who == NULL && i < dacl->AceCount; i++) {
        ACE_HEADER *ace = NULL;
        if (!GetAce(dacl, i, (void **)&ace) || ace->AceType != ACCESS_ALLOWED_ACE_TYPE ||
            (ace->AceFlags & INHERIT_ONLY_ACE) != 0) {
            continue;
        }
        ACCESS_ALLOWED_ACE *allow = (ACCESS_ALLOWED_ACE *)ace;
        for (size_t k = 0; k < sizeof(wide) / sizeof(wide[0]); k++) {
            if ((allow->Mask & reading) != 0 && IsWellKnownSid(&allow->SidStart, wide[k])) {
                who = wide_name[k];
            }
        }
    }
    LocalFree(sd);
    if (who != NULL) {
        die("--key-file %s can be read by %s: icacls %s /inheritance:r /grant:r "
            "\"%%USERNAME%%\":F",
            path, who, path);
    }
}

/* The shared key: the whole file (16 .. 4096 bytes), which only its owner may read. */
static uint8_t *read_key(const char *path, uint32_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        die("--key-file %s: %s", path, strerror(errno));
    }
    check_key_acl(path);
    static uint8_t key[MAX_KEY + 1];
    size_t n = fread(key, 1, sizeof(key), f);
    fclose(f);
    if (n < MIN_KEY || n > MAX_KEY) {
        die("--key-file %s has %u bytes; a key has %d to %d", path, (unsigned)n, MIN_KEY,
            MAX_KEY);
    }
    *len = (uint32_t)n;
    return key;
}

static unsigned long long parse_count(const char *opt, const char *arg, unsigned long long min,
                                      unsigned long long max)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 0);
    if (end == arg || *end != '\0' || errno == ERANGE || strpbrk(arg, "+-") != NULL ||
        v < min || v > max) {
        die("%s needs a whole number %llu .. %llu, got '%s'", opt, min, max, arg);
    }
    return v;
}

static const char *need_arg(int *i, int argc, char **argv)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "copapy-runner: error: %s needs a value\n%s", argv[*i], USAGE);
        exit(2);
    }
    return argv[++*i];
}

int main(int argc, char **argv)
{
    host *h = &H;
    h->client = h->guest = h->listener = INVALID_SOCKET;
    h->com = INVALID_HANDLE_VALUE;
    h->want_rt = 1;
    const char *name = "copapy host runner (windows)", *key_file = NULL, *com = NULL;
    unsigned long long max_image = DEFAULT_MAX_IMAGE, max_memory = DEFAULT_MAX_MEMORY;
    unsigned long long budget_factor = DEFAULT_BUDGET_FACTOR;
    double link_timeout = 0.0, lease = 0.0, auth_grace = -1.0;
    int tcp_port = -1;
    const char *image_path = NULL;
    int start_image = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--tcp") == 0 || strcmp(a, "--com") == 0) {
            if (h->mode != T_NONE) {
                die("give one transport: --tcp PORT, --com COMn or --stdio");
            }
            const char *v = need_arg(&i, argc, argv);
            if (a[2] == 't') {
                h->mode = T_TCP;
                tcp_port = (int)parse_count("--tcp", v, 0, 65535);
            } else {
                h->mode = T_COM;
                com = v;
            }
        } else if (strcmp(a, "--key-file") == 0) {
            key_file = need_arg(&i, argc, argv);
        } else if (strcmp(a, "--name") == 0) {
            name = need_arg(&i, argc, argv);
        } else if (strcmp(a, "--max-image") == 0) {
            max_image = parse_count(a, need_arg(&i, argc, argv), 64, 0x7fffffffULL);
        } else if (strcmp(a, "--max-memory") == 0) {
            max_memory = parse_count(a, need_arg(&i, argc, argv), 4096, SIZE_MAX);
        } else if (strcmp(a, "--budget-factor") == 0) {
            budget_factor = parse_count(a, need_arg(&i, argc, argv), 0, 1000000);
        } else if (strcmp(a, "--link-timeout") == 0) {
            link_timeout = parse_seconds(a, need_arg(&i, argc, argv));
        } else if (strcmp(a, "--session-lease") == 0) {
            lease = parse_seconds(a, need_arg(&i, argc, argv));
        } else if (strcmp(a, "--auth-grace") == 0) {
            auth_grace = parse_seconds(a, need_arg(&i, argc, argv));
        } else if (strcmp(a, "--no-rt") == 0) {
            h->want_rt = 0;
        } else if (strcmp(a, "--allow-code") == 0) {
            h->allow_code = 1;
        } else if (strcmp(a, "--image") == 0) {
            image_path = need_arg(&i, argc, argv);
        } else if (strcmp(a, "--start") == 0) {
            start_image = 1;
        } else if (strcmp(a, "--help") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(a, "--stdio") == 0) {
            if (h->mode != T_NONE) {
                die("give one transport: --tcp PORT, --com COMn or --stdio");
            }
            h->mode = T_STDIO;
        } else if (strcmp(a, "--unix") == 0 || strcmp(a, "--pty") == 0 ||
                   strcmp(a, "--user") == 0) {
            /* the Linux runner's transports and privilege drop that this one does not have */
            die("%s is not available on Windows: give --tcp PORT --key-file F (127.0.0.1, "
                "with a key), --com COMn or --stdio",
                a);
        } else {
            fprintf(stderr, "copapy-runner: error: unknown argument '%s'\n%s", a, USAGE);
            return 2;
        }
    }
    if (h->mode == T_NONE) {
        fprintf(stderr, "copapy-runner: error: give a transport\n%s", USAGE);
        return 2;
    }
    if (start_image && image_path == NULL) {
        die("--start needs --image FILE (the program to start)");
    }
    if (h->mode == T_TCP && key_file == NULL) {
        die("--tcp needs --key-file: any local user (and a browser's request) can reach a TCP "
            "port");
    }
    uint32_t key_len = 0;
    const uint8_t *key = key_file != NULL ? read_key(key_file, &key_len) : NULL;

    WSADATA wsa;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) {
        die("WSAStartup failed");
    }
    h->staging = malloc(max_image);
    size_t work_size = cp_server_work_size(MAX_PAYLOAD, PORTS_CAPACITY, RING_SIZE);
    h->work = malloc(work_size);
    if (h->staging == NULL || h->work == NULL) {
        die("out of memory");
    }
    InitializeSRWLock(&h->lock);
    InitializeConditionVariable(&h->cond);
    SetConsoleCtrlHandler(on_console, TRUE);
    open_wake(h);
    if (h->want_rt) {
        timeBeginPeriod(1); /* the system timer at 1 ms for the timers that are not high-res */
    }

    h->platform = *cp_platform_posix();
    h->platform.max_region_size = (size_t)max_memory;
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
    cfg->budget_min_ns = 2u * WATCHDOG_POLL_NS;
    cfg->link_timeout_ns = (uint64_t)(link_timeout * 1e9);
    cfg->session_lease_ns = (uint64_t)(lease * 1e9);
    h->auth_grace_ns = auth_grace >= 0.0 ? (uint64_t)(auth_grace * 1e9) : DEFAULT_AUTH_GRACE_NS;
    cfg->key = key;
    cfg->key_len = key_len;
    /* --image feeds its requests unauthenticated, before any client can connect; the rule
     * is switched on after it (the server reads it per request) */
    cfg->require_auth = key != NULL && image_path == NULL;

    start_tick_thread(h);
    int wd = cp_posix_watchdog_start(WATCHDOG_POLL_NS, h->want_rt ? 1 : 0);
    if (wd != 0) {
        die("cannot start the watchdog thread (error %d)", wd);
    }
    cfg->flags = (uint8_t)(CP_SERVER_FLAG_SIMULATED_IO |
                           (h->allow_code ? CP_SERVER_FLAG_CODE : 0) |
                           (h->rt_active ? CP_SERVER_FLAG_REALTIME : 0));
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    AcquireSRWLockExclusive(&h->lock);
    cp_status st = cp_server_init(&h->srv, cfg, &err);
    ReleaseSRWLockExclusive(&h->lock);
    if (st != CP_OK) {
        die("%s", err.message);
    }
    if (image_path != NULL) {
        char why[CP_ERROR_MESSAGE_MAX + 512];
        if (cp_preload_image(&h->srv, &h->pre, (uint32_t)max_image, image_path, start_image,
                             why, sizeof(why)) != 0) {
            die("%s", why);
        }
        h->srv.cfg.require_auth = key != NULL;
    }
    if (h->mode == T_TCP) {
        open_tcp(h, tcp_port);
        tcp_loop(h);
    } else if (h->mode == T_COM) {
        open_com(h, com);
        com_loop(h);
    } else {
        open_stdio(h);
        stdio_loop(h);
    }

    AcquireSRWLockExclusive(&h->lock);
    h->quit = 1;
    WakeAllConditionVariable(&h->cond);
    ReleaseSRWLockExclusive(&h->lock);
    WaitForSingleObject(h->tick_thread, INFINITE);
    cp_server_close(&h->srv); /* the outputs take their safe values */
    WSACleanup();
    return 0;
}
