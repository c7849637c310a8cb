/* Unit tests of the wire codec (runner/src/proto.c): COBS round trips and known vectors, frame
 * sealing, the incremental decoder (any split, resynchronisation, every way a frame is dropped)
 * and random byte streams. Run under ASan/UBSan by `make -C runner test`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copapy/proto.h"
#include "internal.h"
#include "check.h"

enum { BIG = 4096 };

static void roundtrip(const uint8_t *in, size_t n)
{
    static uint8_t enc[BIG + BIG / 254 + 8], dec[BIG + 8];
    size_t e = cp_cobs_encode(in, n, enc, sizeof(enc));
    CHECK(e >= 1 && e <= CP_COBS_MAX(n));
    CHECK(memchr(enc, 0, e) == NULL);
    size_t d = cp_cobs_decode(enc, e, dec, sizeof(dec));
    CHECK(d == n);
    CHECK(d == n && (n == 0 || memcmp(dec, in, n) == 0));
    /* exactly CP_COBS_MAX(n) bytes always suffice, one fewer than needed never overflows */
    if (e > 1) {
        CHECK(cp_cobs_encode(in, n, enc, e - 1) == 0);
    }
}

static void test_cobs_vectors(void)
{
    static const struct {
        uint8_t in[8];
        size_t n;
        uint8_t out[8];
        size_t m;
    } v[] = {
        {{0}, 0, {0x01}, 1},
        {{0x00}, 1, {0x01, 0x01}, 2},
        {{0x00, 0x00}, 2, {0x01, 0x01, 0x01}, 3},
        {{0x00, 0x11, 0x00}, 3, {0x01, 0x02, 0x11, 0x01}, 4},
        {{0x11, 0x22, 0x00, 0x33}, 4, {0x03, 0x11, 0x22, 0x02, 0x33}, 5},
        {{0x11, 0x22, 0x33, 0x44}, 4, {0x05, 0x11, 0x22, 0x33, 0x44}, 5},
        {{0x11, 0x00, 0x00, 0x00}, 4, {0x02, 0x11, 0x01, 0x01, 0x01}, 5},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        uint8_t out[16], back[16];
        size_t m = cp_cobs_encode(v[i].in, v[i].n, out, sizeof(out));
        CHECK(m == v[i].m && memcmp(out, v[i].out, m) == 0);
        CHECK(cp_cobs_decode(v[i].out, v[i].m, back, sizeof(back)) == v[i].n);
        CHECK(memcmp(back, v[i].in, v[i].n) == 0);
    }
    /* 254 non-zero bytes: one full block; encoders may or may not add a final 0x01 block */
    uint8_t run[254], enc[300], dec[300];
    for (int i = 0; i < 254; i++) {
        run[i] = (uint8_t)(i + 1);
    }
    size_t m = cp_cobs_encode(run, sizeof(run), enc, sizeof(enc));
    CHECK(enc[0] == 0xff && (m == 255 || (m == 256 && enc[255] == 0x01)));
    CHECK(cp_cobs_decode(enc, 255, dec, sizeof(dec)) == 254 && memcmp(dec, run, 254) == 0);
    enc[255] = 0x01;
    CHECK(cp_cobs_decode(enc, 256, dec, sizeof(dec)) == 254 && memcmp(dec, run, 254) == 0);
    /* invalid: a zero inside, a run past the end, output too small */
    static const uint8_t zero_inside[] = {0x03, 0x11, 0x00};
    static const uint8_t past_end[] = {0x05, 0x11, 0x22};
    CHECK(cp_cobs_decode(zero_inside, sizeof(zero_inside), dec, sizeof(dec)) == (size_t)-1);
    CHECK(cp_cobs_decode(past_end, sizeof(past_end), dec, sizeof(dec)) == (size_t)-1);
    CHECK(cp_cobs_decode(enc, 255, dec, 100) == (size_t)-1);
}

static void test_cobs_roundtrips(void)
{
    static uint8_t buf[BIG];
    /* all zero and all 0xFF, at every length around the 254-byte block boundaries */
    for (size_t n = 0; n <= 1100; n++) {
        memset(buf, 0, n);
        roundtrip(buf, n);
        memset(buf, 0xff, n);
        roundtrip(buf, n);
    }
    /* runs of non-zero bytes of every length 250..260 between zeros */
    for (size_t runlen = 250; runlen <= 260; runlen++) {
        size_t n = 0;
        for (int k = 0; k < 5; k++) {
            buf[n++] = 0;
            memset(buf + n, 0x5a, runlen);
            n += runlen;
        }
        roundtrip(buf, n);
    }
    /* random data with a random density of zeros */
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = below(BIG);
        uint32_t zero_every = 1 + below(300);
        for (size_t i = 0; i < n; i++) {
            buf[i] = below(zero_every) == 0 ? 0 : (uint8_t)(1 + below(255));
        }
        roundtrip(buf, n);
    }
}

/* ---- frames and the incremental decoder */

enum { MAXP = 300 };

typedef struct dec_fx {
    cp_decoder d;
    uint8_t buf[MAXP + CP_FRAME_OVERHEAD];
    int frames;
    int bad;
    cp_frame last;
    uint8_t last_payload[MAXP];
} dec_fx;

static void dec_init(dec_fx *f)
{
    memset(f, 0, sizeof(*f));
    CHECK(cp_decoder_init(&f->d, f->buf, sizeof(f->buf), MAXP) == 0);
}

static void dec_feed(dec_fx *f, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cp_frame fr;
        int r = cp_decoder_push(&f->d, p[i], &fr);
        if (r == CP_DEC_FRAME) {
            f->frames++;
            f->last = fr;
            CHECK(fr.length <= MAXP);
            memcpy(f->last_payload, fr.payload, fr.length);
            f->last.payload = f->last_payload;
        } else if (r == CP_DEC_BAD) {
            f->bad++;
        }
    }
}

static size_t make_frame(uint8_t *wire, size_t cap, uint8_t flags, uint16_t seq, uint8_t cmd,
                         const uint8_t *payload, uint16_t n)
{
    static uint8_t frame[70000];
    memcpy(frame + CP_FRAME_HEADER, payload, n);
    return cp_frame_encode(frame, flags, seq, cmd, n, wire, cap);
}

static void test_frames(void)
{
    uint8_t payload[MAXP + 10], wire[1024];
    for (int i = 0; i < (int)sizeof(payload); i++) {
        payload[i] = (uint8_t)(i % 7 == 0 ? 0 : i);
    }
    dec_fx f;
    dec_init(&f);
    CHECK(cp_decoder_init(&f.d, f.buf, sizeof(f.buf) - 1, MAXP) == -1);
    dec_init(&f);

    /* a valid frame fed in one go and byte by byte, with and without a leading delimiter */
    size_t w = make_frame(wire, sizeof(wire), 0, 0x1234, CP_CMD_WRITE, payload, 100);
    CHECK(w > 0 && wire[w - 1] == 0 && memchr(wire, 0, w - 1) == NULL);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 1 && f.bad == 0);
    CHECK(f.last.version == 1 && f.last.seq == 0x1234 && f.last.command == CP_CMD_WRITE &&
          f.last.length == 100 && memcmp(f.last.payload, payload, 100) == 0);
    static const uint8_t delim = 0;
    dec_feed(&f, &delim, 1);
    dec_feed(&f, &delim, 1); /* empty frames are ignored silently */
    CHECK(f.frames == 1 && f.bad == 0 && f.d.bad_frames == 0);

    /* the largest payload fits, one more byte is dropped and counted */
    w = make_frame(wire, sizeof(wire), 0, 1, 3, payload, MAXP);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 2 && f.last.length == MAXP);
    w = make_frame(wire, sizeof(wire), 0, 2, 3, payload, MAXP + 1);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 2 && f.bad == 1 && f.d.bad_frames == 1);

    /* a corrupted byte: CRC (or COBS) failure, dropped, the next frame is fine */
    w = make_frame(wire, sizeof(wire), 0, 3, 4, payload, 50);
    wire[10] ^= 0x40;
    if (wire[10] == 0) {
        wire[10] = 1;
    }
    dec_feed(&f, wire, w);
    CHECK(f.frames == 2 && f.bad == 2);
    w = make_frame(wire, sizeof(wire), 0, 4, 4, payload, 50);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 3 && f.bad == 2 && f.last.seq == 4);

    /* too short to hold a header + CRC */
    static const uint8_t tiny[] = {0x03, 0x01, 0x02, 0x00};
    dec_feed(&f, tiny, sizeof(tiny));
    CHECK(f.frames == 3 && f.bad == 3);

    /* a length field that disagrees with the frame, even with a correct CRC */
    uint8_t frame[64];
    memset(frame, 0x11, sizeof(frame));
    cp_frame_seal(frame, 0, 5, 1, 10);
    cp_put16(frame + 6, 11);
    cp_put32(frame + 18, cp_crc32(0, frame, 18));
    uint8_t enc[80];
    size_t e = cp_cobs_encode(frame, 22, enc, sizeof(enc));
    enc[e++] = 0;
    dec_feed(&f, enc, e);
    CHECK(f.frames == 3 && f.bad == 4);

    /* a block cut short by the delimiter */
    static const uint8_t cut[] = {0x09, 0x01, 0x02, 0x00};
    dec_feed(&f, cut, sizeof(cut));
    CHECK(f.frames == 3 && f.bad == 5);

    /* garbage without a delimiter longer than the buffer, then a valid frame after a 0 */
    uint8_t junk[2000];
    memset(junk, 0xa5, sizeof(junk));
    dec_feed(&f, junk, sizeof(junk));
    CHECK(f.frames == 3 && f.bad == 5);
    w = make_frame(wire, sizeof(wire), 0, 6, 5, payload, 20);
    dec_feed(&f, wire, w); /* the junk had no delimiter: junk + this frame are one bad frame */
    CHECK(f.frames == 3 && f.bad == 6);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 4 && f.bad == 6 && f.last.seq == 6);

    /* flags, reserved and an unknown version pass through (the server decides) */
    w = make_frame(wire, sizeof(wire), CP_FLAG_RESPONSE | CP_FLAG_ERROR, 7, 200, payload, 0);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 5 && f.last.flags == 5 && f.last.command == 200 && f.last.length == 0);

    /* reset drops a partial frame without counting it */
    w = make_frame(wire, sizeof(wire), 0, 8, 1, payload, 30);
    dec_feed(&f, wire, w / 2);
    cp_decoder_reset(&f.d);
    dec_feed(&f, wire, w);
    CHECK(f.frames == 6 && f.bad == 6 && f.last.seq == 8);

    /* encode into a too-small buffer fails cleanly */
    CHECK(make_frame(wire, 10, 0, 1, 1, payload, 50) == 0);
}

/* Many frames in one stream, split at random points and interleaved with garbage between
 * delimiters: every intact frame comes out exactly once. */
static void test_stream_splits(void)
{
    static uint8_t stream[200000];
    dec_fx f;
    for (int round = 0; round < 50; round++) {
        dec_init(&f);
        size_t n = 0;
        int sent = 0, junk_frames = 0;
        while (n < sizeof(stream) - 2000) {
            if (below(5) == 0) {
                size_t len = 1 + below(40);
                for (size_t i = 0; i < len; i++) {
                    stream[n++] = (uint8_t)(1 + below(255));
                }
                stream[n++] = 0;
                junk_frames++;
                continue;
            }
            uint8_t payload[MAXP];
            uint16_t len = (uint16_t)below(MAXP + 1);
            for (uint16_t i = 0; i < len; i++) {
                payload[i] = below(3) == 0 ? 0 : (uint8_t)rng();
            }
            n += make_frame(stream + n, sizeof(stream) - n, 0, (uint16_t)sent, 1, payload, len);
            sent++;
        }
        size_t at = 0;
        while (at < n) {
            size_t chunk = 1 + below(700);
            if (chunk > n - at) {
                chunk = n - at;
            }
            dec_feed(&f, stream + at, chunk);
            at += chunk;
        }
        CHECK(f.frames == sent);
        /* random junk passes a CRC-32 with probability 2^-32: every junk frame is dropped */
        CHECK(f.bad == junk_frames);
    }
}

/* Arbitrary bytes: no crash, and anything accepted has a valid CRC (checked by the decoder). */
static void test_random_bytes(void)
{
    dec_fx f;
    dec_init(&f);
    uint8_t buf[4096];
    for (int iter = 0; iter < 2000; iter++) {
        size_t n = below(sizeof(buf));
        uint32_t zero_every = 1 + below(400);
        for (size_t i = 0; i < n; i++) {
            buf[i] = below(zero_every) == 0 ? 0 : (uint8_t)rng();
        }
        dec_feed(&f, buf, n);
    }
    CHECK(f.d.bad_frames == (uint32_t)f.bad);
}

/* Text is recognised by its first bytes (a v1 frame's second byte is the version 0x01). */
static void test_text_frames(void)
{
    static uint8_t buf[1100], wire[CP_WIRE_MAX(1024)], frame[1100];
    cp_decoder d;
    cp_decoder_init(&d, buf, sizeof(buf), 1024);
    cp_frame f;
    const char *lines[] = {"POST / HTTP/1.1\r\n", "GET /", "\r\n\r\nxx", "hello\n"};
    for (size_t k = 0; k < 4; k++) {
        int text = 0;
        for (const char *c = lines[k]; *c != '\0'; c++) {
            text += cp_decoder_push(&d, (uint8_t)*c, &f) == CP_DEC_TEXT;
        }
        CHECK(text == 1 && d.text_frames == k + 1);
        CHECK(cp_decoder_push(&d, 0, &f) == CP_DEC_BAD); /* dropped at its delimiter */
    }
    /* no frame of this protocol is ever text, whatever its header and payload */
    for (int i = 0; i < 2000; i++) {
        uint16_t n = (uint16_t)below(64);
        for (uint16_t k = 0; k < n; k++) {
            frame[CP_FRAME_HEADER + k] = (uint8_t)(0x20 + below(0x5f));
        }
        size_t w = cp_frame_encode(frame, (uint8_t)below(16), (uint16_t)rng(), (uint8_t)rng(), n,
                                   wire, sizeof(wire));
        int got = 0;
        for (size_t k = 0; k < w; k++) {
            int r = cp_decoder_push(&d, wire[k], &f);
            CHECK(r != CP_DEC_TEXT);
            got += r == CP_DEC_FRAME;
        }
        CHECK(got == 1);
    }
}

/* ---- SHA-256 (FIPS 180-4 examples) and HMAC-SHA256 (RFC 4231) */

static int hex_equal(const uint8_t *got, const char *hex, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || got[i] != v) {
            return 0;
        }
    }
    return 1;
}

static void sha256_of(const void *msg, size_t n, uint8_t out[32])
{
    cp_sha256 c;
    cp_sha256_init(&c);
    cp_sha256_update(&c, msg, n);
    cp_sha256_final(&c, out);
}

static void test_sha256_vectors(void)
{
    uint8_t out[32];
    sha256_of("abc", 3, out);
    CHECK(hex_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 32));
    sha256_of("", 0, out);
    CHECK(hex_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 32));
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_of(two, strlen(two), out);
    CHECK(hex_equal(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", 32));
    /* one million 'a' in pieces of every size 1..100: the buffering is split-independent */
    static uint8_t a[1000];
    memset(a, 'a', sizeof(a));
    cp_sha256 c;
    cp_sha256_init(&c);
    size_t done = 0;
    for (size_t k = 1; done < 1000000; k = k % 100 + 1) {
        size_t n = done + k > 1000000 ? 1000000 - done : k;
        cp_sha256_update(&c, a, n);
        done += n;
    }
    cp_sha256_final(&c, out);
    CHECK(hex_equal(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", 32));
}

static void test_hmac_vectors(void)
{
    uint8_t out[32], key[131];
    memset(key, 0x0b, 20); /* RFC 4231 test case 1 */
    cp_hmac_sha256(key, 20, (const uint8_t *)"Hi There", 8, out);
    CHECK(hex_equal(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32));
    cp_hmac_sha256((const uint8_t *)"Jefe", 4, /* case 2 */
                   (const uint8_t *)"what do ya want for nothing?", 28, out);
    CHECK(hex_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32));
    memset(key, 0xaa, sizeof(key)); /* case 6: a key longer than the block is hashed first */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    cp_hmac_sha256(key, 131, (const uint8_t *)m6, strlen(m6), out);
    CHECK(hex_equal(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32));
    /* the prepared key and a split message give the same */
    cp_hmac m;
    cp_hmac_init(&m, key, 131);
    uint8_t split[32];
    cp_hmac_mac2(&m, (const uint8_t *)m6, 10, (const uint8_t *)m6 + 10, strlen(m6) - 10, split);
    CHECK(memcmp(out, split, 32) == 0);
    CHECK(cp_equal_ct(out, split, 32) && !cp_equal_ct(out, split + 1, 31));
}

int main(void)
{
    test_cobs_vectors();
    test_cobs_roundtrips();
    test_frames();
    test_stream_splits();
    test_random_bytes();
    test_text_frames();
    test_sha256_vectors();
    test_hmac_vectors();
    printf("test_proto: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
