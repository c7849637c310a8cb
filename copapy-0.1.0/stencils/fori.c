/* cp.fori_loop (docs/decisions/2026-12-04-fori-loop.md): a counted loop around a chain of
 * ordinary stencils, so a loop body is compiled once whatever the iteration count.
 *
 *     floop_i32__begin   counter = 0
 *     ... the body: any scalar or array stencils (values cross iterations in slots) ...
 *     floop_i32__end     counter += 1; while counter < n jump back to the body (cp_floop,
 *                        resolved by the linker or the runner to the block after the begin)
 *
 * The counter lives in a data slot (role out), because the body's stencils use every register
 * of the chain; the bound n is a frozen length slot, so a verified image fixes it at load. The
 * body runs at least once (n >= 1: the compiler emits no loop for n = 0; the verifier refuses
 * a count of 0). */
#include "cp_stencil.h"

#pragma GCC visibility push(hidden)
extern int32_t cp_n_i32;
extern CP_CC void cp_floop(CP_REGS);
#pragma GCC visibility pop

CP_STENCIL(floop_i32__begin)
{
    cp_out_i32 = 0;
    CP_NEXT();
}

CP_STENCIL(floop_i32__end)
{
    const uint32_t count = (uint32_t)cp_out_i32 + 1u;
    cp_out_i32 = (int32_t)count;
    if (count < (uint32_t)cp_n_i32) {
        CP_MUSTTAIL return cp_floop(CP_ARGS);
    }
    CP_NEXT();
}
