/* What the host platforms' guards (platform_posix.c, platform_win32.c) share: the fault record
 * of a chain that left the CPU state changed, the copy of a caught fault to the caller's
 * record, and the budget supervisor's rule for when to interrupt a job. The ways of catching
 * a fault and of interrupting a thread are each platform's own. */
#ifndef COPAPY_GUARD_COMMON_H
#define COPAPY_GUARD_COMMON_H

#include <stdint.h>

#include "copapy/runner.h"

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

#endif /* COPAPY_GUARD_COMMON_H */
