/* What the Linux and the Windows host runner (copapy_runner.c, win32/copapy_runner_win32.c)
 * share that has nothing platform-specific: their error reporting and option parsing. Both
 * build runner_common.c. */
#ifndef COPAPY_HOST_RUNNER_COMMON_H
#define COPAPY_HOST_RUNNER_COMMON_H

/* "copapy-runner: error: ..." on stderr, then exit status 2 (bad start-up). */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

/* "copapy-runner: warning: ..." on stderr. */
__attribute__((format(printf, 1, 2))) void warn(const char *fmt, ...);

/* The seconds of option `opt` (> 0, at most a day), or die naming the option. */
double parse_seconds(const char *opt, const char *arg);

#endif
