/* Private helpers of libcopapy (runner/lib), shared by abi.c, loop.c and the loop's platform parts. Not installed. */
#ifndef COPAPY_ABI_INTERNAL_H
#define COPAPY_ABI_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "copapy/copapy.h"
#include "../src/internal.h"
#include "../src/slot_value.h"

/* The loop's platform part (loop_rt_posix.c, loop_rt_win32.c): the real-time set-up that
 * copapy_loop_config.flags asks for (the COPAPY_RT_* bits achieved in *rt; the state to undo
 * it, or NULL), its undoing, and a sleep to an absolute deadline of copapy_now_ns(). */
typedef struct copapy_rt_saved copapy_rt_saved;
copapy_rt_saved *copapy_rt_setup(const copapy_loop_config *c, uint32_t *rt);
void copapy_rt_restore(copapy_rt_saved *saved, uint32_t achieved);
void copapy_rt_sleep_until(int64_t deadline);

/* Fills err (only the prefix its struct_size covers) and returns status. */
int copapy_abi_fail(copapy_error *err, int status, uint32_t code, uint32_t detail,
                    const char *name, const char *message);

#endif /* COPAPY_ABI_INTERNAL_H */
