/* The POSIX platform for cp_program_load (mmap'd regions, W^X via mprotect) and the POSIX half
 * of fault containment (docs/realtime.md, "Faults and the safe state"). This is the host
 * platform's interface: on Windows src/platform_win32.c implements it with Win32
 * (VirtualAlloc/VirtualProtect, a vectored exception handler, QueryPerformanceCounter), so
 * libcopapy and the host runner call the same functions there (docs/platforms.md). */
#ifndef COPAPY_PLATFORM_POSIX_H
#define COPAPY_PLATFORM_POSIX_H

#include "copapy/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A static platform whose arch is the architecture this process executes (0 if unknown, so
 * every load fails with CP_ERR_ARCH). Defined where __unix__, __APPLE__ or _WIN32 is. Sealing
 * needs data_offset to be a multiple of the page size, else the load fails with NOMEM. */
const cp_platform *cp_platform_posix(void);

/* The platform's cpu_features hook: the CPU_FEATURES bits of `arch` this CPU executes (x86_64:
 * CPUID, with XGETBV for the operating system's AVX/AVX-512 state; 0 for any other arch),
 * minus those COPAPY_CPU_FEATURES_MASK names (comma- or space-separated feature names, or
 * "all"), read at every call. */
uint64_t cp_posix_cpu_features(void *ctx, uint16_t arch);

/* ---- fault containment
 *
 * cp_posix_guard is a cp_guard_fn. It runs a chain with SIGSEGV, SIGILL, SIGBUS and SIGFPE
 * handled on an alternate signal stack (set up per thread at its first guarded call, unless
 * the thread has one already): a fault inside the chain jumps back into the guard, which
 * returns it as a cp_fault. A fault anywhere else is passed on to the handler that was
 * installed before (or the default action), so a bug in the runner itself still crashes.
 *
 * The time budget is watched by one supervisor thread per process: it samples, every poll
 * interval, which guarded job each thread runs and how much CPU time that thread has used;
 * a job that has used more than its budget is interrupted with CP_POSIX_WATCHDOG_SIGNAL and
 * comes back as CP_FAULT_TIMEOUT. CPU time, not wall time: a job that is preempted (an
 * overloaded machine, --no-rt) is never mistaken for one that does not return. The hot
 * path costs no system call: a sigsetjmp without the signal mask and two relaxed stores. */
#define CP_POSIX_WATCHDOG_SIGNAL SIGXCPU

int cp_posix_guard(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault);

/* What a guard checks after each chain besides the CPU state (cpu_state.h): whether the chain
 * blocked a fault signal or reset a handler, which takes eight system calls (~1.5 us). The
 * ctx of cp_posix_guard and cp_posix_guard_run: NULL checks it (an image from outside the
 * process: the host runner, cp.load, libcopapy); &cp_posix_own_code skips it, for code this
 * process compiled from its own stencils, which makes no system call. */
typedef struct {
    uint8_t check_signals;
    /* the chains are only stencils of a runner table proven to keep the CPU state (a
     * verified, format-2 image, and that table's keeps_cpu_state flag: its proof record from
     * tools/stencil_cpu_state.py; docs/decisions/2026-12-04-stencils-keep-the-cpu-state.md):
     * the jobs of cp_posix_guard_run skip the CPU-state check after each chain
     * (cp_cpu_check). The run still enters the defined state once and gives the caller's
     * back. Never for a format-1 image, nor for a table without the flag (i386's: its
     * stencils use the x87 stack). The Windows guard checks every job whatever this says. */
    uint8_t keeps_cpu_state;
} cp_posix_guard_policy;
extern const cp_posix_guard_policy cp_posix_own_code;
/* format 2 against a table with keeps_cpu_state: from outside, and own_code */
extern const cp_posix_guard_policy cp_posix_verified;
extern const cp_posix_guard_policy cp_posix_own_verified_code;

/* cp_posix_guard_run is a cp_guard_run_fn (cp_sched_config.guard_run): the same containment,
 * armed once (one sigsetjmp) for a run of jobs; each job is then the budget store and the two
 * seq stores around its chain, so faults and budgets are per job as with cp_posix_guard. */
int cp_posix_guard_run(void *ctx, cp_guard_body_fn body, void *arg, cp_fault *fault);

/* cp_posix_guard_jobs is a cp_guard_jobs_fn (cp_sched_config.guard_jobs) for the runs of
 * cp_posix_guard_run: a tick's jobs in one call, each still armed with its own seq and
 * budget, so that nothing but those stores and the progress index lies between two chains. */
int cp_posix_guard_jobs(void *job_ctx, const cp_guard_job_list *list, uint32_t *at,
                        cp_fault *fault);

/* (Re)installs the fault handlers, e.g. after another library replaced them. 0 or -1. */
int cp_posix_guard_install(void);

/* Starts the supervisor (once per process; later calls change nothing and return 0).
 * poll_ns 0: 50 ms (the in-process default; the host runner polls every 2 ms).
 * rt_priority > 0: SCHED_FIFO at that priority (it must preempt a
 * real-time thread that loops); if that is not permitted it runs at normal priority.
 * cp_posix_guard starts it with the defaults when a job first has a budget. Returns 0, or
 * an errno value. */
int cp_posix_watchdog_start(uint64_t poll_ns, int rt_priority);

/* ---- the job clock
 *
 * cp_posix_clock_ns is a cp_sched_config.clock_ns: monotonic nanoseconds for the execution
 * time of jobs, at the cost of a cycle-counter read where the counter is invariant (x86_64:
 * rdtsc when CPUID says invariant TSC and Linux runs on the tsc clock source; AArch64:
 * cntvct_el0, the architected system counter), calibrated once per process against
 * CLOCK_MONOTONIC over 2 ms (docs/design.md, "The job clock"). Elsewhere, or with the
 * environment variable COPAPY_CLOCK=monotonic, it reads CLOCK_MONOTONIC. Its origin is
 * CLOCK_MONOTONIC's at the calibration; its rate may differ from it by ~1e-4, so use it for
 * durations, not to wait for CLOCK_MONOTONIC deadlines. */
enum {
    CP_POSIX_CLOCK_MONOTONIC = 1, /* clock_gettime(CLOCK_MONOTONIC) */
    CP_POSIX_CLOCK_COUNTER = 2    /* the calibrated cycle counter */
};

/* Chooses (and calibrates) the clock once per process, thread-safe; later calls return the
 * choice at once. cp_posix_clock_ns calls it on first use; call it beforehand to keep the
 * calibration off a measured path. Returns CP_POSIX_CLOCK_*. */
int cp_posix_clock_init(void);

uint64_t cp_posix_clock_ns(void *ctx);

/* CLOCK_MONOTONIC in nanoseconds: the clock of timeouts and periodic deadlines (sessions,
 * the watchdog, loops), which must follow the system clock, not a job clock. */
uint64_t cp_posix_monotonic_ns(void);

/* "tsc", "cntvct" or "monotonic", and the counts per second it reads (1e9 for monotonic). */
const char *cp_posix_clock_name(void);
uint64_t cp_posix_clock_hz(void);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_PLATFORM_POSIX_H */
