/* The supervisor process of the host runner (supervisor.h). */
#define _GNU_SOURCE 1

#include "supervisor.h"

#include "host_os.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    MAX_SAFE = 128,          /* output channels one message carries (5 kinds x 16 today) */
    MAGIC_SAFE = 0x45464153, /* "SAFE" */
    MAGIC_CLEAN = 0x4e41454c /* "LEAN": a clean shutdown */
};

typedef struct {
    uint8_t kind;
    uint8_t reserved;
    uint16_t channel;
    uint32_t reserved2;
    double safe;
} safe_entry;

/* One message, always whole: written atomically (smaller than PIPE_BUF), so every read of
 * sizeof(safe_message) returns exactly one. */
typedef struct {
    uint32_t magic;
    uint32_t count;
    safe_entry e[MAX_SAFE];
} safe_message;

_Static_assert(sizeof(safe_message) <= 4096, "a message must fit PIPE_BUF on Linux");

void *supervisor_map_io(const char *path, size_t bytes)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        return NULL;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    int saved = errno;
    close(fd); /* the mapping stays: no descriptor a task could write through */
    if (p == MAP_FAILED) {
        errno = saved;
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void send_message(int fd, const safe_message *m, int *rc)
{
    ssize_t w;
    do {
        w = write(fd, m, sizeof(*m));
    } while (w < 0 && errno == EINTR);
    *rc = w == (ssize_t)sizeof(*m) ? 0 : -1;
}

int supervisor_send_safe(int to_supervisor, const cp_program *prog)
{
    static safe_message m; /* protocol context only */
    memset(&m, 0, sizeof(m));
    m.magic = MAGIC_SAFE;
    uint32_t n = prog != NULL ? prog->io_binding_count : 0;
    for (uint32_t i = 0; i < n && m.count < MAX_SAFE; i++) {
        const cp_io_binding *b = &prog->io_bindings[i];
        if (b->direction == CP_DIR_OUTPUT) {
            m.e[m.count].kind = b->kind;
            m.e[m.count].channel = b->channel;
            m.e[m.count].safe = b->safe;
            m.count++;
        }
    }
    int rc;
    send_message(to_supervisor, &m, &rc);
    return rc;
}

void supervisor_send_clean_exit(int to_supervisor)
{
    static safe_message m;
    m.magic = MAGIC_CLEAN;
    m.count = 0;
    int rc;
    send_message(to_supervisor, &m, &rc);
}

/* ---- the parent */

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0) {
        kill((pid_t)child_pid, sig); /* the runner shuts down cleanly on these */
    }
}

/* Its own state: the last table the runner sent. */
static safe_message table;

static unsigned drive_safe(uint64_t *io, unsigned kinds, unsigned channels)
{
    unsigned driven = 0;
    for (uint32_t i = 0; i < table.count && i < MAX_SAFE; i++) {
        const safe_entry *e = &table.e[i];
        if (e->kind >= 1 && e->kind <= kinds && e->channel < channels) {
            uint64_t bits;
            memcpy(&bits, &e->safe, sizeof(bits));
            __atomic_store_n(&io[(size_t)(e->kind - 1) * channels + e->channel], bits,
                             __ATOMIC_RELAXED);
            driven++;
        }
    }
    return driven;
}

/* Reads messages until the runner's end of the pipe is closed (it ended). Returns 1 if the
 * last message said the shutdown was clean. */
static int follow(int from_runner)
{
    static safe_message m;
    int clean = 0;
    for (;;) {
        ssize_t r = read(from_runner, &m, sizeof(m));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return clean;
        }
        if ((size_t)r != sizeof(m)) {
            continue; /* not a message of ours */
        }
        if (m.magic == MAGIC_CLEAN) {
            clean = 1;
        } else if (m.magic == MAGIC_SAFE && m.count <= MAX_SAFE) {
            table = m;
            clean = 0;
        }
    }
}

static void supervise(pid_t child, int from_runner, uint64_t *io, unsigned kinds,
                      unsigned channels)
{
    /* the runner owns the transport: stdin and stdout are its alone */
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        close(null_fd);
    }
    int clean = follow(from_runner);
    /* the runner's end is closed: it has ended, or is ending (its memory is going away) */
    unsigned driven = drive_safe(io, kinds, channels);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (clean && WIFEXITED(status)) {
        exit(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr,
                "copapy-runner: supervisor: the runner process %d was killed by signal %d "
                "(%s); %u output channel(s) driven to their safe values\n",
                (int)child, sig, strsignal(sig), driven);
        exit(SUPERVISOR_EXIT_SIGNAL_BASE + sig);
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    fprintf(stderr,
            "copapy-runner: supervisor: the runner process %d exited with status %d without a "
            "clean shutdown; %u output channel(s) driven to their safe values\n",
            (int)child, code, driven);
    exit(code != 0 ? code : SUPERVISOR_EXIT_UNEXPECTED);
}

void supervisor_start(uint64_t *io, unsigned kinds, unsigned channels, int *to_supervisor)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "copapy-runner: error: supervisor pipe: %s\n", strerror(errno));
        exit(2);
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "copapy-runner: error: cannot fork the supervisor: %s\n",
                strerror(errno));
        exit(2);
    }
    if (child == 0) {
        close(p[0]);
        /* a supervisor that is gone protects nothing: the runner ends cleanly (outputs safe;
         * Linux only, elsewhere it keeps running) */
#ifdef PR_SET_PDEATHSIG
        if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0UL, 0UL, 0UL) != 0 || getppid() != parent) {
            exit(2);
        }
#else
        (void)parent;
#endif
        int fl = fcntl(p[1], F_GETFL);
        fcntl(p[1], F_SETFL, fl | O_NONBLOCK); /* never blocks the protocol thread */
        *to_supervisor = p[1];
        return;
    }
    close(p[1]);
    child_pid = child;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    supervise(child, p[0], io, kinds, channels);
}
