/* Integer bitwise operations and shifts (shift counts outside 0..31 as NumPy defines them),
 * and the logical operations on bools (0/1 in the int32 class). */
#include "cp_stencil.h"
#include "cp_ops.h"
#include "cp_elements.h"

CP_EL_BITWISE(CP_SCALAR)
