/* LD_PRELOAD library for tests/test_no_alloc.py: counts the allocations and mappings
 * (alloc_hooks.h) that the host runner's tick thread makes. The tick thread is the one that
 * sleeps to absolute deadlines (clock_nanosleep with TIMER_ABSTIME, interposed here): counting
 * starts in a thread at its first such sleep, so its set-up (the guard's alternate stack) is
 * not counted, every tick after is. At exit the count goes to the file named by the
 * environment variable COPAPY_ALLOC_COUNT (if the process ever ticked).
 * Build: cc -shared -fPIC -O1 alloc_shim.c -o alloc_shim.so */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static __thread int on_tick __attribute__((tls_model("initial-exec")));
static unsigned long count; /* atomic */
static int ticked;          /* atomic */

static void note(void)
{
    if (on_tick) {
        __atomic_add_fetch(&count, 1ul, __ATOMIC_RELAXED);
    }
}

#include "alloc_hooks.h"

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                    struct timespec *rem)
{
    if ((flags & TIMER_ABSTIME) != 0 && !on_tick) {
        on_tick = 1;
        __atomic_store_n(&ticked, 1, __ATOMIC_RELAXED);
    }
    long r = syscall(SYS_clock_nanosleep, clock, flags, req, rem);
    return r == 0 ? 0 : errno;
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("COPAPY_ALLOC_COUNT");
    if (path == NULL || !__atomic_load_n(&ticked, __ATOMIC_RELAXED)) {
        return;
    }
    char line[32];
    int n = snprintf(line, sizeof(line), "%lu\n", __atomic_load_n(&count, __ATOMIC_RELAXED));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
}
