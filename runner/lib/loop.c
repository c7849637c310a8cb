/* copapy_loop_run: a periodic loop on the calling thread, with absolute deadlines on
 * CLOCK_MONOTONIC (clock_nanosleep TIMER_ABSTIME), the overrun rule of cyclictest and
 * ros2_control (a wake-up a period or more late skips the missed deadlines and counts them),
 * and the usual real-time set-up (SCHED_FIFO, mlockall, timer slack 1 ns, cpu_dma_latency 0,
 * CPU pinning), each optional and reported in copapy_loop_stats.rt. */
#define _GNU_SOURCE 1
#define COPAPY_BUILDING_LIBRARY 1

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "copapy/copapy.h"
#include "abi_internal.h"

#define STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)

typedef struct rt_saved {
    int policy;
    struct sched_param param;
    int slack;   /* previous timer slack (ns), -1 if unknown */
    int dma_fd;
} rt_saved;

static uint32_t rt_setup(const copapy_loop_config *c, rt_saved *saved)
{
    uint32_t achieved = 0;
    saved->slack = -1;
    saved->dma_fd = -1;
    pthread_getschedparam(pthread_self(), &saved->policy, &saved->param);
    if (c->cpu >= 0 && c->cpu < CPU_SETSIZE) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c->cpu, &set);
        (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    if (c->flags & COPAPY_LOOP_MLOCK) {
        if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
            achieved |= COPAPY_RT_MLOCK;
        }
    }
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
    if (c->flags & COPAPY_LOOP_FIFO) {
        struct sched_param sp;
        memset(&sp, 0, sizeof(sp));
        sp.sched_priority = c->priority > 0 ? c->priority : 80;
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0) {
            achieved |= COPAPY_RT_FIFO;
        }
    }
    return achieved;
}

static void rt_restore(const rt_saved *saved, uint32_t achieved)
{
    if (achieved & COPAPY_RT_FIFO) {
        (void)pthread_setschedparam(pthread_self(), saved->policy, &saved->param);
    }
    if ((achieved & COPAPY_RT_SLACK1) && saved->slack > 0) {
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)saved->slack, 0, 0, 0);
    }
    if (saved->dma_fd >= 0) {
        close(saved->dma_fd);
    }
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

static void sleep_until(int64_t deadline)
{
    struct timespec ts = to_timespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

int copapy_loop_run(const copapy_loop_config *c, copapy_loop_stats *stats, copapy_error *err)
{
    if (c == NULL || c->struct_size < sizeof(copapy_loop_config)) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_loop_run: config with struct_size = "
                               "sizeof(copapy_loop_config) required");
    }
    if (stats != NULL && stats->struct_size < sizeof(copapy_loop_stats)) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_loop_stats.struct_size is too small");
    }
    uint64_t period = c->period_ns != 0 ? c->period_ns : copapy_tick_ns(c->program);
    if (period == 0 || period > (uint64_t)INT64_MAX / 4) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_loop_run: period_ns is 0 and there is no program to "
                               "take the tick from");
    }
    if (c->latency_ns != NULL && c->latency_capacity == 0) {
        return copapy_abi_fail(err, COPAPY_E_ARGUMENT, 0, 0, NULL,
                               "copapy_loop_run: latency_ns given with latency_capacity 0");
    }
    copapy_loop_stats local;
    copapy_loop_stats *s = stats != NULL ? stats : &local;
    memset((uint8_t *)s + sizeof(uint32_t), 0, sizeof(*s) - sizeof(uint32_t));
    s->struct_size = sizeof(*s);
    STORE(s->latency_min_ns, INT64_MAX);

    rt_saved saved;
    uint32_t rt = rt_setup(c, &saved);
    STORE(s->rt, rt);
    STORE(s->running, 1u);

    const int64_t p = (int64_t)period;
    int status = COPAPY_OK;
    int faulted = 0;
    int64_t lat_max = INT64_MIN, lat_min = INT64_MAX, lat_sum = 0, work_max = 0;
    uint64_t missed = 0, overruns = 0, cycle = 0;
    /* the first deadline one period from now */
    int64_t deadline = copapy_now_ns() + p;
    while (c->cycles == 0 || cycle < c->cycles) {
        if (c->stop != NULL && __atomic_load_n(c->stop, __ATOMIC_ACQUIRE) != 0) {
            break;
        }
        sleep_until(deadline);
        int64_t wake = copapy_now_ns();
        int64_t lat = wake - deadline;
        if (c->latency_ns != NULL) {
            c->latency_ns[cycle % c->latency_capacity] = lat;
        }
        lat_sum += lat;
        if (lat > lat_max) {
            lat_max = lat;
            STORE(s->latency_max_ns, lat);
        }
        if (lat < lat_min) {
            lat_min = lat;
            STORE(s->latency_min_ns, lat);
        }
        STORE(s->latency_sum_ns, lat_sum);

        if (c->before != NULL && c->before(c->ctx, cycle, wake) != 0) {
            status = COPAPY_E_STOPPED;
        }
        if (status == COPAPY_OK && c->program != NULL && !faulted &&
            copapy_tick(c->program) == COPAPY_E_FAULTED) {
            faulted = 1;
            STORE(s->status, (int32_t)COPAPY_E_FAULTED);
        }
        if (status == COPAPY_OK && c->after != NULL && c->after(c->ctx, cycle, wake) != 0) {
            status = COPAPY_E_STOPPED;
        }
        cycle++;
        STORE(s->cycles, cycle);
        if (status != COPAPY_OK) {
            break;
        }

        int64_t done = copapy_now_ns();
        if (done - wake > work_max) {
            work_max = done - wake;
            STORE(s->work_max_ns, work_max);
        }
        deadline += p;
        if (done >= deadline) {
            /* the next deadline has passed already: skip it and every further one that has
             * passed, so the next wake-up is on the grid in the future (no catch-up burst) */
            uint64_t skip = (uint64_t)((done - deadline) / p) + 1u;
            deadline += (int64_t)skip * p;
            overruns++;
            missed += skip;
            STORE(s->overruns, overruns);
            STORE(s->missed, missed);
        }
    }
    rt_restore(&saved, rt);
    if (status == COPAPY_OK && faulted) {
        status = COPAPY_E_FAULTED;
    }
    STORE(s->status, (int32_t)status);
    STORE(s->running, 0u);
    if (status == COPAPY_E_STOPPED) {
        return copapy_abi_fail(err, status, 0, 0, NULL, "a loop hook asked to stop");
    }
    if (status == COPAPY_E_FAULTED) {
        return copapy_abi_fail(err, status, 0, 0, NULL,
                               "the program faulted; its outputs took their safe values");
    }
    (void)copapy_abi_fail(err, COPAPY_OK, 0, 0, "OK", "");
    return status;
}
