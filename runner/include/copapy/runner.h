/* copapy runner core: the frozen C ABI shared by every runner (Python module, host process,
 * bare-metal and Zephyr firmware, cppyy kits).
 *
 * Rules of this header: structs carry `struct_size` and are only ever extended at the end;
 * enum values are never renumbered; CP_RUNNER_ABI_VERSION is bumped when something is added.
 * The core never calls libc in the hot path and never allocates by itself: memory comes from
 * the embedder through cp_platform.
 */
#ifndef COPAPY_RUNNER_H
#define COPAPY_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/contract.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CP_RUNNER_ABI_VERSION 10u
#define CP_IMAGE_FORMAT_VERSION 2u
/* the format that carries code: @cp.jit's own images and runners without a stencil table */
#define CP_IMAGE_FORMAT_VERSION_CODE 1u

/* Architecture ids of docs/image.md. */
enum {
    CP_ARCH_X86_64 = 1,
    CP_ARCH_X86 = 2,
    CP_ARCH_AARCH64 = 3,
    CP_ARCH_ARMV6 = 4,
    CP_ARCH_ARMV7A = 5,
    CP_ARCH_CORTEX_M4 = 6,
    CP_ARCH_CORTEX_M7 = 7,
    CP_ARCH_CORTEX_M55 = 8,
    CP_ARCH_RV32 = 9,
    CP_ARCH_RV64 = 10,
    CP_ARCH_TRICORE = 11
};

/* Load errors, in the order they are checked (contract.h's CP_LOAD_ERROR_TABLE). */
#define CP_CONTRACT_STATUS_ENUM(N, code) CP_ERR_##N = code,
typedef enum cp_status {
    CP_OK = 0,
    CP_LOAD_ERROR_TABLE(CP_CONTRACT_STATUS_ENUM)
    CP_STATUS_COUNT = 1 + CP_TABLE_COUNT(CP_LOAD_ERROR_TABLE) /* OK and the errors */
} cp_status;

/* Bits of an image's CPU_FEATURES section for architecture x86_64 (docs/image.md), in the
 * order of src/copapy/targets/x86_64.toml's [image_features] (tests/test_cpu_features.py
 * checks both and the names of cp_cpu_feature_name against it). */
enum {
    CP_X86_64_AVX = 0,
    CP_X86_64_AVX2 = 1,
    CP_X86_64_FMA = 2,
    CP_X86_64_BMI1 = 3,
    CP_X86_64_BMI2 = 4,
    CP_X86_64_F16C = 5,
    CP_X86_64_MOVBE = 6,
    CP_X86_64_ABM = 7,
    CP_X86_64_XSAVE = 8,
    CP_X86_64_AVX512F = 9,
    CP_X86_64_AVX512BW = 10,
    CP_X86_64_AVX512CD = 11,
    CP_X86_64_AVX512DQ = 12,
    CP_X86_64_AVX512VL = 13
};

typedef struct cp_error {
    uint32_t struct_size;   /* sizeof(cp_error) as known by the caller */
    uint32_t code;          /* cp_status */
    uint32_t detail;        /* e.g. index of the offending patch or section */
    char message[160];      /* NUL-terminated, human readable */
} cp_error;

/* Services the embedder provides; the core itself knows no operating system. */
typedef struct cp_platform {
    uint32_t struct_size;
    uint32_t abi_version;
    uint16_t arch;          /* the architecture whose images this runner executes */
    uint16_t reserved;
    void *ctx;
    /* A writable block of `size` bytes whose address is a multiple of `align`; NULL if none. */
    void *(*region_alloc)(void *ctx, size_t size, size_t align);
    /* Make [base, base + code_len) executable after patching; data beyond stays writable.
     * Also synchronises instruction caches. Returns 0 on success. */
    int (*region_seal)(void *ctx, void *base, size_t code_len, size_t size);
    void (*region_free)(void *ctx, void *base, size_t size);
    size_t max_region_size; /* 0 = no limit */
    /* appended in ABI 3: how a user raises max_region_size (e.g. "copapy-runner --max-memory"),
     * named by the TOO_LARGE error; NULL if it cannot be changed */
    const char *memory_option;
    /* appended in ABI 4: the optional instruction-set features of `arch` this CPU executes,
     * as CPU_FEATURES bits (docs/image.md); an image needing others is refused with
     * CP_ERR_CPU_FEATURES before anything is allocated. NULL (or a platform whose
     * struct_size ends before this field): the architecture's baseline only. */
    uint64_t (*cpu_features)(void *ctx, uint16_t arch);
} cp_platform;

/* cp_platform as ABI 3 knew it (without cpu_features): still accepted by cp_program_load. */
#define CP_PLATFORM_SIZE_ABI3 offsetof(cp_platform, cpu_features)

/* A chain's entry. Stencils are compiled once per architecture, for the System V calling
 * convention of the ELF targets: on Windows x86_64 (whose own convention is Microsoft's) the
 * runner calls them as System V functions, so the same tables serve every operating system
 * and the results stay bit-identical (docs/platforms.md). Elsewhere it is a plain function. */
#if defined(_WIN32) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CP_CHAIN_ABI __attribute__((sysv_abi))
#else
#define CP_CHAIN_ABI
#endif
typedef void(CP_CHAIN_ABI *cp_chain_fn)(void);

typedef struct cp_task_entry {
    cp_chain_fn entry;
    uint32_t period_ns;
    uint32_t offset_ns;
    uint16_t priority;
    uint16_t flags;
    uint32_t wcet_ns;
    /* appended in ABI 3 (TASKS entries of 40 bytes; 0 in older images) */
    uint32_t budget_ns;        /* execution budget; 0: wcet_ns, else the period */
    uint64_t link_timeout_ns;  /* dead-man switch: host link silence that faults the program */
} cp_task_entry;

/* A LET copy (docs/realtime.md): phase 0 at release, 1 at the end of the period. */
typedef struct cp_let_copy {
    uint16_t task;
    uint8_t phase;
    uint8_t reserved;
    uint32_t size;
    uint32_t src;
    uint32_t dst;
} cp_let_copy;

/* An I/O binding: direction CP_DIR_INPUT samples a channel into a slot, CP_DIR_OUTPUT
 * drives a channel; kind is a CP_IO_* kind. */
typedef struct cp_io_binding {
    uint16_t task;
    uint8_t direction;
    uint8_t kind;
    uint16_t channel;
    uint8_t dtype;
    uint8_t reserved;
    uint32_t offset;
    double safe;  /* appended in ABI 3: the value an OUTPUT channel takes in the safe state */
} cp_io_binding;

/* kinds: CP_IO_GPIO ... (contract.h's CP_IO_KIND_TABLE, CP_IO_KIND_COUNT of them) */

/* A loaded program. Embeddable: no hidden allocation; all memory is the one region. */
typedef struct cp_program {
    uint32_t struct_size;
    uint32_t loaded;        /* 1 once fully loaded */
    uint8_t *base;          /* region base: code at base, data at base + data_offset */
    size_t region_size;
    uint32_t code_size;
    uint32_t data_offset;
    uint32_t data_size;
    uint32_t task_count;
    cp_task_entry *tasks;   /* inside the region, after the data */
    const cp_platform *platform;
    /* appended in ABI 2: the scheduler's tables and the initial data (for reset), all
     * inside the region. cp_program_load groups the LET copies by (task, phase) and the I/O
     * bindings by (task, direction), keeping the image's order inside each group (the only
     * order the scheduler applies them in); cp_sched_init relies on that grouping. */
    uint32_t let_copy_count;
    uint32_t io_binding_count;
    cp_let_copy *let_copies;
    cp_io_binding *io_bindings;
    uint8_t *initial_data;  /* initial_size bytes (data_size before ABI 8) */
    /* appended in ABI 8: the bytes of the data region that initial_data holds, the image's
     * DATA_INIT; the rest of the region starts as zeros and holds no copy (a temporary or a
     * @cp.jit argument's home costs its size once, not twice): cp_program_reset_data */
    uint32_t initial_size;
} cp_program;

/* Validate a whole image without side effects (every bound, CRC, version, architecture,
 * every patch descriptor and record). */
cp_status cp_image_validate(const uint8_t *image, size_t len, uint16_t arch, cp_error *err);

/* Validate, allocate, copy, patch and seal into `out`. On failure `out` is left untouched,
 * so a program previously held in another cp_program keeps running. */
cp_status cp_program_load(cp_program *out, const uint8_t *image, size_t len,
                          const cp_platform *platform, cp_error *err);

/* Run one task once (task < task_count, checked). Never allocates. */
cp_status cp_program_run(const cp_program *prog, uint32_t task);

/* Release the program's region. Safe on a zeroed or already unloaded program. */
void cp_program_unload(cp_program *prog);

/* Appended in ABI 8: the data region back to what cp_program_load left, whatever a crafted
 * image's code wrote into it: initial_data's bytes, then zeros (written only into 64-byte
 * chunks that are not zero already). cp_sched_reset calls it. */
void cp_program_reset_data(const cp_program *prog);

static inline uint8_t *cp_program_data(const cp_program *prog)
{
    return prog->base + prog->data_offset;
}

/* ---- Fault containment (docs/realtime.md, "Faults and the safe state") -------------------
 *
 * A chain runs inside a platform GUARD: POSIX runs it with fault signals handled on an
 * alternate signal stack and jumps back into the guard (runner/src/platform_posix.c); the
 * Cortex-M firmware's fault handlers and its budget timer return into the guard
 * (runner/baremetal). The core only calls the guard and decides what a fault means: the
 * scheduler stops, every output channel takes its safe value, and the fault is kept until
 * cp_sched_reset. */

/* Fault kinds: contract.h's CP_FAULT_TABLE (CP_FAULT_SIGSEGV ... CP_FAULT_CPU_STATE). */
#define CP_CONTRACT_FAULT_ENUM(N, code, name) CP_FAULT_##N = code,
typedef enum cp_fault_kind {
    CP_FAULT_NONE = 0,
    CP_FAULT_TABLE(CP_CONTRACT_FAULT_ENUM)
    CP_FAULT_KIND_COUNT = 1 + CP_TABLE_COUNT(CP_FAULT_TABLE) /* none and the faults */
} cp_fault_kind;

#define CP_FAULT_NO_TASK 0xFFFFFFFFu

typedef struct cp_fault {
    uint32_t kind;       /* cp_fault_kind; 0: no fault */
    uint32_t task;       /* the faulting task, CP_FAULT_NO_TASK if none (LINK) */
    uint64_t address;    /* data address of a memory fault (si_addr, MMFAR/BFAR), else 0 */
    uint64_t pc;         /* the interrupted instruction if the platform knows it, else 0 */
    uint32_t code;       /* platform detail: si_code; CFSR (| HFSR for a HardFault) */
    uint32_t reserved;
    uint64_t tick;       /* index of the tick during which it happened */
} cp_fault;

/* Runs entry() so that a synchronous fault inside it, or running past budget_ns (0: no
 * limit), comes back here instead of ending the runner. Returns 0 when entry returned;
 * otherwise fills fault->kind, address, pc and code and returns nonzero. */
typedef int (*cp_guard_fn)(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault);

/* Appended in ABI 5: a guard armed once around a run of jobs. It calls body(arg, job,
 * job_ctx) with fault containment armed; body runs each chain as job(job_ctx, entry,
 * budget_ns, fault), a cp_guard_fn that guards exactly that chain with its own budget, as a
 * cp_guard_fn call would, without arming anew. A chain that faults or overruns its budget
 * does not come back into body: cp_guard_run_fn returns nonzero with fault->kind, address,
 * pc and code filled. Otherwise it returns what body returned. A guard that cannot arm (no
 * containment on this thread) calls body with job NULL: body then calls the chains
 * directly. */
typedef int (*cp_guard_body_fn)(void *arg, cp_guard_fn job, void *job_ctx);
typedef int (*cp_guard_run_fn)(void *ctx, cp_guard_body_fn body, void *arg, cp_fault *fault);

/* Appended in ABI 6, changed in ABI 7, 9 and 10: the jobs of one or more ticks in one call
 * of the run's platform. The list: `count` entries of `order`, each a task index i below
 * CP_JOBS_INPUT_JOB (a job: the chain tasks[i].entry, guarded with the budget budget_ns[i],
 * or `budget` for every job if budget_ns is NULL) or an entry that takes the next three words
 * (w0, w1, w2) of `copies`:
 *   CP_JOBS_COPY    w2 bytes from data + w1 to data + w0 (ranges that do not overlap);
 *   CP_JOBS_INPUT   (ABI 9) io[w1] into the slot data + w0 of dtype (uint8_t)w2, converted as
 *                   the scheduler's bindings convert (float32 and int32 saturate, bool 0/1);
 *                   w1 CP_JOBS_NO_CHANNEL: 0.0;
 *   CP_JOBS_OUTPUT  (ABI 9) the slot data + w0 of dtype (uint8_t)w2 as a double into io[w1];
 *                   w1 CP_JOBS_NO_CHANNEL: nothing;
 *   CP_JOBS_INPUT_JOB (ABI 10) a float32 INPUT and the job after it in one entry: io[w1]
 *                   into the float32 slot data + w0 as CP_JOBS_INPUT converts it, then the
 *                   job of task (uint8_t)w2 (a job for *at);
 * or CP_JOBS_ROW (ABI 9, no words): if `rows` is set, a trace row: the `row_ranges` ranges
 * (data + row_offset[r], row_size[r] bytes) one after the other into the ring slot *row_next
 * of `rows` past its 8 bytes of time (left to the caller), then *row_next advances, to 0 at
 * `row_capacity`. The whole list `repeat` times.
 * Inside a run of that platform's cp_guard_run_fn (job_ctx as its body received it), each
 * job is guarded exactly as job(job_ctx, entry, budget, fault) would guard it, one after
 * another. Returns 0 when every chain returned, else nonzero with fault filled for the job
 * *at (a state its chain left changed); no job or move after it runs. *at counts jobs only,
 * over the repeats: the n-th job of the whole call is n; it is set before a fault that jumps
 * back out of the run (so the caller knows which job it came from) and may be left stale
 * otherwise. */
#define CP_JOBS_COPY 0xFFu
#define CP_JOBS_INPUT 0xFEu
#define CP_JOBS_OUTPUT 0xFDu
#define CP_JOBS_ROW 0xFCu
#define CP_JOBS_INPUT_JOB 0xFBu
#define CP_JOBS_NO_CHANNEL 0xFFFFFFFFu
typedef struct cp_guard_job_list {
    const cp_task_entry *tasks;
    const uint64_t *budget_ns;  /* indexed by task; NULL: `budget` for every job */
    uint64_t budget;
    const uint8_t *order;
    uint32_t count;
    uint32_t repeat;
    uint8_t *data;              /* the moves' base (NULL if there are none) */
    const uint32_t *copies;     /* 3 words per COPY, INPUT or OUTPUT entry of `order`, in order */
    /* appended in ABI 9: the simulated I/O of INPUT and OUTPUT entries, the trace ring of ROW
     * entries (rows NULL: ROW entries do nothing) */
    double *io;
    uint8_t *rows;
    uint64_t row_capacity;
    uint64_t *row_next;
    const uint32_t *row_offset;
    const uint32_t *row_size;
    uint32_t row_ranges;
    uint32_t row_bytes;         /* a row's size, its 8 bytes of time included */
} cp_guard_job_list;
typedef int (*cp_guard_jobs_fn)(void *job_ctx, const cp_guard_job_list *list, uint32_t *at,
                                cp_fault *fault);

/* The time a job of `task` may take before the supervisor stops it: the task's budget_ns,
 * else its wcet_ns, else its period, times `factor`, at least min_ns; request_ns for a task
 * that declares none of them (run on request). 0: no limit (always if factor is 0). */
uint64_t cp_task_budget_ns(const cp_task_entry *task, uint32_t factor, uint64_t min_ns,
                           uint64_t request_ns);

/* Name of a fault kind ("SIGSEGV", "UsageFault", "timeout", ...). */
const char *cp_fault_name(uint32_t kind);

/* ---- Scheduler (docs/realtime.md) ------------------------------------------------------ */

#define CP_MAX_TASKS 32u

typedef struct cp_task_stats {
    uint64_t runs;
    uint64_t skipped;
    uint64_t overruns;
    uint64_t exec_ns_max;
    uint64_t exec_ns_sum;
} cp_task_stats;

typedef struct cp_sched_config {
    uint32_t struct_size;
    uint32_t deterministic;  /* 1: job cost = declared wcet_ns; 0: measured with clock_ns */
    uint64_t tick_ns;
    uint64_t (*clock_ns)(void *ctx);  /* monotonic clock for measuring chains; may be NULL */
    void *clock_ctx;
    double (*io_read)(void *ctx, uint8_t kind, uint16_t channel);   /* may be NULL: 0.0 */
    void (*io_write)(void *ctx, uint8_t kind, uint16_t channel, double value);  /* may be NULL */
    void *io_ctx;
    /* appended in ABI 3: fault containment (NULL guard: chains are called directly) and the
     * time budget of every job (cp_task_budget_ns; budget_factor 0: no time limit) */
    cp_guard_fn guard;
    void *guard_ctx;
    uint32_t budget_factor;
    uint32_t reserved;
    uint64_t budget_min_ns;
    /* appended in ABI 5: the same containment armed once per tick's releases (guard_ctx is
     * its ctx); used instead of guard when set. NULL: guard, per job. */
    cp_guard_run_fn guard_run;
    /* appended in ABI 6: guard_run's platform runs a tick's jobs in one call (a planned tick
     * whose jobs have no release work, cp_sched_set_plan). NULL: a call per job. */
    cp_guard_jobs_fn guard_jobs;
} cp_sched_config;

/* cp_sched_config as ABI 3 and 4 knew it (without guard_run): still accepted by
 * cp_sched_init. */
#define CP_SCHED_CONFIG_SIZE_ABI3 offsetof(cp_sched_config, guard_run)

/* Per-tick input samples written to a slot before the releases of tick k (k < count). */
typedef struct cp_sched_feed {
    uint32_t offset;   /* data offset */
    uint32_t size;     /* bytes per sample */
    const uint8_t *samples;  /* count * size bytes, owned by the caller */
    uint64_t count;
    uint64_t first_tick;
} cp_sched_feed;

#define CP_MAX_FEEDS 16u
#define CP_MAX_TRACE_RANGES 64u

typedef struct cp_sched_task_state {
    uint8_t pending;
    uint8_t reserved[7];
    uint64_t remaining_ns;
} cp_sched_task_state;

/* Embeddable scheduler state; all fields are private to sched.c except the statistics. */
typedef struct cp_sched {
    uint32_t struct_size;
    uint32_t task_count;
    const cp_program *prog;
    cp_sched_config cfg;
    uint64_t tick;           /* index of the next tick to process */
    uint64_t now_ns;         /* time of the next tick = tick * tick_ns */
    uint8_t order[CP_MAX_TASKS];  /* task indices by priority */
    cp_sched_task_state state[CP_MAX_TASKS];
    cp_task_stats stats[CP_MAX_TASKS];
    uint32_t feed_count;
    cp_sched_feed feeds[CP_MAX_FEEDS];
    /* trace: rows of (uint64 t_ns, ranges...) in a caller-provided ring buffer */
    uint32_t trace_range_count;
    uint32_t trace_row_size;
    uint32_t trace_offset[CP_MAX_TRACE_RANGES];
    uint32_t trace_size[CP_MAX_TRACE_RANGES];
    uint8_t *trace_buf;
    uint64_t trace_capacity;  /* rows */
    uint64_t trace_rows;      /* rows written in total (the newest is at (rows-1) % capacity) */
    /* appended in ABI 2, private to sched.c: the schedule in ticks and each task's slice of
     * the (grouped) LET copy and I/O binding tables, precomputed by cp_sched_init so that a
     * tick needs neither a 64-bit division nor a table scan */
    uint64_t next_event;                  /* tick index of the earliest next release */
    uint64_t next_release[CP_MAX_TASKS];  /* tick index of each periodic task's next release */
    uint64_t period_ticks[CP_MAX_TASKS];  /* 0: not scheduled (period_ns 0) */
    uint64_t offset_ticks[CP_MAX_TASKS];
    uint32_t copies[CP_MAX_TASKS][3];     /* RELEASE copies [c0, c1), PUBLISH copies [c1, c2) */
    uint32_t bindings[CP_MAX_TASKS][3];   /* INPUT bindings [b0, b1), OUTPUT bindings [b1, b2) */
    uint64_t trace_next;                  /* ring slot of the next row = trace_rows % capacity */
    /* appended in ABI 3: the fault that stopped the program (kind 0: none) and each task's
     * budget (cp_task_budget_ns at init) */
    cp_fault fault;
    uint64_t budget_ns[CP_MAX_TASKS];
    /* appended in ABI 5, private: 0 if no job ever costs time in the processor model (a
     * deterministic run where no task declares a wcet) */
    uint32_t job_costs;
    uint32_t reserved5;
    /* appended after ABI 5, private: the hyperperiod plan (cp_sched_set_plan), in the caller's
     * buffer of plan_capacity bytes, plan_ops of them used (0: no plan) */
    uint8_t *plan;
    uint32_t plan_capacity;
    uint32_t plan_ops;
    uint64_t plan_start;    /* the first tick the plan describes (the latest first release) */
    uint64_t plan_period;   /* ticks in the plan (the hyperperiod) */
    uint64_t plan_tick;     /* the tick plan_at belongs to (UINT64_MAX: none) */
    uint32_t plan_at;       /* byte where tick plan_tick starts */
    uint32_t sim_io_channels; /* channels per kind of sim_io */
    double *sim_io;         /* the simulated I/O the bindings move directly (cp_sched_set_sim_io) */
    /* appended in ABI 7, private: the bare cycle (where every tick of the plan is bare and
     * drives no outputs): one hyperperiod as a guard_jobs list in the plan's buffer, its copies
     * (4-aligned) and order at these bytes, cycle_count entries and cycle_jobs jobs (0: none) */
    uint32_t plan_cycle_copies;
    uint32_t plan_cycle_order;
    uint32_t plan_cycle_count;
    uint32_t plan_cycle_jobs;
    /* appended in ABI 9, private: the cycle is for every plan whose ticks have no feeds (not
     * only bare ones); whether it moves simulated I/O (INPUT, OUTPUT entries: only with
     * sim_io); the byte of its order without ROW entries (for a run without a trace) */
    uint32_t plan_cycle_io;
    uint32_t plan_cycle_rowless;
} cp_sched;

/* The largest tick every task period and offset is a multiple of (0 if no task is periodic):
 * the natural tick for running the program. */
uint64_t cp_program_tick_ns(const cp_program *prog);

/* Check the program's tasks against the tick and set up; time starts at 0. The caller sets
 * s->struct_size = sizeof(cp_sched) (and cfg->struct_size) first, as for cp_program. */
cp_status cp_sched_init(cp_sched *s, const cp_program *prog, const cp_sched_config *cfg,
                        cp_error *err);

/* Bytes a plan of the whole hyperperiod needs (5 a tick, 2 a release, 12 a PUBLISH copy; where
 * every tick's jobs are bare and drive no outputs, the bare cycle besides: 13 a PUBLISH copy, 1
 * a release, up to 3 bytes of alignment), 0 if the program is never planned (no periodic task,
 * a hyperperiod of more than max_ticks ticks, more than 65,535 LET copies). */
uint64_t cp_sched_plan_size(const cp_sched *s, uint64_t max_ticks);

/* Flatten one hyperperiod of releases and publications into `ops` (capacity bytes, owned by
 * the caller, kept until the scheduler is no longer used; cp_sched_plan_size says how many
 * are needed) so that cp_sched_advance walks them instead of deciding every tick.
 * Only where it is exact: deterministic, no wcet (every job finishes in its tick), untimed
 * (clock_ns NULL), a job function fixed for the advance (guard_run armed for all ticks, or no
 * guard_run). Returns the bytes used, 0 if the program is not planned (the general path, with
 * the same results). ops NULL: no plan. Call after cp_sched_init (which drops the plan). */
uint32_t cp_sched_set_plan(cp_sched *s, uint8_t *ops, uint32_t capacity);

/* Simulated I/O that the INPUT and OUTPUT bindings read and write directly instead of
 * calling io_read and io_write: CP_IO_KIND_COUNT kinds of `channels` doubles, kind k's channel
 * c at io[(k - 1) * channels + c] (outside: reads 0.0, writes dropped), the same array the
 * config's io_read and io_write use (they still drive the safe state). io NULL: the
 * callbacks. Call after cp_sched_init. */
void cp_sched_set_sim_io(cp_sched *s, double *io, uint32_t channels);

/* Process the next tick (at s->now_ns) as docs/realtime.md describes. Never allocates. */
void cp_sched_tick(cp_sched *s);

/* Process `ticks` ticks, stopping at a fault. With a guard_run, one guarded run spans them
 * (each job keeps its own guard and budget). */
void cp_sched_advance(cp_sched *s, uint64_t ticks);

/* Publish the jobs whose period ends exactly at the next tick's time and that have finished:
 * the first phase of that tick, done now so that the state at time now_ns is visible (a
 * simulation that stops at T shows the outputs of every period ending at or before T). */
void cp_sched_settle(cp_sched *s);

/* Time 0, statistics and pending jobs cleared, data region back to its initial contents; a
 * fault is cleared too. */
void cp_sched_reset(cp_sched *s);

/* Drives every OUTPUT binding's channel to its safe value (docs/realtime.md). */
void cp_sched_safe_state(const cp_sched *s);

/* The outputs of `s` that `next` does not drive take their safe value (a program replaced by
 * `next`, which takes the others over at its first publication). next may be NULL: all. */
void cp_sched_release_outputs(const cp_sched *s, const cp_program *next);

/* Stops the program with a fault (kind != 0; its tick is set to the current tick): the safe
 * state is applied and cp_sched_tick does nothing until cp_sched_reset. A fault during a
 * tick (from the guard) is recorded the same way. */
void cp_sched_fail(cp_sched *s, const cp_fault *fault);

/* The fault that stopped the program, or NULL. */
static inline const cp_fault *cp_sched_fault(const cp_sched *s)
{
    return s->fault.kind != CP_FAULT_NONE ? &s->fault : (const cp_fault *)0;
}

cp_status cp_sched_add_feed(cp_sched *s, const cp_sched_feed *feed, cp_error *err);
void cp_sched_clear_feeds(cp_sched *s);

/* Record the given shared ranges after every tick into buf (capacity rows of row_size bytes,
 * row_size = 8 + sum(sizes)). Passing count 0 disables tracing. */
cp_status cp_sched_set_trace(cp_sched *s, const uint32_t *offsets, const uint32_t *sizes,
                             uint32_t count, uint8_t *buf, uint64_t capacity, cp_error *err);

/* CRC-32 as used by the image trailer (zlib-compatible). */
uint32_t cp_crc32(uint32_t crc, const uint8_t *data, size_t len);

/* Name of a status code, for messages. */
const char *cp_status_name(cp_status status);

/* Name of CPU_FEATURES bit `bit` of architecture `arch` ("avx2"), NULL if there is none. */
const char *cp_cpu_feature_name(uint16_t arch, uint32_t bit);

/* The CPU_FEATURES bits this runner knows for `arch` (0: the architecture has none). */
uint64_t cp_cpu_features_known(uint16_t arch);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_RUNNER_H */
