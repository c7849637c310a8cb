/* runner_common.h */
#include "runner_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
