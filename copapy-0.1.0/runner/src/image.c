/* Parsing and full validation of a program image (docs/image.md), in the documented error
 * order. Every read is byte-wise little-endian and bounds-checked before it happens; sizes are
 * compared in uint64 so no sum can wrap. */
#include "internal.h"

static const uint8_t magic[4] = {'C', 'P', 'I', 'M'};

/* v1 entry sizes by section type (contract.h's CP_SECTION_TABLE); 0 = unknown type (any
 * entry size is accepted). */
#define V1_ENTRY_SIZE(N, code, size) case code: return size;
static uint32_t v1_entry_size(uint32_t type)
{
    switch (type) {
    CP_SECTION_TABLE(V1_ENTRY_SIZE)
    default:
        return 0;
    }
}

/* TRUNCATED, MAGIC, VERSION, CRC and ARCH: everything before the layout is looked at. Magic and
 * version come before the total_size check so that a foreign file is reported as such. */
static cp_status check_envelope(const uint8_t *p, size_t len, uint16_t arch,
                                const uint32_t *crc_prefix, cp_error *err)
{
    if (len < CP_HEADER_SIZE) {
        return CP_FAIL(err, CP_ERR_TRUNCATED, 0,
                       "image is %u bytes, shorter than the %u-byte header: the transfer was "
                       "cut off or this is not a program image", len, CP_HEADER_SIZE);
    }
    if (p[0] != magic[0] || p[1] != magic[1] || p[2] != magic[2] || p[3] != magic[3]) {
        return CP_FAIL(err, CP_ERR_MAGIC, 0,
                       "image does not start with \"CPIM\" (found %x): this is not a copapy "
                       "program image", cp_le32(p));
    }
    uint16_t version = cp_le16(p + 4);
    if (version != CP_IMAGE_FORMAT_VERSION && version != CP_IMAGE_FORMAT_VERSION_CODE) {
        return CP_FAIL(err, CP_ERR_VERSION, version,
                       "image format version %u, but this runner reads versions %u and %u: "
                       "use a runner and a compiler of matching copapy versions",
                       version, CP_IMAGE_FORMAT_VERSION_CODE, CP_IMAGE_FORMAT_VERSION);
    }
    uint32_t total = cp_le32(p + 12);
    if ((uint64_t)len < total) {
        return CP_FAIL(err, CP_ERR_TRUNCATED, 0,
                       "image is %u bytes but its header says total_size %u: the image was "
                       "cut off in transit or storage", len, total);
    }
    if ((uint64_t)len > total) {
        return CP_FAIL(err, CP_ERR_LAYOUT, total,
                       "image is %u bytes but its header says total_size %u: %u bytes follow "
                       "the image (two images joined, or padding?); pass exactly one image",
                       len, total, (uint64_t)len - total);
    }
    if (total < CP_HEADER_SIZE + CP_CRC_SIZE) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "header total_size %u is smaller than header plus CRC trailer (%u)",
                       total, CP_HEADER_SIZE + CP_CRC_SIZE);
    }
    uint32_t stored = cp_le32(p + total - CP_CRC_SIZE);
    uint32_t computed = crc_prefix != NULL && (uint64_t)total == (uint64_t)len
                            ? *crc_prefix : cp_crc32(0, p, total - CP_CRC_SIZE);
    if (stored != computed) {
        return CP_FAIL(err, CP_ERR_CRC, 0,
                       "image CRC-32 mismatch (stored %x, computed %x): the image was "
                       "corrupted in transit or storage; transfer it again", stored, computed);
    }
    uint16_t image_arch = cp_le16(p + 8);
    if (image_arch != arch) {
        return CP_FAIL(err, CP_ERR_ARCH, image_arch,
                       "image is for architecture %a but this runner executes %a: compile "
                       "with LocalTarget(arch=...) matching the runner", image_arch, arch);
    }
    return CP_OK;
}

static cp_status check_header(cp_image *img, const uint8_t *p, cp_error *err)
{
    uint16_t header_size = cp_le16(p + 6);
    uint16_t flags = cp_le16(p + 10);
    if (header_size < CP_HEADER_SIZE) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "header_size %u is smaller than the v1 header (%u bytes)",
                       header_size, CP_HEADER_SIZE);
    }
    if (flags != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "header flags %x are unknown to this runner (v1 requires 0): update "
                       "the runner", flags);
    }
    if (cp_le32(p + 36) != 0 || cp_le32(p + 40) != 0 || cp_le32(p + 44) != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0, "header reserved words at 36-47 must be 0", 0);
    }
    uint32_t align = img->base_align;
    if (align < 16 || align > 65536 || (align & (align - 1)) != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "base_align %u must be a power of two from 16 to 65536", align);
    }
    if (img->data_offset < img->code_size || img->data_offset % align != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "data_offset %u must be >= code_size %u and a multiple of base_align %u",
                       img->data_offset, img->code_size, align);
    }
    return CP_OK;
}

static cp_status check_directory(cp_image *img, const uint8_t *p, cp_error *err)
{
    uint32_t header_size = cp_le16(p + 6);
    uint32_t count = cp_le32(p + 32);
    uint64_t content_end = (uint64_t)img->total_size - CP_CRC_SIZE;
    if (count > CP_MAX_SECTIONS) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0, "section_count %u exceeds the maximum of %u",
                       count, CP_MAX_SECTIONS);
    }
    uint64_t dir_end = (uint64_t)header_size + (uint64_t)count * CP_DIR_ENTRY_SIZE;
    if (dir_end > content_end) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "section directory [%u, %u) runs past the image content (%u bytes)",
                       header_size, dir_end, content_end);
    }
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = p + header_size + (size_t)i * CP_DIR_ENTRY_SIZE;
        uint16_t type = cp_le16(e);
        cp_section s = {cp_le32(e + 8), cp_le16(e + 2), cp_le32(e + 4), cp_le32(e + 12)};
        uint32_t min_entry = v1_entry_size(type);
        if (min_entry == 0 && (type & CP_SEC_OPTIONAL) == 0) {
            return CP_FAIL(err, CP_ERR_UNSUPPORTED, type,
                           "section %u has type %u, which this runner does not know, and the "
                           "type is required (bit 15 clear): the program needs a newer runner",
                           i, type);
        }
        if (s.entry_size < min_entry) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "section %u (%S, type %u): entry_size %u is below the v1 size %u",
                           i, type, type, s.entry_size, min_entry);
        }
        if ((uint64_t)s.count * s.entry_size != s.size) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "section %u (%S): size %u != count %u x entry_size %u",
                           i, type, s.size, s.count, s.entry_size);
        }
        if (s.offset < dir_end || (uint64_t)s.offset + s.size > content_end) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "section %u (%S): bytes [%u, %u) are outside [%u, %u) between the "
                           "directory and the CRC", i, type, s.offset,
                           (uint64_t)s.offset + s.size, dir_end, content_end);
        }
        for (uint32_t j = 0; j < i; j++) {
            const uint8_t *o = p + header_size + (size_t)j * CP_DIR_ENTRY_SIZE;
            uint32_t o_off = cp_le32(o + 8), o_size = cp_le32(o + 12);
            if (cp_le16(o) == type) {
                return CP_FAIL(err, CP_ERR_LAYOUT, i,
                               "sections %u and %u both have type %u (%S); each type may "
                               "appear once", j, i, type, type);
            }
            int overlap = s.size != 0 && o_size != 0 &&
                          (uint64_t)s.offset < (uint64_t)o_off + o_size &&
                          (uint64_t)o_off < (uint64_t)s.offset + s.size;
            if (overlap) {
                return CP_FAIL(err, CP_ERR_LAYOUT, i,
                               "sections %u (%S) and %u (%S) overlap: [%u, %u) and [%u, %u)",
                               j, cp_le16(o), i, type, o_off, (uint64_t)o_off + o_size,
                               s.offset, (uint64_t)s.offset + s.size);
            }
        }
        if (type >= 1 && type <= CP_SEC_KNOWN_MAX) {
            img->sec[type] = s;
        }
    }
    return CP_OK;
}

/* CPU_FEATURES: one u64 of feature bits (docs/image.md). A bit this runner does not know is
 * a feature it cannot check: the image is refused as needing a newer runner, like an unknown
 * required section. Whether this CPU has the features is the loader's check
 * (cp_check_cpu_features), not the image's. */
static cp_status check_cpu_features(cp_image *img, const uint8_t *p, cp_error *err)
{
    const cp_section *s = &img->sec[CP_SEC_CPU_FEATURES];
    if (s->count == 0) {
        return CP_OK; /* absent or empty: the baseline */
    }
    if (s->count != 1) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "the CPU_FEATURES section has %u entries, it must have exactly 1",
                       s->count);
    }
    uint64_t mask = cp_le64(p + s->offset);
    uint64_t unknown = mask & ~cp_cpu_features_known(img->arch);
    if (unknown != 0) {
        uint32_t bit = 0;
        while (((unknown >> bit) & 1u) == 0) {
            bit++;
        }
        return CP_FAIL(err, CP_ERR_UNSUPPORTED, bit,
                       "CPU feature bit %u of %s is unknown to this runner: the image is "
                       "corrupted or needs a newer runner", bit,
                       (uint64_t)(uintptr_t)cp_arch_name(img->arch));
    }
    img->cpu_features = mask;
    return CP_OK;
}

static int has_section(const uint8_t *p, uint16_t type)
{
    uint32_t header_size = cp_le16(p + 6);
    uint32_t count = cp_le32(p + 32);
    for (uint32_t i = 0; i < count; i++) {
        if (cp_le16(p + header_size + (size_t)i * CP_DIR_ENTRY_SIZE) == type) {
            return 1;
        }
    }
    return 0;
}

/* Format 2 (docs/image.md): BLOCKS and TABLE_PIN instead of CODE, PATCH_KINDS and PATCHES. */
static cp_status check_sections_v2(const cp_image *img, const uint8_t *p, cp_error *err)
{
    static const uint16_t code_sections[] = {CP_SEC_CODE, CP_SEC_PATCH_KINDS, CP_SEC_PATCHES};
    for (unsigned i = 0; i < sizeof(code_sections) / sizeof(code_sections[0]); i++) {
        if (has_section(p, code_sections[i])) {
            return CP_FAIL(err, CP_ERR_LAYOUT, code_sections[i],
                           "a format-2 image carries no code, but it has a %S section: an "
                           "image chooses stencils and data, never code", code_sections[i]);
        }
    }
    if (!has_section(p, CP_SEC_BLOCKS) || !has_section(p, CP_SEC_TASKS) ||
        img->sec[CP_SEC_TABLE_PIN].count != 1) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "a format-2 image needs the BLOCKS and TASKS sections and one TABLE_PIN "
                       "entry", 0);
    }
    if (img->sec[CP_SEC_DATA_INIT].size > img->data_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "DATA_INIT has %u bytes, more than data_size %u",
                       img->sec[CP_SEC_DATA_INIT].size, img->data_size);
    }
    return CP_OK;
}

static cp_status check_sections(const cp_image *img, const uint8_t *p, cp_error *err)
{
    if (img->version == CP_IMAGE_FORMAT_VERSION) {
        return check_sections_v2(img, p, err);
    }
    static const uint16_t v2_sections[] = {CP_SEC_BLOCKS, CP_SEC_TABLE_PIN, CP_SEC_FROZEN};
    for (unsigned i = 0; i < sizeof(v2_sections) / sizeof(v2_sections[0]); i++) {
        if (has_section(p, v2_sections[i])) {
            return CP_FAIL(err, CP_ERR_LAYOUT, v2_sections[i],
                           "a format-1 image has a %S section, which only format 2 knows",
                           v2_sections[i]);
        }
    }
    if (!has_section(p, CP_SEC_CODE) || !has_section(p, CP_SEC_TASKS)) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "the CODE and TASKS sections are required but %S is missing",
                       has_section(p, CP_SEC_CODE) ? CP_SEC_TASKS : CP_SEC_CODE);
    }
    if (img->sec[CP_SEC_CODE].size != img->code_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "CODE section has %u bytes but header code_size is %u",
                       img->sec[CP_SEC_CODE].size, img->code_size);
    }
    if (img->sec[CP_SEC_DATA_INIT].size > img->data_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "DATA_INIT has %u bytes, more than data_size %u",
                       img->sec[CP_SEC_DATA_INIT].size, img->data_size);
    }
    return CP_OK;
}

cp_patch_record cp_image_patch(const cp_image *img, uint32_t index)
{
    const uint8_t *e = cp_image_entry(img, CP_SEC_PATCHES, index);
    uint32_t addend = cp_le32(e + 8);
    cp_patch_record r;
    r.site = cp_le32(e);
    r.kind = cp_le16(e + 4);
    r.base = e[6];
    r.reserved = e[7];
    /* two's complement conversion spelled out; a plain cast is implementation-defined */
    r.addend = addend <= INT32_MAX ? (int32_t)addend : -(int32_t)(~addend) - 1;
    return r;
}

cp_task_record cp_image_task(const cp_image *img, uint32_t index)
{
    const uint8_t *e = cp_image_entry(img, CP_SEC_TASKS, index);
    cp_task_record t = {cp_le32(e), cp_le32(e + 4), cp_le32(e + 8), cp_le16(e + 12),
                        cp_le16(e + 14), cp_le32(e + 16), cp_le32(e + 20), 0, 0, 0};
    if (img->sec[CP_SEC_TASKS].entry_size >= CP_TASK_SIZE_BUDGET) {
        t.budget_ns = cp_le32(e + 24);
        t.reserved2 = cp_le32(e + 28);
        t.link_timeout_ns = cp_le64(e + 32);
    }
    return t;
}

cp_let_copy cp_image_let_copy(const cp_image *img, uint32_t index)
{
    const uint8_t *e = cp_image_entry(img, CP_SEC_LET_COPIES, index);
    cp_let_copy c = {cp_le16(e), e[2], e[3], cp_le32(e + 4), cp_le32(e + 8), cp_le32(e + 12)};
    return c;
}

static double f64_from_bits(uint64_t bits)
{
    double d;
    cp_copy((uint8_t *)&d, (const uint8_t *)&bits, sizeof(d));
    return d;
}

/* The second reserved word (bytes 12-15) is not part of cp_io_binding; it is checked by
 * check_io_bindings directly. The safe value (bytes 16-23) is 0 in 16-byte entries. */
cp_io_binding cp_image_io_binding(const cp_image *img, uint32_t index)
{
    const uint8_t *e = cp_image_entry(img, CP_SEC_IO_BINDINGS, index);
    cp_io_binding b = {cp_le16(e), e[2], e[3], cp_le16(e + 4), e[6], e[7], cp_le32(e + 8),
                       0.0};
    if (img->sec[CP_SEC_IO_BINDINGS].entry_size >= CP_IO_BINDING_SIZE_SAFE) {
        b.safe = f64_from_bits(cp_le64(e + 16));
    }
    return b;
}

cp_status cp_image_check_patch(const cp_image *img, uint32_t index, cp_error *err)
{
    cp_patch_record r = cp_image_patch(img, index);
    uint32_t kind_count = img->sec[CP_SEC_PATCH_KINDS].count;
    if (r.kind >= kind_count) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch %u: kind %u but PATCH_KINDS has only %u entries",
                       index, r.kind, kind_count);
    }
    if (r.base != 0 || r.reserved != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch %u: base %u and reserved %u must be 0 in v1",
                       index, r.base, r.reserved);
    }
    uint32_t word_bytes = cp_image_entry(img, CP_SEC_PATCH_KINDS, r.kind)[0] / 8u;
    if ((uint64_t)r.site + word_bytes > img->code_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch %u: site %u + %u bytes runs past code_size %u",
                       index, r.site, word_bytes, img->code_size);
    }
    return CP_OK;
}

static cp_status check_patches(const cp_image *img, cp_error *err)
{
    const cp_section *kinds = &img->sec[CP_SEC_PATCH_KINDS];
    for (uint32_t i = 0; i < kinds->count; i++) {
        cp_patch_kind k;
        cp_status st = cp_kind_decode(cp_image_entry(img, CP_SEC_PATCH_KINDS, i), i, &k, err);
        if (st != CP_OK) {
            return st;
        }
    }
    for (uint32_t i = 0; i < img->sec[CP_SEC_PATCHES].count; i++) {
        cp_status st = cp_image_check_patch(img, i, err);
        if (st != CP_OK) {
            return st;
        }
    }
    return CP_OK;
}

static cp_status check_tasks(const cp_image *img, cp_error *err)
{
    uint32_t count = img->sec[CP_SEC_TASKS].count;
    if (count > CP_MAX_TASKS) {
        return CP_FAIL(err, CP_ERR_LAYOUT, 0,
                       "the image has %u tasks but a runner schedules at most %u: merge tasks "
                       "of equal period", count, CP_MAX_TASKS);
    }
    for (uint32_t i = 0; i < count; i++) {
        cp_task_record t = cp_image_task(img, i);
        /* format 2: entry is a chain index, checked against BLOCKS while loading */
        if (img->version == CP_IMAGE_FORMAT_VERSION_CODE &&
            (t.entry & ~(uint32_t)1) >= img->code_size) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "task %u: entry %u is not inside the code (code_size %u)",
                           i, t.entry, img->code_size);
        }
        if (t.flags != 0) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i, "task %u: flags %x must be 0 in v1",
                           i, t.flags);
        }
        if (t.period_ns != 0 && t.offset_ns >= t.period_ns) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "task %u: offset %u ns must be smaller than its period %u ns",
                           i, t.offset_ns, t.period_ns);
        }
        if (t.reserved != 0 || t.reserved2 != 0) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "task %u: reserved bytes 20-23 and 28-31 must be 0", i);
        }
    }
    return CP_OK;
}

static cp_status check_ports(const cp_image *img, cp_error *err)
{
    const cp_section *strings = &img->sec[CP_SEC_STRINGS];
    /* a name is terminated iff it starts at or before the last NUL: O(1) per port */
    uint64_t names_end = 0;
    for (uint32_t i = strings->size; i > 0; i--) {
        if (img->bytes[strings->offset + i - 1] == 0) {
            names_end = i;
            break;
        }
    }
    uint32_t task_count = img->sec[CP_SEC_TASKS].count;
    for (uint32_t i = 0; i < img->sec[CP_SEC_PORTS].count; i++) {
        const uint8_t *e = cp_image_entry(img, CP_SEC_PORTS, i);
        uint32_t name = cp_le32(e), offset = cp_le32(e + 4), count = cp_le32(e + 12);
        uint8_t dtype = e[8], role = e[9];
        uint16_t task = cp_le16(e + 10);
        uint32_t size = cp_dtype_size(dtype);
        if (size == 0) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i, "port %u: dtype %u is unknown (the dtypes:"
                           CP_DTYPE_LIST ")", i, dtype);
        }
        if (role < 1 || role > CP_ROLE_COUNT) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i, "port %u: role %u is unknown (1 to %u)",
                           i, role, CP_ROLE_COUNT);
        }
        if ((uint64_t)name >= names_end) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "port %u: name offset %u is not a NUL-terminated string in STRINGS "
                           "(%u bytes)", i, name, strings->size);
        }
        if (task != 0xffffu && task >= task_count) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i, "port %u: task %u but there are %u tasks",
                           i, task, task_count);
        }
        if (offset % size != 0) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "port %u: data offset %u is not aligned to its %u-byte elements",
                           i, offset, size);
        }
        uint64_t end = (uint64_t)offset + (uint64_t)count * size;
        if (end > img->data_size) {
            return CP_FAIL(err, CP_ERR_LAYOUT, i,
                           "port %u: data bytes [%u, %u) exceed data_size %u",
                           i, offset, end, img->data_size);
        }
    }
    return CP_OK;
}

/* A LET copy or an I/O binding belongs to a scheduled task: one with a release and a period
 * end. */
static cp_status check_owner(const cp_image *img, int section, uint32_t index, uint32_t task,
                             cp_error *err)
{
    uint32_t count = img->sec[CP_SEC_TASKS].count;
    int copy = section == CP_SEC_LET_COPIES;
    if (task >= count) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       copy ? "LET copy %u: task %u but there are %u tasks"
                            : "I/O binding %u: task %u but there are %u tasks",
                       index, task, count);
    }
    if (cp_image_task(img, task).period_ns == 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       copy ? "LET copy %u: task %u has period 0 (runs only on request), so "
                              "it has no release or period end; give the task a period"
                            : "I/O binding %u: task %u has period 0 (runs only on request), "
                              "so it has no release or period end; give the task a period",
                       index, task);
    }
    return CP_OK;
}

cp_status cp_image_check_let_copy(const cp_image *img, uint32_t i, cp_error *err)
{
    cp_let_copy c = cp_image_let_copy(img, i);
    cp_status st = check_owner(img, CP_SEC_LET_COPIES, i, c.task, err);
    if (st != CP_OK) {
        return st;
    }
    if (c.phase > 1) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "LET copy %u (task %u): phase %u is unknown (0 release, 1 publish)",
                       i, c.task, c.phase);
    }
    if (c.reserved != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "LET copy %u (task %u): reserved byte 3 must be 0", i, c.task);
    }
    if (c.size == 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i, "LET copy %u (task %u): size must be > 0",
                       i, c.task);
    }
    uint64_t src_end = (uint64_t)c.src + c.size, dst_end = (uint64_t)c.dst + c.size;
    if (src_end > img->data_size || dst_end > img->data_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "LET copy %u (task %u): source [%u, %u) or destination [%u, %u) "
                       "exceeds data_size %u",
                       i, c.task, c.src, src_end, c.dst, dst_end, img->data_size);
    }
    if (c.src < dst_end && c.dst < src_end) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "LET copy %u (task %u): source [%u, %u) and destination [%u, %u) "
                       "overlap", i, c.task, c.src, src_end, c.dst, dst_end);
    }
    return CP_OK;
}

static cp_status check_let_copies(const cp_image *img, cp_error *err)
{
    for (uint32_t i = 0; i < img->sec[CP_SEC_LET_COPIES].count; i++) {
        cp_status st = cp_image_check_let_copy(img, i, err);
        if (st != CP_OK) {
            return st;
        }
    }
    return CP_OK;
}

cp_status cp_image_check_io_binding(const cp_image *img, uint32_t i, cp_error *err)
{
    cp_io_binding b = cp_image_io_binding(img, i);
    cp_status st = check_owner(img, CP_SEC_IO_BINDINGS, i, b.task, err);
    if (st != CP_OK) {
        return st;
    }
    if (b.direction != CP_DIR_INPUT && b.direction != CP_DIR_OUTPUT) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): direction %u is unknown (1 input, "
                       "2 output)", i, b.task, b.direction);
    }
    if (b.kind < 1 || b.kind > CP_IO_KIND_COUNT) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): kind %u is unknown (the kinds:"
                       CP_IO_KIND_LIST ")", i, b.task, b.kind);
    }
    uint32_t size = cp_io_dtype_size(b.dtype);
    if (size == 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): dtype %u is unknown (I/O slots:"
                       CP_IO_DTYPE_LIST ")", i, b.task, b.dtype);
    }
    if (b.reserved != 0 || cp_le32(cp_image_entry(img, CP_SEC_IO_BINDINGS, i) + 12) != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): reserved bytes 7 and 12-15 must be 0",
                       i, b.task);
    }
    if (b.safe != b.safe || b.safe - b.safe != 0.0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): the safe value is not a finite number",
                       i, b.task);
    }
    if ((uint64_t)b.offset + size > img->data_size) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): slot [%u, %u) exceeds data_size %u",
                       i, b.task, b.offset, (uint64_t)b.offset + size, img->data_size);
    }
    if (b.offset % size != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, i,
                       "I/O binding %u (task %u): slot offset %u is not aligned to its "
                       "%u-byte dtype", i, b.task, b.offset, size);
    }
    return CP_OK;
}

static cp_status check_io_bindings(const cp_image *img, cp_error *err)
{
    for (uint32_t i = 0; i < img->sec[CP_SEC_IO_BINDINGS].count; i++) {
        cp_status st = cp_image_check_io_binding(img, i, err);
        if (st != CP_OK) {
            return st;
        }
    }
    return CP_OK;
}

static cp_status parse(cp_image *img, const uint8_t *image, size_t len, uint16_t arch,
                       const uint32_t *crc_prefix, cp_error *err)
{
    if (img == NULL || (image == NULL && len != 0)) {
        return CP_FAIL(err, CP_ERR_ARGUMENT, 0, "image pointer is NULL", 0);
    }
    cp_status st = check_envelope(image, len, arch, crc_prefix, err);
    if (st != CP_OK) {
        return st;
    }
    cp_image v;
    cp_fill((uint8_t *)&v, 0, sizeof(v));
    v.bytes = image;
    v.total_size = cp_le32(image + 12);
    v.arch = cp_le16(image + 8);
    v.code_size = cp_le32(image + 16);
    v.data_offset = cp_le32(image + 20);
    v.data_size = cp_le32(image + 24);
    v.base_align = cp_le32(image + 28);
    v.version = cp_le16(image + 4);
    if ((st = check_header(&v, image, err)) != CP_OK ||
        (st = check_directory(&v, image, err)) != CP_OK ||
        (st = check_cpu_features(&v, image, err)) != CP_OK ||
        (st = check_sections(&v, image, err)) != CP_OK ||
        (st = check_patches(&v, err)) != CP_OK ||
        (st = check_tasks(&v, err)) != CP_OK ||
        (st = check_ports(&v, err)) != CP_OK ||
        (st = check_let_copies(&v, err)) != CP_OK ||
        (st = check_io_bindings(&v, err)) != CP_OK) {
        return st;
    }
    *img = v;
    cp_ok(err);
    return CP_OK;
}

cp_status cp_image_parse(cp_image *img, const uint8_t *image, size_t len, uint16_t arch,
                         cp_error *err)
{
    return parse(img, image, len, arch, NULL, err);
}

cp_status cp_image_parse_crc(cp_image *img, const uint8_t *image, size_t len, uint16_t arch,
                             uint32_t crc_prefix, cp_error *err)
{
    return parse(img, image, len, arch, &crc_prefix, err);
}

cp_status cp_image_validate(const uint8_t *image, size_t len, uint16_t arch, cp_error *err)
{
    cp_image img;
    return cp_image_parse(&img, image, len, arch, err);
}
