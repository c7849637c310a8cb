/* Does reading the clock after a job wait for the job? (docs/design.md, "The job clock")
 *
 *     cc -O2 benchmarks/clock_barrier.c -o /tmp/clock_barrier && /tmp/clock_barrier
 *
 * A "job" is a dependent chain of 20 mulss (80 cycles of latency); consecutive jobs are
 * independent, so run back to back they overlap in the out-of-order core. Per job (CPU time,
 * best of 5 x 2M): alone, with an lfence after each (waits for it), with an rdtsc after each,
 * with clock_gettime(CLOCK_MONOTONIC) after each, and the reads alone. x86_64 only. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

enum { CALLS = 2000000, ROUNDS = 5, KINDS = 6 };

static volatile float in[64];
static float out[64];
static uint64_t sink;

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

static inline uint64_t monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void job(int i)
{
    float x = in[i & 63];
    for (int k = 0; k < 20; k++) {
        __asm__ volatile("mulss %1, %0" : "+x"(x) : "x"(x));
    }
    out[i & 63] = x;
}

static void run(int kind)
{
    for (int i = 0; i < CALLS; i++) {
        if (kind < 4) {
            job(i);
        }
        if (kind == 1) {
            __asm__ volatile("lfence" ::: "memory");
        } else if (kind == 2 || kind == 4) {
            sink += rdtsc();
        } else if (kind == 3 || kind == 5) {
            sink += monotonic();
        }
    }
}

int main(void)
{
    static const char *names[KINDS] = {"job alone", "job + lfence", "job + rdtsc",
                                       "job + clock_gettime", "rdtsc alone",
                                       "clock_gettime alone"};
    double best[KINDS];
    for (int k = 0; k < KINDS; k++) {
        best[k] = 1e9;
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < KINDS; k++) {
            double t0 = cpu_s();
            run(k);
            double t = cpu_s() - t0;
            best[k] = t < best[k] ? t : best[k];
        }
    }
    for (int k = 0; k < KINDS; k++) {
        printf("%-20s %6.1f ns\n", names[k], best[k] / CALLS * 1e9);
    }
    return (int)(sink & 0u);
}

#else

int main(void)
{
    puts("clock_barrier: x86_64 only");
    return 0;
}

#endif
