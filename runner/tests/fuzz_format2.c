/* libFuzzer harness of verified loading (format 2, docs/image.md): the input is an image
 * for x86_64, loaded by a runner that carries the x86_64 stencil tables (runner/tables/
 * x86_64*.c, CP_WITH_TABLE): the BLOCKS manifest reader, the verifier (blocks.c: stencil ids,
 * slot ranges, frozen slots, loop structure, table pin) and the program build (copy and patch
 * from the table, task table, LET copies, I/O bindings). Under ASan/UBSan any out-of-bounds
 * access or undefined behaviour aborts the run. Mutated code never runs (loading only).
 *
 * To let mutations reach the checks behind the CRC, the harness writes total_size and the
 * CRC of every input of at least the header's size (the old deterministic fuzzer,
 * fuzz_image.c, covers CRC and size errors).
 *
 *   make -C runner CC=clang-19 build/fuzz_format2
 *   python -m tests.support.fuzz_seeds /tmp/seeds      # images of tests/support/image_corpus.py
 *   runner/build/fuzz_format2 -jobs=1 -max_total_time=600 -max_len=65536 corpus/ /tmp/seeds
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "test_image.h"

#define HEADER 52u /* the smallest image the validator reads a directory of */

static void fail(const char *what, cp_status a, cp_status b, const char *message)
{
    fprintf(stderr, "fuzz_format2: %s (%s, %s): %s\n", what, cp_status_name(a),
            cp_status_name(b), message);
    abort();
}

/* What a loaded program must satisfy whatever the image: every task entry a code address of
 * its own region, every table inside the region after the data. */
static void check_loaded(const cp_program *p)
{
    const uint8_t *end = p->base + p->region_size;
    if (p->code_size > p->data_offset || (uint64_t)p->data_offset + p->data_size >
                                             p->region_size) {
        fail("code or data past the region", CP_OK, CP_OK, "");
    }
    for (uint32_t i = 0; i < p->task_count; i++) {
        const uint8_t *entry = (const uint8_t *)(uintptr_t)p->tasks[i].entry;
        if (entry < p->base || entry >= p->base + p->code_size) {
            fail("a task entry outside the program's code", CP_OK, CP_OK, "");
        }
    }
    const uint8_t *tables[] = {(const uint8_t *)p->tasks, (const uint8_t *)p->let_copies,
                               (const uint8_t *)p->io_bindings, p->initial_data};
    for (unsigned k = 0; k < sizeof(tables) / sizeof(tables[0]); k++) {
        if (tables[k] < p->base + p->data_offset + p->data_size || tables[k] > end) {
            fail("a loader table outside the region's tail", CP_OK, CP_OK, "");
        }
    }
    for (uint32_t i = 0; i < p->let_copy_count; i++) {
        const cp_let_copy *c = &p->let_copies[i];
        if ((uint64_t)c->src + c->size > p->data_size || (uint64_t)c->dst + c->size >
                                                             p->data_size) {
            fail("a LET copy outside the data", CP_OK, CP_OK, "");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tp_ctx ctx;
    static cp_platform pf;
    static int ready, trace;
    if (!ready) {
        pf = tp_platform(&ctx, CP_ARCH_X86_64);
        pf.max_region_size = 1u << 22; /* mutated sizes would otherwise zero gigabytes */
        trace = getenv("FUZZ_FORMAT2_TRACE") != NULL; /* one line per input (the seed test) */
        ready = 1;
    }
    /* exact-size heap copy: reading one byte past the image is caught by ASan */
    uint8_t *image = malloc(size ? size : 1);
    if (image == NULL) {
        return 0;
    }
    memcpy(image, data, size);
    if (size >= HEADER) {
        tb_put32(image + 12, (uint32_t)size);
        tb_fix_crc(image, size);
    }
    cp_error err = tb_error();
    cp_status vs = cp_image_validate(image, size, CP_ARCH_X86_64, &err);
    if (vs >= CP_STATUS_COUNT || strlen(err.message) >= sizeof(err.message)) {
        fail("bad validate status", vs, vs, err.message);
    }
    cp_program prog = tb_program();
    int before = ctx.allocs - ctx.frees;
    cp_status ls = cp_program_load(&prog, image, size, &pf, &err);
    if (ls >= CP_STATUS_COUNT || strlen(err.message) >= sizeof(err.message)) {
        fail("bad load status", ls, ls, err.message);
    }
    /* a structurally invalid image is refused by load with validate's reason; load adds the
     * verifier's refusals and what needs the platform */
    if (vs != CP_OK && ls != vs) {
        fail("validate refused but load disagrees", vs, ls, err.message);
    }
    if (trace) {
        printf("fuzz_format2: %zu bytes: validate %s, load %s\n", size, cp_status_name(vs),
               cp_status_name(ls));
    }
    if (ls == CP_OK) {
        if (prog.loaded != 1) {
            fail("CP_OK without a loaded program", vs, ls, "");
        }
        check_loaded(&prog);
        cp_program_unload(&prog);
    }
    if (ctx.allocs - ctx.frees != before) {
        fail("a region leaked", vs, ls, err.message);
    }
    free(image);
    return 0;
}
