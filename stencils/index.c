/* Index stencils (cp_index.h): strided views of N-D arrays over three levels and their adjoint;
 * stable sorting along rows, the permutation's gather and its adjoint scatter. They compare and
 * move bits only: the same results on every CPU. */
#include "cp_index.h"

CP_NSTRIDED(i32, uint32_t)
CP_NSTRIDED(f64, uint64_t)

CP_ARGSORT_WORDS(f32)
CP_ARGSORT(f64, uint64_t)
CP_ARGSORT_WORDS(i32)

CP_PERMUTE(i32, uint32_t)
CP_PERMUTE(f64, uint64_t)

#if defined(CP_FUSE_BYTES)
CP_PGATHERS(i32, uint32_t)
CP_PGATHERS(f64, uint64_t)
CP_VRSGATHER(i32, uint32_t)
CP_VRSGATHER(f64, uint64_t)
#endif
