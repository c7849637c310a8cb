/* libcopapy: the copapy runner as a shared library, for C and C++ programs (and cppyy, ctypes,
 * ros2_control controllers) that load a program image, bind its ports by name and run its
 * ticks without Python. Built from the same runner core (runner/src) as the Python module, the
 * host runner process and the firmware; `make -C runner lib` gives runner/build/libcopapy.so,
 * and the Python package ships it (`python -m copapy.kits paths`).
 *
 * The ABI is frozen and versioned:
 *   * every exported symbol starts with `copapy_` (glibc exports a legacy `step`; a controller
 *     calling a library function of that name once bound to glibc's and crashed);
 *   * every struct the caller passes in starts with `struct_size` (set it to sizeof() of the
 *     struct as your header knows it); fields are only ever appended, so an older caller gets
 *     the prefix it knows and a newer library never writes past it;
 *   * enum values are never renumbered; COPAPY_ABI_VERSION grows when something is appended
 *     (2: fault containment: copapy_options' budget fields, copapy_fault, copapy_get_fault).
 *
 * Faults: every chain runs inside the runner core's POSIX guard (cp_posix_guard, docs/
 * realtime.md "Faults and the safe state"): a SIGSEGV, SIGILL, SIGBUS or SIGFPE in generated
 * code, or a job running past its time budget, stops the program (COPAPY_E_FAULTED, the fault
 * in copapy_get_fault, its OUTPUT channels at their safe values) instead of the host process.
 *
 * Threads: one program is used by one thread at a time (the loop's). Different programs are
 * independent. copapy_loop_run() writes its statistics with relaxed atomic stores, so another
 * thread may read them with __atomic_load_n while it runs.
 *
 * A minimal consumer (see runner/lib/example.c):
 *
 *     copapy_program *p;
 *     copapy_error err = {sizeof err};
 *     if (copapy_load_file("pid.cpim", NULL, &p, &err) != COPAPY_OK) { puts(err.message); ... }
 *     copapy_port sp = {sizeof sp}, u = {sizeof u};
 *     copapy_port_find(p, "setpoint", &sp, &err);
 *     copapy_port_find(p, "ctrl.out0", &u, &err);
 *     double x = 1.0, y;
 *     copapy_write(p, sp.index, &x, 1);
 *     copapy_tick(p);                      // one tick: the tasks released now run, LET applied
 *     copapy_read(p, u.index, &y, 1);
 *     copapy_free(p);
 */
#ifndef COPAPY_COPAPY_H
#define COPAPY_COPAPY_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/contract.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COPAPY_ABI_VERSION 2u

#if defined(COPAPY_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define COPAPY_API __attribute__((visibility("default")))
#else
#define COPAPY_API
#endif

/* Results of every function that can fail. */
typedef enum copapy_status {
    COPAPY_OK = 0,
    COPAPY_E_ARGUMENT = 1,   /* NULL pointer, struct_size too small, index or count out of range */
    COPAPY_E_IMAGE = 2,      /* the image was rejected; copapy_error.code is the load error of
                              * docs/image.md (1 TRUNCATED, 2 MAGIC, ... 10 ARGUMENT) */
    COPAPY_E_NO_PORT = 3,    /* no port of that name (the message lists the ports) */
    COPAPY_E_NOMEM = 4,
    COPAPY_E_IO = 5,         /* a file could not be read */
    COPAPY_E_READ_ONLY = 6,  /* writing a port the program computes (an output, a constant) */
    COPAPY_E_FAULTED = 7,    /* the program faulted and is stopped until copapy_reset */
    COPAPY_E_SYSTEM = 8,     /* the operating system refused (thread, clock) */
    COPAPY_E_STOPPED = 9     /* copapy_loop_run: a hook asked to stop */
} copapy_status;

typedef struct copapy_error {
    uint32_t struct_size;    /* sizeof(copapy_error) */
    int32_t status;          /* copapy_status */
    uint32_t code;           /* COPAPY_E_IMAGE: the runner's load error code, else 0 */
    uint32_t detail;         /* e.g. the offending section or patch */
    char name[32];           /* "IMAGE/CRC", "NO_PORT", ... */
    char message[256];       /* human readable, says what to do */
} copapy_error;

/* Element types (COPAPY_F32 ...), roles of ports (COPAPY_INPUT ...) and I/O channel kinds
 * (COPAPY_GPIO ...): the rows of copapy/contract.h, the one declaration the runner and the
 * Python package share. */
#define COPAPY_CONTRACT_DTYPE(N, code, bytes, io, py) COPAPY_##N = code,
#define COPAPY_CONTRACT_CODE(N, code, ...) COPAPY_##N = code,
enum { CP_DTYPE_TABLE(COPAPY_CONTRACT_DTYPE) };
enum { CP_PORT_ROLE_TABLE(COPAPY_CONTRACT_CODE) };
enum { CP_IO_KIND_TABLE(COPAPY_CONTRACT_CODE) };

/* copapy_options.flags */
enum {
    /* a job's cost is its declared wcet (simulation, as LocalTarget); default: measured */
    COPAPY_DETERMINISTIC = 1u,
    /* do not time the chains (no clock reads; exec times in the statistics stay 0) */
    COPAPY_NO_MEASURE = 2u,
    /* ABI 2: no time budget (a chain that never returns is not stopped) */
    COPAPY_NO_BUDGET = 4u,
    /* also load a format-1 image, which carries machine code (unverified; docs/image.md):
     * only for fault-containment tests. Default: format 2 only, built from the stencil table */
    COPAPY_ALLOW_CODE = 8u
};

typedef struct copapy_options {
    uint32_t struct_size;    /* sizeof(copapy_options) */
    uint32_t flags;          /* COPAPY_DETERMINISTIC | COPAPY_NO_MEASURE */
    uint64_t tick_ns;        /* scheduler tick; 0: the program's own (the largest that divides
                              * every period and offset; 1 ms without periodic tasks) */
    /* appended in ABI 2: a job may use budget_factor x its task's budget (cp.Task budget=,
     * else wcet=, else its period) of CPU time, at least budget_min_ns, before it is stopped
     * (fault kind COPAPY_FAULT_TIMEOUT). 0: the defaults, 10 and 20 ms. The supervisor that
     * watches it (one per process, SCHED_FIFO 90 where permitted) polls every budget_min_ns / 2
     * as the first program loaded sets it. */
    uint32_t budget_factor;
    uint32_t reserved;
    uint64_t budget_min_ns;
} copapy_options;

typedef struct copapy_program copapy_program;  /* opaque */

typedef struct copapy_port {
    uint32_t struct_size;    /* sizeof(copapy_port) */
    uint32_t index;          /* what copapy_read/copapy_write take */
    const char *name;        /* valid until copapy_free */
    uint32_t offset;         /* byte offset in the data region */
    uint32_t count;          /* elements (1 for a scalar) */
    uint8_t dtype;           /* COPAPY_F32 ... */
    uint8_t role;            /* COPAPY_INPUT ... */
    uint16_t task;           /* owning task, 0xFFFF: none */
} copapy_port;

typedef struct copapy_task_stats {
    uint32_t struct_size;    /* sizeof(copapy_task_stats) */
    uint32_t reserved;
    uint64_t runs;
    uint64_t skipped;        /* releases skipped because the previous job was still pending */
    uint64_t overruns;
    uint64_t exec_ns_max;
    uint64_t exec_ns_sum;
} copapy_task_stats;

/* ---- faults (ABI 2) */

/* copapy_fault.kind: the values of the runner core's cp_fault_kind (COPAPY_FAULT_SIGSEGV ...) */
#define COPAPY_CONTRACT_FAULT(N, code, name) COPAPY_FAULT_##N = code,
enum { COPAPY_FAULT_NONE = 0, CP_FAULT_TABLE(COPAPY_CONTRACT_FAULT) };

typedef struct copapy_fault {
    uint32_t struct_size;    /* sizeof(copapy_fault) */
    uint32_t kind;           /* COPAPY_FAULT_*; 0: the program has not faulted */
    uint32_t task;           /* the faulting task; 0xFFFFFFFF: none */
    uint32_t code;           /* the signal's si_code */
    uint64_t address;        /* the data address of a memory fault, else 0 */
    uint64_t pc;             /* the interrupted instruction, 0 if unknown */
    uint64_t tick;           /* the tick during which it happened */
    char name[32];           /* "SIGSEGV", "timeout", ... ("none") */
} copapy_fault;

/* ---- library */

/* COPAPY_ABI_VERSION of the loaded library (compare with your header's). */
COPAPY_API uint32_t copapy_abi_version(void);
/* "OK", "NO_PORT", ...; never NULL. */
COPAPY_API const char *copapy_status_name(int status);

/* ---- programs */

/* Validates and loads an image for this machine (options may be NULL). On failure *out is
 * NULL and err (if given) says why. */
COPAPY_API int copapy_load(const void *image, size_t len, const copapy_options *options,
                           copapy_program **out, copapy_error *err);
COPAPY_API int copapy_load_file(const char *path, const copapy_options *options,
                                copapy_program **out, copapy_error *err);
/* Releases everything; NULL is allowed. */
COPAPY_API void copapy_free(copapy_program *program);

COPAPY_API uint32_t copapy_port_count(const copapy_program *program);
COPAPY_API int copapy_port_at(const copapy_program *program, uint32_t index, copapy_port *out);
/* The port called `name`; COPAPY_E_NO_PORT (message: the available names) if there is none. */
COPAPY_API int copapy_port_find(const copapy_program *program, const char *name,
                                copapy_port *out, copapy_error *err);

/* n elements (1 <= n <= count) of a port from element 0, converted from/to double as the
 * Python targets do (float32: round to nearest; int32: truncation, saturated; bool: != 0).
 * Inputs and states may be written; tasks see a written input at their next release. */
COPAPY_API int copapy_write(copapy_program *program, uint32_t port, const double *values,
                            uint32_t n);
COPAPY_API int copapy_read(const copapy_program *program, uint32_t port, double *values,
                           uint32_t n);
/* The data region itself (ports at their offsets), for zero-copy access; *size its bytes. */
COPAPY_API void *copapy_data(copapy_program *program, uint32_t *size);

/* One scheduler tick (docs/realtime.md), then the jobs whose period ends at the next tick and
 * have finished publish, so the outputs computed from this tick's inputs are readable now
 * (what LocalTarget.step(tick) does). COPAPY_E_FAULTED if the program is faulted. */
COPAPY_API int copapy_tick(copapy_program *program);
COPAPY_API int copapy_advance(copapy_program *program, uint64_t ticks);
/* Runs task's chain once, outside the schedule (programs compiled with LocalTarget.compile),
 * guarded like a tick (its budget: the task's, else 60 s); COPAPY_E_FAULTED if it faults. */
COPAPY_API int copapy_run(copapy_program *program, uint32_t task);
/* Time 0, data back to its initial contents, statistics and a fault cleared. */
COPAPY_API void copapy_reset(copapy_program *program);

COPAPY_API uint64_t copapy_tick_ns(const copapy_program *program);
COPAPY_API uint64_t copapy_ticks(const copapy_program *program);
COPAPY_API uint32_t copapy_task_count(const copapy_program *program);
/* ABI 2: the fault that stopped the program (kind 0 if none; copapy_reset clears it). */
COPAPY_API int copapy_get_fault(const copapy_program *program, copapy_fault *out);
COPAPY_API int copapy_get_task_stats(const copapy_program *program, uint32_t task,
                                 copapy_task_stats *out);

/* Simulated I/O channels (kind COPAPY_GPIO..COPAPY_DAC, channel 0..255): what a program's
 * INPUT bindings sample and its OUTPUT bindings drive. */
COPAPY_API double copapy_io_get(const copapy_program *program, int kind, int channel);
COPAPY_API int copapy_io_set(copapy_program *program, int kind, int channel, double value);

/* ---- a periodic loop (absolute deadlines on CLOCK_MONOTONIC), on the calling thread
 *
 * Each cycle: sleep to the deadline, record the wake-up latency (wake - deadline), call
 * `before` (read the hardware, write the inputs), copapy_tick the program (if given), call
 * `after` (read the outputs, write the commands). A cycle that ends after the next deadline
 * skips every deadline that has passed and counts them in `missed` (as cyclictest and
 * ros2_control do) instead of running catch-up cycles back to back. A faulted program stops being ticked; the hooks keep running
 * (so they can command a safe state) and the status says FAULTED. */

enum {
    COPAPY_LOOP_FIFO = 1u,          /* SCHED_FIFO at `priority` for this thread */
    COPAPY_LOOP_MLOCK = 2u,         /* mlockall(MCL_CURRENT | MCL_FUTURE) (process-wide) */
    COPAPY_LOOP_SLACK1 = 4u,        /* timer slack 1 ns for this thread */
    COPAPY_LOOP_DMA_LATENCY0 = 8u   /* hold /dev/cpu_dma_latency at 0 while running */
};

typedef struct copapy_loop_config {
    uint32_t struct_size;           /* sizeof(copapy_loop_config) */
    uint32_t flags;                 /* COPAPY_LOOP_* */
    uint64_t period_ns;             /* 0: the program's tick */
    uint64_t cycles;                /* stop after this many cycles; 0: until *stop != 0 */
    int32_t priority;               /* SCHED_FIFO priority 1..99 (default 80 if 0) */
    int32_t cpu;                    /* pin this thread to a CPU; -1: no pinning */
    copapy_program *program;        /* ticked every cycle; may be NULL (only the hooks run) */
    const int32_t *stop;            /* read with an acquire load every cycle; may be NULL */
    /* hooks, may be NULL; nonzero return stops the loop (COPAPY_E_STOPPED) */
    int (*before)(void *ctx, uint64_t cycle, int64_t wake_ns);
    int (*after)(void *ctx, uint64_t cycle, int64_t wake_ns);
    void *ctx;
    int64_t *latency_ns;            /* optional ring: [cycle % capacity] = wake - deadline (ns) */
    uint64_t latency_capacity;
} copapy_loop_config;

/* copapy_loop_stats.rt: what the real-time set-up achieved */
enum { COPAPY_RT_FIFO = 1u, COPAPY_RT_MLOCK = 2u, COPAPY_RT_SLACK1 = 4u,
       COPAPY_RT_DMA_LATENCY0 = 8u };

typedef struct copapy_loop_stats {
    uint32_t struct_size;           /* sizeof(copapy_loop_stats) */
    uint32_t rt;                    /* COPAPY_RT_* achieved */
    uint64_t cycles;                /* cycles run */
    uint64_t missed;                /* deadlines skipped because a cycle ended after them */
    uint64_t overruns;              /* cycles whose work ended after the next deadline */
    int64_t latency_max_ns;
    int64_t latency_min_ns;
    int64_t latency_sum_ns;
    int64_t work_max_ns;            /* longest before + tick + after */
    int32_t status;                 /* COPAPY_OK while running / at a normal end */
    uint32_t running;               /* 1 from the start of the loop to its end */
} copapy_loop_stats;

/* Runs the loop until `cycles` cycles, *stop, a hook's request or an error. Statistics are
 * updated every cycle with relaxed atomic stores (readable from another thread). Returns
 * COPAPY_OK, COPAPY_E_STOPPED, COPAPY_E_FAULTED (program faulted; the loop ran on with the
 * hooks until stopped) or an argument/system error. The thread's scheduling policy and timer
 * slack are restored at the end; mlockall stays. */
COPAPY_API int copapy_loop_run(const copapy_loop_config *config, copapy_loop_stats *stats,
                               copapy_error *err);

/* CLOCK_MONOTONIC in ns (the loop's clock). */
COPAPY_API int64_t copapy_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_COPAPY_H */
