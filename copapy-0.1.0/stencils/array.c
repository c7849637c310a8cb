/* Packed-array stencils (cp_array.h): the scalar families applied element-wise, selects and
 * broadcasts, lane-ordered reductions and matrix products. The element expressions are the
 * scalar stencils' (cp_elements.h). */
#include "cp_array.h"
#include "cp_elements.h"
#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

/* ---- element-wise: out[i] = op(a_i, b_i) in the forms v_v, v_m, m_v, then out[i] = op(a_i) */

CP_ELEMENTS(CP_VLOOP_BINARY)
CP_ELEMENTS(CP_VLOOP_UNARY)

/* ---- select and broadcast ---------------------------------------------------------------- */

CP_VSELECT(f32)
CP_VSELECT(f64)
CP_VSELECT(i32)

CP_VFILL(f32)
CP_VFILL(f64)
CP_VFILL(i32)

/* ---- strided views: a gather and its adjoint scatter, by element width ------------------ */

CP_VSTRIDED(i32, uint32_t)
CP_VSTRIDED(f64, uint64_t)

/* ---- reductions into a register and matrix products --------------------------------------- */

CP_ARRAY_HELPERS(f32)
CP_ARRAY_HELPERS(f64)
CP_ARRAY_HELPERS(i32)

CP_VREDUCTIONS(f32)
CP_VREDUCTIONS(f64)
CP_VREDUCTIONS(i32)

CP_VMATRIX(f32)
CP_VMATRIX(f64)
CP_VMATRIX(i32)
