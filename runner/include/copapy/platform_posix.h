/* The POSIX platform for cp_program_load: mmap'd regions, W^X via mprotect. */
#ifndef COPAPY_PLATFORM_POSIX_H
#define COPAPY_PLATFORM_POSIX_H

#include "copapy/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A static platform whose arch is the architecture this process executes (0 if unknown, so
 * every load fails with CP_ERR_ARCH). Defined only where __unix__ or __APPLE__ is. Sealing
 * needs data_offset to be a multiple of the page size, else the load fails with NOMEM. */
const cp_platform *cp_platform_posix(void);

#ifdef __cplusplus
}
#endif

#endif /* COPAPY_PLATFORM_POSIX_H */
