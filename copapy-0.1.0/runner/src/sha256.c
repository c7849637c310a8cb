/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the session authentication of the wire
 * protocol (docs/protocol.md, "Sessions and authentication"). Libc-free and allocation-free,
 * byte-order independent (big-endian words are assembled byte by byte), so the host runner
 * and the firmware share it. Checked against Python's hashlib and hmac on random inputs
 * (tests/test_auth.py) and against the FIPS and RFC 4231 vectors (runner/tests). */
#include "copapy/proto.h"
#include "internal.h"

static const uint32_t K[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u,
    0xab1c5ed5u, 0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu,
    0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu,
    0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u,
    0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu,
    0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u, 0xa2bfe8a1u, 0xa81a664bu,
    0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u,
    0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u,
    0xc67178f2u,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32u - n));
}

static void compress(uint32_t h[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (unsigned i = 0; i < 16; i++) {
        const uint8_t *p = block + 4 * i;
        w[i] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    }
    for (unsigned i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (unsigned i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] +
                      w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void cp_sha256_init(cp_sha256 *c)
{
    static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    for (unsigned i = 0; i < 8; i++) {
        c->h[i] = iv[i];
    }
    c->bytes = 0;
    c->fill = 0;
}

void cp_sha256_update(cp_sha256 *c, const uint8_t *p, size_t n)
{
    c->bytes += n;
    while (n > 0) {
        if (c->fill == 0 && n >= 64) {
            compress(c->h, p);
            p += 64;
            n -= 64;
            continue;
        }
        size_t take = 64u - c->fill < n ? 64u - c->fill : n;
        cp_copy(c->buf + c->fill, p, take);
        c->fill += (uint32_t)take;
        p += take;
        n -= take;
        if (c->fill == 64) {
            compress(c->h, c->buf);
            c->fill = 0;
        }
    }
}

void cp_sha256_final(cp_sha256 *c, uint8_t out[CP_SHA256_SIZE])
{
    uint64_t bits = c->bytes * 8u;
    c->buf[c->fill++] = 0x80;
    if (c->fill > 56) {
        cp_fill(c->buf + c->fill, 0, 64u - c->fill);
        compress(c->h, c->buf);
        c->fill = 0;
    }
    cp_fill(c->buf + c->fill, 0, 56u - c->fill);
    for (unsigned i = 0; i < 8; i++) {
        c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    compress(c->h, c->buf);
    for (unsigned i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void cp_hmac_init(cp_hmac *m, const uint8_t *key, size_t len)
{
    uint8_t k[64];
    cp_fill(k, 0, sizeof(k));
    if (len > 64) { /* longer keys are hashed first */
        cp_sha256 c;
        cp_sha256_init(&c);
        cp_sha256_update(&c, key, len);
        cp_sha256_final(&c, k);
    } else if (len > 0) {
        cp_copy(k, key, len);
    }
    uint8_t pad[64];
    for (unsigned i = 0; i < 64; i++) {
        pad[i] = (uint8_t)(k[i] ^ 0x36u);
    }
    cp_sha256_init(&m->inner);
    cp_sha256_update(&m->inner, pad, 64);
    for (unsigned i = 0; i < 64; i++) {
        pad[i] = (uint8_t)(k[i] ^ 0x5cu);
    }
    cp_sha256_init(&m->outer);
    cp_sha256_update(&m->outer, pad, 64);
    cp_fill(k, 0, sizeof(k));
    cp_fill(pad, 0, sizeof(pad));
}

void cp_hmac_mac2(const cp_hmac *m, const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                  uint8_t out[CP_SHA256_SIZE])
{
    cp_sha256 c = m->inner;
    cp_sha256_update(&c, a, na);
    cp_sha256_update(&c, b, nb);
    uint8_t inner[CP_SHA256_SIZE];
    cp_sha256_final(&c, inner);
    c = m->outer;
    cp_sha256_update(&c, inner, sizeof(inner));
    cp_sha256_final(&c, out);
}

void cp_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t n,
                    uint8_t out[CP_SHA256_SIZE])
{
    cp_hmac m;
    cp_hmac_init(&m, key, key_len);
    cp_hmac_mac2(&m, msg, n, msg, 0, out);
}

int cp_equal_ct(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++) {
        diff |= (uint8_t)(a[i] ^ b[i]);
    }
    return diff == 0;
}
