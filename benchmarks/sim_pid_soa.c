/* A stronger anchor for benchmarks/bench_sim.py: the same PID tasks as sim_pid.c, the same
 * float32 operations in the same order per task, but laid out as structure of arrays so that
 * the compiler runs the tasks of a tick side by side in vector lanes (as numba does with the
 * bench's arrays). Untimed only: a job clock per task has no vector form.
 *
 *     cc -std=c11 -O3 -march=native -shared -fPIC benchmarks/sim_pid_soa.c -o /tmp/sim_pid_soa.so */
#include <stdint.h>

enum { MAX_TASKS = 32 };

static float setpoint[MAX_TASKS], position[MAX_TASKS], integral[MAX_TASKS], prev_error[MAX_TASKS];
static int32_t first[MAX_TASKS];
static uint64_t runs[MAX_TASKS];

void soa_reset(int n)
{
    for (int k = 0; k < n && k < MAX_TASKS; k++) {
        setpoint[k] = 1.0f + (float)k;
        position[k] = integral[k] = prev_error[k] = 0.0f;
        first[k] = 1;
        runs[k] = 0;
    }
}

/* `ticks` ticks of `n` tasks, each released every tick; returns task 0's position. */
float soa_run(int n, int64_t ticks)
{
    const float dt = 1e-3f;
    if (n > MAX_TASKS) {
        n = MAX_TASKS;
    }
    for (int64_t t = 0; t < ticks; t++) {
        for (int k = 0; k < n; k++) {
            float error = setpoint[k] - position[k];
            integral[k] = integral[k] + error * dt;
            float rate = first[k] ? 0.0f : (error - prev_error[k]) / dt;
            float u = 2.0f * error + 5.0f * integral[k] + 0.05f * rate;
            float clamped = u < -10.0f ? -10.0f : (u > 10.0f ? 10.0f : u);
            position[k] = position[k] + (clamped - position[k]) * (dt / 0.05f);
            prev_error[k] = error;
            first[k] = 0;
            runs[k]++;
        }
    }
    return position[0];
}
