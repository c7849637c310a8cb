/* The few Linux system interfaces copapy_runner.c uses, for Darwin (macOS): there they are
 * built from what it has, so the host runner's code stays one file (docs/platforms.md).
 *   clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME): relative nanosleeps to the deadline;
 *   getrandom: arc4random_buf; accept4, pipe2: the call, then fcntl; SOCK_CLOEXEC: 0 (the
 *   runner never execs); prctl (timer slack): fails with ENOSYS, one warning with real time.
 * On Linux this is only <sys/prctl.h> and <sys/random.h>. */
#ifndef COPAPY_HOST_OS_H
#define COPAPY_HOST_OS_H

#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/random.h>
#elif defined(__APPLE__)
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SOCK_CLOEXEC 0
#define SOCK_NONBLOCK 0x20000000 /* only accept4's flag here, never given to socket() */
#define PR_SET_TIMERSLACK 29
#ifndef TIMER_ABSTIME
#define TIMER_ABSTIME 1
#endif

static inline int cp_prctl(int option, unsigned long a, unsigned long b, unsigned long c,
                           unsigned long d)
{
    (void)option, (void)a, (void)b, (void)c, (void)d;
    errno = ENOSYS;
    return -1;
}
#define prctl cp_prctl

static inline ssize_t cp_getrandom(void *buf, size_t n, unsigned flags)
{
    (void)flags;
    arc4random_buf(buf, n);
    return (ssize_t)n;
}
#define getrandom cp_getrandom

static inline int cp_set_nonblock_cloexec(int fd, int nonblock)
{
    int fl = fcntl(fd, F_GETFL);
    if (nonblock && fl >= 0) {
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    return fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static inline int cp_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int c = accept(fd, addr, len);
    if (c >= 0) {
        (void)cp_set_nonblock_cloexec(c, (flags & SOCK_NONBLOCK) != 0);
    }
    return c;
}
#define accept4 cp_accept4

static inline int cp_pipe2(int fds[2], int flags)
{
    if (pipe(fds) != 0) {
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        (void)cp_set_nonblock_cloexec(fds[i], (flags & O_NONBLOCK) != 0);
    }
    return 0;
}
#define pipe2 cp_pipe2

/* only CLOCK_MONOTONIC with TIMER_ABSTIME is used: sleep until that clock reaches *ts */
static inline int cp_clock_nanosleep(clockid_t clock, int flags, const struct timespec *ts,
                                     struct timespec *rem)
{
    (void)flags, (void)rem;
    struct timespec now;
    if (clock_gettime(clock, &now) != 0) {
        return errno;
    }
    long long left = ((long long)ts->tv_sec - now.tv_sec) * 1000000000LL +
                     (ts->tv_nsec - now.tv_nsec);
    if (left <= 0) {
        return 0;
    }
    struct timespec d = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
    return nanosleep(&d, NULL) == 0 ? 0 : errno;
}
#define clock_nanosleep cp_clock_nanosleep
#endif

#endif /* COPAPY_HOST_OS_H */
