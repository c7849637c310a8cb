/* --image for the host runners: preload.h. */
#include "preload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copapy/runner.h"

void cp_preload_reply(cp_preload *pl, const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cp_frame f;
        if (cp_decoder_push(&pl->dec, bytes[i], &f) != CP_DEC_FRAME ||
            !(f.flags & CP_FLAG_RESPONSE)) {
            continue;
        }
        pl->answered = 1;
        pl->error = 0;
        pl->status = 0;
        if (f.flags & CP_FLAG_ERROR) {
            pl->error = f.length > 0 ? f.payload[0] : -1;
            pl->status = f.length > 1 ? f.payload[1] : 0;
            size_t len = f.length > 8 ? (size_t)f.length - 8 : 0;
            if (len > CP_ERROR_MESSAGE_MAX) {
                len = CP_ERROR_MESSAGE_MAX;
            }
            memcpy(pl->message, f.payload + 8, len);
            pl->message[len] = '\0';
        }
    }
}

/* One request to the server; 0, or -1 with the server's message in why. */
static int request(cp_server *srv, cp_preload *pl, uint16_t seq, uint8_t command,
                   const uint8_t *payload, uint16_t length, const char *path, char *why,
                   size_t why_size)
{
    static uint8_t frame[CP_PRELOAD_MAX_PAYLOAD + CP_FRAME_OVERHEAD];
    static uint8_t wire[CP_WIRE_MAX(CP_PRELOAD_MAX_PAYLOAD)];
    memcpy(frame + CP_FRAME_HEADER, payload, length);
    size_t n = cp_frame_encode(frame, 0, seq, command, length, wire, sizeof(wire));
    pl->answered = 0;
    cp_server_feed(srv, wire, n);
    if (!pl->answered) {
        snprintf(why, why_size, "%s: the runner did not answer command %u", path, command);
    } else if (pl->error != 0 && pl->status != 0) { /* a load error: its name, then why */
        snprintf(why, why_size, "%s: %s: %s", path, cp_status_name((cp_status)pl->status),
                 pl->message);
    } else if (pl->error != 0) {
        snprintf(why, why_size, "%s: %s", path, pl->message);
    } else {
        return 0;
    }
    return -1;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++) {
        p[k] = (uint8_t)(v >> (8 * k));
    }
}

static int send_image(cp_server *srv, cp_preload *pl, const uint8_t *image, size_t size,
                      const char *path, int start, char *why, size_t why_size)
{
    /* the image CRC of LOAD_BEGIN is the image's own trailing CRC field (docs/protocol.md) */
    uint8_t p[CP_PRELOAD_MAX_PAYLOAD];
    put_u32(p, (uint32_t)size);
    memcpy(p + 4, image + size - 4, 4);
    uint16_t seq = 1;
    if (request(srv, pl, seq++, CP_CMD_LOAD_BEGIN, p, 8, path, why, why_size) != 0) {
        return -1;
    }
    const size_t chunk = CP_PRELOAD_MAX_PAYLOAD - 4;
    for (size_t off = 0; off < size; off += chunk) {
        size_t len = size - off < chunk ? size - off : chunk;
        put_u32(p, (uint32_t)off);
        memcpy(p + 4, image + off, len);
        if (request(srv, pl, seq++, CP_CMD_LOAD_CHUNK, p, (uint16_t)(len + 4), path, why,
                    why_size) != 0) {
            return -1;
        }
    }
    if (request(srv, pl, seq++, CP_CMD_LOAD_COMMIT, p, 0, path, why, why_size) != 0) {
        return -1;
    }
    return start ? request(srv, pl, seq++, CP_CMD_START, p, 0, path, why, why_size) : 0;
}

int cp_preload_image(cp_server *srv, cp_preload *pl, uint32_t max_image, const char *path,
                     int start, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    uint8_t *image = malloc(max_image);
    if (image == NULL) {
        fclose(f);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    size_t size = fread(image, 1, max_image, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    int rc = -1;
    if (more) {
        snprintf(why, why_size,
                 "%s is larger than the largest image this runner accepts (%u bytes; "
                 "--max-image)",
                 path, max_image);
    } else if (size < 8 || memcmp(image, "CPIM", 4) != 0) {
        snprintf(why, why_size, "%s is not a copapy program image (it does not start with CPIM)",
                 path);
    } else if (cp_decoder_init(&pl->dec, pl->buf, sizeof(pl->buf), CP_PRELOAD_MAX_PAYLOAD) !=
               0) {
        snprintf(why, why_size, "decoder set-up failed");
    } else {
        pl->active = 1;
        rc = send_image(srv, pl, image, size, path, start, why, why_size);
        pl->active = 0;
        cp_server_disconnect(srv);
    }
    free(image);
    return rc;
}
