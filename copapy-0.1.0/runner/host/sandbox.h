/* The tick thread's system-call filter (Linux seccomp; docs/realtime.md, "Isolation on the
 * host runner"). Installed by the tick thread on itself, after everything that needs more is
 * set up (the guard's slot and alternate stack, the job clock): from then on that thread may
 * make only the calls it needs to sleep, take the lock, time and contain jobs. */
#ifndef COPAPY_HOST_SANDBOX_H
#define COPAPY_HOST_SANDBOX_H

enum { SANDBOX_MAX_WRITE_FDS = 4 };

/* Installs the filter on the calling thread (threads it creates inherit it; the process's
 * other threads are not affected). write(2) is allowed on `write_fds` only (the wake pipe,
 * /dev/cpu_dma_latency, stderr with --verbose; -1 entries are skipped). Any other call, any
 * call of another ABI (int 0x80, x32) and the forbidden uses of the allowed ones (blocking a
 * signal, changing a handler, a write to another descriptor) raise SIGSYS in the calling
 * thread, which the POSIX guard turns into a fault of kind SIGSYS inside a job, and which
 * ends the process anywhere else. Returns 0, or an errno value: ENOSYS where there is no
 * seccomp (not Linux, or an architecture this file does not know), or what the kernel said. */
int sandbox_tick_thread(const int *write_fds, int count);

#endif /* COPAPY_HOST_SANDBOX_H */
