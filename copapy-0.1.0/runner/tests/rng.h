/* A small deterministic random generator (xorshift64*) for the tests and fuzzers: every run
 * exercises the same inputs unless a seed is given. */
#ifndef CP_TEST_RNG_H
#define CP_TEST_RNG_H

#include <stdint.h>

/* Seeded by each test program (never 0). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static inline uint64_t rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static inline uint32_t below(uint32_t n)
{
    return n == 0 ? 0 : (uint32_t)(rng() % n);
}

#endif /* CP_TEST_RNG_H */
