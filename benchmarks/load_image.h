/* Loading an image file into a cp_program, for the C benchmark programs (sched_floor.c,
 * term_code.c). */
#ifndef CP_BENCH_LOAD_IMAGE_H
#define CP_BENCH_LOAD_IMAGE_H

#include <stdio.h>
#include <string.h>

#include "copapy/platform_posix.h"
#include "copapy/runner.h"

enum { CP_BENCH_IMAGE_MAX = 1 << 24 };

/* Reads the image file at path and loads it for this machine; 0, or 1 with a message. */
static int cp_bench_load_image(const char *path, cp_program *prog)
{
    static uint8_t image[CP_BENCH_IMAGE_MAX];
    FILE *f = fopen(path, "rb");
    const size_t len = f != NULL ? fread(image, 1, sizeof(image), f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    memset(prog, 0, sizeof(*prog));
    prog->struct_size = sizeof(*prog);
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    if (len == 0 || cp_program_load(prog, image, len, cp_platform_posix(), &err) != CP_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.message);
        return 1;
    }
    return 0;
}

#endif /* CP_BENCH_LOAD_IMAGE_H */
