/* What the Linux and the Windows host runner (copapy_runner.c, win32/copapy_runner_win32.c)
 * share that has nothing platform-specific: their error reporting, option parsing,
 * simulated I/O and admission deadlines. Both
 * build runner_common.c. */
#ifndef COPAPY_HOST_RUNNER_COMMON_H
#define COPAPY_HOST_RUNNER_COMMON_H

#include <stdint.h>

/* The simulated I/O: CP_IO_KIND_COUNT kinds of HOST_CHANNELS channels, each a double kept as
 * its bits and read and written atomically (the tick thread and the protocol thread). Outputs
 * (GPIO, PWM) are recorded; inputs (ENCODER, ADC) are set by the host via IO_WRITE. Every
 * channel is writable. */
#define HOST_CHANNELS 16

/* The value of channel `channel` of kind `kind` (1 ..), 0.0 for one that does not exist. */
double host_io_read(uint64_t (*io)[HOST_CHANNELS], uint8_t kind, uint16_t channel);

/* Sets it: 0, or 1 for a channel that does not exist. */
int host_io_write(uint64_t (*io)[HOST_CHANNELS], uint8_t kind, uint16_t channel, double value);

/* Admission with a key on a socket: a connection without a session is closed when its grace
 * time is over; an authenticated owner's deadline moves on (a session that ends starts its
 * grace anew). `client`: HOST_LINK_NONE, _OPEN (no session) or _AUTHENTICATED; `guest`: a
 * guest connection is open. Sets *drop to the HOST_DROP_ bits of the connections to close
 * now, and returns the poll timeout in ms to the next deadline, -1 for none. */
enum { HOST_LINK_NONE, HOST_LINK_OPEN, HOST_LINK_AUTHENTICATED };
enum { HOST_DROP_CLIENT = 1, HOST_DROP_GUEST = 2 };
int host_admission_deadlines(uint64_t now, uint64_t grace_ns, uint64_t *client_deadline_ns,
                             uint64_t guest_deadline_ns, int client, int guest, int *drop);

/* "copapy-runner: error: ..." on stderr, then exit status 2 (bad start-up). */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

/* "copapy-runner: warning: ..." on stderr. */
__attribute__((format(printf, 1, 2))) void warn(const char *fmt, ...);

/* The seconds of option `opt` (> 0, at most a day), or die naming the option. */
double parse_seconds(const char *opt, const char *arg);

#endif
