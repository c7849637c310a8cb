/* What the Windows platform (src/platform_win32.c) adds to the host platform interface of
 * copapy/platform_posix.h, which it implements too (docs/platforms.md). */
#ifndef COPAPY_PLATFORM_WIN32_H
#define COPAPY_PLATFORM_WIN32_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sleeps until cp_posix_monotonic_ns() >= deadline_ns: a high-resolution waitable timer
 * where Windows has one (10 1803 and later), else a waitable timer at the system timer's
 * resolution (timeBeginPeriod(1) while the process runs chains); never wakes early. The
 * calling thread's timer is created at its first call. */
void cp_win32_sleep_until(uint64_t deadline_ns);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_PLATFORM_WIN32_H */
