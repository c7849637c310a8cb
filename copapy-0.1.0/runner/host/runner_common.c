/* runner_common.h */
#include "runner_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copapy/server.h"

static void report(const char *what, const char *fmt, va_list ap)
{
    fprintf(stderr, "copapy-runner: %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report("error", fmt, ap);
    va_end(ap);
    exit(2);
}

void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report("warning", fmt, ap);
    va_end(ap);
}

double parse_seconds(const char *opt, const char *arg)
{
    char *end = NULL;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(v > 0.0) || v > 86400.0) {
        die("%s needs a time in seconds (> 0, at most 86400), got '%s'", opt, arg);
    }
    return v;
}

double host_io_read(uint64_t (*io)[HOST_CHANNELS], uint8_t kind, uint16_t channel)
{
    if (kind < 1 || kind > CP_IO_KIND_COUNT || channel >= HOST_CHANNELS) {
        return 0.0;
    }
    uint64_t bits = __atomic_load_n(&io[kind - 1][channel], __ATOMIC_RELAXED);
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

int host_io_write(uint64_t (*io)[HOST_CHANNELS], uint8_t kind, uint16_t channel, double value)
{
    if (kind < 1 || kind > CP_IO_KIND_COUNT || channel >= HOST_CHANNELS) {
        return 1;
    }
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    __atomic_store_n(&io[kind - 1][channel], bits, __ATOMIC_RELAXED);
    return 0;
}

int host_admission_deadlines(uint64_t now, uint64_t grace_ns, uint64_t *client_deadline_ns,
                             uint64_t guest_deadline_ns, int client, int guest, int *drop)
{
    *drop = 0;
    if (client == HOST_LINK_AUTHENTICATED) {
        *client_deadline_ns = now + grace_ns;
    } else if (client == HOST_LINK_OPEN && now >= *client_deadline_ns) {
        *drop |= HOST_DROP_CLIENT;
        client = HOST_LINK_NONE;
    }
    if (guest && now >= guest_deadline_ns) {
        *drop |= HOST_DROP_GUEST;
        guest = 0;
    }
    uint64_t next = UINT64_MAX;
    if (client == HOST_LINK_OPEN) {
        next = *client_deadline_ns;
    }
    if (guest && guest_deadline_ns < next) {
        next = guest_deadline_ns;
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000u) + 1;
}
