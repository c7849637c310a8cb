/* The anchor of benchmarks/bench_sim.py: bench_sim.pid_program's tasks hand-written in C, the
 * same float32 operations in the same order (-O2, no -ffast-math), stepped tick after tick.
 * `timed`: a job-clock read after each task (rdtsc on x86, as copapy's job clock; else
 * CLOCK_MONOTONIC) and the max/sum statistics the scheduler keeps. sim_trace: a trace row of the
 * outputs after every tick, as a LocalTarget trace of them. sim_io: each task reads its
 * simulated ADC element (a double, added to its plant) and writes its position to its DAC
 * element every tick, as bench_sim.py's "io" program binds them.
 *
 *     cc -std=c11 -O2 -shared -fPIC benchmarks/sim_pid.c -o /tmp/sim_pid.so  (bench_sim.py does) */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* A tick of the task; returns the plant's new position (the caller stores it). */
static inline float pid_update(pid_task *t)
{
    const float dt = 1e-3f;
    float error = t->setpoint - t->position;
    t->integral = t->integral + error * dt;
    float rate = t->first ? 0.0f : (error - t->prev_error) / dt;
    float u = 2.0f * error + 5.0f * t->integral + 0.05f * rate;
    float clamped = u < -10.0f ? -10.0f : (u > 10.0f ? 10.0f : u);
    float position = t->position + (clamped - t->position) * (dt / 0.05f);
    t->prev_error = error;
    t->first = 0;
    t->runs++;
    return position;
}

static inline void step(pid_task *t)
{
    t->position = pid_update(t);
}

/* The I/O anchor's arrays: an ADC and a DAC element per task, owned by the caller. */
static const double *io_adc;
static double *io_dac;

void sim_io(const double *adc, double *dac)
{
    io_adc = adc;
    io_dac = dac;
}

void sim_reset(int n)
{
    for (int k = 0; k < n && k < MAX_TASKS; k++) {
        pid_task fresh = {1.0f + (float)k, 0.0f, 0.0f, 0.0f, 1, 0, 0, 0};
        tasks[k] = fresh;
    }
}

/* The trace anchor's rows: the tick's time in ns, then every task's position (as a
 * LocalTarget trace row of the outputs), into a buffer the caller preallocated. */
static uint8_t *trace_buf;
static uint64_t trace_rows;

void sim_trace(uint8_t *buf)
{
    trace_buf = buf;
    trace_rows = 0;
}

static inline void trace_row(int n, uint64_t t_ns)
{
    uint8_t *row = trace_buf + trace_rows * (sizeof(uint64_t) + (size_t)n * sizeof(float));
    memcpy(row, &t_ns, sizeof(t_ns));
    for (int k = 0; k < n; k++) {
        memcpy(row + sizeof(t_ns) + (size_t)k * sizeof(float), &tasks[k].position,
               sizeof(float));
    }
    trace_rows++;
}

/* `ticks` ticks of `n` tasks, each released every tick; returns task 0's position. With a
 * buffer from sim_trace (rows of 8 + 4n bytes, `ticks` of them), a row after every tick; with
 * arrays from sim_io (untimed), each task's ADC read and DAC write. */
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
        } else if (io_adc != NULL) {
            for (int k = 0; k < n; k++) {
                float disturbance = (float)io_adc[k];
                tasks[k].position = pid_update(&tasks[k]) + disturbance;
                io_dac[k] = (double)tasks[k].position;
            }
        } else {
            for (int k = 0; k < n; k++) {
                step(&tasks[k]);
            }
        }
        if (trace_buf != NULL) {
            trace_row(n, (uint64_t)t * 1000000u);
        }
    }
    return tasks[0].position;
}

uint64_t sim_runs(int k)
{
    return k >= 0 && k < MAX_TASKS ? tasks[k].runs : 0;
}
