/* The real-time set-up of copapy_loop_run on Windows (abi_internal.h, "the loop's platform
 * part"): COPAPY_LOOP_FIFO raises the thread to THREAD_PRIORITY_TIME_CRITICAL (the highest
 * of a normal-priority process), COPAPY_LOOP_MLOCK grows the working set so the loop's pages
 * stay resident, CPU pinning is an affinity mask; timer slack and cpu_dma_latency have no
 * Windows counterpart and are never reported as achieved. Sleeps go to absolute deadlines through
 * cp_win32_sleep_until (a high-resolution waitable timer), with the system timer at 1 ms while
 * the loop runs. */
#if defined(_WIN32)
#define COPAPY_BUILDING_LIBRARY 1
#define WIN32_LEAN_AND_MEAN 1

#include <windows.h>
#include <mmsystem.h>
#include <stdlib.h>

#include "copapy/copapy.h"
#include "copapy/platform_win32.h"
#include "abi_internal.h"

struct copapy_rt_saved {
    int priority;       /* the thread's priority before */
    DWORD_PTR affinity; /* the thread's affinity mask before (0: unchanged) */
    int period_set;     /* timeBeginPeriod(1) called */
};

copapy_rt_saved *copapy_rt_setup(const copapy_loop_config *c, uint32_t *rt)
{
    uint32_t achieved = 0;
    copapy_rt_saved *saved = calloc(1, sizeof(*saved));
    *rt = 0;
    if (saved == NULL) {
        return NULL;
    }
    HANDLE self = GetCurrentThread();
    saved->priority = GetThreadPriority(self);
    if (c->cpu >= 0 && c->cpu < (int32_t)(8 * sizeof(DWORD_PTR))) {
        saved->affinity = SetThreadAffinityMask(self, (DWORD_PTR)1 << c->cpu);
    }
    if (c->flags & COPAPY_LOOP_MLOCK) {
        SIZE_T lo = 0, hi = 0;
        if (GetProcessWorkingSetSize(GetCurrentProcess(), &lo, &hi) &&
            SetProcessWorkingSetSize(GetCurrentProcess(), lo + (64u << 20), hi + (64u << 20))) {
            achieved |= COPAPY_RT_MLOCK;
        }
    }
    if ((c->flags & COPAPY_LOOP_FIFO) && SetThreadPriority(self, THREAD_PRIORITY_TIME_CRITICAL)) {
        achieved |= COPAPY_RT_FIFO;
    }
    saved->period_set = timeBeginPeriod(1) == TIMERR_NOERROR;
    *rt = achieved;
    return saved;
}

void copapy_rt_restore(copapy_rt_saved *saved, uint32_t achieved)
{
    if (saved == NULL) {
        return;
    }
    HANDLE self = GetCurrentThread();
    if (achieved & COPAPY_RT_FIFO) {
        (void)SetThreadPriority(self, saved->priority);
    }
    if (saved->affinity != 0) {
        (void)SetThreadAffinityMask(self, saved->affinity);
    }
    if (saved->period_set) {
        timeEndPeriod(1);
    }
    free(saved);
}

void copapy_rt_sleep_until(int64_t deadline)
{
    cp_win32_sleep_until(deadline > 0 ? (uint64_t)deadline : 0u);
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int copapy_loop_rt_win32_unavailable;

#endif
