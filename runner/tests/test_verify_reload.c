/* Verified loading checks the bytes the code uses (docs/decisions/2026-12-05-leftovers.md):
 * pass 2 of cp_program_load reads the lengths and pointer slots from the region's copy of
 * DATA_INIT, not from the caller's buffer. A caller that changes its buffer between the
 * passes (the test hook CP_TEST_LOAD_HOOK: step 1 after pass 1, step 2 after DATA_INIT was
 * copied into the region) cannot make the region hold a length no pass checked. Before, pass
 * 2 re-read the buffer: a length made huge after pass 1 and put back after the copy loaded.
 *
 * The image is built here from this runner's own table (the machine's architecture): one
 * chain of one block stencil with a length n and arrays sized by it (found by its role
 * descriptors, so no stencil name or id is assumed). Built with -DCP_WITH_TABLE
 * -DCP_TEST_HOOKS and the table (runner/Makefile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "test_image.h"

enum {
    T_FUNC = 20, /* blocks.c's table layout */
    T_ROLE = 4,
    FN_BLOCK = 1,
    FN_LOOPS = 2 | 4 | 8 | 32 | 64,
    ACC_SCALAR = 0,
    ACC_ARRAY = 1,
    ACC_LENGTH = 2,
    ROLE_N = 4,
    DIM_N = 2,
    N = 4,            /* the length DATA_INIT holds */
    SLOT = 64,        /* bytes per slot: N elements of up to 8 bytes, and room */
    HUGE_N = 1 << 24, /* a length whose arrays leave any data region here */
    PAGE = 65536
};

typedef struct {
    uint32_t id, nroles;
    uint32_t offs[8];
    uint32_t length_at; /* the length slot's offset */
    uint32_t data_size;
} block;

/* A block stencil with one length n, arrays sized by n (at least one) and scalars only. */
static int find_block(const cp_table *t, block *out)
{
    const uint8_t *b = t->blob;
    uint32_t funcs = cp_le32(b + 8), off_funcs = cp_le32(b + 32), off_roles = cp_le32(b + 40);
    uint32_t best = UINT32_MAX, best_roles = 99;
    for (uint32_t id = 0; id < funcs; id++) {
        const uint8_t *f = b + off_funcs + (size_t)id * T_FUNC;
        uint32_t first = cp_le16(f + 14), nroles = f[16], flags = f[19];
        if (!(flags & FN_BLOCK) || (flags & FN_LOOPS) || nroles > 8 || nroles >= best_roles) {
            continue;
        }
        unsigned lengths = 0, arrays = 0, others = 0;
        for (uint32_t r = 0; r < nroles; r++) {
            const uint8_t *d = b + off_roles + (size_t)(first + r) * T_ROLE;
            if (d[1] == ACC_LENGTH && d[0] == ROLE_N) {
                lengths++;
            } else if (d[1] == ACC_ARRAY && d[3] == (d[3] & (DIM_N | 1)) && (d[3] & DIM_N) &&
                       d[2] <= 8) {
                arrays++;
            } else if (d[1] != ACC_SCALAR || d[2] > 8) {
                others++;
            }
        }
        if (lengths == 1 && arrays >= 1 && others == 0) {
            best = id;
            best_roles = nroles;
        }
    }
    if (best == UINT32_MAX) {
        return 0;
    }
    const uint8_t *f = b + off_funcs + (size_t)best * T_FUNC;
    out->id = best;
    out->nroles = f[16];
    for (uint32_t r = 0; r < out->nroles; r++) {
        const uint8_t *d = b + off_roles + (size_t)(cp_le16(f + 14) + r) * T_ROLE;
        out->offs[r] = SLOT * r;
        if (d[1] == ACC_LENGTH) {
            out->length_at = SLOT * r;
        }
    }
    out->data_size = SLOT * out->nroles;
    return 1;
}

static size_t leb(uint8_t *p, uint32_t v)
{
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        p[n++] = (uint8_t)(byte | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* The image of the block with the given code_size (the layout pass 1 computes); DATA_INIT is
 * section 2 (its bytes at img->sec_offset[2]). */
static void build(const cp_table *t, const block *k, uint16_t arch, uint32_t code_size,
                  tb_image *img)
{
    static uint8_t blocks[64], init[8 * SLOT], pin[32], frozen[8], task[24];
    size_t n = leb(blocks, 1);
    n += leb(blocks + n, 1);
    n += leb(blocks + n, k->id);
    n += leb(blocks + n, k->nroles);
    for (uint32_t r = 0; r < k->nroles; r++) {
        n += leb(blocks + n, k->offs[r]);
    }
    memset(init, 0, sizeof(init));
    tb_put32(init + k->length_at, N);
    memcpy(pin, t->sha256, 32);
    tb_put32(frozen, k->length_at);
    tb_put32(frozen + 4, 4);
    memset(task, 0, sizeof(task)); /* chain 0, run on request */
    tb_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.version = CP_IMAGE_FORMAT_VERSION;
    spec.header_size = 48;
    spec.arch = arch;
    spec.code_size = code_size;
    spec.data_offset = (code_size + PAGE - 1) / PAGE * PAGE;
    spec.data_size = k->data_size;
    spec.base_align = PAGE;
    spec.nsec = 5;
    spec.sec[0] = (tb_section){CP_SEC_BLOCKS, 1, blocks, (uint32_t)n};
    spec.sec[1] = (tb_section){CP_SEC_TASKS, 24, task, 24};
    spec.sec[2] = (tb_section){CP_SEC_DATA_INIT, 1, init, k->data_size};
    spec.sec[3] = (tb_section){CP_SEC_TABLE_PIN, 32, pin, 32};
    spec.sec[4] = (tb_section){CP_SEC_FROZEN, 8, frozen, 8};
    tb_build(&spec, img);
}

static int verbose_errors;

/* what the hook writes into the caller's buffer at steps 1 and 2 (0: nothing) */
static uint8_t *length_in_buffer;
static uint32_t at_step[3];

static void hook(int step)
{
    if (length_in_buffer != NULL && at_step[step] != 0) {
        tb_put32(length_in_buffer, at_step[step]);
    }
}

static cp_status load(tb_image *img, const block *k, uint32_t step1, uint32_t step2,
                      uint32_t *region_n)
{
    const cp_platform *pf = cp_platform_posix();
    cp_program prog = tb_program();
    cp_error err = tb_error();
    length_in_buffer = img->bytes + img->sec_offset[2] + k->length_at;
    at_step[1] = step1;
    at_step[2] = step2;
    cp_status st = cp_program_load(&prog, img->bytes, img->len, pf, &err);
    tb_put32(length_in_buffer, N); /* the buffer as it was */
    length_in_buffer = NULL;
    if (st == CP_OK) {
        *region_n = tb_get32(cp_program_data(&prog) + k->length_at);
        cp_program_unload(&prog);
    } else if (verbose_errors) {
        fprintf(stderr, "  load: %s\n", err.message);
    }
    return st;
}

int main(int argc, char **argv)
{
    verbose_errors = argc > 1 && strcmp(argv[1], "-v") == 0;
    cp_table t;
    const cp_platform *pf = cp_platform_posix();
    block k;
    CHECK(cp_table_get(0, &t) == 1);
    CHECK(find_block(&t, &k) == 1);
    if (failures != 0) {
        printf("test_verify_reload: no table or no block stencil with a length\n");
        return 1;
    }
    /* pass 1 tells the code size (the header's must match) */
    static tb_image img;
    build(&t, &k, pf->arch, 1u << 20, &img);
    cp_image parsed;
    cp_error err = tb_error();
    cp_blocks_plan plan;
    cp_table picked;
    CHECK_STATUS(cp_image_parse(&parsed, img.bytes, img.len, pf->arch, &err), CP_OK);
    CHECK_STATUS(cp_blocks_plan_make(&parsed, &picked, &plan, &err), CP_ERR_STRUCTURE);
    build(&t, &k, pf->arch, plan.code_size, &img);
    cp_test_load_hook = hook;

    uint32_t n = 0;
    /* the image as built loads, its region holding n */
    CHECK_STATUS(load(&img, &k, 0, 0, &n), CP_OK);
    CHECK(n == N);
    /* a length made huge after pass 1 and put back after the copy: pass 2 sees the region's
     * huge length and refuses (before: it re-read the buffer's N and loaded HUGE_N) */
    n = 0;
    CHECK_STATUS(load(&img, &k, HUGE_N, N, &n), CP_ERR_DATA_RANGE);
    CHECK(n == 0);
    /* a buffer changed after the copy does not matter: the region holds what was checked */
    CHECK_STATUS(load(&img, &k, 0, HUGE_N, &n), CP_OK);
    CHECK(n == N);
    /* a length changed to another valid one after pass 1: pass 2 checks it and the region
     * holds it (the code is the same for any n) */
    CHECK_STATUS(load(&img, &k, 1, 0, &n), CP_OK);
    CHECK(n == 1);
    cp_test_load_hook = NULL;
    printf("test_verify_reload: %d checks, %d failed (stencil %u, %u roles)\n", checks,
           failures, k.id, k.nroles);
    return failures == 0 ? 0 : 1;
}
