/* The anchor of benchmarks/bench_sim.py: bench_sim.pid_program's tasks hand-written in C, the
 * same float32 operations in the same order (-O2, no -ffast-math), stepped tick after tick.
 * `timed`: a job-clock read after each task (rdtsc on x86, as copapy's job clock; else
 * CLOCK_MONOTONIC) and the max/sum statistics the scheduler keeps.
 *
 *     cc -std=c11 -O2 -shared -fPIC benchmarks/sim_pid.c -o /tmp/sim_pid.so  (bench_sim.py does) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

enum { MAX_TASKS = 32 };

typedef struct {
    float setpoint, position, integral, prev_error;
    int32_t first;
    uint64_t runs, exec_max, exec_sum;
} pid_task;

static pid_task tasks[MAX_TASKS];

static inline uint64_t job_clock(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static inline void step(pid_task *t)
{
    const float dt = 1e-3f;
    float error = t->setpoint - t->position;
    t->integral = t->integral + error * dt;
    float rate = t->first ? 0.0f : (error - t->prev_error) / dt;
    float u = 2.0f * error + 5.0f * t->integral + 0.05f * rate;
    float clamped = u < -10.0f ? -10.0f : (u > 10.0f ? 10.0f : u);
    t->position = t->position + (clamped - t->position) * (dt / 0.05f);
    t->prev_error = error;
    t->first = 0;
    t->runs++;
}

void sim_reset(int n)
{
    for (int k = 0; k < n && k < MAX_TASKS; k++) {
        pid_task fresh = {1.0f + (float)k, 0.0f, 0.0f, 0.0f, 1, 0, 0, 0};
        tasks[k] = fresh;
    }
}

/* `ticks` ticks of `n` tasks, each released every tick; returns task 0's position. */
float sim_run(int n, int64_t ticks, int timed)
{
    if (n > MAX_TASKS) {
        n = MAX_TASKS;
    }
    for (int64_t t = 0; t < ticks; t++) {
        if (timed) {
            uint64_t start = job_clock();
            for (int k = 0; k < n; k++) {
                step(&tasks[k]);
                uint64_t stop = job_clock();
                uint64_t exec = stop - start;
                tasks[k].exec_max = exec > tasks[k].exec_max ? exec : tasks[k].exec_max;
                tasks[k].exec_sum += exec;
                start = stop;
            }
        } else {
            for (int k = 0; k < n; k++) {
                step(&tasks[k]);
            }
        }
    }
    return tasks[0].position;
}

uint64_t sim_runs(int k)
{
    return k >= 0 && k < MAX_TASKS ? tasks[k].runs : 0;
}
