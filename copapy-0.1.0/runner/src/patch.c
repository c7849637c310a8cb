/* The generic patch of docs/image.md: all architecture knowledge is in the descriptor.
 * Arithmetic is uint64 two's complement; every variable shift is kept below 64. */
#include "internal.h"

static uint64_t low_mask(unsigned bits)
{
    return bits >= 64 ? UINT64_MAX : (((uint64_t)1 << bits) - 1u);
}

/* >> on a negative signed value is implementation-defined in C, so sign-fill by hand. */
static uint64_t shift_right_arith(uint64_t v, unsigned s)
{
    if (s == 0) {
        return v;
    }
    uint64_t r = v >> s;
    if (v >> 63) {
        r |= ~(UINT64_MAX >> s);
    }
    return r;
}

static int fits(uint64_t value, unsigned bits, int is_signed)
{
    if (bits == 0 || bits >= 64) {
        return 1;
    }
    if (is_signed) {
        uint64_t top = shift_right_arith(value, bits - 1);
        return top == 0 || top == UINT64_MAX;
    }
    return (value >> bits) == 0;
}

static uint64_t read_word(const cp_patch_kind *kind, const uint8_t *p)
{
    switch (kind->word_bits) {
    case 16:
        return cp_le16(p);
    case 32:
        if (kind->flags & CP_PK_THUMB32) {
            /* Thumb-2: the first halfword in memory holds the high 16 bits */
            return ((uint64_t)cp_le16(p) << 16) | cp_le16(p + 2);
        }
        return cp_le32(p);
    default:
        return cp_le64(p);
    }
}

static void write_word(const cp_patch_kind *kind, uint8_t *p, uint64_t word)
{
    switch (kind->word_bits) {
    case 16:
        cp_put16(p, (uint16_t)word);
        break;
    case 32:
        if (kind->flags & CP_PK_THUMB32) {
            cp_put16(p, (uint16_t)(word >> 16));
            cp_put16(p + 2, (uint16_t)word);
        } else {
            cp_put32(p, (uint32_t)word);
        }
        break;
    default:
        cp_put64(p, word);
        break;
    }
}

/* fields: how many the descriptor holds (4 or 6); known: the flags it may use */
static cp_status kind_decode(const uint8_t *raw, unsigned fields, uint32_t known, uint32_t index,
                             cp_patch_kind *kind, cp_error *err)
{
    cp_patch_kind k;
    cp_fill((uint8_t *)&k, 0, sizeof(k));
    k.word_bits = raw[0];
    k.flags = raw[1];
    k.shift = raw[2];
    k.range_bits = raw[3];
    k.align_log2 = raw[4];
    k.field_count = raw[5];
    for (unsigned f = 0; f < fields; f++) {
        for (unsigned b = 0; b < 3; b++) {
            k.field[f][b] = raw[8 + 3 * f + b];
        }
    }
    if (fields == CP_KIND_FIELDS_WIDE) {
        if (raw[26] != 0 || raw[27] != 0) {
            return CP_FAIL(err, CP_ERR_LAYOUT, index,
                           "patch kind %u: reserved bytes 26-27 must be 0", index);
        }
        k.flip_mask = cp_le32(raw + 28);
    }

    if (k.word_bits != 16 && k.word_bits != 32 && k.word_bits != 64) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: word_bits %u is invalid; must be 16, 32 or 64",
                       index, k.word_bits);
    }
    uint32_t unknown_flags = (uint32_t)k.flags & ~known;
    if (unknown_flags != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: unknown flag bits %x (v1 knows bits 0-4)",
                       index, unknown_flags);
    }
    if (k.shift > 63) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index, "patch kind %u: shift %u exceeds 63",
                       index, k.shift);
    }
    if (k.range_bits > 64) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index, "patch kind %u: range_bits %u exceeds 64",
                       index, k.range_bits);
    }
    if (k.align_log2 > 63) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index, "patch kind %u: align_log2 %u exceeds 63",
                       index, k.align_log2);
    }
    if (k.field_count < 1 || k.field_count > fields) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index, "patch kind %u: field_count %u must be 1 to %u",
                       index, k.field_count, fields);
    }
    if (!(k.flags & CP_PK_XOR_NOT_SIGN) && k.flip_mask != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: a flip mask without XOR_NOT_SIGN", index);
    }
    if (raw[6] != 0 || raw[7] != 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: reserved bytes 6-7 must be 0", index);
    }
    if ((k.flags & CP_PK_THUMB32) && k.word_bits != 32) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: THUMB32 needs word_bits 32, not %u", index, k.word_bits);
    }
    if ((k.flags & CP_PK_ROUND) && k.shift == 0) {
        return CP_FAIL(err, CP_ERR_LAYOUT, index,
                       "patch kind %u: ROUND needs shift >= 1", index);
    }
    for (unsigned f = 0; f < fields; f++) {
        unsigned src = k.field[f][0], width = k.field[f][1], dst = k.field[f][2];
        if (f >= k.field_count) {
            if (src != 0 || width != 0 || dst != 0) {
                return CP_FAIL(err, CP_ERR_LAYOUT, index,
                               "patch kind %u: unused field %u must be all 0", index, f);
            }
            continue;
        }
        if (width < 1 || dst + width > k.word_bits || src + width > 64) {
            return CP_FAIL(err, CP_ERR_LAYOUT, index,
                           "patch kind %u: field %u (src %u, width %u, dst %u) does not fit "
                           "a %u-bit word and a 64-bit value", index, f, src, width, dst,
                           k.word_bits);
        }
    }
    *kind = k;
    return CP_OK;
}

cp_status cp_kind_decode(const uint8_t *raw, uint32_t index, cp_patch_kind *kind, cp_error *err)
{
    return kind_decode(raw, CP_KIND_FIELDS, CP_PK_KNOWN, index, kind, err);
}

cp_status cp_kind_decode_wide(const uint8_t *raw, uint32_t index, cp_patch_kind *kind,
                              cp_error *err)
{
    return kind_decode(raw, CP_KIND_FIELDS_WIDE, CP_PK_KNOWN_WIDE, index, kind, err);
}

cp_status cp_patch_apply(const cp_patch_kind *kind, uint8_t *word, uint64_t site_addr,
                         uint64_t target_addr, uint32_t index, cp_error *err)
{
    uint64_t value = target_addr;
    if (kind->flags & CP_PK_PCREL) {
        if (kind->flags & CP_PK_PAGE) {
            value = (target_addr & ~(uint64_t)0xfff) - (site_addr & ~(uint64_t)0xfff);
        } else {
            value = target_addr - site_addr;
        }
    }
    if (value & low_mask(kind->align_log2)) {
        return CP_FAIL(err, CP_ERR_PATCH, index,
                       "patch %u (site %x): value %x is not a multiple of %u; the region "
                       "base or the target is misaligned for this relocation",
                       index, site_addr, value, (uint64_t)1 << kind->align_log2);
    }
    if ((kind->flags & CP_PK_ROUND) && kind->shift >= 1) {
        value += (uint64_t)1 << (kind->shift - 1);
    }
    value = shift_right_arith(value, kind->shift);
    int is_signed = (kind->flags & CP_PK_SIGNED) != 0;
    if (!fits(value, kind->range_bits, is_signed)) {
        if (is_signed) {
            return CP_FAIL(err, CP_ERR_PATCH, index,
                           "patch %u (site %x): value %d (after >> %u) does not fit in %u "
                           "signed bits; the target is out of this relocation's reach",
                           index, site_addr, value, kind->shift, kind->range_bits);
        }
        return CP_FAIL(err, CP_ERR_PATCH, index,
                       "patch %u (site %x): value %x (after >> %u) does not fit in %u "
                       "unsigned bits; the target is out of this relocation's reach",
                       index, site_addr, value, kind->shift, kind->range_bits);
    }
    if ((kind->flags & CP_PK_XOR_NOT_SIGN) && (value >> 63) == 0) {
        value ^= kind->flip_mask;
    }
    uint64_t w = read_word(kind, word);
    unsigned count = kind->field_count > CP_KIND_FIELDS_WIDE ? (unsigned)CP_KIND_FIELDS_WIDE
                                                             : kind->field_count;
    for (unsigned f = 0; f < count; f++) {
        unsigned src = kind->field[f][0], width = kind->field[f][1], dst = kind->field[f][2];
        if (width == 0 || src > 63 || dst > 63) {
            continue; /* cp_kind_decode rejects these; never shift by 64 even if misused */
        }
        uint64_t mask = low_mask(width);
        w = (w & ~(mask << dst)) | (((value >> src) & mask) << dst);
    }
    write_word(kind, word, w);
    return CP_OK;
}
