/* Wire protocol v1 codec: COBS, frame header and CRC, incremental decoder (docs/protocol.md).
 * Libc-free and allocation-free; every write is bounds-checked, so no byte sequence can make
 * the decoder leave its buffer. */
#include "copapy/proto.h"

#include "internal.h"

size_t cp_cobs_encode(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    if (cap == 0) {
        return 0;
    }
    size_t code_at = 0; /* where the current block's code byte goes */
    size_t o = 1;
    uint8_t code = 1;   /* 1 + data bytes in the current block */
    for (size_t i = 0; i < n; i++) {
        if (in[i] == 0) {
            out[code_at] = code;
            if (o >= cap) {
                return 0;
            }
            code_at = o++;
            code = 1;
            continue;
        }
        if (o >= cap) {
            return 0;
        }
        out[o++] = in[i];
        if (++code == 0xff) {
            out[code_at] = code;
            if (o >= cap) {
                return 0;
            }
            code_at = o++;
            code = 1;
        }
    }
    out[code_at] = code;
    return o;
}

size_t cp_cobs_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t o = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t code = in[i++];
        if (code == 0 || (size_t)(code - 1) > n - i) {
            return (size_t)-1;
        }
        for (uint8_t k = 1; k < code; k++) {
            uint8_t b = in[i++];
            if (b == 0 || o >= cap) {
                return (size_t)-1;
            }
            out[o++] = b;
        }
        if (code != 0xff && i < n) {
            if (o >= cap) {
                return (size_t)-1;
            }
            out[o++] = 0;
        }
    }
    return o;
}

void cp_frame_header(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                     uint16_t length)
{
    frame[0] = CP_FRAME_VERSION;
    frame[1] = flags;
    cp_put16(frame + 2, seq);
    frame[4] = command;
    frame[5] = 0;
    cp_put16(frame + 6, length);
}

size_t cp_frame_seal(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                     uint16_t length)
{
    cp_frame_header(frame, flags, seq, command, length);
    cp_frame_put_crc(frame, length);
    return (size_t)CP_FRAME_HEADER + length + CP_FRAME_CRC;
}

void cp_frame_put_crc(uint8_t *frame, uint16_t length)
{
    size_t body = (size_t)CP_FRAME_HEADER + length;
    cp_put32(frame + body, cp_crc32(0, frame, body));
}

size_t cp_frame_encode(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                       uint16_t length, uint8_t *out, size_t cap)
{
    size_t n = cp_frame_seal(frame, flags, seq, command, length);
    if (cap < 2) {
        return 0;
    }
    size_t w = cp_cobs_encode(frame, n, out, cap - 1);
    if (w == 0) {
        return 0;
    }
    out[w] = 0;
    return w + 1;
}

/* ---- incremental decoder */

enum { DEC_IDLE = 0, DEC_FRAME = 1, DEC_DISCARD = 2 };

int cp_decoder_init(cp_decoder *d, uint8_t *buf, size_t buf_size, uint16_t max_payload)
{
    if (d == NULL || buf == NULL || max_payload == 0 ||
        buf_size < (size_t)max_payload + CP_FRAME_OVERHEAD) {
        return -1;
    }
    cp_fill((uint8_t *)d, 0, sizeof(*d));
    d->buf = buf;
    d->cap = (uint32_t)max_payload + CP_FRAME_OVERHEAD;
    d->max_payload = max_payload;
    return 0;
}

void cp_decoder_reset(cp_decoder *d)
{
    d->len = 0;
    d->block_code = 0;
    d->block_left = 0;
    d->state = DEC_IDLE;
    d->prefix = 0;
}

/* What a line of text or an HTTP request consists of. */
static int is_text(uint8_t b)
{
    return (b >= 0x20 && b <= 0x7e) || b == '\t' || b == '\n' || b == '\r';
}

static int dec_drop(cp_decoder *d)
{
    d->bad_frames++;
    cp_decoder_reset(d);
    return CP_DEC_BAD;
}

static int dec_finish(cp_decoder *d, cp_frame *out)
{
    if (d->block_left != 0 || d->len < CP_FRAME_OVERHEAD) {
        return dec_drop(d); /* a block cut short by the delimiter, or no room for a header */
    }
    const uint8_t *f = d->buf;
    uint16_t length = cp_le16(f + 6);
    if ((uint32_t)length + CP_FRAME_OVERHEAD != d->len) {
        return dec_drop(d);
    }
    size_t body = (size_t)CP_FRAME_HEADER + length;
    uint32_t crc = cp_le32(f + body);
    if (cp_crc32(0, f, body) != crc) {
        return dec_drop(d);
    }
    out->version = f[0];
    out->flags = f[1];
    out->seq = cp_le16(f + 2);
    out->command = f[4];
    out->reserved = f[5];
    out->length = length;
    out->payload = f + CP_FRAME_HEADER;
    out->crc = crc;
    cp_decoder_reset(d);
    return CP_DEC_FRAME;
}

int cp_decoder_push(cp_decoder *d, uint8_t byte, cp_frame *out)
{
    if (byte == 0) {
        switch (d->state) {
        case DEC_IDLE:
            return CP_DEC_NONE;
        case DEC_DISCARD:
            return dec_drop(d);
        default:
            return dec_finish(d, out);
        }
    }
    if (d->state == DEC_DISCARD) {
        return CP_DEC_NONE;
    }
    if (d->prefix < CP_TEXT_PREFIX) {
        d->prefix = is_text(byte) ? (uint8_t)(d->prefix + 1) : 0xff;
        if (d->prefix == CP_TEXT_PREFIX) {
            d->text_frames++;
            d->state = DEC_DISCARD;
            return CP_DEC_TEXT;
        }
    }
    d->state = DEC_FRAME;
    if (d->block_left == 0) {
        /* a code byte: the previous block (unless it was a full 254-byte run) ended in a zero */
        if (d->block_code != 0 && d->block_code != 0xff) {
            if (d->len >= d->cap) {
                d->state = DEC_DISCARD;
                return CP_DEC_NONE;
            }
            d->buf[d->len++] = 0;
        }
        d->block_code = byte;
        d->block_left = (uint8_t)(byte - 1);
        return CP_DEC_NONE;
    }
    if (d->len >= d->cap) {
        d->state = DEC_DISCARD;
        return CP_DEC_NONE;
    }
    d->buf[d->len++] = byte;
    d->block_left--;
    return CP_DEC_NONE;
}
