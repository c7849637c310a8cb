/* A C program that runs a copapy program image without Python, through libcopapy:
 *
 *   cc -std=c11 example.c $(python -m copapy.kits cflags) $(python -m copapy.kits libs) -o example
 *   ./example program.cpim INPUT OUTPUT v0 v1 v2 ...
 *
 * loads the image, finds the ports INPUT and OUTPUT by name, and for each value v_k writes it to
 * INPUT, runs one tick and prints OUTPUT as a C99 hex float (exact). tests/test_kits_abi.py
 * compares the result with LocalTarget's bit for bit. */
#include <stdio.h>
#include <stdlib.h>

#include "copapy/copapy.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s IMAGE INPUT OUTPUT [values...]\n", argv[0]);
        return 2;
    }
    if (copapy_abi_version() != COPAPY_ABI_VERSION) {
        fprintf(stderr, "libcopapy ABI %u, this program was built for %u\n",
                copapy_abi_version(), COPAPY_ABI_VERSION);
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
        copapy_free(p);
        return 1;
    }
    for (int k = 4; k < argc; k++) {
        double x = strtod(argv[k], NULL), y = 0.0;
        copapy_write(p, in.index, &x, 1);
        if (copapy_tick(p) != COPAPY_OK) {
            fprintf(stderr, "tick failed\n");
            copapy_free(p);
            return 1;
        }
        copapy_read(p, out.index, &y, 1);
        printf("%a\n", y);
    }
    copapy_free(p);
    return 0;
}
