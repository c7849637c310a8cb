/* Wire protocol v1 codec (docs/protocol.md): COBS byte stuffing, the frame header and CRC, and
 * an incremental byte-by-byte decoder over a fixed buffer. No allocation and no libc: the same
 * code serves the host runner, the bare-metal firmware and the Zephyr firmware.
 *
 * A frame on the wire is COBS(header | payload | crc32) followed by one 0x00 delimiter. */
#ifndef COPAPY_PROTO_H
#define COPAPY_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/contract.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The frame format (a frame's first byte): unchanged since the first protocol, so a host and a
 * runner of different protocol versions still exchange frames and HELLO names the mismatch. */
#define CP_FRAME_VERSION 1u
/* The protocol (the commands' payloads), HELLO's protocol_version. 2: HELLO carries the number
 * of I/O kinds and a channel count per kind (version 1 had four fixed counts). */
#define CP_PROTO_VERSION 2u

enum {
    CP_FRAME_HEADER = 8,    /* version, flags, seq(2), command, reserved, length(2) */
    CP_FRAME_CRC = 4,
    CP_FRAME_OVERHEAD = 12  /* header + CRC */
};

/* Frame flags. AUTH: the payload ends in the 20-byte authentication trailer of a session
 * (u32 counter, 16-byte truncated HMAC-SHA256; docs/protocol.md). */
enum { CP_FLAG_RESPONSE = 1u, CP_FLAG_EVENT = 2u, CP_FLAG_ERROR = 4u, CP_FLAG_AUTH = 8u };

enum {
    CP_AUTH_TAG = 16,       /* bytes of the truncated HMAC-SHA256 */
    CP_AUTH_TRAILER = 20,   /* u32 counter + tag, at the end of the payload */
    CP_AUTH_NONCE = 16
};

/* Commands (CP_CMD_HELLO ...) and the error codes of an ERROR response (CP_PERR_BAD_COMMAND
 * ...): contract.h's CP_COMMAND_TABLE and CP_PROTOCOL_ERROR_TABLE. */

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

/* Writes the 8-byte header (version 1, reserved 0). */
void cp_frame_header(uint8_t *frame, uint8_t flags, uint16_t seq, uint8_t command,
                     uint16_t length);

/* The CRC of a frame whose header and payload (length bytes) are in place. */
void cp_frame_put_crc(uint8_t *frame, uint16_t length);

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
    uint8_t prefix;       /* private: printable bytes seen at the frame's start */
    uint8_t reserved[2];
    uint32_t text_frames; /* frames discarded as text (also counted in bad_frames) */
} cp_decoder;

/* Results of cp_decoder_push. CP_DEC_TEXT: the frame being received starts with printable
 * text (an HTTP request, a line typed into a terminal): it is no frame of this protocol (a
 * v1 frame's second byte is the version 0x01); it is discarded up to its delimiter and
 * counted in text_frames. A transport that can, closes the connection. */
enum { CP_DEC_NONE = 0, CP_DEC_FRAME = 1, CP_DEC_BAD = 2, CP_DEC_TEXT = 3 };
enum { CP_TEXT_PREFIX = 4 };  /* printable bytes at a frame's start that make it text */

/* max_payload >= 1; buf of max_payload + CP_FRAME_OVERHEAD bytes. Returns 0, or -1 if the
 * arguments are unusable. */
int cp_decoder_init(cp_decoder *d, uint8_t *buf, size_t buf_size, uint16_t max_payload);

/* Discards a partly received frame (e.g. after a disconnect) without counting it. */
void cp_decoder_reset(cp_decoder *d);

/* One received byte. CP_DEC_FRAME: *out describes a complete frame whose CRC and length are
 * valid (valid until the next push). CP_DEC_BAD: a frame was dropped (bad_frames counted). */
int cp_decoder_push(cp_decoder *d, uint8_t byte, cp_frame *out);

/* ---- SHA-256 and HMAC-SHA256 (runner/src/sha256.c) for the session authentication */

enum { CP_SHA256_SIZE = 32 };

typedef struct cp_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    uint32_t fill;
} cp_sha256;

void cp_sha256_init(cp_sha256 *c);
void cp_sha256_update(cp_sha256 *c, const uint8_t *p, size_t n);
void cp_sha256_final(cp_sha256 *c, uint8_t out[CP_SHA256_SIZE]);

/* A key prepared once: the hash states after the inner and the outer pad. */
typedef struct cp_hmac {
    cp_sha256 inner;
    cp_sha256 outer;
} cp_hmac;

void cp_hmac_init(cp_hmac *m, const uint8_t *key, size_t len);
/* HMAC of the concatenation a | b. */
void cp_hmac_mac2(const cp_hmac *m, const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                  uint8_t out[CP_SHA256_SIZE]);
void cp_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t n,
                    uint8_t out[CP_SHA256_SIZE]);
/* 1 if the n bytes are equal; the time does not depend on where they differ. */
int cp_equal_ct(const uint8_t *a, const uint8_t *b, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_PROTO_H */
