/* --image: a saved program (cp.save, `copapy run`) loaded at start-up through the protocol
 * server, exactly as an upload over a link (LOAD_BEGIN, LOAD_CHUNK..., LOAD_COMMIT, START):
 * the server checks it as it checks any upload (format, CRC, verified loading, --allow-code
 * for format 1). Platform-free; both host runners (copapy_runner.c and
 * win32/copapy_runner_win32.c) build it. While `active` is set, the runner's write_link hands
 * every byte the server writes to cp_preload_reply instead of a link. */
#ifndef COPAPY_HOST_PRELOAD_H
#define COPAPY_HOST_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "copapy/proto.h"
#include "copapy/server.h"

/* the host runners' max_payload (their server configuration uses the same) */
#define CP_PRELOAD_MAX_PAYLOAD 1024u

typedef struct cp_preload {
    int active;
    cp_decoder dec;
    uint8_t buf[CP_PRELOAD_MAX_PAYLOAD + CP_FRAME_OVERHEAD];
    int answered, error, status; /* status: the cp_status of IMAGE_INVALID */
    char message[CP_ERROR_MESSAGE_MAX + 1];
} cp_preload;

/* The server's answers during a preload (called from the runner's write_link). */
void cp_preload_reply(cp_preload *pl, const uint8_t *bytes, size_t n);

/* Loads the image file `path` (at most `max_image` bytes) into `srv`, and starts it if
 * `start`. 0, or -1 with `why` (a sentence naming the file and the server's reason). The
 * caller switches off srv's require_auth around it (the requests come from no link). */
int cp_preload_image(cp_server *srv, cp_preload *pl, uint32_t max_image, const char *path,
                     int start, char *why, size_t why_size);

#endif
