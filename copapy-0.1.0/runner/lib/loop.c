/* copapy_loop_run: a periodic loop on the calling thread, with absolute deadlines on the
 * monotonic clock, the overrun rule of cyclictest and ros2_control (a wake-up a period or more
 * late skips the missed deadlines and counts them), and the usual real-time set-up, each
 * optional and reported in copapy_loop_stats.rt. The set-up and the sleep are the platform's
 * (loop_rt_posix.c: SCHED_FIFO, mlockall, timer slack 1 ns, cpu_dma_latency 0, CPU pinning;
 * loop_rt_win32.c: thread priority, working set, a high-resolution waitable timer). */
#define COPAPY_BUILDING_LIBRARY 1

#include <string.h>

#include "copapy/copapy.h"
#include "abi_internal.h"

#define STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)

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

    uint32_t rt = 0;
    copapy_rt_saved *saved = copapy_rt_setup(c, &rt);
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
        copapy_rt_sleep_until(deadline);
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
    copapy_rt_restore(saved, rt);
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
