/* Outputs safe even when the runner dies (docs/realtime.md, "Isolation on the host runner").
 * With --io-file the host runner's channels live in a shared file mapping; before any other
 * thread exists the runner forks: the parent becomes the supervisor, with its own copy of the
 * loaded program's safe output values (sent to it over a pipe by the protocol thread at each
 * commit, START, STOP, RESET and unload), and the child is the runner. When the child ends
 * without a clean shutdown (SIGKILL from outside, a crash, exit_group from a task), the
 * supervisor writes the safe values into the mapping, says so on stderr and exits with a
 * status that names what happened. */
#ifndef COPAPY_HOST_SUPERVISOR_H
#define COPAPY_HOST_SUPERVISOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "copapy/runner.h"

/* The supervisor's exit status when the runner ended without a clean shutdown: 128 + the
 * signal that killed it (137: SIGKILL, 139: SIGSEGV), as a shell reports it; the runner's own
 * status if it exited without being asked to, or SUPERVISOR_EXIT_UNEXPECTED if that was 0. */
enum { SUPERVISOR_EXIT_SIGNAL_BASE = 128, SUPERVISOR_EXIT_UNEXPECTED = 3 };

/* Maps `path` (created mode 0600 if missing, sized to `bytes`, zeroed) shared; dies with a
 * message naming the file on failure. */
void *supervisor_map_io(const char *path, size_t bytes);

/* Forks. Returns in the child (the runner) with the pipe's write end in *to_supervisor
 * (non-blocking, close-on-exec); the child gets SIGTERM if the supervisor dies. The parent
 * never returns: it supervises the child and exits (see above). `io` is the mapping, `kinds`
 * x `channels` little-endian float64 values, kind-major. */
void supervisor_start(uint64_t *io, unsigned kinds, unsigned channels, int *to_supervisor);

/* Runner side, protocol context: the OUTPUT bindings of `prog` (NULL: none) are now the
 * ones to drive safe. Returns 0, or -1 if the message could not be written. */
int supervisor_send_safe(int to_supervisor, const cp_program *prog);

/* Runner side: the shutdown is clean (sent after the outputs took their safe values). */
void supervisor_send_clean_exit(int to_supervisor);

#endif /* COPAPY_HOST_SUPERVISOR_H */
