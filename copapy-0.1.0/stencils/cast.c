/* Conversions between register classes. Float to int saturates and maps NaN to 0 (C leaves
 * out-of-range conversions undefined; we define them). */
#include "cp_stencil.h"
#include "cp_ops.h"
#include "cp_elements.h"

CP_EL_CAST(CP_SCALAR)
