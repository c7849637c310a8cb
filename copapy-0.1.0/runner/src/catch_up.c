/* The catch-up rule of a tick loop (docs/protocol.md; declared in copapy/server.h): how a
 * firmware or host tick thread that woke late runs the ticks it owes, up to a bound, and drops
 * the deadlines still due. */
#include "copapy/server.h"

#include "internal.h"

uint64_t cp_deadline_skip(uint64_t *deadline, uint64_t tick, uint64_t now, uint64_t margin)
{
    uint64_t limit = now > UINT64_MAX - margin ? UINT64_MAX : now + margin;
    if (tick == 0 || *deadline > limit) {
        return 0;
    }
    uint64_t missed = (limit - *deadline) / tick + 1u;
    *deadline += missed * tick;
    return missed;
}

uint32_t cp_server_catch_up(cp_server *srv, uint64_t *deadline, uint64_t tick, uint64_t now,
                            uint64_t margin, uint32_t max_run)
{
    if (tick == 0) {
        return 0;
    }
    uint64_t limit = now > UINT64_MAX - margin ? UINT64_MAX : now + margin;
    uint64_t late = 0;
    for (uint32_t run = 0; run < max_run && *deadline <= limit; run++) {
        if (now >= *deadline && now - *deadline >= tick) {
            late++;
        }
        (void)cp_server_tick(srv);
        *deadline += tick;
    }
    late += cp_deadline_skip(deadline, tick, now, margin);
    return late > UINT32_MAX ? UINT32_MAX : (uint32_t)late;
}
