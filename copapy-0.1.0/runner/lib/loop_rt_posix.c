/* The real-time set-up of copapy_loop_run on POSIX systems (abi_internal.h, "the loop's
 * platform part"): SCHED_FIFO, mlockall, timer slack 1 ns, cpu_dma_latency 0, CPU pinning (the
 * Linux ones where the system has them), and sleeps to absolute CLOCK_MONOTONIC deadlines. */
#if !defined(_WIN32)
#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#include "copapy/copapy.h"
#include "abi_internal.h"

struct copapy_rt_saved {
    int policy;
    struct sched_param param;
    int slack;   /* previous timer slack (ns), -1 if unknown */
    int dma_fd;
};

copapy_rt_saved *copapy_rt_setup(const copapy_loop_config *c, uint32_t *rt)
{
    uint32_t achieved = 0;
    copapy_rt_saved *saved = calloc(1, sizeof(*saved));
    *rt = 0;
    if (saved == NULL) {
        return NULL; /* no set-up: nothing to undo */
    }
    saved->slack = -1;
    saved->dma_fd = -1;
    pthread_getschedparam(pthread_self(), &saved->policy, &saved->param);
#if defined(__linux__)
    if (c->cpu >= 0 && c->cpu < CPU_SETSIZE) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c->cpu, &set);
        (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
#endif
    if (c->flags & COPAPY_LOOP_MLOCK) {
        if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
            achieved |= COPAPY_RT_MLOCK;
        }
    }
#if defined(__linux__)
    if (c->flags & COPAPY_LOOP_SLACK1) {
        int old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0) {
            saved->slack = old;
            achieved |= COPAPY_RT_SLACK1;
        }
    }
    if (c->flags & COPAPY_LOOP_DMA_LATENCY0) {
        int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
        int32_t zero = 0;
        if (fd >= 0 && write(fd, &zero, sizeof(zero)) == (ssize_t)sizeof(zero)) {
            saved->dma_fd = fd;  /* held open: the request lasts while the fd is open */
            achieved |= COPAPY_RT_DMA_LATENCY0;
        } else if (fd >= 0) {
            close(fd);
        }
    }
#endif
    if (c->flags & COPAPY_LOOP_FIFO) {
        struct sched_param sp;
        memset(&sp, 0, sizeof(sp));
        sp.sched_priority = c->priority > 0 ? c->priority : 80;
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0) {
            achieved |= COPAPY_RT_FIFO;
        }
    }
    *rt = achieved;
    return saved;
}

void copapy_rt_restore(copapy_rt_saved *saved, uint32_t achieved)
{
    if (saved == NULL) {
        return;
    }
    if (achieved & COPAPY_RT_FIFO) {
        (void)pthread_setschedparam(pthread_self(), saved->policy, &saved->param);
    }
#if defined(__linux__)
    if ((achieved & COPAPY_RT_SLACK1) && saved->slack > 0) {
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)saved->slack, 0, 0, 0);
    }
#endif
    if (saved->dma_fd >= 0) {
        close(saved->dma_fd);
    }
    free(saved);
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

void copapy_rt_sleep_until(int64_t deadline)
{
#if defined(__APPLE__)
    /* no clock_nanosleep: a relative sleep to the same deadline */
    for (int64_t left = deadline - copapy_now_ns(); left > 0; left = deadline - copapy_now_ns()) {
        struct timespec ts = to_timespec(left);
        (void)nanosleep(&ts, NULL);
    }
#else
    struct timespec ts = to_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
#endif
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int copapy_loop_rt_posix_unavailable;

#endif
