/* Counts every heap or mapping allocation of the process while armed (tests/test_no_alloc.py):
 * the executable's malloc, calloc, realloc, free, posix_memalign, aligned_alloc, mmap and
 * mremap (alloc_hooks.h) take precedence over libc's for libcopapy.so too. Then runs
 * an image through libcopapy: warm-up, then N write + tick + read calls armed. Prints the
 * count. Usage: alloc_count IMAGE INPUT OUTPUT N */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "copapy/copapy.h"

static volatile int armed;
static volatile unsigned long count;

static void note(void)
{
    if (armed) {
        count++;
    }
}

#include "alloc_hooks.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s IMAGE INPUT OUTPUT N\n", argv[0]);
        return 2;
    }
    copapy_error err = {.struct_size = sizeof err};
    copapy_program *p = NULL;
    if (copapy_load_file(argv[1], NULL, &p, &err) != COPAPY_OK) {
        fprintf(stderr, "%s: %s\n", err.name, err.message);
        return 1;
    }
    copapy_port in = {.struct_size = sizeof in}, out = {.struct_size = sizeof out};
    if (copapy_port_find(p, argv[2], &in, &err) != COPAPY_OK ||
        copapy_port_find(p, argv[3], &out, &err) != COPAPY_OK) {
        fprintf(stderr, "%s: %s\n", err.name, err.message);
        return 1;
    }
    long n = strtol(argv[4], NULL, 10);
    double x = 0.0, y = 0.0, sum = 0.0;
    for (long i = 0; i < n + 1000; i++) {
        armed = i >= 1000; /* the first 1000: warm-up (lazy set-up, the job clock) */
        x = (double)(i % 100) * 0.01;
        copapy_write(p, in.index, &x, 1);
        if (copapy_tick(p) != COPAPY_OK) {
            armed = 0;
            fprintf(stderr, "tick %ld failed\n", i);
            return 1;
        }
        copapy_read(p, out.index, &y, 1);
        sum += y;
    }
    armed = 0;
    copapy_free(p);
    printf("%lu %g\n", count, sum);
    return 0;
}
