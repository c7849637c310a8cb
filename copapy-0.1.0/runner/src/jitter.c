/* The release-jitter histogram of the tick loops (declared in copapy/server.h): 100 ns buckets
 * up to 100 us, 10 us buckets up to 10 ms, one beyond; written by the tick context, read by
 * STATS with relaxed atomics. */
#include "copapy/server.h"

#include "internal.h"

void cp_jitter_clear(cp_jitter_hist *h)
{
    for (uint32_t i = 0; i < CP_JITTER_FINE + CP_JITTER_COARSE + 1; i++) {
        RELAXED_STORE(&h->bucket[i], 0u);
    }
    RELAXED_STORE(&h->count, 0u);
    RELAXED_STORE(&h->max_ns, 0u);
}

void cp_jitter_record(cp_jitter_hist *h, uint64_t ns)
{
    uint32_t b;
    if (ns < 100000u) {
        b = (uint32_t)ns / 100u;
    } else if (ns < 10000000u) {
        b = CP_JITTER_FINE + ((uint32_t)ns - 100000u) / 10000u;
    } else {
        b = CP_JITTER_FINE + CP_JITTER_COARSE;
    }
    RELAXED_STORE(&h->bucket[b], RELAXED_LOAD(&h->bucket[b]) + 1u);
    RELAXED_STORE(&h->count, RELAXED_LOAD(&h->count) + 1u);
    uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    if (v > RELAXED_LOAD(&h->max_ns)) {
        RELAXED_STORE(&h->max_ns, v);
    }
}

uint32_t cp_jitter_percentile(const cp_jitter_hist *h, uint32_t permille)
{
    uint32_t count = RELAXED_LOAD(&h->count);
    uint32_t max = RELAXED_LOAD(&h->max_ns);
    if (count == 0) {
        return 0;
    }
    uint64_t target = ((uint64_t)count * permille + 999u) / 1000u;
    if (target == 0) {
        target = 1;
    }
    uint64_t seen = 0;
    for (uint32_t i = 0; i < CP_JITTER_FINE + CP_JITTER_COARSE + 1; i++) {
        seen += RELAXED_LOAD(&h->bucket[i]);
        if (seen >= target) {
            uint32_t edge = i < CP_JITTER_FINE ? (i + 1u) * 100u
                            : i < CP_JITTER_FINE + CP_JITTER_COARSE
                                ? 100000u + (i - CP_JITTER_FINE + 1u) * 10000u
                                : max;
            return edge < max ? edge : max;
        }
    }
    return max;
}

void cp_jitter_rt_stats(cp_server_rt_stats *out, const cp_jitter_hist *h,
                        const uint32_t *late_ticks)
{
    out->late_ticks = RELAXED_LOAD(late_ticks);
    out->jitter_p50_ns = cp_jitter_percentile(h, 500);
    out->jitter_p99_ns = cp_jitter_percentile(h, 990);
    out->jitter_max_ns = RELAXED_LOAD(&h->max_ns);
}
