/* Loading, running and unloading a program. The new region is private until every step has
 * succeeded, so a failed load never disturbs the program that is already running. */
#include "internal.h"

static cp_status check_arguments(const cp_program *out, const cp_platform *pf, cp_error *err)
{
    if (out == NULL || pf == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0, "cp_program_load: out and platform must not "
                       "be NULL", 0);
    }
    if (out->struct_size < sizeof(cp_program)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "cp_program.struct_size is %u, expected >= %u: set it to "
                       "sizeof(cp_program) before loading", out->struct_size, sizeof(cp_program));
    }
    if (out->loaded) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "out already holds a loaded program: load into another cp_program "
                       "or unload it first", 0);
    }
    if (pf->struct_size < CP_PLATFORM_SIZE_ABI3 || pf->abi_version == 0 ||
        pf->region_alloc == NULL || pf->region_seal == NULL || pf->region_free == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0,
                       "platform is incomplete: struct_size must be >= %u, abi_version set and "
                       "region_alloc/seal/free given", CP_PLATFORM_SIZE_ABI3);
    }
    return CP_OK;
}

/* Patches the private copy; on failure the caller frees the region. */
static cp_status apply_patches(const cp_image *img, uint8_t *base, cp_error *err)
{
    for (uint32_t i = 0; i < img->sec[CP_SEC_PATCHES].count; i++) {
        /* re-checked here so the writes stay in bounds even if the caller's image buffer
         * changed after validation */
        cp_status st = cp_image_check_patch(img, i, err);
        if (st != CP_OK) {
            return st;
        }
        cp_patch_record r = cp_image_patch(img, i);
        cp_patch_kind kind;
        st = cp_kind_decode(cp_image_entry(img, CP_SEC_PATCH_KINDS, r.kind), r.kind, &kind, err);
        if (st != CP_OK) {
            return st;
        }
        uint64_t base_addr = (uint64_t)(uintptr_t)base;
        /* uint64 wrap-around gives base + signed addend in two's complement */
        uint64_t target = base_addr + (uint64_t)(int64_t)r.addend;
        st = cp_patch_apply(&kind, base + r.site, base_addr + r.site, target, i, err);
        if (st != CP_OK) {
            return st;
        }
    }
    return CP_OK;
}

static void fill_tasks(const cp_image *img, uint8_t *base, cp_task_entry *tasks,
                       const cp_blocks_plan *plan)
{
    for (uint32_t i = 0; i < img->sec[CP_SEC_TASKS].count; i++) {
        cp_task_record t = cp_image_task(img, i);
        if (plan != NULL) {
            t.entry = plan->chain_start[t.entry]; /* a chain index, checked by pass 1 */
        }
        /* integer to function pointer is the implementation-defined but universal way;
         * entry keeps bit 0 so Thumb code is entered in Thumb state */
        tasks[i].entry = (cp_chain_fn)((uintptr_t)base + t.entry);
        tasks[i].period_ns = t.period_ns;
        tasks[i].offset_ns = t.offset_ns;
        tasks[i].priority = t.priority;
        tasks[i].flags = t.flags;
        tasks[i].wcet_ns = t.wcet_ns;
        tasks[i].budget_ns = t.budget_ns;
        tasks[i].link_timeout_ns = t.link_timeout_ns;
    }
}

/* Copies and bindings are grouped by (task, phase) and (task, direction), keeping table order
 * inside a group (a stable counting sort): the scheduler applies exactly one group at a time,
 * in table order, so the grouping changes nothing but lets it find a group without a scan.
 * Every entry is checked again while it is placed, so a caller that changes its image buffer
 * during the load cannot make a write leave the tables. */
#define GROUPS (2u * CP_MAX_TASKS)

static cp_status changed_during_load(cp_error *err, int type)
{
    return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                   "the %S section changed while it was being loaded: keep the image "
                   "buffer unchanged during cp_program_load", type);
}

/* One section of records (LET copies or I/O bindings), grouped by task and direction. */
typedef struct {
    int section;
    uint32_t (*group_of)(const cp_image *img, uint32_t index);
    cp_status (*check)(const cp_image *img, uint32_t index, cp_error *err);
    void (*put)(const cp_image *img, uint32_t index, void *out, uint32_t at);
} record_kind;

/* The stable counting sort described above, for either kind of record. */
static cp_status fill_grouped(const cp_image *img, const record_kind *kind, void *out,
                              cp_error *err)
{
    uint32_t count = img->sec[kind->section].count;
    uint32_t next[GROUPS], end[GROUPS]; /* insert position and end of each group */
    cp_fill((uint8_t *)end, 0, sizeof(end));
    for (uint32_t i = 0; i < count; i++) {
        uint32_t g = kind->group_of(img, i);
        if (g < GROUPS) {
            end[g]++;
        }
    }
    uint32_t at = 0;
    for (uint32_t g = 0; g < GROUPS; g++) {
        next[g] = at;
        at += end[g];
        end[g] = at;
    }
    for (uint32_t i = 0; i < count; i++) {
        cp_status st = kind->check(img, i, err);
        if (st != CP_OK) {
            return st;
        }
        uint32_t g = kind->group_of(img, i);
        if (g >= GROUPS || next[g] >= end[g] || next[g] >= count) {
            return changed_during_load(err, kind->section);
        }
        kind->put(img, i, out, next[g]++);
    }
    return CP_OK;
}

static uint32_t let_copy_group(const cp_image *img, uint32_t index)
{
    cp_let_copy c = cp_image_let_copy(img, index);
    return cp_let_copy_group(&c);
}

static void put_let_copy(const cp_image *img, uint32_t index, void *out, uint32_t at)
{
    ((cp_let_copy *)out)[at] = cp_image_let_copy(img, index);
}

static uint32_t io_binding_group(const cp_image *img, uint32_t index)
{
    cp_io_binding b = cp_image_io_binding(img, index);
    return cp_io_binding_group(&b);
}

static void put_io_binding(const cp_image *img, uint32_t index, void *out, uint32_t at)
{
    ((cp_io_binding *)out)[at] = cp_image_io_binding(img, index);
}

static const record_kind LET_COPIES = {CP_SEC_LET_COPIES, let_copy_group,
                                       cp_image_check_let_copy, put_let_copy};
static const record_kind IO_BINDINGS = {CP_SEC_IO_BINDINGS, io_binding_group,
                                        cp_image_check_io_binding, put_io_binding};

#ifndef CP_DATA_END_ALIGN
#define CP_DATA_END_ALIGN 1u
#endif

static uint64_t align_up(uint64_t n, uint64_t align)
{
    return (n + align - 1) / align * align;
}

static cp_status load(cp_program *out, const uint8_t *image, size_t len,
                      const cp_platform *platform, int allow_code, cp_error *err)
{
    cp_status st = check_arguments(out, platform, err);
    if (st != CP_OK) {
        return st;
    }
    cp_image img;
    st = cp_image_parse(&img, image, len, platform->arch, err);
    if (st != CP_OK) {
        return st;
    }
    img.allow_code = (uint8_t)allow_code;
    return cp_program_load_parsed(out, &img, platform, err);
}

cp_status cp_program_load(cp_program *out, const uint8_t *image, size_t len,
                          const cp_platform *platform, cp_error *err)
{
    return load(out, image, len, platform, 0, err);
}

cp_status cp_program_load_own(cp_program *out, const uint8_t *image, size_t len,
                              const cp_platform *platform, cp_error *err)
{
    return load(out, image, len, platform, 1, err);
}

/* Which format this runner takes: a runner that carries a stencil table (a build with
 * CP_WITH_TABLE) runs only what it can verify (format 2), unless the caller compiled the code
 * itself (allow_code); one without a table takes format 1 only. */
static cp_status check_format(const cp_image *img, cp_error *err)
{
#if defined(CP_WITH_TABLE)
    int has_table = 1;
#else
    int has_table = 0;
    if (img->version == CP_IMAGE_FORMAT_VERSION) {
        return CP_FAIL(err, CP_ERR_TABLE, 0,
                       "this runner carries no stencil table for %a, so it cannot build a "
                       "format-2 image: use a runner built with one (runner/tables/)", img->arch);
    }
#endif
    if (img->version == CP_IMAGE_FORMAT_VERSION_CODE && has_table && !img->allow_code) {
        return CP_FAIL(err, CP_ERR_VERSION, img->version,
                       "image format 1 carries machine code; this runner runs only verified "
                       "format-2 images (stencil ids): compile or save the program again", 0);
    }
    return CP_OK;
}

#if defined(CP_TEST_HOOKS)
void (*cp_test_load_hook)(int step) = NULL;
#endif

cp_status cp_program_load_parsed(cp_program *out, const cp_image *img,
                                 const cp_platform *platform, cp_error *err)
{
    cp_status st = check_arguments(out, platform, err);
    if (st != CP_OK) {
        return st;
    }
    if (img == NULL) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0, "cp_program_load_parsed: no parsed image", 0);
    }
    if (img->arch != platform->arch) {
        return CP_FAIL(err, CP_ERR_ARCH, img->arch,
                       "image is for architecture %a but this runner executes %a: compile "
                       "with LocalTarget(arch=...) matching the runner", img->arch,
                       platform->arch);
    }
    st = cp_check_cpu_features(img, platform, err);
    if (st != CP_OK) {
        return st;
    }
    st = check_format(img, err);
    if (st != CP_OK) {
        return st;
    }
#if defined(CP_WITH_TABLE)
    cp_table table;
    cp_blocks_plan plan;
    int blocks = img->version == CP_IMAGE_FORMAT_VERSION;
    if (blocks && (st = cp_blocks_plan_make(img, &table, &plan, err)) != CP_OK) {
        return st;
    }
    const cp_blocks_plan *laid = blocks ? &plan : NULL;
    CP_TEST_LOAD_HOOK(1);
#else
    const cp_blocks_plan *laid = NULL;
#endif
    const uint8_t *image = img->bytes;

    /* region: code | gap | data | tasks | LET copies | I/O bindings | initial data */
    uint32_t task_count = img->sec[CP_SEC_TASKS].count;
    uint32_t copy_count = img->sec[CP_SEC_LET_COPIES].count;
    uint32_t binding_count = img->sec[CP_SEC_IO_BINDINGS].count;
    uint64_t data_end = (uint64_t)img->data_offset + img->data_size;
    /* CP_DATA_END_ALIGN (a platform's -D, e.g. the firmware's MPU granule): nothing of the
     * runner's shares a granule with the data a task may write */
    uint64_t tasks_offset = align_up(align_up(data_end, CP_DATA_END_ALIGN),
                                     _Alignof(cp_task_entry));
    uint64_t copies_offset = align_up(tasks_offset + (uint64_t)task_count * sizeof(cp_task_entry),
                                      _Alignof(cp_let_copy));
    uint64_t bindings_offset = align_up(copies_offset + (uint64_t)copy_count *
                                        sizeof(cp_let_copy), _Alignof(cp_io_binding));
    uint64_t initial_offset = align_up(bindings_offset + (uint64_t)binding_count *
                                       sizeof(cp_io_binding), 16);
    /* the reset copy holds DATA_INIT only: the image's data ends at its last non-zero byte and
     * the rest of the region is zeros after the load (the placement writes only code, the
     * pointer slots are relative to themselves), so cp_program_reset_data zeroes it again */
    uint32_t initial_size = img->sec[CP_SEC_DATA_INIT].size;
    uint64_t need = initial_offset + initial_size;
    if (need == 0) {
        need = 1; /* an empty program still gets a real, freeable region */
    }
    uint64_t limit = platform->max_region_size != 0 ? platform->max_region_size : SIZE_MAX;
    if (need > limit) {
        const char *option = platform->memory_option;
        return CP_FAIL(err, CP_ERR_TOO_LARGE, 0,
                       option != NULL
                           ? "image needs %u bytes of memory, at most %u here: raise the limit "
                             "(%s)"
                           : "image needs %u bytes of memory but this runner offers at most %u: "
                             "shrink the program or give the runner more memory",
                       need, limit, (uint64_t)(uintptr_t)option);
    }
    size_t size = (size_t)need;

    uint8_t *base = platform->region_alloc(platform->ctx, size, img->base_align);
    if (base == NULL) {
        return CP_FAIL(err, CP_ERR_NOMEM, 0,
                       "the platform could not allocate %u bytes aligned to %u",
                       need, img->base_align);
    }
    if ((uintptr_t)base % img->base_align != 0) {
        platform->region_free(platform->ctx, base, size);
        return CP_FAIL(err, CP_ERR_NOMEM, 0,
                       "the platform returned a region at %x, not aligned to base_align %u",
                       (uintptr_t)base, img->base_align);
    }
    cp_clear(base, size);
    cp_copy(base + img->data_offset, image + img->sec[CP_SEC_DATA_INIT].offset,
            img->sec[CP_SEC_DATA_INIT].size);
    if (laid != NULL) {
#if defined(CP_WITH_TABLE)
        CP_TEST_LOAD_HOOK(2);
        st = cp_blocks_place(img, &table, laid, base, err);
#endif
    } else {
        cp_copy(base, image + img->sec[CP_SEC_CODE].offset, img->code_size);
        st = apply_patches(img, base, err);
    }
    if (st != CP_OK) {
        platform->region_free(platform->ctx, base, size);
        return st;
    }
    cp_task_entry *tasks = (cp_task_entry *)(void *)(base + tasks_offset);
    cp_let_copy *copies = (cp_let_copy *)(void *)(base + copies_offset);
    cp_io_binding *bindings = (cp_io_binding *)(void *)(base + bindings_offset);
    uint8_t *initial = base + initial_offset;
    fill_tasks(img, base, tasks, laid);
    if ((st = fill_grouped(img, &LET_COPIES, copies, err)) != CP_OK ||
        (st = fill_grouped(img, &IO_BINDINGS, bindings, err)) != CP_OK) {
        platform->region_free(platform->ctx, base, size);
        return st;
    }
    /* the patches only touch the code, so this is the data region as the image defines it */
    cp_copy_sparse(initial, base + img->data_offset, initial_size);
    /* [0, data_offset) holds code and the zero gap; data and the task table stay writable */
    if (platform->region_seal(platform->ctx, base, img->data_offset, size) != 0) {
        platform->region_free(platform->ctx, base, size);
        return CP_FAIL(err, CP_ERR_NOMEM, 0,
                       "the platform could not make the code executable (data_offset %u must "
                       "be a multiple of its page size; W^X policy?)", img->data_offset);
    }

    out->base = base;
    out->region_size = size;
    out->code_size = img->code_size;
    out->data_offset = img->data_offset;
    out->data_size = img->data_size;
    out->task_count = task_count;
    out->tasks = tasks;
    out->platform = platform;
    out->let_copy_count = copy_count;
    out->io_binding_count = binding_count;
    out->let_copies = copies;
    out->io_bindings = bindings;
    out->initial_data = initial;
    out->initial_size = initial_size;
    out->loaded = 1;
    cp_ok(err);
    return CP_OK;
}

CP_CALLS_LOADED_CODE
cp_status cp_program_run(const cp_program *prog, uint32_t task)
{
    if (prog == NULL || !prog->loaded || task >= prog->task_count) {
        return CP_ERR_ARGUMENT;
    }
    prog->tasks[task].entry();
    return CP_OK;
}

void cp_program_reset_data(const cp_program *prog)
{
    if (prog == NULL || !prog->loaded) {
        return;
    }
    uint8_t *data = cp_program_data(prog);
    uint32_t kept = prog->initial_size < prog->data_size ? prog->initial_size : prog->data_size;
    cp_copy(data, prog->initial_data, kept);
    cp_clear(data + kept, prog->data_size - kept);
}

void cp_program_unload(cp_program *prog)
{
    if (prog == NULL || !prog->loaded) {
        return;
    }
    const cp_platform *pf = prog->platform;
    if (pf != NULL && pf->region_free != NULL && prog->base != NULL) {
        pf->region_free(pf->ctx, prog->base, prog->region_size);
    }
    prog->loaded = 0;
    prog->base = NULL;
    prog->region_size = 0;
    prog->code_size = 0;
    prog->data_offset = 0;
    prog->data_size = 0;
    prog->task_count = 0;
    prog->tasks = NULL;
    prog->platform = NULL;
    prog->let_copy_count = 0;
    prog->io_binding_count = 0;
    prog->let_copies = NULL;
    prog->io_bindings = NULL;
    prog->initial_data = NULL;
    prog->initial_size = 0;
}
