/* What the host platforms' guards (platform_posix.c, platform_win32.c) share: the fault record
 * of a chain that left the CPU state changed, the copy of a caught fault to the caller's
 * record, and the budget supervisor's rule for when to interrupt a job. The ways of catching
 * a fault and of interrupting a thread are each platform's own. */
#ifndef COPAPY_GUARD_COMMON_H
#define COPAPY_GUARD_COMMON_H

#include <stdint.h>

#include "copapy/runner.h"
#include "internal.h"
#include "slot_value.h"

/* A chain that left the CPU (or the signal) state changed (cpu_state.h): a fault. Returns 1. */
static inline int cp_guard_changed_state(cp_fault *fault, uint32_t changed, uint32_t fp_left)
{
    if (fault != NULL) {
        fault->kind = CP_FAULT_CPU_STATE;
        fault->address = fp_left;
        fault->pc = 0;
        fault->code = changed;
    }
    return 1;
}

/* A fault caught in a slot, into the caller's record (may be NULL). Returns 1. */
static inline int cp_guard_report(cp_fault *out, const cp_fault *caught)
{
    if (out != NULL) {
        out->kind = caught->kind;
        out->address = caught->address;
        out->pc = caught->pc;
        out->code = caught->code;
    }
    return 1;
}

/* The supervisor's view of one slot (its thread only). */
typedef struct cp_guard_watch {
    uint64_t seen_seq;
    uint64_t seen_cpu_ns;
    uint64_t seen_wall_ns;
    uint64_t kill_cpu_ns;
} cp_guard_watch;

/* A job blocked in a system call (a sleep, a futex wait) uses no CPU time: it is interrupted
 * after CP_GUARD_WALL_FACTOR budgets of wall time, at least CP_GUARD_WALL_MIN_NS (far beyond
 * any preemption, so a preempted job is never mistaken for a blocked one). */
#define CP_GUARD_WALL_FACTOR 100u
#define CP_GUARD_WALL_MIN_NS 1000000000ull

static inline uint64_t cp_guard_wall_limit(uint64_t budget)
{
    if (budget > UINT64_MAX / CP_GUARD_WALL_FACTOR) {
        return UINT64_MAX;
    }
    return budget > CP_GUARD_WALL_MIN_NS / CP_GUARD_WALL_FACTOR ? budget * CP_GUARD_WALL_FACTOR
                                                                : CP_GUARD_WALL_MIN_NS;
}

/* One sample, at wall time `wall`, of a slot whose job `seq` (odd: running) has `budget` ns
 * and whose thread has used `cpu` ns so far; `fired`: the job was interrupted already. 1 if it
 * must be interrupted now: once when it has used its budget (or been blocked for the wall
 * limit) since it was first seen running, and again each further budget if that did not end
 * it. */
static inline int cp_guard_watch_due(cp_guard_watch *w, uint64_t seq, uint64_t budget,
                                     uint64_t cpu, uint64_t wall, int fired)
{
    if (seq != w->seen_seq) {
        /* first seen running now: it has used at least nothing of its budget */
        w->seen_seq = seq;
        w->seen_cpu_ns = cpu;
        w->seen_wall_ns = wall;
        return 0;
    }
    int blocked = wall - w->seen_wall_ns >= cp_guard_wall_limit(budget);
    if ((!fired && (cpu - w->seen_cpu_ns >= budget || blocked)) ||
        (fired && cpu - w->kill_cpu_ns >= budget)) {
        w->kill_cpu_ns = cpu;
        return 1;
    }
    return 0;
}

/* ---- the walk of a guard_jobs list (runner.h), one for every platform */

/* A ROW entry: the ranges into the ring's next row (past its time), the ring slot advanced
 * (nothing without a ring). Out of line: one a tick, and the jobs' loop stays short. */
static CP_NOINLINE void cp_jobs_row(const cp_guard_job_list *list)
{
    if (list->rows == NULL) {
        return;
    }
    uint64_t next = *list->row_next;
    uint8_t *row = list->rows + (size_t)next * list->row_bytes + sizeof(uint64_t);
    for (uint32_t r = 0; r < list->row_ranges; r++) {
        cp_copy_words(row, list->data + list->row_offset[r], list->row_size[r]);
        row += list->row_size[r];
    }
    *list->row_next = next + 1 < list->row_capacity ? next + 1 : 0;
}

/* The list's entry `kind` that is not a job (COPY, INPUT, OUTPUT, ROW) with its words at w
 * (`data`, `io`: the list's, in the walk's locals: the moves' byte stores may alias the
 * list); returns the words after it. The conversions are the scheduler's (slot_value.h), a
 * float32 slot without the dtype switch, as the scheduler's planned tick moves it. */
static CP_ALWAYS_INLINE const uint32_t *cp_jobs_move(const cp_guard_job_list *list,
                                                    uint8_t *data, double *io,
                                                    uint32_t kind, const uint32_t *w)
{
    if (kind == CP_JOBS_COPY) {
        cp_copy_words(data + w[0], data + w[1], w[2]);
        return w + 3;
    }
    if (kind == CP_JOBS_ROW) {
        cp_jobs_row(list);
        return w;
    }
    uint8_t dtype = (uint8_t)w[2];
    if (kind == CP_JOBS_INPUT) {
        double v = w[1] != CP_JOBS_NO_CHANNEL ? io[w[1]] : 0.0;
        if (dtype == CP_DT_F32) {
            float f = cp_to_f32(v);
            cp_copy(data + w[0], (const uint8_t *)&f, sizeof(f));
        } else {
            cp_slot_store(data + w[0], dtype, v);
        }
    } else if (w[1] != CP_JOBS_NO_CHANNEL) {
        if (dtype == CP_DT_F32) {
            float f;
            cp_copy((uint8_t *)&f, data + w[0], sizeof(f));
            io[w[1]] = (double)f;
        } else {
            io[w[1]] = cp_slot_load(data + w[0], dtype);
        }
    }
    return w + 3;
}

/* A run of OUTPUT entries (the first one's words at w, *o past it) in one loop: a tick's period
 * ends come one after another, and each entry walked costs as much as its move. Returns the
 * words after the run, *o past it. */
static CP_ALWAYS_INLINE const uint32_t *cp_jobs_outputs(const cp_guard_job_list *list,
                                                       uint8_t *data, double *io,
                                                       const uint32_t *w, const uint8_t **o,
                                                       const uint8_t *stop)
{
    for (;;) {
        w = cp_jobs_move(list, data, io, CP_JOBS_OUTPUT, w);
        if (*o == stop || **o != CP_JOBS_OUTPUT) {
            return w;
        }
        (*o)++;
    }
}

/* The INPUT half of an INPUT_JOB entry (words w): the channel into its float32 slot, as
 * cp_jobs_move's INPUT converts it. */
static CP_ALWAYS_INLINE void cp_jobs_input_f32(uint8_t *data, const double *io,
                                               const uint32_t *w)
{
    float f = cp_to_f32(w[1] != CP_JOBS_NO_CHANNEL ? io[w[1]] : 0.0);
    cp_copy(data + w[0], (const uint8_t *)&f, sizeof(f));
}

/* A platform's job of a list: task `task`'s chain guarded, `n` its index over the call.
 * Nonzero: it faulted (fault filled), the walk stops. */
typedef int (*cp_jobs_job_fn)(void *ctx, uint32_t task, uint32_t n, cp_fault *fault);

/* The list's entries `repeat` times: the moves here, each job by `job` (a constant where this
 * is inlined, so that the platform's job is inlined into the loop too). Returns 1 if a job
 * faulted (no entry after it has run), else 0. An INPUT_JOB is its move and its job with no
 * entry walked between them, a run of OUTPUTs one loop (docs/decisions/2026-12-05-io-entries.md). */
static CP_ALWAYS_INLINE int cp_jobs_walk(const cp_guard_job_list *list, cp_jobs_job_fn job,
                                         void *ctx, cp_fault *fault)
{
    const uint8_t *order = list->order, *stop = order + list->count;
    const uint32_t *words = list->copies;
    uint8_t *data = list->data;
    double *io = list->io;
    uint32_t n = 0;
    for (uint32_t r = list->repeat; r != 0; r--) {
        const uint32_t *w = words;
        const uint8_t *o = order;
        while (o != stop) {
            uint32_t kind = *o++;
            if (kind < CP_JOBS_INPUT_JOB) {
                if (job(ctx, kind, n++, fault) != 0) {
                    return 1;
                }
            } else if (kind == CP_JOBS_INPUT_JOB) { /* (the job inlined here again: faster) */
                cp_jobs_input_f32(data, io, w);
                kind = (uint8_t)w[2];
                w += 3;
                if (job(ctx, kind, n++, fault) != 0) {
                    return 1;
                }
            } else if (kind == CP_JOBS_OUTPUT) {
                w = cp_jobs_outputs(list, data, io, w, &o, stop);
            } else {
                w = cp_jobs_move(list, data, io, kind, w);
            }
        }
    }
    return 0;
}

#endif /* COPAPY_GUARD_COMMON_H */
