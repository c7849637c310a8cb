/* zlib-compatible CRC-32 (reflected 0xEDB88320, init and final xor 0xFFFFFFFF).
 * A 16-entry nibble table: 64 bytes of rodata, fast enough for images on microcontrollers. */
#include "copapy/runner.h"

static const uint32_t nibble_table[16] = {
    0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu, 0x76dc4190u, 0x6b6b51f4u,
    0x4db26158u, 0x5005713cu, 0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu,
    0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu,
};

uint32_t cp_crc32(uint32_t crc, const uint8_t *data, size_t len)
{
    crc = ~crc; /* continuing from a previous result, as zlib's crc32(crc, ...) does */
    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
        crc = (crc >> 4) ^ nibble_table[crc & 0x0fu];
        crc = (crc >> 4) ^ nibble_table[crc & 0x0fu];
    }
    return ~crc;
}
