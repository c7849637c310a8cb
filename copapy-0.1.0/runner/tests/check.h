/* What the runner's C tests share: check counters with readable failure lines (and the
 * deterministic random generator of rng.h). */
#ifndef CP_TEST_CHECK_H
#define CP_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "copapy/runner.h"
#include "rng.h"

static int checks, failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        checks++;                                                                    \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_STATUS(got, want)                                                          \
    do {                                                                                 \
        cp_status got_ = (got), want_ = (want);                                          \
        checks++;                                                                        \
        if (got_ != want_) {                                                             \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s gave %s, expected %s\n", __FILE__, __LINE__, #got, \
                    cp_status_name(got_), cp_status_name(want_));                        \
        }                                                                                \
    } while (0)

#endif /* CP_TEST_CHECK_H */
