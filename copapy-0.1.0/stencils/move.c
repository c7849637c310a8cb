/* Data movement and chain framing: loads/moves, stores, selects, entry and return. */
#include "cp_stencil.h"
#include "cp_elements.h"

CP_EL_MOVE(CP_SCALAR)
CP_STORE(f32)
CP_STORE(f64)
CP_STORE(i32)
CP_SELECT(f32)
CP_SELECT(f64)
CP_SELECT(i32)

/* Called by the runner as void(void); starts the chain with a normal call so the chain's
 * final return lands here, whatever calling convention the stencils use. */
void cp_entry(void)
{
    cp_next(CP_ZERO_ARGS);
}

CP_STENCIL(cp_ret)
{
    (void)f0;
    (void)f1;
    (void)REG_f64_0;
    (void)REG_f64_1;
    (void)i0;
    (void)i1;
}
