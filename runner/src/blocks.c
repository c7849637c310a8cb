/* Verified loading (docs/image.md, format 2): the runner builds the code itself, copying and
 * patching every byte from its own stencil table (table.c; layout:
 * src/copapy/compiler/runner_table.py), by the image's BLOCKS manifest of stencil ids and slot
 * offsets. Every rule is checked while walking the manifest; an error names the chain, the
 * block and the rule (STENCIL, SLOTS, DATA_RANGE, STRUCTURE, FROZEN, TABLE).
 *
 * The walk runs twice: pass 1 (base NULL) checks and lays out, pass 2 writes. No list of
 * pending patches is kept: references to helpers and constants use pass 1's layout, a
 * reference to the next block is patched when that block is placed. The placement is the
 * compiler's (compiler/manifest.py materialise): chains, helpers breadth first, constant
 * blobs, padding to 4. The table itself is trusted (it is part of the runner). */
#include "internal.h"

/* ---- the table blob (trusted: built by tools/gen_runner_tables.py) */

enum {
    T_HEADER = 80,
    T_FUNC = 20,
    T_RELOC = 12,
    T_ROLE = 4,
    T_KIND = CP_KIND_SIZE_WIDE,
    T_RODATA = 12,
    FN_BLOCK = 1,
    FN_LOOP_BEGIN = 2,
    FN_LOOP_END = 4,
    FN_LOOP_BODY = 8,
    FN_THUMB = 16,
    FN_FORI_BEGIN = 32, /* cp.fori_loop's counted loop (stencils/fori.c) */
    FN_FORI_END = 64,
    REL_SLOT = 0,
    REL_NEXT = 1,
    REL_LOOP = 2,
    REL_FUNC = 3,
    REL_RODATA = 4,
    ACC_SCALAR = 0,
    ACC_ARRAY = 1,
    ACC_LENGTH = 2,
    ACC_LOOP_POINTER = 3,
    ACC_POINTER = 4,
    ACC_COUNTER = 5, /* a counted loop's counter: frozen, written by its loop's stencils only */
    ROLE_WRITTEN = 1,
    DIM_N = 2,
    DIM_K = 4,
    DIM_J = 8,
    ROLE_N = 4, /* indices in the role letters a b c out n k j */
    ROLE_K = 5,
    ROLE_J = 6,
    MAX_ROLES = 7,
    MAX_WAITING = 32
};

typedef struct {
    const uint8_t *b;
    uint32_t funcs, relocs, roles, kinds, rodata, code_size;
    uint32_t off_funcs, off_relocs, off_roles, off_kinds, off_rodata, off_code;
    uint16_t entry_id, ret_id;
    uint8_t nop_len;
    const uint8_t *nop;
    cp_patch_kind kind[CP_MAX_KINDS];
} tab;

typedef struct {
    uint32_t code_off, len, first_reloc;
    uint16_t nrelocs, first_role;
    uint8_t nroles, strip, align, flags;
} fn;

typedef struct {
    uint32_t offset;
    uint8_t kind, type;
    uint16_t target;
    int32_t addend;
} reloc;

static fn tab_fn(const tab *t, uint32_t id)
{
    const uint8_t *p = t->b + t->off_funcs + (size_t)id * T_FUNC;
    fn f = {cp_le32(p), cp_le32(p + 4), cp_le32(p + 8), cp_le16(p + 12), cp_le16(p + 14),
            p[16], p[17], p[18], p[19]};
    return f;
}

static reloc tab_reloc(const tab *t, uint32_t index)
{
    const uint8_t *p = t->b + t->off_relocs + (size_t)index * T_RELOC;
    uint32_t a = cp_le32(p + 8);
    reloc r = {cp_le32(p), p[4], p[5], cp_le16(p + 6),
               a <= INT32_MAX ? (int32_t)a : -(int32_t)(~a) - 1};
    return r;
}

static cp_status tab_open(tab *t, const cp_table *table, uint16_t arch, cp_error *err)
{
    const uint8_t *b = table->blob;
    if (table->size < T_HEADER || b[0] != 'C' || b[1] != 'P' || b[2] != 'T' || b[3] != 'B' ||
        cp_le16(b + 4) != 2 || cp_le16(b + 6) != arch) {
        return CP_FAIL(err, CP_ERR_TABLE, 0,
                       "this runner's stencil table is not a version-2 table for %a: rebuild "
                       "the runner", arch);
    }
    t->b = b;
    t->funcs = cp_le32(b + 8);
    t->relocs = cp_le32(b + 12);
    t->roles = cp_le32(b + 16);
    t->kinds = cp_le32(b + 20);
    t->rodata = cp_le32(b + 24);
    t->code_size = cp_le32(b + 28);
    t->off_funcs = cp_le32(b + 32);
    t->off_relocs = cp_le32(b + 36);
    t->off_roles = cp_le32(b + 40);
    t->off_kinds = cp_le32(b + 44);
    t->off_rodata = cp_le32(b + 48);
    t->off_code = cp_le32(b + 52);
    t->entry_id = cp_le16(b + 56);
    t->ret_id = cp_le16(b + 58);
    t->nop_len = b[60];
    t->nop = b + 64;
    if (t->kinds > CP_MAX_KINDS || t->nop_len == 0 || t->nop_len > 16 ||
        (uint64_t)t->off_code + t->code_size > table->size ||
        (uint64_t)t->off_kinds + (uint64_t)t->kinds * T_KIND > table->size) {
        return CP_FAIL(err, CP_ERR_TABLE, 0, "this runner's stencil table is malformed", 0);
    }
    for (uint32_t k = 0; k < t->kinds; k++) {
        cp_status st = cp_kind_decode_wide(b + t->off_kinds + (size_t)k * T_KIND, k, &t->kind[k], err);
        if (st != CP_OK) {
            return st;
        }
    }
    return CP_OK;
}

/* A table from outside the runner (cp_blocks_plan_table's `untrusted`: the in-process
 * verifier of another architecture's images, whose table the caller supplies): every record
 * and every reference must lie inside the blob, so no blob makes the walk read or write
 * outside it. A runner's own tables are part of it and are not checked. */
static cp_status tab_check(const tab *t, uint32_t size, cp_error *err)
{
    const uint64_t parts[5][2] = {{t->off_funcs, (uint64_t)t->funcs * T_FUNC},
                                  {t->off_relocs, (uint64_t)t->relocs * T_RELOC},
                                  {t->off_roles, (uint64_t)t->roles * T_ROLE},
                                  {t->off_rodata, (uint64_t)t->rodata * T_RODATA},
                                  {t->off_code, t->code_size}};
    for (unsigned i = 0; i < 5; i++) {
        if (parts[i][0] < T_HEADER || parts[i][0] + parts[i][1] > size) {
            return CP_FAIL(err, CP_ERR_TABLE, i, "the stencil table's part %u lies outside "
                           "its %u bytes", i, size);
        }
    }
    if (t->entry_id >= t->funcs || t->ret_id >= t->funcs) {
        return CP_FAIL(err, CP_ERR_TABLE, 0, "the stencil table's cp_entry or cp_ret id is "
                       "not a function", 0);
    }
    for (uint32_t id = 0; id < t->funcs; id++) {
        const uint8_t *p = t->b + t->off_funcs + (size_t)id * T_FUNC;
        uint64_t code_off = cp_le32(p), len = cp_le32(p + 4), first_reloc = cp_le32(p + 8);
        uint32_t nrelocs = cp_le16(p + 12), first_role = cp_le16(p + 14), nroles = p[16];
        if (code_off + len > t->code_size || first_reloc + nrelocs > t->relocs ||
            (uint64_t)first_role + nroles > t->roles || nroles > MAX_ROLES) {
            return CP_FAIL(err, CP_ERR_TABLE, id, "stencil table: function %u's code, "
                           "relocations or roles lie outside the table", id);
        }
        for (uint32_t q = 0; q < nroles; q++) {
            if (t->b[t->off_roles + (size_t)(first_role + q) * T_ROLE] >= MAX_ROLES) {
                return CP_FAIL(err, CP_ERR_TABLE, id, "stencil table: function %u has an "
                               "unknown slot role", id);
            }
        }
        for (uint32_t k = 0; k < nrelocs; k++) {
            reloc r = tab_reloc(t, (uint32_t)first_reloc + k);
            uint32_t limit = r.type == REL_SLOT ? nroles : r.type == REL_FUNC ? t->funcs
                             : r.type == REL_RODATA ? t->rodata : 1;
            if (r.kind >= t->kinds || r.type > REL_RODATA || r.target >= limit ||
                (uint64_t)r.offset + t->kind[r.kind].word_bits / 8u > len) {
                return CP_FAIL(err, CP_ERR_TABLE, id, "stencil table: a relocation of "
                               "function %u lies outside it or names nothing", id);
            }
        }
    }
    for (uint32_t i = 0; i < t->rodata; i++) {
        const uint8_t *d = t->b + t->off_rodata + (size_t)i * T_RODATA;
        if ((uint64_t)cp_le32(d) + cp_le32(d + 4) > t->code_size || cp_le32(d + 8) > 4096) {
            return CP_FAIL(err, CP_ERR_TABLE, i, "stencil table: constant blob %u lies "
                           "outside the table", i);
        }
    }
    return CP_OK;
}

/* ---- the manifest (untrusted) */

typedef struct {
    const uint8_t *p;
    uint32_t len, at;
} reader;

static int leb(reader *r, uint32_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        if (r->at >= r->len) {
            return -1;
        }
        uint8_t byte = r->p[r->at++];
        v |= (uint64_t)(byte & 0x7fu) << shift;
        if (v > UINT32_MAX) {
            return -1;
        }
        if ((byte & 0x80u) == 0) {
            *out = (uint32_t)v;
            return 0;
        }
    }
    return -1;
}

/* ---- one walk of the manifest */

typedef struct {
    const cp_image *img;
    const tab *t;
    cp_blocks_plan *plan;       /* pass 1 fills it */
    const cp_blocks_plan *laid; /* pass 2 reads it */
    uint8_t *base;              /* NULL in pass 1 */
    uint64_t vbase;             /* the address base[0] has for the patches (pass 2) */
    cp_error *err;
    uint32_t at;                /* code bytes placed */
    uint32_t waiting[MAX_WAITING];
    uint8_t waiting_kind[MAX_WAITING];
    int32_t waiting_addend[MAX_WAITING];
    uint32_t nwaiting;
    uint32_t chain, block, ops; /* where the walk is, for messages */
    /* every counted loop's counter (a plan's list), once all are known: NULL while pass 1
     * first collects them (check_counters) */
    const cp_blocks_plan *counters;
    /* the bytes the lengths and pointer slots are read from: the loaded region's data (pass
     * 2 of a load, which checks the very bytes the code will use: a caller that changed its
     * buffer after DATA_INIT was copied is refused), else NULL: DATA_INIT in the image */
    const uint8_t *data;
} walk;

static cp_status fail_block(walk *w, cp_status code, const char *what, uint64_t a, uint64_t b)
{
    return CP_FAIL(w->err, code, w->ops,
                   "chain %u, block %u: %s (%u, %u): the image is not a composition of this "
                   "runner's stencils; refused", w->chain, w->block,
                   (uint64_t)(uintptr_t)what, a, b);
}

static uint8_t init_byte(const walk *w, uint64_t i)
{
    if (w->data != NULL) {
        return w->data[i]; /* i < data_size: the caller checked the slot's range */
    }
    const cp_section *s = &w->img->sec[CP_SEC_DATA_INIT];
    return i < s->size ? w->img->bytes[s->offset + i] : 0;
}

static uint64_t init_le(const walk *w, uint32_t off, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++) {
        v |= (uint64_t)init_byte(w, (uint64_t)off + i) << (8 * i);
    }
    return v;
}

/* the frozen entry covering [off, off + size), or -1; entries are sorted and disjoint */
static int64_t frozen_find(const cp_image *img, uint64_t off, uint64_t size)
{
    const cp_section *s = &img->sec[CP_SEC_FROZEN];
    uint32_t lo = 0, hi = s->count; /* first entry whose end > off */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const uint8_t *e = cp_image_entry(img, CP_SEC_FROZEN, mid);
        if ((uint64_t)cp_le32(e) + cp_le32(e + 4) <= off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == s->count) {
        return -1;
    }
    const uint8_t *e = cp_image_entry(img, CP_SEC_FROZEN, lo);
    uint64_t start = cp_le32(e), end = start + cp_le32(e + 4);
    if (size == 0 ? start <= off && off < end : start < off + size) {
        return lo; /* overlaps */
    }
    return -1;
}

static int frozen_covers(const cp_image *img, uint32_t off, uint32_t size)
{
    int64_t i = frozen_find(img, off, size);
    if (i < 0) {
        return 0;
    }
    const uint8_t *e = cp_image_entry(img, CP_SEC_FROZEN, (uint32_t)i);
    return cp_le32(e) <= off && (uint64_t)off + size <= (uint64_t)cp_le32(e) + cp_le32(e + 4);
}

static int written_frozen(const cp_image *img, uint64_t off, uint64_t size)
{
    return size != 0 && frozen_find(img, off, size) >= 0;
}

int cp_blocks_frozen_overlap(const cp_image *img, uint64_t off, uint64_t size)
{
    return written_frozen(img, off, size);
}

static cp_status layout_error(walk *w);

/* A counted loop's counter is the one frozen slot a stencil writes (its loop's own), so no
 * length or pointer slot of any block, in any chain, may share a byte with one, and two
 * counters are the same slot or disjoint: else the loop rewrites a length or a pointer that
 * the verifier read from the initial data (an array op then runs over `bound` elements).
 * The offset of a counter other than `except` that overlaps [off, off + size), or -1. */
static int64_t counter_overlap(const walk *w, uint64_t off, uint64_t size, uint64_t except)
{
    const cp_blocks_plan *c = w->counters;
    for (uint32_t i = 0; c != NULL && i < c->counter_count; i++) {
        uint64_t at = c->counter[i];
        if (at != except && at < off + size && off < at + 4) {
            return (int64_t)at;
        }
    }
    return -1;
}

/* Pass 1's first walk lists each counter once; later walks find every counter in the list
 * (pass 2: else the image changed) and check it against the others. */
static cp_status check_counter(walk *w, uint32_t off)
{
    if (w->counters == NULL) {
        cp_blocks_plan *plan = w->plan;
        for (uint32_t i = 0; i < plan->counter_count; i++) {
            if (plan->counter[i] == off) {
                return CP_OK;
            }
        }
        if (plan->counter_count >= CP_MAX_COUNTERS) {
            return fail_block(w, CP_ERR_TOO_LARGE, "more counted loops than a runner checks "
                              "(count, limit)", plan->counter_count, CP_MAX_COUNTERS);
        }
        plan->counter[plan->counter_count++] = off;
        return CP_OK;
    }
    int known = 0;
    for (uint32_t i = 0; i < w->counters->counter_count; i++) {
        known |= w->counters->counter[i] == off;
    }
    if (!known) {
        return layout_error(w);
    }
    int64_t other = counter_overlap(w, off, 4, off);
    if (other >= 0) {
        return fail_block(w, CP_ERR_FROZEN, "two counted loops' counters overlap (counter, "
                          "other counter)", off, (uint64_t)other);
    }
    return CP_OK;
}

/* elem x the product of dims, or UINT64_MAX if it exceeds the data region. A length of 0
 * counts as 1: the lane-order reductions (rsum, rmin, rmax, dot and the fused dots, the
 * matrix products' inner sums) read element 0 before they look at n, so an empty array at
 * the end of the data would read the bytes after it (the task table: a code address). */
static uint64_t extent(uint64_t elem, const uint32_t *dims, unsigned count, uint64_t limit)
{
    uint64_t n = elem;
    for (unsigned i = 0; i < count; i++) {
        uint64_t d = dims[i] != 0 ? dims[i] : 1u;
        if (n > limit / d) {
            return UINT64_MAX;
        }
        n *= d;
    }
    return n;
}

/* Checks the slots of one block (DATA_RANGE, FROZEN); loop_n: the enclosing loop's length;
 * *counter: the offset of a counted loop's counter slot (UINT32_MAX: none). */
static cp_status check_slots(walk *w, const fn *f, const uint32_t *offs, uint32_t loop_n,
                             int in_loop, uint32_t *own_n, uint32_t *counter)
{
    const cp_image *img = w->img;
    uint64_t data = img->data_size;
    uint32_t len[MAX_ROLES] = {0};
    /* every slot on a multiple of its element's size (up to 4): a Cortex-M's VLDR and LDRD
     * fault on an unaligned address, and a verified program does not fault */
    for (uint32_t r = 0; r < f->nroles; r++) {
        const uint8_t *d = w->t->b + w->t->off_roles + (size_t)(f->first_role + r) * T_ROLE;
        uint32_t align = d[2] < 4 ? d[2] : 4;
        if (align > 1 && offs[r] % align != 0) {
            return fail_block(w, CP_ERR_DATA_RANGE, "a slot is not aligned to its element "
                              "(offset, alignment)", offs[r], align);
        }
    }
    /* lengths first: arrays of the same block are sized by them */
    for (uint32_t r = 0; r < f->nroles; r++) {
        const uint8_t *d = w->t->b + w->t->off_roles + (size_t)(f->first_role + r) * T_ROLE;
        if (d[1] != ACC_LENGTH) {
            continue;
        }
        if ((uint64_t)offs[r] + 4 > data) {
            return fail_block(w, CP_ERR_DATA_RANGE, "a length slot lies outside the data region "
                              "(offset, data_size)", offs[r], data);
        }
        if (!frozen_covers(img, offs[r], 4)) {
            return fail_block(w, CP_ERR_FROZEN, "a length slot is not in the FROZEN list "
                              "(offset, role)", offs[r], d[0]);
        }
        int64_t counter_at = counter_overlap(w, offs[r], 4, UINT64_MAX);
        if (counter_at >= 0) {
            return fail_block(w, CP_ERR_FROZEN, "a length slot overlaps a counted loop's "
                              "counter, which the loop rewrites (offset, counter)", offs[r],
                              (uint64_t)counter_at);
        }
        if (d[0] < MAX_ROLES) {
            len[d[0]] = (uint32_t)init_le(w, offs[r], 4);
        }
    }
    *own_n = len[ROLE_N];
    *counter = UINT32_MAX;
    for (uint32_t r = 0; r < f->nroles; r++) {
        const uint8_t *d = w->t->b + w->t->off_roles + (size_t)(f->first_role + r) * T_ROLE;
        uint8_t access = d[1], elem = d[2], flags = d[3];
        uint64_t start = offs[r], size = elem;
        if (access == ACC_LENGTH) {
            continue;
        }
        if (access == ACC_COUNTER) {
            /* only its loop writes it: frozen for every other writer, apart from the bound */
            if (start + 4 > data) {
                return fail_block(w, CP_ERR_DATA_RANGE, "a loop counter lies outside the data "
                                  "region (offset, data_size)", start, data);
            }
            if (!frozen_covers(img, offs[r], 4)) {
                return fail_block(w, CP_ERR_FROZEN, "a loop counter is not in the FROZEN list "
                                  "(offset, role)", offs[r], d[0]);
            }
            for (uint32_t q = 0; q < f->nroles; q++) {
                const uint8_t *e = w->t->b + w->t->off_roles + (size_t)(f->first_role + q) * T_ROLE;
                if (e[1] == ACC_LENGTH && offs[q] < start + 4 && start < (uint64_t)offs[q] + 4) {
                    return fail_block(w, CP_ERR_FROZEN, "a loop counter overlaps the loop's "
                                      "bound (counter, bound)", start, offs[q]);
                }
            }
            cp_status st = check_counter(w, offs[r]);
            if (st != CP_OK) {
                return st;
            }
            *counter = offs[r];
            continue;
        }
        if (access == ACC_ARRAY) {
            uint32_t dims[3];
            unsigned nd = 0;
            if (flags & DIM_N) dims[nd++] = len[ROLE_N];
            if (flags & DIM_K) dims[nd++] = len[ROLE_K];
            if (flags & DIM_J) dims[nd++] = len[ROLE_J];
            size = extent(elem, dims, nd, data);
        } else if (access == ACC_POINTER || access == ACC_LOOP_POINTER) {
            if (access == ACC_LOOP_POINTER && !in_loop) {
                return fail_block(w, CP_ERR_STRUCTURE, "a loop-body stencil outside a fused "
                                  "loop (offset, role)", offs[r], d[0]);
            }
            if (start + 8 > data) {
                return fail_block(w, CP_ERR_DATA_RANGE, "a pointer slot lies outside the data "
                                  "region (offset, data_size)", start, data);
            }
            if (!frozen_covers(img, offs[r], 8)) {
                return fail_block(w, CP_ERR_FROZEN, "a pointer slot is not in the FROZEN list "
                                  "(offset, role)", offs[r], d[0]);
            }
            int64_t counter_at = counter_overlap(w, start, 8, UINT64_MAX);
            if (counter_at >= 0) {
                return fail_block(w, CP_ERR_FROZEN, "a pointer slot overlaps a counted loop's "
                                  "counter, which the loop rewrites (offset, counter)", start,
                                  (uint64_t)counter_at);
            }
            /* the slot holds its target relative to itself (stencils/fused.c) */
            start = (start + init_le(w, offs[r], 8)) & UINT64_MAX;
            if (elem > 1 && start % (elem < 4 ? elem : 4) != 0) {
                return fail_block(w, CP_ERR_DATA_RANGE, "a pointer slot's array is not aligned "
                                  "to its element (target, element bytes)", start, elem);
            }
            /* a block's own pointer: the product of its length roles (n; j for a gather's
             * source; n x k for a level gather's result) */
            uint32_t dims[3];
            unsigned nd = 0;
            if (access == ACC_LOOP_POINTER) {
                dims[nd++] = loop_n;
            } else {
                if (flags & DIM_N) dims[nd++] = len[ROLE_N];
                if (flags & DIM_K) dims[nd++] = len[ROLE_K];
                if (flags & DIM_J) dims[nd++] = len[ROLE_J];
            }
            size = extent(elem, dims, nd, data);
        }
        if (size > data || start > data - size) {
            return fail_block(w, CP_ERR_DATA_RANGE, access == ACC_ARRAY
                              ? "an array's elements leave the data region (offset, bytes)"
                              : access == ACC_SCALAR ? "a slot leaves the data region "
                              "(offset, bytes)" : "a pointer slot's array leaves the data "
                              "region (target, bytes)", start, size);
        }
        if ((flags & ROLE_WRITTEN) && written_frozen(img, start, size)) {
            return fail_block(w, CP_ERR_FROZEN, "the block writes a frozen slot (offset, bytes)",
                              start, size);
        }
    }
    return CP_OK;
}

static cp_status layout_error(walk *w)
{
    return CP_FAIL(w->err, CP_ERR_LAYOUT, w->ops,
                   "the BLOCKS section changed while it was being loaded: keep the image "
                   "buffer unchanged during cp_program_load", 0);
}

static int find16(const uint16_t *list, uint32_t count, uint16_t id)
{
    for (uint32_t i = 0; i < count; i++) {
        if (list[i] == id) {
            return (int)i;
        }
    }
    return -1;
}

/* The code placed so far plus `more` bytes must fit the header's code_size (checked in both
 * passes, before anything is written: w->at never passes it, so it cannot wrap). */
static cp_status room(walk *w, uint64_t more)
{
    if ((uint64_t)w->at + more > w->img->code_size) {
        return fail_block(w, CP_ERR_STRUCTURE, "the blocks make more code than the header's "
                          "code_size (bytes, code_size)", (uint64_t)w->at + more,
                          w->img->code_size);
    }
    return CP_OK;
}

static cp_status pad(walk *w, uint32_t align)
{
    uint64_t target = ((uint64_t)w->at + align - 1) / align * align;
    cp_status st = room(w, target - w->at);
    if (st != CP_OK) {
        return st;
    }
    while (w->at < target) { /* whole no-ops, the last one cut short (link.py pad_to) */
        for (uint32_t k = 0; k < w->t->nop_len && w->at < target; k++, w->at++) {
            if (w->base != NULL) {
                w->base[w->at] = w->t->nop[k];
            }
        }
    }
    return CP_OK;
}

/* Patch a reference at site to target (offsets in the region); pass 2 only. */
static cp_status patch(walk *w, uint32_t site, uint8_t kind, uint64_t target)
{
    if (w->base == NULL) {
        return CP_OK;
    }
    const cp_patch_kind *k = &w->t->kind[kind];
    if ((uint64_t)site + k->word_bits / 8u > w->laid->code_size) {
        return layout_error(w);
    }
    return cp_patch_apply(k, w->base + site, w->vbase + site, w->vbase + target, w->ops,
                          w->err);
}

static cp_status add_ref(walk *w, const reloc *r, uint32_t site)
{
    if (r->type == REL_FUNC) {
        if (w->base == NULL) {
            if (find16(w->plan->helper, w->plan->helper_count, r->target) < 0) {
                if (w->plan->helper_count >= CP_MAX_HELPERS) {
                    return fail_block(w, CP_ERR_TOO_LARGE, "more helper functions than a "
                                      "runner places (count, limit)", w->plan->helper_count,
                                      CP_MAX_HELPERS);
                }
                w->plan->helper[w->plan->helper_count++] = r->target;
            }
            return CP_OK;
        }
        int i = find16(w->laid->helper, w->laid->helper_count, r->target);
        if (i < 0) {
            return layout_error(w);
        }
        return patch(w, site, r->kind, (uint64_t)w->laid->helper_at[i] + (uint64_t)(int64_t)r->addend);
    }
    if (r->type == REL_RODATA) {
        if (w->base == NULL) {
            if (find16(w->plan->rodata, w->plan->rodata_count, r->target) < 0) {
                if (w->plan->rodata_count >= CP_MAX_RODATA) {
                    return fail_block(w, CP_ERR_TOO_LARGE, "more constant blobs than a runner "
                                      "places (count, limit)", w->plan->rodata_count,
                                      CP_MAX_RODATA);
                }
                w->plan->rodata[w->plan->rodata_count++] = r->target;
            }
            return CP_OK;
        }
        int i = find16(w->laid->rodata, w->laid->rodata_count, r->target);
        if (i < 0) {
            return layout_error(w);
        }
        return patch(w, site, r->kind, (uint64_t)w->laid->rodata_at[i] + (uint64_t)(int64_t)r->addend);
    }
    return CP_OK;
}

/* Places function `id` (stripped of its trailing jump unless `whole`); slot offsets `offs`. */
typedef struct {
    int after_begin;     /* the previous block began a fused loop */
    uint32_t start;      /* where its back branch goes: the block after the begin */
    int after_fori;      /* the same for a counted loop (cp.fori_loop) */
    uint32_t fori_start;
} loop_state;

static cp_status place(walk *w, uint32_t id, int whole, const uint32_t *offs, loop_state *loop,
                       uint32_t *start_out)
{
    const tab *t = w->t;
    fn f = tab_fn(t, id);
    if (f.align == 0) {
        f.align = 1;
    }
    uint32_t body = whole || f.strip > f.len ? f.len : f.len - f.strip;
    cp_status grown = pad(w, f.align);
    if (grown != CP_OK || (grown = room(w, body)) != CP_OK) {
        return grown;
    }
    uint32_t start = w->at;
    if (w->base != NULL) {
        if ((uint64_t)start + body > w->laid->code_size) {
            return layout_error(w);
        }
        cp_copy(w->base + start, t->b + t->off_code + f.code_off, body);
    }
    w->at += body;
    if (loop->after_begin) {
        loop->start = start;
    }
    loop->after_begin = (f.flags & FN_LOOP_BEGIN) != 0;
    if (loop->after_fori) {
        loop->fori_start = start;
    }
    loop->after_fori = (f.flags & FN_FORI_BEGIN) != 0;
    /* the previous block's references to "the next block" */
    for (uint32_t i = 0; i < w->nwaiting; i++) {
        cp_status st = patch(w, w->waiting[i], w->waiting_kind[i],
                             (uint64_t)start + (uint64_t)(int64_t)w->waiting_addend[i]);
        if (st != CP_OK) {
            return st;
        }
    }
    w->nwaiting = 0;
    for (uint32_t k = 0; k < f.nrelocs; k++) {
        reloc r = tab_reloc(t, f.first_reloc + k);
        if (r.offset >= body) {
            continue; /* inside the dropped trailing jump */
        }
        uint32_t site = start + r.offset;
        cp_status st = CP_OK;
        if (r.type == REL_SLOT) {
            st = patch(w, site, r.kind, (uint64_t)w->img->data_offset + offs[r.target] +
                                            (uint64_t)(int64_t)r.addend);
        } else if (r.type == REL_NEXT) {
            if (w->nwaiting >= MAX_WAITING) {
                return CP_FAIL(w->err, CP_ERR_TABLE, 0, "stencil table: too many next refs", 0);
            }
            w->waiting[w->nwaiting] = site;
            w->waiting_kind[w->nwaiting] = r.kind;
            w->waiting_addend[w->nwaiting++] = r.addend;
        } else if (r.type == REL_LOOP) {
            uint32_t back = (f.flags & FN_FORI_END) ? loop->fori_start : loop->start;
            st = patch(w, site, r.kind, (uint64_t)back + (uint64_t)(int64_t)r.addend);
        } else {
            st = add_ref(w, &r, site);
        }
        if (st != CP_OK) {
            return st;
        }
    }
    *start_out = start | ((f.flags & FN_THUMB) ? 1u : 0u);
    return CP_OK;
}

/* The helpers' own references (helpers and constants), placing them in pass 2. */
static cp_status place_helpers(walk *w)
{
    cp_blocks_plan *plan = w->plan;
    uint32_t count = w->base == NULL ? plan->helper_count : w->laid->helper_count;
    for (uint32_t h = 0; h < count; h++) {
        uint16_t id = w->base == NULL ? plan->helper[h] : w->laid->helper[h];
        fn f = tab_fn(w->t, id);
        cp_status grown = pad(w, f.align == 0 ? 1 : f.align);
        if (grown != CP_OK || (grown = room(w, f.len)) != CP_OK) {
            return grown;
        }
        if (w->base == NULL) {
            plan->helper_at[h] = w->at;
        } else if (w->at != w->laid->helper_at[h] ||
                   (uint64_t)w->at + f.len > w->laid->code_size) {
            return layout_error(w);
        } else {
            cp_copy(w->base + w->at, w->t->b + w->t->off_code + f.code_off, f.len);
        }
        uint32_t start = w->at;
        w->at += f.len;
        for (uint32_t k = 0; k < f.nrelocs; k++) {
            reloc r = tab_reloc(w->t, f.first_reloc + k);
            if (r.type != REL_FUNC && r.type != REL_RODATA) {
                return CP_FAIL(w->err, CP_ERR_TABLE, id, "stencil table: helper %u refers to "
                               "a chain", id);
            }
            cp_status st = add_ref(w, &r, start + r.offset);
            if (st != CP_OK) {
                return st;
            }
        }
        if (w->base == NULL) {
            count = plan->helper_count; /* breadth first: helpers of helpers come last */
        }
    }
    uint32_t nro = w->base == NULL ? plan->rodata_count : w->laid->rodata_count;
    for (uint32_t i = 0; i < nro; i++) {
        uint16_t id = w->base == NULL ? plan->rodata[i] : w->laid->rodata[i];
        const uint8_t *d = w->t->b + w->t->off_rodata + (size_t)id * T_RODATA;
        uint32_t off = cp_le32(d), len = cp_le32(d + 4), align = cp_le32(d + 8);
        cp_status grown = pad(w, align == 0 ? 1 : align);
        if (grown != CP_OK || (grown = room(w, len)) != CP_OK) {
            return grown;
        }
        if (w->base == NULL) {
            plan->rodata_at[i] = w->at;
        } else if (w->at != w->laid->rodata_at[i] ||
                   (uint64_t)w->at + len > w->laid->code_size) {
            return layout_error(w);
        } else {
            cp_copy(w->base + w->at, w->t->b + w->t->off_code + off, len);
        }
        w->at += len;
    }
    return pad(w, 4);
}

static cp_status walk_blocks(walk *w)
{
    const cp_image *img = w->img;
    const tab *t = w->t;
    const cp_section *s = &img->sec[CP_SEC_BLOCKS];
    reader r = {img->bytes + s->offset, s->size, 0};
    uint32_t chains;
    w->chain = w->block = w->ops = 0;
    if (leb(&r, &chains) != 0 || chains == 0 || chains > CP_MAX_TASKS) {
        return CP_FAIL(w->err, CP_ERR_STRUCTURE, 0,
                       "BLOCKS: the chain count is missing, 0 or above %u", CP_MAX_TASKS);
    }
    for (uint32_t c = 0; c < chains; c++) {
        uint32_t count, start, none[1] = {0};
        w->chain = c;
        w->block = 0;
        if (leb(&r, &count) != 0) {
            return fail_block(w, CP_ERR_STRUCTURE, "the manifest ends inside a chain header "
                              "(byte, bytes)", r.at, r.len);
        }
        loop_state loop = {0, 0, 0, 0};
        cp_status st = place(w, t->entry_id, 0, none, &loop, &start);
        if (st != CP_OK) {
            return st;
        }
        if (w->base == NULL) {
            w->plan->chain_start[c] = start;
        } else if (w->laid->chain_start[c] != start) {
            return layout_error(w);
        }
        int in_loop = 0;
        uint32_t loop_n = 0;
        uint32_t fori_counter = UINT32_MAX; /* inside a counted loop: its counter slot */
        for (uint32_t b = 0; b < count; b++, w->ops++) {
            uint32_t id, nslots, offs[MAX_ROLES];
            w->block = b;
            if (leb(&r, &id) != 0 || leb(&r, &nslots) != 0) {
                return fail_block(w, CP_ERR_STRUCTURE, "the manifest ends inside a block "
                                  "(byte, bytes)", r.at, r.len);
            }
            if (id >= t->funcs || !(tab_fn(t, id).flags & FN_BLOCK)) {
                return fail_block(w, CP_ERR_STENCIL, "the id names no stencil of this runner's "
                                  "table (id, stencils)", id, t->funcs);
            }
            fn f = tab_fn(t, id);
            if (nslots != f.nroles) {
                return fail_block(w, CP_ERR_SLOTS, "the block gives a wrong number of slots "
                                  "(given, the stencil's)", nslots, f.nroles);
            }
            for (uint32_t k = 0; k < nslots; k++) {
                if (leb(&r, &offs[k]) != 0) {
                    return fail_block(w, CP_ERR_STRUCTURE, "the manifest ends inside a block's "
                                      "slots (byte, bytes)", r.at, r.len);
                }
            }
            int body = (f.flags & FN_LOOP_BODY) != 0;
            if ((f.flags & FN_LOOP_BEGIN) ? in_loop : body != in_loop) {
                return fail_block(w, CP_ERR_STRUCTURE, in_loop
                                  ? "a fused loop holds a stencil that is not a loop body "
                                    "(id, loop)" : "a loop-body stencil outside a fused loop "
                                    "(id, loop)", id, in_loop);
            }
            uint32_t own_n = 0, counter = UINT32_MAX;
            st = check_slots(w, &f, offs, loop_n, in_loop, &own_n, &counter);
            if (st != CP_OK) {
                return st;
            }
            /* counted loops: not nested, not inside a fused loop, begin and end share their
             * counter, the bound (frozen) is at least 1 */
            if (f.flags & FN_FORI_BEGIN) {
                if (fori_counter != UINT32_MAX || in_loop) {
                    return fail_block(w, CP_ERR_STRUCTURE, "a counted loop begins inside another "
                                      "loop (id, fused)", id, in_loop);
                }
                fori_counter = counter;
            } else if (f.flags & FN_FORI_END) {
                if (fori_counter == UINT32_MAX || in_loop) {
                    return fail_block(w, CP_ERR_STRUCTURE, "a counted loop ends where none began "
                                      "(id, fused)", id, in_loop);
                }
                if (counter != fori_counter) {
                    return fail_block(w, CP_ERR_STRUCTURE, "a counted loop ends on another "
                                      "counter than it began with (end, begin)", counter,
                                      fori_counter);
                }
                if (own_n == 0) {
                    return fail_block(w, CP_ERR_STRUCTURE, "a counted loop's count is 0 "
                                      "(count, id)", own_n, id);
                }
                fori_counter = UINT32_MAX;
            }
            st = place(w, id, 0, offs, &loop, &start);
            if (st != CP_OK) {
                return st;
            }
            if (f.flags & FN_LOOP_BEGIN) {
                in_loop = 1;
                loop_n = own_n;
            } else if (f.flags & FN_LOOP_END) {
                in_loop = 0;
            }
        }
        if (in_loop || fori_counter != UINT32_MAX) {
            return fail_block(w, CP_ERR_STRUCTURE, "the chain ends inside a loop "
                              "(blocks, fused)", count, in_loop);
        }
        w->block = count;
        st = place(w, t->ret_id, 1, none, &loop, &start);
        if (st != CP_OK) {
            return st;
        }
    }
    if (r.at != r.len) {
        return CP_FAIL(w->err, CP_ERR_STRUCTURE, w->ops,
                       "BLOCKS: %u bytes follow the last chain", (uint64_t)(r.len - r.at));
    }
    if (w->base == NULL) {
        w->plan->chain_count = chains;
        w->plan->ops = w->ops;
    } else if (chains != w->laid->chain_count) {
        return layout_error(w);
    }
    return place_helpers(w);
}

/* Ports the host writes, LET copies' destinations and input bindings never touch a frozen
 * slot; the frozen list is sorted and disjoint, inside the data region. */
static cp_status check_frozen_list(const cp_image *img, cp_error *err)
{
    const cp_section *s = &img->sec[CP_SEC_FROZEN];
    uint64_t prev_end = 0;
    for (uint32_t i = 0; i < s->count; i++) {
        const uint8_t *e = cp_image_entry(img, CP_SEC_FROZEN, i);
        uint64_t off = cp_le32(e), size = cp_le32(e + 4);
        if (size == 0 || off < prev_end || off + size > img->data_size) {
            return CP_FAIL(err, CP_ERR_FROZEN, i,
                           "FROZEN entry %u [%u, +%u) is empty, out of order or outside the "
                           "%u-byte data region", i, off, size, img->data_size);
        }
        prev_end = off + size;
    }
    for (uint32_t i = 0; i < img->sec[CP_SEC_PORTS].count; i++) {
        const uint8_t *e = cp_image_entry(img, CP_SEC_PORTS, i);
        uint8_t role = e[9];
        uint64_t size = (uint64_t)cp_le32(e + 12) * cp_dtype_size(e[8]);
        if ((role == CP_ROLE_INPUT || role == CP_ROLE_STATE) &&
            written_frozen(img, cp_le32(e + 4), size)) {
            return CP_FAIL(err, CP_ERR_FROZEN, i,
                           "port %u (an input or state the host writes) overlaps a frozen "
                           "slot", i);
        }
    }
    for (uint32_t i = 0; i < img->sec[CP_SEC_LET_COPIES].count; i++) {
        cp_let_copy c = cp_image_let_copy(img, i);
        if (written_frozen(img, c.dst, c.size)) {
            return CP_FAIL(err, CP_ERR_FROZEN, i,
                           "LET copy %u writes [%u, +%u), which overlaps a frozen slot",
                           i, c.dst, c.size);
        }
    }
    for (uint32_t i = 0; i < img->sec[CP_SEC_IO_BINDINGS].count; i++) {
        cp_io_binding b = cp_image_io_binding(img, i);
        if (b.direction == CP_DIR_INPUT &&
            written_frozen(img, b.offset, cp_io_dtype_size(b.dtype))) {
            return CP_FAIL(err, CP_ERR_FROZEN, i,
                           "I/O binding %u writes its input into a frozen slot", i);
        }
    }
    return CP_OK;
}

static void hex8(char *out, const uint8_t *p)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15u];
    }
    out[16] = 0;
}

static int same_pin(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (unsigned i = 0; i < CP_PIN_SIZE; i++) {
        diff |= (uint8_t)(a[i] ^ b[i]);
    }
    return diff == 0;
}

cp_status cp_blocks_plan_make(const cp_image *img, cp_table *table, cp_blocks_plan *plan,
                              cp_error *err)
{
    uint32_t count = cp_table_count();
    if (count == 0) {
        return CP_FAIL(err, CP_ERR_TABLE, 0,
                       "this runner carries no stencil table for %a, so it cannot build a "
                       "format-2 image: use a runner built with one (runner/tables/)", img->arch);
    }
    const uint8_t *pin = img->bytes + img->sec[CP_SEC_TABLE_PIN].offset;
    int found = 0;
    for (uint32_t i = 0; i < count && !found; i++) {
        found = cp_table_get(i, table) && same_pin(pin, table->sha256);
    }
    if (!found) {
        char want[17], have[17];
        cp_table first;
        (void)cp_table_get(0, &first);
        hex8(want, pin);
        hex8(have, first.sha256);
        return CP_FAIL(err, CP_ERR_TABLE, 0,
                       "the image was compiled against stencil table %s..., this runner "
                       "carries %u others (%s..., ...): compile with the copapy version of the "
                       "runner", (uint64_t)(uintptr_t)want, count, (uint64_t)(uintptr_t)have);
    }
    /* the image's CPU_FEATURES decide the loader's CPU check: they must name what the
     * table's code executes (an x86_64-v4 pin without them ran AVX-512 on any CPU) */
    uint64_t undeclared = table->cpu_features & ~img->cpu_features;
    if (undeclared != 0) {
        return CP_FAIL(err, CP_ERR_TABLE, (uint32_t)undeclared,
                       "the image's stencil table needs CPU features %x that its CPU_FEATURES "
                       "section does not declare: compile it again", undeclared);
    }
    return cp_blocks_plan_table(img, table, 0, plan, err);
}

cp_status cp_blocks_plan_table(const cp_image *img, const cp_table *table, int untrusted,
                               cp_blocks_plan *plan, cp_error *err)
{
    if (!same_pin(img->bytes + img->sec[CP_SEC_TABLE_PIN].offset, table->sha256)) {
        return CP_FAIL(err, CP_ERR_TABLE, 0, "the image was compiled against another stencil "
                       "table than the one given: compile it with this copapy", 0);
    }
    tab t;
    cp_status st = tab_open(&t, table, img->arch, err);
    if (st == CP_OK && untrusted) {
        st = tab_check(&t, table->size, err);
    }
    if (st != CP_OK || (st = check_frozen_list(img, err)) != CP_OK) {
        return st;
    }
    cp_fill((uint8_t *)plan, 0, sizeof(*plan));
    walk w;
    cp_fill((uint8_t *)&w, 0, sizeof(w));
    w.img = img;
    w.t = &t;
    w.plan = plan;
    w.err = err;
    st = walk_blocks(&w);
    if (st == CP_OK && plan->counter_count > 0) {
        /* the same walk again, now that every counter is known (a length may come before
         * the loop whose counter overlaps it); it lays out the same plan */
        plan->helper_count = plan->rodata_count = 0;
        w.at = w.nwaiting = 0;
        w.counters = plan;
        st = walk_blocks(&w);
    }
    if (st != CP_OK) {
        return st;
    }
    plan->code_size = w.at;
    if (plan->code_size != img->code_size) {
        return CP_FAIL(err, CP_ERR_STRUCTURE, 0,
                       "the blocks make %u bytes of code but the header's code_size is %u",
                       plan->code_size, img->code_size);
    }
    for (uint32_t i = 0; i < img->sec[CP_SEC_TASKS].count; i++) {
        cp_task_record task = cp_image_task(img, i);
        if (task.entry >= plan->chain_count) {
            return CP_FAIL(err, CP_ERR_STRUCTURE, i,
                           "task %u starts chain %u but BLOCKS has %u chains", i, task.entry,
                           plan->chain_count);
        }
    }
    return CP_OK;
}

static cp_status place_all(const cp_image *img, const cp_table *table,
                           const cp_blocks_plan *plan, uint8_t *base, uint64_t vbase,
                           const uint8_t *data, cp_error *err);

cp_status cp_blocks_place(const cp_image *img, const cp_table *table,
                          const cp_blocks_plan *plan, uint8_t *base, cp_error *err)
{
    return place_all(img, table, plan, base, (uint64_t)(uintptr_t)base,
                     base + img->data_offset, err);
}

cp_status cp_blocks_place_at(const cp_image *img, const cp_table *table,
                             const cp_blocks_plan *plan, uint8_t *base, uint64_t vbase,
                             cp_error *err)
{
    return place_all(img, table, plan, base, vbase, NULL, err);
}

static cp_status place_all(const cp_image *img, const cp_table *table,
                           const cp_blocks_plan *plan, uint8_t *base, uint64_t vbase,
                           const uint8_t *data, cp_error *err)
{
    tab t;
    cp_status st = tab_open(&t, table, img->arch, err);
    if (st != CP_OK || (st = check_frozen_list(img, err)) != CP_OK) {
        return st;
    }
    walk w; /* pass 2 records nothing (w.plan NULL); it reads pass 1's plan */
    cp_fill((uint8_t *)&w, 0, sizeof(w));
    w.img = img;
    w.t = &t;
    w.plan = NULL;
    w.laid = plan;
    w.counters = plan;
    w.base = base;
    w.vbase = vbase;
    w.data = data;
    w.err = err;
    st = walk_blocks(&w);
    if (st == CP_OK && w.at != plan->code_size) {
        return layout_error(&w);
    }
    return st;
}
