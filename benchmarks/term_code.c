/* The code of a compiled program alone: its task 0 called REPS times in a C loop, timed as
 * bench_term.py times its C baselines (CLOCK_MONOTONIC, nine batches, the median batch's time
 * per call), so that the packed term's generated code is compared with C without the Python
 * call of tg.run(). bench_term.py builds and runs it ("packed, code alone"):
 *
 *     cc -std=c11 -O2 -Irunner/include -Irunner/src -pthread benchmarks/term_code.c \
 *         runner/src/[a-z]*.c -o /tmp/term_code && /tmp/term_code IMAGE OFFSET REPS
 *
 * OFFSET is the float32 result's offset in the data region; the program prints the median
 * seconds per call and that result (after the timed calls). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copapy/runner.h"
#include "load_image.h"

enum { BATCHES = 9 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: term_code IMAGE OFFSET REPS\n");
        return 2;
    }
    const long offset = atol(argv[2]);
    const long reps = atol(argv[3]);
    cp_program prog;
    if (cp_bench_load_image(argv[1], &prog) != 0) {
        return 1;
    }
    if (prog.task_count == 0 || reps < 1 || offset < 0 ||
        (unsigned long)offset + sizeof(float) > prog.data_size) {
        fprintf(stderr, "no task 0, or REPS / OFFSET out of range\n");
        return 1;
    }
    void (*const entry)(void) = prog.tasks[0].entry;
    const uint8_t *result = cp_program_data(&prog) + offset;
    volatile float sink = 0.0f;
    double t[BATCHES];
    for (int k = 0; k < BATCHES; k++) {
        const double t0 = now();
        for (long r = 0; r < reps; r++) {
            entry();
            float value;
            memcpy(&value, result, sizeof(value));
            sink = value;
        }
        t[k] = (now() - t0) / (double)reps;
    }
    qsort(t, BATCHES, sizeof(t[0]), by_value);
    printf("%.6e %.9g\n", t[BATCHES / 2], (double)sink);
    cp_program_unload(&prog);
    return 0;
}
