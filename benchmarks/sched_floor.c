/* Where a timed simulation tick goes: the chains of an image back to back, the chains with a
 * clock read after each (the floor of timing every job), and the scheduler untimed and timed,
 * set up as LocalTarget does (guard, watchdog budgets, simulated I/O). docs/design.md, "The
 * job clock"; benchmarks/RESULTS.md.
 *
 *     PYTHONPATH=src python benchmarks/bench_sim.py --image /tmp/pid10.img
 *     cc -std=c11 -O2 -Irunner/include -Irunner/src -pthread benchmarks/sched_floor.c \
 *         runner/src/[a-z]*.c -o /tmp/sched_floor && /tmp/sched_floor /tmp/pid10.img
 *     valgrind --tool=callgrind /tmp/sched_floor /tmp/pid10.img timed   # instructions
 *
 * ns per job, CPU time of the process, best of 15 runs of 20,000 ticks (every task is
 * released every tick in that image). The scheduler rows arm the guard once per advance
 * and run a tick's jobs in one cp_posix_guard_jobs call, as LocalTarget does; the last two
 * rows: the per-job guard
 * (cp_posix_guard alone, as the host runner and the firmware), and no guard at all. The
 * scheduler walks its hyperperiod plan (cp_sched_set_plan) as LocalTarget's does; NO_PLAN=1:
 * the per-tick decisions; NO_GUARD=1 with untimed: the scheduler without a guard. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copapy/platform_posix.h"
#include "copapy/runner.h"
#include "load_image.h"

enum { TICKS = 20000, ROUNDS = 15 };

static double io[4][256];
static uint64_t sink;

static double read_io(void *ctx, uint8_t kind, uint16_t channel)
{
    (void)ctx;
    return kind >= 1 && kind <= 4 ? io[kind - 1][channel & 255u] : 0.0;
}

static void write_io(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    (void)ctx;
    if (kind >= 1 && kind <= 4) {
        io[kind - 1][channel & 255u] = value;
    }
}

static uint64_t monotonic_ns(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* the chains alone, tick after tick; with a clock: one read after each */
static double chains(const cp_program *prog, uint64_t (*clock)(void *))
{
    double best = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = cpu_s();
        for (int t = 0; t < TICKS; t++) {
            for (uint32_t i = 0; i < prog->task_count; i++) {
                prog->tasks[i].entry();
                if (clock != NULL) {
                    sink += clock(NULL);
                }
            }
        }
        double dt = cpu_s() - t0;
        best = dt < best ? dt : best;
    }
    return best / ((double)TICKS * prog->task_count) * 1e9;
}

/* the chains with their LET copies and nothing else (every task released every tick; the
 * copies of this image are 4-byte slots): the publish copies of all tasks, then each task's
 * release copies and its chain; the floor of any loop that keeps the jobs apart */
static void copy4(uint8_t *data, const cp_let_copy *c)
{
    memcpy(data + c->dst, data + c->src, 4);
}

static double chains_with_copies(const cp_program *prog)
{
    enum { MAX = 256 };
    uint8_t *data = cp_program_data(prog);
    const cp_let_copy *pub[MAX], *rel[MAX];
    uint32_t npub = 0, nrel[CP_MAX_TASKS + 1] = {0};
    for (uint32_t i = 0; i < prog->task_count; i++) { /* release copies grouped by task */
        nrel[i + 1] = nrel[i];
        for (uint32_t k = 0; k < prog->let_copy_count && nrel[i + 1] < MAX; k++) {
            const cp_let_copy *c = &prog->let_copies[k];
            if (c->size != 4) {
                return 0.0; /* not this image */
            }
            if (c->task == i && c->phase == 0) {
                rel[nrel[i + 1]++] = c;
            } else if (c->task == i && npub < MAX) {
                pub[npub++] = c;
            }
        }
    }
    double best = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = cpu_s();
        for (int t = 0; t < TICKS; t++) {
            for (uint32_t k = 0; k < npub; k++) {
                copy4(data, pub[k]);
            }
            for (uint32_t i = 0; i < prog->task_count; i++) {
                for (uint32_t k = nrel[i]; k < nrel[i + 1]; k++) {
                    copy4(data, rel[k]);
                }
                prog->tasks[i].entry();
            }
        }
        double dt = cpu_s() - t0;
        best = dt < best ? dt : best;
    }
    return best / ((double)TICKS * prog->task_count) * 1e9;
}

enum { NO_GUARD, GUARD_PER_JOB, GUARD_PER_TICK };

static double scheduled(const cp_program *prog, uint64_t (*clock)(void *), int guard)
{
    static cp_sched s;
    memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    cp_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.struct_size = sizeof(cfg);
    cfg.deterministic = 1;
    cfg.tick_ns = cp_program_tick_ns(prog);
    cfg.clock_ns = clock;
    cfg.io_read = read_io;
    cfg.io_write = write_io;
    cfg.guard = guard != NO_GUARD ? cp_posix_guard : NULL;
    cfg.guard_run = guard == GUARD_PER_TICK ? cp_posix_guard_run : NULL;
    cfg.guard_jobs = guard == GUARD_PER_TICK ? cp_posix_guard_jobs : NULL;
    /* as LocalTarget guards a format-2 program it compiled (module.c, guard_policy) */
    cfg.guard_ctx = (void *)&cp_posix_own_verified_code;
    cfg.budget_factor = 10;            /* the in-process defaults of module.c */
    cfg.budget_min_ns = 1000000000u;
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    if (cp_sched_init(&s, prog, &cfg, &err) != CP_OK) {
        fprintf(stderr, "cp_sched_init: %s\n", err.message);
        exit(1);
    }
    static uint8_t plan[1u << 16]; /* as LocalTarget; NO_PLAN=1: the per-tick decisions */
    (void)cp_sched_set_plan(&s, getenv("NO_PLAN") == NULL ? plan : NULL, sizeof(plan));
    double best = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        cp_sched_reset(&s);
        double t0 = cpu_s();
        cp_sched_advance(&s, TICKS);
        double dt = cpu_s() - t0;
        best = dt < best ? dt : best;
    }
    return best / ((double)TICKS * prog->task_count) * 1e9;
}

int main(int argc, char **argv)
{
    /* ONLY: "read", "timed" or "untimed" runs just the chains with a read after each, or the
     * timed or untimed scheduler (one function to count under valgrind --tool=callgrind) */
    const char *only = argc == 3 ? argv[2] : "";
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(only, "read") != 0 &&
                                 strcmp(only, "timed") != 0 && strcmp(only, "untimed") != 0)) {
        fprintf(stderr, "usage: sched_floor IMAGE [read|timed|untimed]\n");
        return 2;
    }
    cp_program prog;
    if (cp_bench_load_image(argv[1], &prog) != 0) {
        return 1;
    }
    if (cp_posix_guard_install() != 0) {
        return 1;
    }
    printf("job clock: %s (%.3f MHz), %u tasks\n", cp_posix_clock_name(),
           (double)cp_posix_clock_hz() * 1e-6, prog.task_count);
    if (only[0] != '\0') {
        printf("%s %6.2f ns/job\n", only,
               only[0] == 'r' ? chains(&prog, cp_posix_clock_ns)
                              : scheduled(&prog, only[0] == 't' ? cp_posix_clock_ns : NULL,
                                          getenv("NO_GUARD") != NULL ? NO_GUARD
                                                                     : GUARD_PER_TICK));
        cp_program_unload(&prog);
        return (int)(sink & 0u);
    }
    printf("chains back to back          %6.2f ns/job\n", chains(&prog, NULL));
    printf("chains + their LET copies    %6.2f ns/job\n", chains_with_copies(&prog));
    printf("chains + job clock read      %6.2f ns/job\n", chains(&prog, cp_posix_clock_ns));
    printf("chains + clock_gettime       %6.2f ns/job\n", chains(&prog, monotonic_ns));
    printf("scheduler, untimed           %6.2f ns/job\n",
           scheduled(&prog, NULL, GUARD_PER_TICK));
    printf("scheduler, job clock         %6.2f ns/job\n",
           scheduled(&prog, cp_posix_clock_ns, GUARD_PER_TICK));
    printf("scheduler, clock_gettime     %6.2f ns/job\n",
           scheduled(&prog, monotonic_ns, GUARD_PER_TICK));
    printf("  job clock, guard per job   %6.2f ns/job\n",
           scheduled(&prog, cp_posix_clock_ns, GUARD_PER_JOB));
    printf("  job clock, no guard        %6.2f ns/job\n",
           scheduled(&prog, cp_posix_clock_ns, NO_GUARD));
    cp_program_unload(&prog);
    return (int)(sink & 0u);
}
