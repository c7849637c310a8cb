/* Wire protocol v1 codec (docs/protocol.md): COBS byte stuffing, the frame header and CRC, and
 * an incremental byte-by-byte decoder over a fixed buffer. No allocation and no libc: the same
 * code serves the host runner, the bare-metal firmware and the Zephyr firmware.
 *
 * A frame on the wire is COBS(header | payload | crc32) followed by one 0x00 delimiter. */
#ifndef COPAPY_PROTO_H
#define COPAPY_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CP_PROTO_VERSION 1u

enum {
    CP_FRAME_HEADER = 8,    /* version, flags, seq(2), command, reserved, length(2) */
    CP_FRAME_CRC = 4,
    CP_FRAME_OVERHEAD = 12  /* header + CRC */
};

/* Frame flags. */
enum { CP_FLAG_RESPONSE = 1u, CP_FLAG_EVENT = 2u, CP_FLAG_ERROR = 4u };

/* Commands. */
enum {
    CP_CMD_HELLO = 1,
    CP_CMD_LOAD_BEGIN = 2,
    CP_CMD_LOAD_CHUNK = 3,
    CP_CMD_LOAD_STATUS = 4,
    CP_CMD_LOAD_COMMIT = 5,
    CP_CMD_START = 6,
    CP_CMD_STOP = 7,
    CP_CMD_READ = 8,
    CP_CMD_WRITE = 9,
    CP_CMD_STATS = 10,
    CP_CMD_STREAM = 11,
    CP_CMD_RESET = 12,
    CP_CMD_IO_READ = 13,
    CP_CMD_IO_WRITE = 14,
    CP_CMD_GET_PORTS = 15
};

/* Error codes of an ERROR response. */
enum {
    CP_PERR_BAD_COMMAND = 1,
    CP_PERR_BAD_PAYLOAD = 2,
    CP_PERR_BAD_STATE = 3,
    CP_PERR_TOO_LARGE = 4,
    CP_PERR_GAP = 5,
    CP_PERR_IMAGE_INVALID = 6,
    CP_PERR_OUT_OF_RANGE = 7,
    CP_PERR_NOT_WRITABLE = 8,
    CP_PERR_VERSION = 9
};

#define CP_ERROR_MESSAGE_MAX 120u

/* Bytes of the COBS encoding of n bytes, without the delimiter (one code byte per started run
 * of 254 bytes, at least one). */
#define CP_COBS_MAX(n) ((n) + (n) / 254u + 1u)
/* Bytes on the wire for a frame with a payload of p bytes, delimiter included. */
#define CP_WIRE_MAX(p) (CP_COBS_MAX((p) + 12u) + 1u)

/* COBS-encodes n bytes into out (without the delimiter). Returns the encoded length, or 0 if
 * cap is too small (the encoding of anything, even of nothing, is at least one byte). */
size_t cp_cobs_encode(const uint8_t *in, size_t n, uint8_t *out, size_t cap);

/* Decodes one COBS block sequence (without the delimiter). Returns the decoded length, or
 * (size_t)-1 if the input is not valid COBS (a zero byte, a run past the end) or does not fit. */
size_t cp_cobs_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap);

/* A decoded, CRC-checked frame; payload points into the decoder's buffer. */
typedef struct cp_frame {
    uint8_t version;
    uint8_t flags;
    uint16_t seq;
    uint8_t command;
    uint8_t reserved;
    uint16_t length;
    const uint8_t *payload;
    uint32_t crc;      /* the frame's CRC field (identifies the request for replay) */
} cp_frame;

/* Writes header and CRC around a payload already placed at frame + CP_FRAME_HEADER; returns
 * the frame length (CP_FRAME_OVERHEAD + length). */
size_t cp_frame_seal(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                     uint16_t length);

/* cp_frame_seal, then COBS into out with the trailing delimiter. Returns the wire length, or
 * 0 if cap is too small. */
size_t cp_frame_encode(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                       uint16_t length, uint8_t *out, size_t cap);

/* Incremental decoder. Feed every received byte; the decoded frame is built in buf, which must
 * hold max_payload + CP_FRAME_OVERHEAD bytes. A frame that is not valid COBS, longer than buf,
 * has a wrong length field or a wrong CRC is dropped at its delimiter and counted. An empty
 * frame (two delimiters in a row) is ignored silently: a sender may use 0x00 to resynchronise. */
typedef struct cp_decoder {
    uint8_t *buf;
    uint32_t cap;
    uint32_t len;         /* decoded bytes of the frame being received */
    uint32_t bad_frames;  /* frames dropped */
    uint16_t max_payload;
    uint8_t block_code;   /* code byte of the current COBS block (0 before the first) */
    uint8_t block_left;   /* data bytes still expected in the current block */
    uint8_t state;        /* private */
    uint8_t reserved[3];
} cp_decoder;

/* Results of cp_decoder_push. */
enum { CP_DEC_NONE = 0, CP_DEC_FRAME = 1, CP_DEC_BAD = 2 };

/* max_payload >= 1; buf of max_payload + CP_FRAME_OVERHEAD bytes. Returns 0, or -1 if the
 * arguments are unusable. */
int cp_decoder_init(cp_decoder *d, uint8_t *buf, size_t buf_size, uint16_t max_payload);

/* Discards a partly received frame (e.g. after a disconnect) without counting it. */
void cp_decoder_reset(cp_decoder *d);

/* One received byte. CP_DEC_FRAME: *out describes a complete frame whose CRC and length are
 * valid (valid until the next push). CP_DEC_BAD: a frame was dropped (bad_frames counted). */
int cp_decoder_push(cp_decoder *d, uint8_t byte, cp_frame *out);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_PROTO_H */
