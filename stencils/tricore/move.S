/* Data movement and chain framing: moves, stores, selects, entry and return. */
#include "cp_tricore.h"

CP_MOVE(f32)
CP_MOVE(i32)
CP_STORE(f32)
CP_STORE(i32)
CP_SELECT(f32)
CP_SELECT(i32)

/* The runner calls cp_entry as a C function (CALL/CALLI, return address in %a11, upper context
 * saved); the chain's last stencil returns with RET, which restores it. */
CP_FUNC(cp_entry) CP_NEXT

CP_FUNC(cp_ret) ret;
